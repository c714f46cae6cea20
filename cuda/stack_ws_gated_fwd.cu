// A gated layer's forward (docs/model.md §5.4; stack_forward_k's maths, stack.cu) on the
// warp-specialised persistent tile (wgmma_ws.cuh; stack_ws.cu has the layout: one item = a focus's
// 128-row tile, both |m| groups), in one launch: z0 = U0 A, S = sigmoid(z00 G) with the gate product
// on the tensor cores between the groups' products, z1 = U1 W1; epilogues
// U0' = U0 + [silu(z00), z0[:, Cf:] * S] and U1' = U1 + z1 * S (the update formed in the
// accumulators, then the identity layers' residual epilogue). The item's code is in
// stack_ws_gated_fwd.cuh (the chained forward, stack_ws_chain.cu, runs it too).
// Why (docs/performance.md, 2026-12-03): the gate between the products in IEEE FFMA by the consumers
// took 159 us per 32,768-edge chunk (ncu) against 89 for an identity layer; a SIMT gate pass beside
// the product kernel (removed) 54 + 104 us. H200, 4,096 atoms, lean, the 80 gated forward launches:
// 13.4 ms split in two launches, 10.2 ms in this one.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated_fwd.cuh"

namespace sezm::cuda {
namespace {

struct WsGatedTc {
  WsGatedImages img;  // this layer's
  WsIo io;
  int ntiles, nitems;
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_tc_k(const __grid_constant__ WsGatedTc p,
                                                                     const __grid_constant__ CUtensorMap tmA) {
  using R = WsTcRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const ring = ws_dsmem + R::kScratch;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_regs_dec<kWsProducerRegs>();
    if (threadIdx.x >= 32) return;
    for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
      const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
      gated_fwd_fill<R::kStages, R::kStage, kOne>(p.img, ring, full, empty, pp, &tmA, f, y);
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  // This thread's stash in 16-byte slot groups (set_slots, slot_quad: stack_ws_gated.cuh), a
  // quarter of the shared-memory instructions of 4-byte ones.
  float4* const stash4 = reinterpret_cast<float4*>(ws_dsmem) + ct;
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    gated_fwd_item<R::kStages, R::kStage, kOne>(p.io, f, row0, ring, full, empty, pp, ct, stash4);
  }
}

}  // namespace

void launch_gated_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                          float* zsave, cudaStream_t s) {
  if (d.ROW != 10 * kCf || d.M0 != kM0)
    throw Error("launch_gated_forward: rows of ten 32-wide blocks expected (Cf = 32, L = 3)");
  if (out == in || zsave == in) throw Error("launch_gated_forward: the output and the kept z must not be the input");
  if (w.G_ws == nullptr) throw Error("launch_gated_forward: the gate's padded image (BlockWDev::G_ws) was not built");
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_tc_k<true> : stack_ws_gated_tc_k<false>;
  const int bytes = one ? WsTcRing<true>::kBytes : WsTcRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_tc_k");
  WsGatedTc p;
  p.img = gated_images(d, w, layer);
  p.io = WsIo{in, out, zsave, Ec, d.ROW};
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, activations_map(d, Ec, in));
  SEZM_LAUNCH("stack_ws_gated_tc_k");
}

}  // namespace sezm::cuda
