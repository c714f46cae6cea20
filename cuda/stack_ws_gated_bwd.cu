// A gated layer's backward (docs/model.md §7.10; stack_backward_k's maths, stack.cu) on the
// warp-specialised persistent tile (wgmma_ws.cuh; stack_ws.cu has the layout: one item = a focus's
// 128-row tile, both |m| groups), in one launch:
//   S = sigmoid(z00 G), s_bar = sum over the three orders of each degree of g z,
//   eta = s_bar S (1 - S), z_bar00 = g00 silu'(z00) + eta G^T,
//   G0' = g0 + z_bar0 A^T (z_bar0 = [z_bar00, g0[:, Cf:] S]), G1' = g1 + (g1 S) W1^T.
// Per item, four phases on one ring whose stages hold A's box (g), B's block and a second box of
// the saved z at A's coordinates (ws_fill's kZoff, read by the hooks beside A: ws_land_a):
//  1. S_pre = z00 G (A = z's scalar-row boxes, B = G's image zero-padded to 128 columns: the
//     forward's gate product, stack_ws_gated_fwd.cu, so S is the forward's to the bit), S = sigmoid;
//  2. the |m| = 1 product G1', its hook also adding g1 z1 into s_bar;
//  3. eta G^T (B = G^T's padded image): its k block j's stage also holds the g and z boxes of the
//     m = 0 columns Cf + 16 j .., whose g0 z0 complete those columns of s_bar in the hook, which
//     then forms A = eta = s_bar S (1 - S);
//  4. the m = 0 product G0'.
// (Phase 3 was two: a pass without a product over the m = 0 boxes, then eta G^T on B-only stages;
// the pass's quick blocks outran the three-stage ring and waited on its copies: 6 % of the
// kernel's warp samples, ncu, docs/performance.md, 2026-12-03.)
// Each consumer thread's S, s_bar and eta G^T values are its own (the products' output quad (q4, h)
// and A's quad (kb = q4, h) cover the same rows and columns 16 q4 + 4 t; stack_ws_gated_fwd.cu):
// they live in shared memory, thread-major in 16-byte groups (48 + 48 floats per thread, slot_quad), where the
// hooks index them by k, a run-time value in the products' k loops. z is only read.
// Why (docs/performance.md, 2026-12-03): a SIMT gate pass writing [z_bar00 | S] beside the product
// kernel (removed) took 14.05 ms of the 4,096-atom lean call's gated backward; this launch 12.32.
// Numerics: S as the forward's; s_bar in IEEE fp32 FFMA over the orders as they land (|m| = 1, then
// m = 0); eta G^T and the products in 3xTF32 (kOne, `precision tf32`: one TF32 pass).
// An item's fills and phases are in stack_ws_gated_bwd.cuh, which the chained backward
// (stack_ws_chain_bwd.cu) shares.
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated_bwd.cuh"

namespace sezm::cuda {
namespace {

struct WsGatedBwd {
  const float* in;  // (F, Ec, ROW): the layer's output adjoint g (A of the products) and the residual
  float* out;       // (F, Ec, ROW)
  WsBwdImages g;    // the layer's images
  int Ec, ROW, ntiles, nitems;
  int rev;  // items from the last (ws_bwd_reverse)
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_backward_k(const __grid_constant__ WsGatedBwd p,
                                                                           const __grid_constant__ CUtensorMap tmA,
                                                                           const __grid_constant__ CUtensorMap tmZ) {
  using R = WsBwdRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const ring = ws_dsmem + R::kScratch;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_regs_dec<kWsProducerRegs>();
    if (threadIdx.x >= 32) return;
    for (int i0 = blockIdx.x; i0 < p.nitems; i0 += ws_grid()) {
      const int i = ws_item(i0, p.nitems, p.rev);
      const int f = i / p.ntiles;
      gated_bwd_fill<R::kStages, R::kStage, R::kZoff, kOne>(p.g, ring, full, empty, pp, &tmA, &tmZ, f,
                                                            (i - f * p.ntiles) * kWsRows);
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  const WsIo io{p.in, p.out, nullptr, p.Ec, p.ROW};
  for (int i0 = blockIdx.x; i0 < p.nitems; i0 += gridDim.x) {
    const int i = ws_item(i0, p.nitems, p.rev);
    const int f = i / p.ntiles;
    gated_bwd_item<R, kOne>(true, false, io, f, (i - f * p.ntiles) * kWsRows, ring, full, empty, pp, ct,
                            reinterpret_cast<float4*>(ws_dsmem) + ct);
  }
}

}  // namespace

void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                           const float* z, cudaStream_t s) {
  if (d.ROW != 10 * kCf)
    throw Error("launch_gated_backward: rows of ten 32-wide blocks expected (Cf = 32, L = 3)");
  if (w.G_ws == nullptr || w.GT_ws == nullptr)
    throw Error("launch_gated_backward: the gate's padded images (BlockWDev::G_ws, GT_ws) were not built");
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_backward_k<true> : stack_ws_gated_backward_k<false>;
  const int bytes = one ? WsBwdRing<true>::kBytes : WsBwdRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_backward_k");
  WsGatedBwd p;
  p.in = in;
  p.out = out;
  p.g = gated_bwd_images(d, w, layer);
  set_ws_items(p, d, Ec);
  p.rev = ws_bwd_reverse(d, layer);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, activations_map(d, Ec, in), activations_map(d, Ec, z));
  SEZM_LAUNCH("stack_ws_gated_backward_k");
}

}  // namespace sezm::cuda
