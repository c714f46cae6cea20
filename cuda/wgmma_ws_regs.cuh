#pragma once
// The warp-specialised tile's one-pass product with A from the consumers' registers, and the
// landing of a chain's input into them: what the register-resident chains run
// (stack_ws_chain_regs.cu, stack_ws_chain_bwd_regs.cu; the gate product of stack_ws_gated_fwd.cuh
// there). On wgmma_ws.cuh's ring, schedule and rounding (ws_product_one_loop), so the same bits as
// landing the same quads.
#include <cuda_fp16.h>

#include <type_traits>

#include "wgmma_ws.cuh"

namespace sezm::cuda {
namespace {

// A quad of a stage's box of binary16 rows (16 x 128 halves, ws_fill_h's): the
// halves at row `row`, columns 4 t .. 4 t + 3, times the row's inverse scale sc (f16_rows.cuh).
__device__ __forceinline__ float4 ws_h4(const float* st, int row, int t, float sc) {
  const uint2 v = *reinterpret_cast<const uint2*>(reinterpret_cast<const __half*>(st) + ws_a_offset(row, 4 * t));
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&v.x)),
               b = __half22float2(*reinterpret_cast<const __half2*>(&v.y));
  return make_float4(a.x * sc, a.y * sc, b.x * sc, b.y * sc);
}
// The inverse scales of rows ra0, ra1 that the first stage of a group's boxes of binary16 rows
// holds after its box (ws_fill_h): 0 for a row past the chunk (live false), whatever
// the bytes the bulk copy read past the scales' run hold.
__device__ __forceinline__ void ws_h_scales(const float* st, int ra0, int ra1, bool live0, bool live1, float& s0,
                                            float& s1) {
  const float* sc = st + kWsRows * kWsK / 2;
  s0 = live0 ? sc[ra0] : 0.0f;
  s1 = live1 ? sc[ra1] : 0.0f;
}

// ws_product_one with A from registers: a[2 kb + h] this thread's quad of block kb and row
// ws_row(ct, h) (the layout of ws_product_one's kept, i.e. of its output quads (kb, h)), so that a
// product's output, after its epilogue, is the next product's A without leaving the SM. The stages
// hold B's block at kBOff floats (by default after where A's box would be; 0: a ring of B-only
// stages, ws_fill's kBAt0) and are waited for as ws_land_a waits; the fragments are ws_land_a's
// from the same quads. A hook other than WsAsIs is called as ax(row, k, x, zx), x the quad from
// registers, zx the quad at the same place of the box the stage holds where A's box would be (the
// chained backward's saved z, copied by A's tensor copy from z's map), in ws_land_a's order (block
// by block, row ra0 then ra1), so a hook with side effects (s_bar's sums) makes them in that order.
// kZh: that box is binary16 rows (ws_fill_h's with B), the first stage with the rows' scales (live0,
// live1: ws_h_scales'); kZRaw: the hook gets the halves unscaled and the rows' two scales are handed
// back in zsc (a hook whose z enters only sums that the caller then scales: exact, the scales being
// powers of two).
template <int N, int K, int kStages, int kStage, int kBOff = kWsRows * kWsK, class AX = WsAsIs, bool kZh = false,
          bool kZRaw = false>
__device__ __forceinline__ void ws_product_one_regs(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                                    int ct, float (&acc)[N / 2], const float4* a, AX ax = AX{},
                                                    bool live0 = true, bool live1 = true, float* zsc = nullptr) {
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  float s0 = 0.0f, s1 = 0.0f;  // kZh: the rows' scales
  auto next_block = [&](uint32_t (&h)[kWsKs][4], int kb) {
    const int cur = ws_wait_full<kStages>(full, pp);
    float4 x0 = a[2 * kb], x1 = a[2 * kb + 1];
    if constexpr (!std::is_same_v<AX, WsAsIs>) {
      const float* sZ = ring + cur * kStage;
      float4 z0, z1;
      if constexpr (kZh) {
        if (kb == 0) ws_h_scales(sZ, ra0, ra1, live0, live1, s0, s1);
        z0 = ws_h4(sZ, ra0, t, kZRaw ? 1.0f : s0);
        z1 = ws_h4(sZ, ra1, t, kZRaw ? 1.0f : s1);
      } else {
        z0 = *reinterpret_cast<const float4*>(sZ + ws_a_offset(ra0, 4 * t));
        z1 = *reinterpret_cast<const float4*>(sZ + ws_a_offset(ra1, 4 * t));
      }
      x0 = ax(ra0, kb * kWsK + 4 * t, x0, z0);
      x1 = ax(ra1, kb * kWsK + 4 * t, x1, z1);
    }
    float f[kWsKs][4];
    ws_frag_order(x0, x1, f);
    ws_round_one(f, h);
    return cur;
  };
  ws_product_one_loop<N, K, kStages, kStage, kBOff>(ring, empty, ct, acc, next_block);
  if constexpr (kZRaw) {
    zsc[0] = s0;
    zsc[1] = s1;
  }
}

// ws_product_one with A the stages' boxes of binary16 rows (ws_fill_h's with B: the chained backward's
// saved z00, for the gate product), the first with the rows' scales; B's block after where an fp32
// box would be, as ws_fill lands it.
template <int N, int K, int kStages, int kStage>
__device__ __forceinline__ void ws_product_one_h(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                                 int ct, float (&acc)[N / 2], bool live0, bool live1) {
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  float s0 = 0.0f, s1 = 0.0f;
  auto next_block = [&](uint32_t (&h)[kWsKs][4], int kb) {
    const int cur = ws_wait_full<kStages>(full, pp);
    const float* st = ring + cur * kStage;
    if (kb == 0) ws_h_scales(st, ra0, ra1, live0, live1, s0, s1);
    float f[kWsKs][4];
    ws_frag_order(ws_h4(st, ra0, t, s0), ws_h4(st, ra1, t, s1), f);
    ws_round_one(f, h);
    return cur;
  };
  ws_product_one_loop<N, K, kStages, kStage, kWsRows * kWsK>(ring, empty, ct, acc, next_block);
}

// The A quads of K / 16 stages that hold A's boxes alone (ws_fill's !kB) into q, in
// ws_product_one's kept layout, each stage released once read: a chain's input, whose products
// then take A from registers (ws_product_one_regs).
template <int K, int kStages, int kStage>
__device__ __forceinline__ void ws_land_quads(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                              float4 (&q)[K / 8]) {
  const int t = ct & 3, ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
#pragma unroll
  for (int kb = 0; kb < K / kWsK; ++kb) {
    const int cur = ws_wait_full<kStages>(full, pp);
    const float* sA = ring + cur * kStage;
    q[2 * kb] = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra0, 4 * t));
    q[2 * kb + 1] = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra1, 4 * t));
    ws_fence_proxy_shared();  // the loads before the producer's next copy into the stage
    __syncwarp();
    if ((ct & 31) == 0) ws_bar_arrive(&empty[cur]);
  }
}

// ws_land_quads over binary16 rows (f16_rows.cuh): stages of a box of halves (16 x 128, 4 KiB),
// the first with the group's 128 inverse scales after it (ws_fill_h); a quad is its four halves
// times its row's scale (ws_h_scales).
template <int K, int kStages, int kStage>
__device__ __forceinline__ void ws_land_quads_h(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                                bool live0, bool live1, float4 (&q)[K / 8]) {
  const int t = ct & 3, ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
  for (int kb = 0; kb < K / kWsK; ++kb) {
    const int cur = ws_wait_full<kStages>(full, pp);
    const float* st = ring + cur * kStage;
    if (kb == 0) ws_h_scales(st, ra0, ra1, live0, live1, s0, s1);
    q[2 * kb] = ws_h4(st, ra0, t, s0);
    q[2 * kb + 1] = ws_h4(st, ra1, t, s1);
    ws_fence_proxy_shared();  // as ws_land_quads'
    __syncwarp();
    if ((ct & 31) == 0) ws_bar_arrive(&empty[cur]);
  }
}

// The producer warp's stages of K / 16 boxes of binary16 rows of tmA (activations_map_h) at columns
// it.x, it.x + 16, ... of rows it.y .. of focus it.z, each at its stage's start, the first stage
// also the 128 inverse scales at `scales` (the group's run from row it.y: 512 bytes, 16-byte
// aligned, f16_scale_at) after the box: ws_land_quads_h's stages (NB = 0), or (NB > 0) a product's
// with the box read by ws_product_one_h or a kZh hook and B's block (NB columns, one plane, it.B)
// where ws_fill<NB, K, .., true> places it, after an fp32 box's place.
template <int K, int kStages, int kStage, int NB = 0>
__device__ __forceinline__ void ws_fill_h(float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, const CUtensorMap* tmA,
                                          const float* scales, const WsItem& it) {
  constexpr uint32_t kBox = kWsRows * kWsK * 2, kScales = kWsRows * 4;
  constexpr int kBFloats = NB > 0 ? ws_b_floats(NB, true) : 0, kBlock = NB > 0 ? wg_stage_floats(NB, kWsKs) : 0;
  constexpr uint32_t kBBytes = kBFloats * sizeof(float);
  static_assert(kWsRows * kWsK / 2 + kWsRows <= kStage, "a stage holds the box and the scales");
  static_assert(NB == 0 || kWsRows * kWsK + kBFloats <= kStage, "a stage holds the box's place and B's block");
#pragma unroll 1
  for (int kb = 0; kb < K / kWsK; ++kb) {
    ws_bar_wait(&empty[pp.stage], pp.phase ^ 1u);
    float* dst = ring + pp.stage * kStage;
    if ((threadIdx.x & 31) == 0) {
      ws_bar_expect(&full[pp.stage], kBox + kBBytes + (kb == 0 ? kScales : 0u));
      if (NB > 0) ws_bulk(dst + kWsRows * kWsK, it.B + static_cast<size_t>(kb) * kBlock, kBBytes, &full[pp.stage]);
      ws_tma_3d(dst, tmA, it.x + kb * kWsK, it.y, it.z, &full[pp.stage]);
      if (kb == 0) ws_bulk(dst + kWsRows * kWsK / 2, scales, kScales, &full[pp.stage]);
    }
    ws_advance<kStages>(pp);
  }
}

// A register-resident chain's input group (K columns from column x, rows y .., focus z): the
// producer's stages, fp32 boxes of tmA or (half) ws_fill_h's halves and `scales`; and the
// consumers' landing of them into q (half: the binary16 rows, f16_rows.cuh).
template <int K, int kStages, int kStage>
__device__ __forceinline__ void ws_fill_input(float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                              const CUtensorMap* tmA, bool half, const float* scales, int x, int y,
                                              int z) {
  if (half)
    ws_fill_h<K, kStages, kStage>(ring, full, empty, pp, tmA, scales, WsItem{x, y, z, nullptr});
  else
    ws_fill<K, K, kStages, kStage, true, true, 0, false>(ring, full, empty, pp, tmA, WsItem{x, y, z, nullptr});
}
template <int K, int kStages, int kStage>
__device__ __forceinline__ void ws_land_input(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                              bool half, bool live0, bool live1, float4 (&q)[K / 8]) {
  if (half)
    ws_land_quads_h<K, kStages, kStage>(ring, full, empty, pp, ct, live0, live1, q);
  else
    ws_land_quads<K, kStages, kStage>(ring, full, empty, pp, ct, q);
}

}  // namespace
}  // namespace sezm::cuda
