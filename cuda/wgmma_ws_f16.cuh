#pragma once
// The warp-specialised tile's product on the FP16 tensor cores (Dims::stack_f16, kAr3xF16): the 3x
// split a = hi + lo, b = hi + lo in binary16 (lo·hi + hi·lo + hi·hi, fp32 accumulate) at twice the
// TF32 instructions' rate, with ws_product's ring, schedule and partials (wgmma_ws.cuh). Why, and
// the image: wgmma_f16_layout.h. Per 16-k block one m64n64k16 instruction per product and chunk
// instead of two k8 steps; a stage holds A's box (fp32, as for TF32) and the FP16 image's block (hi
// and lo planes of 16 k: 16 N floats, the one-pass stage's size, ws_one_plane).
// Range: binary16 has 5 exponent bits, so each A row of each k block is scaled by a power of two
// that puts its largest |a| in [2^7, 2^8) before the split (the quad of threads holding the row's
// 16 k agree on it by two shuffles), and B by kWsF16BScale in its image; both are exact, and a
// block's partial is folded into the accumulators as acc = fma(d, 2^-(row's e) / kWsF16BScale, acc),
// so the accumulators hold A B unscaled. Scaled per block rather than per row, an adjoint row
// whose entries span many decades (the backward's, 1e-17 .. 0.06 on C.pt) keeps its own relative
// precision block by block, and no epilogue has to hand a scale on.
// Accuracy (the stack's operands of C.pt emulated, note of 2026-12-05; the probe's variant 111 on
// an H200: 1.5e-7 of the largest element against 3xTF32's 2.0e-7): 3xTF32's.
#include <cuda_fp16.h>

#include "wgmma_f16_layout.h"
#include "wgmma_ws.cuh"

namespace sezm::cuda {
namespace {

// Two consecutive k (the first in the low half, as the fragment wants them) split into binary16
// hi = rn(x) and lo = rn(x - hi).
__device__ __forceinline__ void ws_f16_split2(float a, float b, uint32_t& h, uint32_t& l) {
  const __half2 hh = __floats2half2_rn(a, b);
  const float2 back = __half22float2(hh);
  const __half2 ll = __floats2half2_rn(a - back.x, b - back.y);
  h = *reinterpret_cast<const uint32_t*>(&hh);
  l = *reinterpret_cast<const uint32_t*>(&ll);
}

// The scale s = 2^(7 - e) of a block row whose largest |a| is m in [2^e, 2^(e+1)) (m s in [2^7,
// 2^8)), and the fold's factor 1 / (s kWsF16BScale). The quad of lanes (t = lane & 3) holding the
// row agree on m. A row below 2^-103 (zeros included) is scaled as one at 2^-103: its scaled values
// stay below 2^7 and every factor is a normal float.
__device__ __forceinline__ float2 ws_f16_row_scale(float m) {
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  static_assert(kWsF16BScale == 256.0f, "the fold's exponent below assumes B scaled by 2^8");
  const int e = max((__float_as_int(m) >> 23) & 0xff, 24);  // biased exponent of m, at least 2^-103's
  return make_float2(__int_as_float((261 - e) << 23), __int_as_float((e - 15) << 23));  // 2^(134-e), 2^(e-142)
}

// ws_product (its arguments, AX hook, kRes residual and schedule, ws_split_schedule) on the FP16 tensor cores: B the
// image wgmma_b_image_f16_ws (ws_fill with one plane stages it). Ends with nothing in flight.
template <int N, int K, int kStages, int kStage, class AX = WsAsIs, bool kRes = false>
__device__ __forceinline__ void ws_product_f16(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                               float (&acc)[N / 2], AX ax = AX{}, bool res = true) {
  static_assert(!kRes || K == N, "the residual is A itself");
  static_assert(kWsK == kF16K, "one k16 instruction per stage block");
  constexpr int kAFloats = kWsRows * kWsK;
  constexpr int kBPlaneBytes = 2 * kF16K * N;  // the lo plane's byte offset in a B block
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  const bool leader = (ct & 31) == 0;
  float pb[2][kWsChunk / 2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) pb[b][i] = 0.0f;  // read by the asm only (scale-d 0)
  // FP16 hi / lo fragments and fold factors (rows ra0, ra1) of two consecutive blocks (u = block parity).
  uint32_t hi[2][4], lo[2][4];
  float inv[2][2];
  // Block kb = seg kSeg + j into set u (ws_land_split), scaled per row and split into binary16.
  auto next_block = [&](int u, int seg, int j) {
    float f[kWsKs][4];
    const int cur = ws_land_split<kStages, kStage, K, kRes>(ring, full, pp, ra0, ra1, t, seg, j, ax, f, acc, res);
    // This thread's k 4t .. 4t + 3 of rows ra0 (v0) and ra1 (v1), undoing ws_land_a's TF32 order;
    // the FP16 image holds them at instruction k {2t, 2t + 1} and {2t + 8, 2t + 9} (ws_f16_phys_k).
    const float v0[4] = {f[0][0], f[0][2], f[1][0], f[1][2]}, v1[4] = {f[0][1], f[0][3], f[1][1], f[1][3]};
    const float2 c0 = ws_f16_row_scale(fmaxf(fmaxf(fabsf(v0[0]), fabsf(v0[1])), fmaxf(fabsf(v0[2]), fabsf(v0[3]))));
    const float2 c1 = ws_f16_row_scale(fmaxf(fmaxf(fabsf(v1[0]), fabsf(v1[1])), fmaxf(fabsf(v1[2]), fabsf(v1[3]))));
    inv[u][0] = c0.y;
    inv[u][1] = c1.y;
    ws_f16_split2(c0.x * v0[0], c0.x * v0[1], hi[u][0], lo[u][0]);
    ws_f16_split2(c1.x * v1[0], c1.x * v1[1], hi[u][1], lo[u][1]);
    ws_f16_split2(c0.x * v0[2], c0.x * v0[3], hi[u][2], lo[u][2]);
    ws_f16_split2(c1.x * v1[2], c1.x * v1[3], hi[u][3], lo[u][3]);
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(hi[u][e]), "+r"(lo[u][e]));  // written before the fence
    return cur;
  };
  // The 3x partial of chunk q of the block in set u (stage st) from zero into d: one commit group.
  auto issue = [&](float (&d)[kWsChunk / 2], int u, int st, int q) {
    const char* sB = reinterpret_cast<const char*>(ring + st * kStage + kAFloats) + 2 * ws_f16_b_chunk_offset(q);
    const uint64_t dh = wg_desc(reinterpret_cast<const float*>(sB));
    const uint64_t dl = wg_desc(reinterpret_cast<const float*>(sB + kBPlaneBytes));
    wg_pin(d);
    wg_fence();
    WgmmaF16<kWsChunk>::mma(d, lo[u], dh, 0);
    WgmmaF16<kWsChunk>::mma(d, hi[u], dl, 1);
    WgmmaF16<kWsChunk>::mma(d, hi[u], dh, 1);
    wg_commit();
  };
  // A completed partial d of chunk q of the block in set u into the accumulators, its rows' scales
  // taken off (accumulator register i belongs to row ra0 when (i / 2) % 2 == 0, else ra1).
  auto fold = [&](float (&d)[kWsChunk / 2], int q, int u) {
    wg_pin(d);
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) {
      acc[ws_acc_index(q, i)] = fmaf(d[i], inv[u][(i >> 1) & 1], acc[ws_acc_index(q, i)]);
      asm volatile("" : "+f"(acc[ws_acc_index(q, i)])::"memory");  // the add before the next issue
    }
  };
  auto release = [&](int st) {  // every warp's products that read stage st have completed
    __syncwarp();
    if (leader) ws_bar_arrive(&empty[st]);
  };
#pragma unroll
  for (int j = 0; j < N / 2; ++j) acc[j] = 0.0f;
  ws_split_schedule<N, K>(pb, next_block, issue, fold, release);
}

}  // namespace
}  // namespace sezm::cuda
