#pragma once
// A gated layer's forward on the warp-specialised tile, one work item (a focus's 128-row tile)
// at a time: the producer's fills and the consumers' products and epilogues, shared by the
// one-layer launch (stack_ws_gated_fwd.cu, which says why the layer runs this way and its
// numerics) and the chained forward (stack_ws_chain.cu).
// Per item: z0 = U0 A from the ring's m = 0 blocks; z0 parked in shared memory (each consumer
// thread's 64 floats thread-major: conflict-free) while its scalar row z00 (the thread's quads 0, 1)
// is the A operand of S_pre = z00 G, whose B blocks (G's image, zero-padded to 128 columns: two
// stages holding B alone) the producer streams between the groups; S = sigmoid(S_pre). Every S value
// a thread's epilogues need is in its own accumulators (the product's output quad (q4, h) and A's
// quad (kb = q4, h) are the same rows and columns 16 q4 + 4 t): S stays in registers through the
// m = 0 epilogue, then takes z0's place in shared memory for the |m| = 1 epilogue. No gate pass, no T.
// Numerics: S_pre in the products' arithmetic (kAr: 3xTF32, one TF32 pass or 3xFP16) from the product's z00, which is also the z00 kept
// and put through silu; the backward (stack_ws_gated_bwd.cu) recomputes S by the same product from
// the kept z00, so to the bit.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

constexpr int kM0 = 128;  // M0 = (L + 1) Cf
constexpr int kNG = 128;  // G's padded width: two 64-column chunks

// u + z s per element as one FMA: the epilogues' residual added to the gated product in one
// rounding, written out (the compiler had contracted them so where the residual's loads let it, in
// every arithmetic but the one pass's |m| = 1 epilogue; now in all of them).
__device__ __forceinline__ float4 fma4(float4 z, float4 s, float4 u) {
  return make_float4(__fmaf_rn(z.x, s.x, u.x), __fmaf_rn(z.y, s.y, u.y), __fmaf_rn(z.z, s.z, u.z),
                     __fmaf_rn(z.w, s.w, u.w));
}

// Quad (q4, h) of the accumulators (wg_quad's) set to v.
template <int M>
__device__ __forceinline__ void set_quad(float (&acc)[M], int q4, int h, float4 v) {
  acc[8 * q4 + 2 * h] = v.x;
  acc[8 * q4 + 2 * h + 1] = v.y;
  acc[8 * q4 + 4 + 2 * h] = v.z;
  acc[8 * q4 + 5 + 2 * h] = v.w;
}

// Shared memory: the consumers' stash (64 floats per thread in 16-byte groups, thread-major), then
// the ring, four stages of 32 KiB (one pass: six of 20 KiB). Not five (eight): 192 (184) KiB keep
// the shared-memory carve-out at 196 KiB of the SM's unified 256 (224 KiB take the 228 KiB step),
// so L1 keeps 60 KiB, not 28; with 32 KiB of unused shared memory added the probe's gated kind
// runs 7-8 % slower, and loads that skip L1 are slower still (docs/performance.md, 2026-12-04
// third session). Here, 4,096 atoms: fast -1.1 ms, lean -0.3; `precision tf32` fast -1.7, lean
// -1.0; the same bits.
template <int kAr>
using WsTcRing = WsScratchRing<kM0 / 2, ws_one_plane(kAr) ? 6 : 4, ws_stage_floats(192, ws_one_plane(kAr))>;

// One gated layer's images: A (kS 2), focus f's at B0 + f 2 M0 M0; G padded to kNG columns, at
// BG + f 2 Cf kNG; W1 (kS 2), at B1 + f 2 (2 M1)^2.
struct WsGatedImages {
  const float *B0, *BG, *B1;
};

// Host: layer `layer`'s images (BlockWDev's, built by Dims::stack_ws; f16: the FP16 images of
// Dims::stack_f16, at the same offsets); an identity layer (gated false) has no G image (BG null).
inline WsGatedImages gated_images(const Dims& d, const BlockWDev& w, int layer, bool gated = true, bool f16 = false) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  return WsGatedImages{(f16 ? w.A_f16 : w.A_ws) + lf * 2 * d.M0 * d.M0,
                       gated ? (f16 ? w.G_f16 : w.G_ws) + lf * 2 * d.Cf * kNG : nullptr,
                       (f16 ? w.W1_f16 : w.W1_wg) + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1)};
}

// The producer warp's fills of item (focus f, rows y ..): A's m = 0 blocks with A's image, G's
// B-only blocks (gated_fwd_fill_m0: what reads the input's m = 0 columns), A's |m| = 1 blocks
// with W1's image. Called by the 32 lanes of the producer warp.
template <int kStages, int kStage, int kAr>
__device__ __forceinline__ void gated_fwd_fill_m0(const WsGatedImages& g, float* ring, uint64_t* full, uint64_t* empty,
                                                  WsPipe& pp, const CUtensorMap* tmA, int f, int y) {
  group_fill<128, kStages, kStage, kAr>(g.B0, ring, full, empty, pp, tmA, f, y);
  ws_fill<kNG, kCf, kStages, kStage, ws_one_plane(kAr), false>(
      ring, full, empty, pp, tmA, WsItem{0, y, f, g.BG + static_cast<size_t>(f) * 2 * kCf * kNG});
}
template <int kStages, int kStage, int kAr>
__device__ __forceinline__ void gated_fwd_fill(const WsGatedImages& g, float* ring, uint64_t* full, uint64_t* empty,
                                               WsPipe& pp, const CUtensorMap* tmA, int f, int y) {
  gated_fwd_fill_m0<kStages, kStage, kAr>(g, ring, full, empty, pp, tmA, f, y);
  group_fill<192, kStages, kStage, kAr>(g.B1, ring, full, empty, pp, tmA, f, y);
}

// The consumers' part of item (focus f, rows row0 ..): the products from the ring as
// gated_fwd_fill streams them, the epilogues U0' = U0 + [silu(z00), z0[:, Cf:] * S] and
// U1' = U1 + z1 * S into io.out. Called by the 256 consumer threads (ct = threadIdx.x - 128;
// stash4: the scratch as float4, + ct). In three steps around the two groups' products (the
// chained forward, stack_ws_chain.cu, shares those products with its identity layers):
//  gated_fwd_park, after z0 = U0 A: z00's quads kept (index 2 kb + h), z0 parked in the stash;
//  gated_fwd_gate, then: S = sigmoid(z00 G) and the m = 0 epilogue, S parked in the stash;
//  gated_fwd_m1_epilogue, after z1 = U1 W1 (acc): the |m| = 1 epilogue.
__device__ __forceinline__ void gated_fwd_park(const float (&acc)[kM0 / 2], float4 (&z00)[4], float4* stash4) {
#pragma unroll
  for (int q = 0; q < 4; ++q) z00[q] = wg_quad(acc, q >> 1, q & 1);
  set_slots<kM0 / 2>(stash4, acc);
}

// The pre-activations z (the accumulators, N columns) kept for the backward at column c0 of the
// item's rows, stored evict-first (st.global.cs): nothing reads them before the backward, and
// the chained forward's hand-over rows should keep L2 (docs/performance.md, 2026-12-05 ninth
// session). All of them before the epilogue's arithmetic, so that the branches on live rows sit
// outside it and do not change how the compiler contracts the epilogue's multiplies and adds.
template <int N>
__device__ __forceinline__ void store_z(const WsIo& io, size_t fo, int row0, const bool (&live)[2], int ct,
                                        const float (&acc)[N / 2], int c0) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!live[h]) continue;
    float* zr = io.zsave + fo + static_cast<size_t>(row0 + ws_row(ct, h)) * io.ROW + c0;
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4) __stcs(reinterpret_cast<float4*>(zr + wg_quad_col(q4)), wg_quad(acc, q4, h));
  }
}

// store_z, or (kRegs, io.z16: the register-resident chain with stack_z_f16) the same columns as
// binary16 rows with their scales (store_rows_h, evict-first), group c0 / 128.
template <int N, bool kRegs>
__device__ __forceinline__ void store_z_any(const WsIo& io, size_t fo, int row0, const bool (&live)[2], int ct,
                                            const float (&acc)[N / 2], int c0) {
  if (kRegs && io.z16)
    store_rows_h<N, true>(io.zsave, io.F, io.Ec, io.ROW, io.f, row0, c0 == 0 ? 0 : 1, ct,
                          [&](int q4, int h) { return wg_quad(acc, q4, h); });
  else
    store_z<N>(io, fo, row0, live, ct, acc, c0);
}

// S_pre = z00 G into g (the gate product: A the consumer's own z00 quads, gated_fwd_park's, B G's
// stages). kRegs: stack_ws_chain_regs.cu's ring, stages of B alone at their start (one TF32
// pass; z00[2 kb + h] is ws_product_one_regs's layout: the same fragments, the same bits).
template <int kStages, int kStage, int kAr, bool kRegs = false>
__device__ __forceinline__ void gated_fwd_s_pre(const float4 (&z00)[4], const float* ring, uint64_t* full,
                                                uint64_t* empty, WsPipe& pp, int ct, float (&g)[kNG / 2]) {
  if constexpr (kRegs) {
    static_assert(kAr == kAr1xTf32, "the register-resident chain runs one TF32 pass");
    ws_product_one_regs<kNG, kCf, kStages, kStage, 0>(ring, full, empty, pp, ct, g, z00);
  } else {
    const int ra0 = ws_row(ct, 0);
    ws_multiply<kNG, kCf, kStages, kStage, kAr>(ring, full, empty, pp, ct, g, [&](int row, int k, float4) {
      const bool h1 = row != ra0;
      return k < kWsK ? (h1 ? z00[1] : z00[0]) : (h1 ? z00[3] : z00[2]);
    });
  }
}

// (live: whether the thread's rows h = 0, 1 are edges of the chunk; u0: U0's quads as the m = 0
// product landed them (ws_multiply's kept, one TF32 pass), or null: read back.) kRegs
// (stack_ws_chain_regs.cu): the output's quads also into uout (the next layer's A), stored only
// where io.out is not null, S not parked (that chain computes it again for the |m| = 1 group), and
// the gate product from that chain's stages (gated_fwd_s_pre's kRegs).
template <int kStages, int kStage, int kAr, bool kRegs = false>
__device__ __forceinline__ void gated_fwd_gate(const WsIo& io, size_t fo, int row0, const bool (&live)[2],
                                               const float4 (&z00)[4], const float* ring, uint64_t* full,
                                               uint64_t* empty, WsPipe& pp, int ct, float4* stash4,
                                               const float4* u0 = nullptr, float4* uout = nullptr) {
  constexpr int N0 = 128;
  float g[kNG / 2];  // S_pre, then S (its quads 0 .. 5; 6, 7 are the padding's, left alone)
  gated_fwd_s_pre<kStages, kStage, kAr, kRegs>(z00, ring, full, empty, pp, ct, g);
  {  // ---- m = 0 epilogue: U0' = U0 + [silu(z00), z0[:, Cf:] * S] ----
    float4 res[N0 / 8];  // U0's quads, in flight while the sigmoids run
    if (u0 != nullptr) {
#pragma unroll
      for (int j = 0; j < N0 / 8; ++j) res[j] = u0[j];
    } else {
      residual_load<N0>(io.in, fo, io.ROW, row0, io.Ec, ct, res);
    }
#pragma unroll
    for (int j = 0; j < kLC / 2; ++j) g[j] = sigmoidf_(g[j]);  // quads 6, 7 are G's padding: unused
    float acc[N0 / 2];
    get_slots<N0 / 2>(stash4, acc);
    if (io.zsave) store_z_any<N0, kRegs>(io, fo, row0, live, ct, acc, 0);
#pragma unroll
    for (int q4 = 0; q4 < N0 / 16; ++q4)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 z = wg_quad(acc, q4, h);
        float4 sg;  // silu(z) = z sigmoid(z) on the scalar row's columns, else S at column 16 q4 + 4 t - Cf
        if (q4 < kCf / 16) sg = make_float4(sigmoidf_(z.x), sigmoidf_(z.y), sigmoidf_(z.z), sigmoidf_(z.w));
        else sg = wg_quad(g, q4 - kCf / 16, h);
        set_quad(acc, q4, h, fma4(z, sg, res[2 * q4 + h]));
      }
    if constexpr (kRegs) {
      ws_out_quads(acc, uout);
      if (io.out) store_epilogue<N0>(io.out, fo, io.ROW, row0, io.Ec, ct, acc);
    } else {
      store_epilogue<N0>(io.out, fo, io.ROW, row0, io.Ec, ct, acc);
    }
  }
  if constexpr (!kRegs) set_slots<kLC / 2>(stash4, g);  // S's quads 0 .. 5
}

// U1' = U1 + z1 * S (the sigmoid of the component's degree), z1 in acc; u1: U1's quads as the
// product landed them (ws_multiply's kept, one TF32 pass), or null: read back. kRegs: as
// gated_fwd_gate's (U1' into uout, stored only where io.out is not null).
template <bool kRegs = false>
__device__ __forceinline__ void gated_fwd_m1_epilogue(const WsIo& io, size_t fo, int row0, const bool (&live)[2],
                                                      float (&acc)[96], int ct, const float4* stash4,
                                                      const float4* u1 = nullptr, float4* uout = nullptr) {
  constexpr int N0 = 128, N1 = 192;
  float4 res[N1 / 8];  // U1's quads (read back: in flight during the gating and the z stores)
  if (u1 != nullptr) {
#pragma unroll
    for (int j = 0; j < N1 / 8; ++j) res[j] = u1[j];
  } else {
    residual_load<N1>(io.in, fo + N0, io.ROW, row0, io.Ec, ct, res);
  }
  if (io.zsave) store_z_any<N1, kRegs>(io, fo, row0, live, ct, acc, N0);
#pragma unroll
  for (int q4 = 0; q4 < N1 / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 z = wg_quad(acc, q4, h);
      // column c = 16 q4 + 4 t: degree red_l(L + 1 + c / Cf) - 1, S's quad 2 d + (c % Cf) / 16
      const int sq = 2 * (red_l(3 + 1 + q4 / 2, 3) - 1) + (q4 & 1);
      const float4 sg = slot_quad(stash4, 16 * sq, h);
      set_quad(acc, q4, h, fma4(z, sg, res[2 * q4 + h]));
    }
  if constexpr (kRegs) {
    ws_out_quads(acc, uout);
    if (io.out) store_epilogue<N1>(io.out, fo + N0, io.ROW, row0, io.Ec, ct, acc);
  } else {
    store_epilogue<N1>(io.out, fo + N0, io.ROW, row0, io.Ec, ct, acc);
  }
}

template <int kStages, int kStage, int kAr>
__device__ __forceinline__ void gated_fwd_item(const WsIo& io, int f, int row0, const float* ring, uint64_t* full,
                                               uint64_t* empty, WsPipe& pp, int ct, float4* stash4) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  const size_t fo = static_cast<size_t>(f) * io.Ec * io.ROW;
  const bool live[2] = {row0 + ws_row(ct, 0) < io.Ec, row0 + ws_row(ct, 1) < io.Ec};
  constexpr bool kOne = ws_one_pass(kAr);  // the residuals from the quads the products landed
  float4 z00[4];
  float4 u0[kOne ? N0 / 8 : 1];
  {
    float acc[N0 / 2];
    ws_multiply<N0, N0, kStages, kStage, kAr>(ring, full, empty, pp, ct, acc, WsAsIs{}, true, kOne ? u0 : nullptr);
    gated_fwd_park(acc, z00, stash4);
  }
  gated_fwd_gate<kStages, kStage, kAr>(io, fo, row0, live, z00, ring, full, empty, pp, ct, stash4,
                                       kOne ? u0 : nullptr);
  float acc[N1 / 2];
  float4 u1[kOne ? N1 / 8 : 1];
  ws_multiply<N1, N1, kStages, kStage, kAr>(ring, full, empty, pp, ct, acc, WsAsIs{}, true, kOne ? u1 : nullptr);
  gated_fwd_m1_epilogue(io, fo, row0, live, acc, ct, stash4, kOne ? u1 : nullptr);
}

}  // namespace
}  // namespace sezm::cuda
