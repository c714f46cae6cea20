#pragma once
// EXPERIMENT (branch exp-f16; used only by sezm-stack-probe variant 111 so far): the
// warp-specialised tile's product (cuda/wgmma_ws.cuh, whose ring, barriers and schedule this keeps)
// on the FP16 tensor cores, in the 3x split with each A row scaled by a power of two first. Why and
// the layout: cuda/wgmma_f16_layout.h. Per 16-k block one m64n64k16 instruction per product and
// chunk instead of two k8 steps; a ring stage holds A's box (fp32, as now) and the FP16 image's
// block (hi and lo planes, 32 N halves: half the TF32 block's bytes), so the same ~192 KiB hold
// 9 (N = 192) or 12 (N = 128) stages. The thread's four k of a row are one 16-byte load as in the
// TF32 tile (ws_f16_phys_k), scaled by the row's s and split into hi / lo half2 fragments; each
// chunk's partial lo·hi + hi·lo + hi·hi is formed from zero and folded into the accumulators as
// acc = fma(d, 1 / (s s_B), acc) (exact scale: powers of two), so the accumulators hold A B unscaled.
#include <cuda_fp16.h>

#include "wgmma_f16_layout.h"
#include "wgmma_ws.cuh"

namespace sezm::cuda {
namespace {

// Floats of one ring stage: A (128 rows x 16 fp32) and the FP16 image's block (16 N floats; one
// pass: its hi plane, 8 N floats, the block's first half).
SEZM_WG_HD constexpr int ws_f16_stage_floats(int N, bool one = false) {
  return kWsRows * kWsK + ws_f16_b_halves(N, one) / 2;
}
// ~180-192 KiB of stages, as the TF32 ring: 9 x 20 KiB / 12 x 16 KiB; one pass 13 x 14 / 16 x 12.
SEZM_WG_HD constexpr int ws_f16_stages(int N, bool one = false) { return one ? (N > 128 ? 13 : 16) : (N > 128 ? 9 : 12); }
SEZM_WG_HD constexpr int ws_f16_smem_bytes(int N, bool one = false) {
  return ws_f16_stages(N, one) * ws_f16_stage_floats(N, one) * 4;
}

// The producer warp's part of one product of item `it` (it.B: the FP16 image, wgmma_b_image_f16,
// passed as floats): each k block's A box and image block into the ring, as ws_fill.
template <int N, int K, int kStages, int kStage, bool kOne = false>
__device__ __forceinline__ void ws_fill_f16(float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                            const CUtensorMap* tmA, const WsItem& it) {
  constexpr int kAFloats = kWsRows * kWsK, kBFloats = ws_f16_b_halves(N, kOne) / 2;
  constexpr int kBlock = ws_f16_b_halves(N, false) / 2;  // the image's block (both planes)
  constexpr uint32_t kABytes = kAFloats * sizeof(float), kBBytes = kBFloats * sizeof(float);
  static_assert(kAFloats + kBFloats <= kStage && kStage % 32 == 0, "a stage holds A's box and B's block, 128-byte aligned");
#pragma unroll 1
  for (int kb = 0; kb < K / kWsK; ++kb) {
    ws_bar_wait(&empty[pp.stage], pp.phase ^ 1u);
    float* dst = ring + pp.stage * kStage;
    if ((threadIdx.x & 31) == 0) {
      ws_bar_expect(&full[pp.stage], kABytes + kBBytes);
      ws_bulk(dst + kAFloats, it.B + static_cast<size_t>(kb) * kBlock, kBBytes, &full[pp.stage]);
      ws_tma_3d(dst, tmA, it.x + kb * kWsK, it.y, it.z, &full[pp.stage]);
    }
    ws_advance<kStages>(pp);
  }
}

// Two consecutive k (the first in the low half, as the fragment wants them) split into binary16
// hi = rn(x) and lo = rn(x - hi).
__device__ __forceinline__ void ws_f16_split2(float a, float b, uint32_t& h, uint32_t& l) {
  const __half2 hh = __floats2half2_rn(a, b);
  const float2 back = __half22float2(hh);
  const __half2 ll = __floats2half2_rn(a - back.x, b - back.y);
  h = *reinterpret_cast<const uint32_t*>(&hh);
  l = *reinterpret_cast<const uint32_t*>(&ll);
}

// The consumers' part of one product (K x N), ws_product's schedule: acc = A B for this thread's
// rows ws_row(ct, 0 / 1), whose scales are s0 / s1 (powers of two), B's image scaled by 1 / binv.
template <int N, int K, int kStages, int kStage>
__device__ __forceinline__ void ws_product_f16(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                               float (&acc)[N / 2], float s0, float s1, float binv) {
  constexpr int kNQ = N / kWsChunk, kNkb = K / kWsK;
  constexpr int kSeg = kNkb <= 8 ? kNkb : kNkb / 2;
  constexpr int kAFloats = kWsRows * kWsK;
  constexpr int kBPlaneBytes = 2 * kF16K * N;  // the lo plane's byte offset in a B block
  static_assert(N % kWsChunk == 0 && K % kWsK == 0 && kNkb % kSeg == 0 && kSeg <= 8, "whole chunks, blocks, segments");
  static_assert(kWsK == kF16K, "one k16 instruction per stage block");
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  const bool leader = (ct & 31) == 0;
  const float inv0 = binv / s0, inv1 = binv / s1;  // accumulator registers i with (i / 2) % 2 == 0 / 1
  float pb[2][kWsChunk / 2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) pb[b][i] = 0.0f;
  uint32_t hi[2][4], lo[2][4];  // fragments of two consecutive blocks (block parity)
  auto next_block = [&](uint32_t (&h)[4], uint32_t (&l)[4]) {
    const int cur = pp.stage;
    ws_bar_wait(&full[cur], pp.phase);
    ws_advance<kStages>(pp);
    const float* sA = ring + cur * kStage;
    const float4 x0 = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra0, 4 * t));
    const float4 x1 = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra1, 4 * t));
    // a0: row g, k 4t, 4t + 1 (instruction k 2t, 2t + 1); a1: row g + 8; a2, a3: k 4t + 2, 4t + 3.
    ws_f16_split2(s0 * x0.x, s0 * x0.y, h[0], l[0]);
    ws_f16_split2(s1 * x1.x, s1 * x1.y, h[1], l[1]);
    ws_f16_split2(s0 * x0.z, s0 * x0.w, h[2], l[2]);
    ws_f16_split2(s1 * x1.z, s1 * x1.w, h[3], l[3]);
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(h[e]), "+r"(l[e]));  // written before the fence
    return cur;
  };
  auto issue = [&](float (&d)[kWsChunk / 2], const uint32_t (&h)[4], const uint32_t (&l)[4], int st, int q) {
    const char* sB = reinterpret_cast<const char*>(ring + st * kStage + kAFloats) + 2 * ws_f16_b_chunk_offset(q);
    const uint64_t dh = wg_desc(reinterpret_cast<const float*>(sB));
    const uint64_t dl = wg_desc(reinterpret_cast<const float*>(sB + kBPlaneBytes));
    wg_pin(d);
    wg_fence();
    WgmmaF16<kWsChunk>::mma(d, l, dh, 0);
    WgmmaF16<kWsChunk>::mma(d, h, dl, 1);
    WgmmaF16<kWsChunk>::mma(d, h, dh, 1);
    wg_commit();
  };
  auto fold = [&](float (&d)[kWsChunk / 2], int q) {
    ws_wait1();
    wg_pin(d);
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) {
      acc[ws_acc_index(q, i)] = fmaf(d[i], (i >> 1) & 1 ? inv1 : inv0, acc[ws_acc_index(q, i)]);
      asm volatile("" : "+f"(acc[ws_acc_index(q, i)])::"memory");
    }
  };
  auto release = [&](int st) {
    __syncwarp();
    if (leader) ws_bar_arrive(&empty[st]);
  };
#pragma unroll
  for (int j = 0; j < N / 2; ++j) acc[j] = 0.0f;
#pragma unroll 1
  for (int seg = 0; seg < kNkb / kSeg; ++seg) {
    int st[2];
#pragma unroll
    for (int j = 0; j < kSeg; ++j) {
      const int u = j & 1;
      st[u] = next_block(hi[u], lo[u]);
#pragma unroll
      for (int q = 0; q < kNQ; ++q) {
        const int g = kNQ * j + q;
        issue(pb[g & 1], hi[u], lo[u], st[u], q);
        if (g > 0) {
          fold(pb[(g - 1) & 1], (g - 1) % kNQ);
          if (q == 0) release(st[u ^ 1]);
        }
      }
    }
    constexpr int kLast = (kNQ * kSeg - 1) & 1;
    wg_wait0();
    wg_pin(pb[kLast]);
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i)
      acc[ws_acc_index(kNQ - 1, i)] = fmaf(pb[kLast][i], (i >> 1) & 1 ? inv1 : inv0, acc[ws_acc_index(kNQ - 1, i)]);
    release(st[(kSeg - 1) & 1]);
  }
}

// One FP16 pass (a candidate for `precision tf32`: one TF32 pass's error, measured on the CPU): the
// rows scaled and rounded to binary16, every block's full-width m64nNk16 product accumulated by the
// tensor cores over all of K (ws_product_one's schedule), then the scale taken off once.
template <int N, int K, int kStages, int kStage>
__device__ __forceinline__ void ws_product_f16_one(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                                   int ct, float (&acc)[N / 2], float s0, float s1, float binv) {
  constexpr int kNkb = K / kWsK, kAFloats = kWsRows * kWsK;
  static_assert(K % kWsK == 0 && N % 16 == 0 && N <= 256 && kNkb <= 12, "whole blocks, a wgmma width, a short unroll");
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  const bool leader = (ct & 31) == 0;
  uint32_t a[2][4];
  auto next_block = [&](uint32_t (&h)[4]) {
    const int cur = pp.stage;
    ws_bar_wait(&full[cur], pp.phase);
    ws_advance<kStages>(pp);
    const float* sA = ring + cur * kStage;
    const float4 x0 = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra0, 4 * t));
    const float4 x1 = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra1, 4 * t));
    const __half2 h0 = __floats2half2_rn(s0 * x0.x, s0 * x0.y), h1 = __floats2half2_rn(s1 * x1.x, s1 * x1.y);
    const __half2 h2 = __floats2half2_rn(s0 * x0.z, s0 * x0.w), h3 = __floats2half2_rn(s1 * x1.z, s1 * x1.w);
    h[0] = *reinterpret_cast<const uint32_t*>(&h0);
    h[1] = *reinterpret_cast<const uint32_t*>(&h1);
    h[2] = *reinterpret_cast<const uint32_t*>(&h2);
    h[3] = *reinterpret_cast<const uint32_t*>(&h3);
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(h[e]));  // written before the fence
    return cur;
  };
  auto release = [&](int st) {
    __syncwarp();
    if (leader) ws_bar_arrive(&empty[st]);
  };
#pragma unroll
  for (int j = 0; j < N / 2; ++j) acc[j] = 0.0f;
  int st[2];
#pragma unroll
  for (int j = 0; j < kNkb; ++j) {
    const int u = j & 1;
    st[u] = next_block(a[u]);
    if (j == 0) wg_pin(acc);
    wg_fence();
    WgmmaF16<N>::mma(acc, a[u], wg_desc(ring + st[u] * kStage + kAFloats), 1);
    wg_commit();
    if (j > 0) {
      ws_wait1();
      release(st[u ^ 1]);
    }
  }
  wg_wait0();
  wg_pin(acc);
  release(st[(kNkb - 1) & 1]);
  const float inv0 = binv / s0, inv1 = binv / s1;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] *= (i >> 1) & 1 ? inv1 : inv0;
}

// ws_gemm for the FP16 product (K = N; kOne: one pass): rs[row] the scale of each of the rows rows
// (1 past them), binv = 1 / the image's scale; launched with ws_f16_smem_bytes(N, kOne).
template <int N, bool kOne, class Item, class Epi>
__device__ __forceinline__ void ws_gemm_f16(int n_items, const CUtensorMap* tmA, Item item, Epi epi, const float* rs,
                                            int rows, float binv) {
  constexpr int kStages = ws_f16_stages(N, kOne), kStage = ws_f16_stage_floats(N, kOne);
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_regs_dec<kWsProducerRegs>();
    if (threadIdx.x >= 32) return;
    for (int i = blockIdx.x; i < n_items; i += ws_grid())
      ws_fill_f16<N, N, kStages, kStage, kOne>(ws_dsmem, full, empty, pp, tmA, item(i));
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float acc[N / 2];
  for (int i = blockIdx.x; i < n_items; i += gridDim.x) {
    const int r0 = i * kWsRows + ws_row(ct, 0), r1 = i * kWsRows + ws_row(ct, 1);
    const float s0 = r0 < rows ? rs[r0] : 1.0f, s1 = r1 < rows ? rs[r1] : 1.0f;
    if constexpr (kOne) ws_product_f16_one<N, N, kStages, kStage>(ws_dsmem, full, empty, pp, ct, acc, s0, s1, binv);
    else ws_product_f16<N, N, kStages, kStage>(ws_dsmem, full, empty, pp, ct, acc, s0, s1, binv);
    epi(i, acc, ct);
  }
}

}  // namespace
}  // namespace sezm::cuda
