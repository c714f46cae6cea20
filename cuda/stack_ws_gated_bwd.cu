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
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>
#include <cstdlib>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

// Shared memory: the consumers' scratch (S, then s_bar / eta G^T: 48 floats each per thread), then
// the ring, stages of A's box, B's block and z's box: three of 40 KiB (one pass: four of 28).
constexpr int kZBox = kWsRows * kWsK;
template <bool kOne>
struct WsBwdRing : WsScratchRing<2 * 48, kOne ? 4 : 3, ws_stage_floats(192, kOne) + kZBox> {
  static constexpr int kZoff = WsBwdRing::kStage - kZBox;  // z's box: the stage's last
};

struct WsGatedBwd {
  const float* in;   // (F, Ec, ROW): the layer's output adjoint g (A of the products) and the residual
  float* out;        // (F, Ec, ROW)
  const float* B0;   // this layer's A^T images, focus f's at B0 + f 2 M0 M0
  const float* B1;   // its W1^T images, focus f's at B1 + f 2 (2 M1)^2
  const float* BG;   // its padded G images (Cf x 128), focus f's at BG + f 2 Cf 128
  const float* BGT;  // its padded G^T images (L Cf x 64), focus f's at BGT + f 2 L Cf 64
  int Ec, ROW, ntiles, nitems;
  int rev;  // items from the last (ws_bwd_reverse)
  int zevict;  // EXPERIMENT: z's last reads evict-first (SEZM_CUDA_Z_EVICT=0: not)
};

template <int kStages, int kStage, int kZoff, bool kOne>
__device__ __forceinline__ void bwd_producer(const WsGatedBwd& p, float* ring, uint64_t* full, uint64_t* empty,
                                             WsPipe& pp, const CUtensorMap* tmA, const CUtensorMap* tmZ) {
  constexpr int N0 = 128, N1 = 192, NG = 128, NGT = 64;
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  // z's last reads (phase 2's |m| = 1 columns, phase 4's m = 0 columns; phases 1 and 3 read the
  // m = 0 columns first) evict-first: L2 keeps the rows this launch writes for the next one.
  const uint64_t zlast = p.zevict ? ws_policy_evict_first() : 0;
  for (int i0 = blockIdx.x; i0 < p.nitems; i0 += ws_grid()) {
    const int i = ws_item(i0, p.nitems, p.rev);
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    const float* b0 = p.B0 + static_cast<size_t>(f) * 2 * N0 * N0;
    ws_fill<NG, kCf, kStages, kStage, kOne>(ring, full, empty, pp, tmZ,
                                            WsItem{0, y, f, p.BG + static_cast<size_t>(f) * 2 * kCf * NG});
    ws_fill<N1, N1, kStages, kStage, kOne, true, kZoff>(ring, full, empty, pp, tmA,
                                                        WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1},
                                                        0, N1 / kWsK, tmZ, zlast);
    ws_fill<NGT, kLC, kStages, kStage, kOne, true, kZoff>(
        ring, full, empty, pp, tmA, WsItem{kCf, y, f, p.BGT + static_cast<size_t>(f) * 2 * kLC * NGT}, 0, kLC / kWsK,
        tmZ);
    ws_fill<N0, N0, kStages, kStage, kOne, true, kZoff>(ring, full, empty, pp, tmA, WsItem{0, y, f, b0}, 0,
                                                        N0 / kWsK, tmZ, zlast);
  }
}

__device__ __forceinline__ float4 mul4(float4 a, float4 b) { return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }

// 2.: A = g1 S (the component's degree), s_bar += g1 z1.
template <int kZ>
struct M1Hook {
  static constexpr int kZoff = kZ;
  const float4* S;
  float4* sbar;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    const int h = row != ra0, sc = (red_l(3 + 1 + k / kCf, 3) - 1) * kCf + k % kCf;
    slot_fma(sbar, sc, h, x, z);
    return mul4(x, slot_quad(S, sc, h));
  }
};
// 3.: A = eta = s_bar S (1 - S), s_bar's column k (of the three degrees' Cf each) completed by
// g0 z0 at m = 0 column Cf + k (x, z: the stage's boxes there), as slot_fma would, in registers.
template <int kZ>
struct EtaHook {
  static constexpr int kZoff = kZ;
  const float4 *S, *sbar;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    const int h = row != ra0;
    const float4 s = slot_quad(S, k, h), o = slot_quad(sbar, k, h);
    const float4 b = make_float4(fmaf(x.x, z.x, o.x), fmaf(x.y, z.y, o.y), fmaf(x.z, z.z, o.z), fmaf(x.w, z.w, o.w));
    return make_float4(b.x * s.x * (1.0f - s.x), b.y * s.y * (1.0f - s.y), b.z * s.z * (1.0f - s.z),
                       b.w * s.w * (1.0f - s.w));
  }
};
// 4.: A = z_bar0: g00 silu'(z00) + eta G^T on the scalar row's columns, g0 S on the others.
template <int kZ>
struct M0Hook {
  static constexpr int kZoff = kZ;
  const float4 *S, *eg;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    const int h = row != ra0;
    if (k < kCf) {
      const float4 e = slot_quad(eg, k, h);
      return make_float4(fmaf(x.x, silu_gradf_(z.x), e.x), fmaf(x.y, silu_gradf_(z.y), e.y),
                         fmaf(x.z, silu_gradf_(z.z), e.z), fmaf(x.w, silu_gradf_(z.w), e.w));
    }
    return mul4(x, slot_quad(S, k - kCf, h));
  }
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_backward_k(const __grid_constant__ WsGatedBwd p,
                                                                           const __grid_constant__ CUtensorMap tmA,
                                                                           const __grid_constant__ CUtensorMap tmZ) {
  constexpr int N0 = 128, N1 = 192, NG = 128, NGT = 64;
  using R = WsBwdRing<kOne>;
  constexpr bool kRes = !kOne;  // 3xTF32: the products add the residual (ws_epilogue)
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const ring = ws_dsmem + R::kScratch;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    bwd_producer<R::kStages, R::kStage, R::kZoff, kOne>(p, ring, full, empty, pp, &tmA, &tmZ);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128, ra0 = ws_row(ct, 0);
  float4* const S = reinterpret_cast<float4*>(ws_dsmem) + ct;  // S's 48 accumulators (slot_quad's groups)
  float4* const sbar = S + 12 * 256;                            // s_bar, then eta G^T's 32 accumulators
  for (int i0 = blockIdx.x; i0 < p.nitems; i0 += gridDim.x) {
    const int i = ws_item(i0, p.nitems, p.rev);
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    {  // 1. S = sigmoid(z00 G)
      float g[NG / 2];
      ws_multiply<NG, kCf, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, g);
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) g[j] = sigmoidf_(g[j]);
#pragma unroll
      for (int J = 0; J < kLC / 8; ++J) {
        S[256 * J] = make_float4(g[4 * J], g[4 * J + 1], g[4 * J + 2], g[4 * J + 3]);
        sbar[256 * J] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
    {  // 2. G1' = g1 + (g1 S) W1^T
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne, M1Hook<R::kZoff>, kRes>(ring, full, empty, pp, ct, acc,
                                                                               M1Hook<R::kZoff>{S, sbar, ra0});
      ws_epilogue<N1, kRes>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
    {  // 3. eta G^T (s_bar completed by g0 z0 in the hook), into s_bar's slots once every s_bar value is read
      float eg[NGT / 2];
      ws_multiply<NGT, kLC, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, eg,
                                                         EtaHook<R::kZoff>{S, sbar, ra0});
      set_slots<NGT / 2>(sbar, eg);
    }
    {  // 4. G0' = g0 + z_bar0 A^T
      float acc[N0 / 2];
      ws_multiply<N0, N0, R::kStages, R::kStage, kOne, M0Hook<R::kZoff>, kRes>(ring, full, empty, pp, ct, acc,
                                                                               M0Hook<R::kZoff>{S, sbar, ra0});
      ws_epilogue<N0, kRes>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}

}  // namespace

void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                           const float* z, cudaStream_t s) {
  if (d.ROW != 10 * kCf)
    throw Error("launch_gated_backward: rows of ten 32-wide blocks expected (Cf = 32, L = 3)");
  if (w.G_ws == nullptr || w.GT_ws == nullptr)
    throw Error("launch_gated_backward: the gate's padded images (BlockWDev::G_ws, GT_ws) were not built");
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_backward_k<true> : stack_ws_gated_backward_k<false>;
  const int bytes = one ? WsBwdRing<true>::kBytes : WsBwdRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_backward_k");
  WsGatedBwd p;
  p.in = in;
  p.out = out;
  p.B0 = w.AT_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1T_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  p.BG = w.G_ws + lf * 2 * d.Cf * 128;
  p.BGT = w.GT_ws + lf * 2 * d.L * d.Cf * 64;
  set_ws_items(p, d, Ec);
  p.rev = ws_bwd_reverse(d, layer);
  static const bool no_evict = [] { const char* e = std::getenv("SEZM_CUDA_Z_EVICT"); return e && *e == '0'; }();
  p.zevict = no_evict ? 0 : 1;
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, activations_map(d, Ec, in), activations_map(d, Ec, z));
  SEZM_LAUNCH("stack_ws_gated_backward_k");
}

}  // namespace sezm::cuda
