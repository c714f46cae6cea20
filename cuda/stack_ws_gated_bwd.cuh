#pragma once
// A gated layer's backward on the warp-specialised tile, one work item (a focus's 128-row tile) at
// a time: the producer's fills and the consumers' four phases, shared by the one-layer launch
// (stack_ws_gated_bwd.cu, which says why the layer runs this way, its phases and numerics) and
// the chained backward (stack_ws_chain_bwd.cu), which also runs an identity layer's backward
// through phases 2 and 4 with the hooks switched off (`on` false: A = the landed g, so the
// identity layers' one-layer arithmetic, stack_ws.cu).
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

// Shared memory: the consumers' scratch (S, then s_bar / eta G^T: 48 floats each per thread), then
// the ring, stages of A's box, B's block and z's box: three of 40 KiB (one pass: four of 28).
constexpr int kZBox = kWsRows * kWsK;
template <int kAr>
struct WsBwdRing : WsScratchRing<2 * 48, ws_one_plane(kAr) ? 4 : 3, ws_stage_floats(192, ws_one_plane(kAr)) + kZBox> {
  static constexpr int kZoff = WsBwdRing::kStage - kZBox;  // z's box: the stage's last
};

// A gated layer's backward images, focus f's: A^T's (at B0 + f 2 M0 M0), W1^T's (B1 + f 2 (2 M1)^2),
// G's padded to 128 columns (BG + f 2 Cf 128) and G^T's padded to 64 (BGT + f 2 L Cf 64). An
// identity layer's: B0 and B1 only.
struct WsBwdImages {
  const float *B0, *B1, *BG, *BGT;
};

// Host: layer `layer`'s backward images (BlockWDev's, built by Dims::stack_ws; f16: the FP16
// images of Dims::stack_f16, at the same offsets); an identity layer (gated false) has no G images
// (BG, BGT null).
inline WsBwdImages gated_bwd_images(const Dims& d, const BlockWDev& w, int layer, bool gated = true, bool f16 = false) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  return WsBwdImages{(f16 ? w.AT_f16 : w.AT_ws) + lf * 2 * d.M0 * d.M0,
                     (f16 ? w.W1T_f16 : w.W1T_wg) + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1),
                     gated ? (f16 ? w.G_f16 : w.G_ws) + lf * 2 * d.Cf * 128 : nullptr,
                     gated ? (f16 ? w.GT_f16 : w.GT_ws) + lf * 2 * d.L * d.Cf * 64 : nullptr};
}

// The producer warp's fills of item (focus f, rows y ..) of a gated layer, in the consumers' phase
// order: z00 with G's image (gated_bwd_fill_z: no output adjoint read); g1 and z1 with W1^T's
// (gated_bwd_fill_m1: the adjoint's |m| = 1 columns); g0 and z0 (the columns Cf ..) with G^T's, g0
// and z0 with A^T's (gated_bwd_fill_m0: its m = 0 columns).
template <int kStages, int kStage, int kAr>
__device__ __forceinline__ void gated_bwd_fill_z(const WsBwdImages& g, float* ring, uint64_t* full, uint64_t* empty,
                                                 WsPipe& pp, const CUtensorMap* tmZ, int f, int y) {
  constexpr int NG = 128;
  ws_fill<NG, kCf, kStages, kStage, ws_one_plane(kAr)>(ring, full, empty, pp, tmZ,
                                                       WsItem{0, y, f, g.BG + static_cast<size_t>(f) * 2 * kCf * NG});
}
template <int kStages, int kStage, int kZoff, int kAr>
__device__ __forceinline__ void gated_bwd_fill_m1(const WsBwdImages& g, float* ring, uint64_t* full, uint64_t* empty,
                                                  WsPipe& pp, const CUtensorMap* tmA, const CUtensorMap* tmZ, int f, int y) {
  constexpr int N0 = 128, N1 = 192;
  ws_fill<N1, N1, kStages, kStage, ws_one_plane(kAr), true, kZoff>(
      ring, full, empty, pp, tmA, WsItem{N0, y, f, g.B1 + static_cast<size_t>(f) * 2 * N1 * N1}, 0, N1 / kWsK, tmZ);
}
template <int kStages, int kStage, int kZoff, int kAr>
__device__ __forceinline__ void gated_bwd_fill_m0(const WsBwdImages& g, float* ring, uint64_t* full, uint64_t* empty,
                                                  WsPipe& pp, const CUtensorMap* tmA, const CUtensorMap* tmZ, int f, int y) {
  constexpr int N0 = 128, NGT = 64;
  constexpr bool kOne = ws_one_plane(kAr);  // the stages' layout
  ws_fill<NGT, kLC, kStages, kStage, kOne, true, kZoff>(
      ring, full, empty, pp, tmA, WsItem{kCf, y, f, g.BGT + static_cast<size_t>(f) * 2 * kLC * NGT}, 0, kLC / kWsK, tmZ);
  ws_fill<N0, N0, kStages, kStage, kOne, true, kZoff>(
      ring, full, empty, pp, tmA, WsItem{0, y, f, g.B0 + static_cast<size_t>(f) * 2 * N0 * N0}, 0, N0 / kWsK, tmZ);
}
template <int kStages, int kStage, int kZoff, int kAr>
__device__ __forceinline__ void gated_bwd_fill(const WsBwdImages& g, float* ring, uint64_t* full, uint64_t* empty,
                                               WsPipe& pp, const CUtensorMap* tmA, const CUtensorMap* tmZ, int f, int y) {
  gated_bwd_fill_z<kStages, kStage, kAr>(g, ring, full, empty, pp, tmZ, f, y);
  gated_bwd_fill_m1<kStages, kStage, kZoff, kAr>(g, ring, full, empty, pp, tmA, tmZ, f, y);
  gated_bwd_fill_m0<kStages, kStage, kZoff, kAr>(g, ring, full, empty, pp, tmA, tmZ, f, y);
}

__device__ __forceinline__ float4 mul4(float4 a, float4 b) { return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }

// 2.: A = g1 S (the component's degree), s_bar += g1 z1; `on` false: A = g1 (an identity layer).
template <int kZ>
struct M1Hook {
  static constexpr int kZoff = kZ;
  const float4* S;
  float4* sbar;
  int ra0;
  bool on;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    if (!on) return x;
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
// 4.: A = z_bar0: g00 silu'(z00) + eta G^T on the scalar row's columns, g0 S on the others; `on`
// false: A = g0 (an identity layer).
template <int kZ>
struct M0Hook {
  static constexpr int kZoff = kZ;
  const float4 *S, *eg;
  int ra0;
  bool on;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    if (!on) return x;
    const int h = row != ra0;
    if (k < kCf) {
      const float4 e = slot_quad(eg, k, h);
      return make_float4(fmaf(x.x, silu_gradf_(z.x), e.x), fmaf(x.y, silu_gradf_(z.y), e.y),
                         fmaf(x.z, silu_gradf_(z.z), e.z), fmaf(x.w, silu_gradf_(z.w), e.w));
    }
    return mul4(x, slot_quad(S, k - kCf, h));
  }
};

// Phase 1: S = sigmoid(z00 G) (the stage's box z00, G's image) into S's slots, s_bar's zeroed.
// kZh: z00's boxes are binary16 rows (the register-resident chained backward's, ws_fill_h; live0,
// live1: the thread's rows are edges of the chunk).
template <int kStages, int kStage, int kAr, bool kZh = false>
__device__ __forceinline__ void gated_bwd_phase1(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                                 float4* S, float4* sbar, bool live0 = true, bool live1 = true) {
  float g[128 / 2];
  if constexpr (kZh) {
    static_assert(kAr == kAr1xTf32, "binary16 z: the one TF32 pass");
    ws_product_one_h<128, kCf, kStages, kStage>(ring, full, empty, pp, ct, g, live0, live1);
  } else {
    ws_multiply<128, kCf, kStages, kStage, kAr>(ring, full, empty, pp, ct, g);
  }
  // kZh: S by sigmoid_approxf_ (S is no longer the forward's bit for bit anyway, z00 being
  // rounded): 48 values in each of the kernel's two copies of this phase, whose code then fits the
  // instruction cache.
#pragma unroll
  for (int j = 0; j < kLC / 2; ++j) g[j] = kZh ? sigmoid_approxf_(g[j]) : sigmoidf_(g[j]);
#pragma unroll
  for (int J = 0; J < kLC / 8; ++J) {
    S[256 * J] = make_float4(g[4 * J], g[4 * J + 1], g[4 * J + 2], g[4 * J + 3]);
    sbar[256 * J] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The consumers' part of item (focus f, rows row0 ..) of a gated layer's backward (gated) or an
// identity layer's (!gated: phases 2 and 4 only, the hooks off; the producer's fills then carry
// no z): io.out = the input adjoint from io.in, the output adjoint. scratch: the kernel's scratch
// as float4 (WsBwdRing's), + ct. Called by the 256 consumer threads (ct = threadIdx.x - 128).
// drop (the chained backward): io.in's |m| = 1 columns dropped from L2 after phase 2, its m = 0
// columns after phase 4, their last reads (ws_drop_group). stored1 (the chained backward, an
// item's step before its last): the |m| = 1 columns' hand-over, arrived on after phase 2's
// epilogue and drop (ws_chain_wait); null: none.
template <class R, int kAr>
__device__ __forceinline__ void gated_bwd_item(bool gated, bool drop, const WsIo& io, int f, int row0, const float* ring,
                                               uint64_t* full, uint64_t* empty, WsPipe& pp, int ct, float4* scratch,
                                               uint64_t* stored1 = nullptr) {
  constexpr int N0 = 128, N1 = 192, NGT = 64;
  const int ra0 = ws_row(ct, 0);
  float4* const S = scratch;          // S's 48 accumulators (slot_quad's groups)
  float4* const sbar = S + 12 * 256;  // s_bar, then eta G^T's 32 accumulators
  const size_t fo = static_cast<size_t>(f) * io.Ec * io.ROW;
  if (gated) gated_bwd_phase1<R::kStages, R::kStage, kAr>(ring, full, empty, pp, ct, S, sbar);  // 1. S = sigmoid(z00 G)
  {  // 2. G1' = g1 + (g1 S) W1^T
    float acc[N1 / 2];
    ws_multiply<N1, N1, R::kStages, R::kStage, kAr, M1Hook<R::kZoff>, true>(ring, full, empty, pp, ct, acc,
                                                                             M1Hook<R::kZoff>{S, sbar, ra0, gated});
    store_epilogue<N1>(io.out, fo + N0, io.ROW, row0, io.Ec, ct, acc);  // the product added the residual
  }
  if (drop) ws_drop_group<N1>(io.in, fo + N0, io.ROW, row0, io.Ec, ct);
  if (stored1) {  // the next step's |m| = 1 product may start
    ws_fence_proxy_global();
    ws_bar_arrive(stored1);
  }
  if (gated) {  // 3. eta G^T (s_bar completed by g0 z0 in the hook), into s_bar's slots once every s_bar value is read
    float eg[NGT / 2];
    ws_multiply<NGT, kLC, R::kStages, R::kStage, kAr>(ring, full, empty, pp, ct, eg, EtaHook<R::kZoff>{S, sbar, ra0});
    set_slots<NGT / 2>(sbar, eg);
  }
  {  // 4. G0' = g0 + z_bar0 A^T
    float acc[N0 / 2];
    ws_multiply<N0, N0, R::kStages, R::kStage, kAr, M0Hook<R::kZoff>, true>(ring, full, empty, pp, ct, acc,
                                                                             M0Hook<R::kZoff>{S, sbar, ra0, gated});
    store_epilogue<N0>(io.out, fo, io.ROW, row0, io.Ec, ct, acc);
  }
  if (drop) ws_drop_group<N0>(io.in, fo, io.ROW, row0, io.Ec, ct);
}

}  // namespace
}  // namespace sezm::cuda
