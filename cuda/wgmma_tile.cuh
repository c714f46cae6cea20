#pragma once
// The stack's tile product on Hopper's warpgroup tensor-core instructions (wgmma, sm_90a):
// C (64 kWG rows x N) += A B (K x N) per CTA of kWG warpgroups (the engine: one, two CTAs per SM;
// stack_tile.cuh), in the 3xTF32 split (fp32-accurate) or one TF32 pass. The SIMT / mma.sync twin is `tile_mma` in stack_tile.cuh.
//
// Why this shape (docs/performance.md, "Tensor cores"): the mma.sync tile read every operand
// fragment from shared memory with scalar loads and re-split B per CTA, and topped out at 42
// useful TFLOP/s. Here
//  - A never touches shared memory: each thread loads its own fragment elements from global
//    memory as 16-byte vectors and splits them in registers. That needs the k index permuted
//    inside each 32-deep k block: wgmma step s (0..3) of block kb takes, at fragment column
//    c (0..7), the physical k = 32 kb + 8 (c % 4) + 2 s + c / 4, so that thread t's columns t
//    and t + 4 of all four steps are the eight consecutive k = 32 kb + 8 t .. + 7.
//  - B (the weights: fixed per call) is split into TF32 hi and lo planes, permuted the same way
//    and laid out as the instruction reads it, once, by wgmma_b_image (host); a k block is then
//    one contiguous copy (cp.async), two stages deep.
//  - N is also permuted, so that a thread's accumulators come as quads of four consecutive
//    logical columns (as tile_mma's do): the instruction's column n = 16 p + 8 h + 2 t + e is
//    logical column 16 p + 4 t + 2 h + e (wgmma_col).
// Accuracy: the tensor cores' fp32 accumulation truncates, so the 3xTF32 products of kAdd k
// steps are formed from zero in a partial (lo*hi and hi*lo first, then hi*hi) and added to the
// accumulators with IEEE adds (docs/performance.md: all-in-accumulator biased the energy).
#include <cstdint>

#include "async_copy.cuh"
#include "wgmma_layout.h"
#include "wgmma_ops.cuh"

namespace sezm::cuda {

namespace {

__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous
// product's issue and wait.
template <int M>
__device__ __forceinline__ void wg_pin(float (&d)[M]) {
#pragma unroll
  for (int i = 0; i < M; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// After the partial's products were committed: wait for them, then add the partial to the
// accumulators in IEEE fp32 (the tensor cores' own accumulation truncates).
template <int M>
__device__ __forceinline__ void wg_fold_partial(float (&part)[M], float (&acc)[M]) {
  wg_wait0();
  wg_pin(part);
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] += part[i];
}
// Ordinary (or cp.async) shared-memory writes made visible to the tensor cores' reads.
__device__ __forceinline__ void wg_fence_async_smem() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Shared-memory matrix descriptor of one k step's plane, no swizzle: the start address, then
// the byte offsets between core matrices adjacent in k (the "leading" one, 128) and in n (256),
// as wgmma_b_image lays them out (checked on the H200 by sezm-stack-probe: the swapped pair gives
// garbage).
__device__ __forceinline__ uint64_t wg_desc(const float* smem) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((a & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(kWgLboBytes >> 4) << 16) |
         (static_cast<uint64_t>(kWgSboBytes >> 4) << 32);
}
// x rounded to TF32 (nearest, ties away), as a bit pattern; stack_tile.cuh's tf32_round too.
__device__ __forceinline__ uint32_t wg_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float wg_tf32f(float x) { return __uint_as_float(wg_tf32(x)); }
// The low part of a 3xTF32 split, lo = d = x - hi rounded as wg_tf32 rounds: bits + 0x1000, then
// the low 13 bits cleared. sm_90 expands cvt.rna into that plus a compare and a select that pass
// NaN and infinity through unrounded; d is never NaN or infinite unless x is, and then hi already
// is, so the product is not finite either way. The same bits for every finite d, in 2 instructions
// instead of 4.
__device__ __forceinline__ uint32_t wg_tf32_lo(float d) { return (__float_as_uint(d) + 0x1000u) & 0xffffe000u; }

// This thread's two rows (0..127) of the CTA tile: r and r + 8.
__device__ __forceinline__ int wg_row() {
  const int tid = threadIdx.x;
  return 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + ((tid & 31) >> 2);
}
// First logical column of the thread's quad p (N / 16 quads per row).
__device__ __forceinline__ int wg_quad_col(int p) { return 16 * p + 4 * (threadIdx.x & 3); }
// The thread's quad p of row r (h = 0) or r + 8 (h = 1) in the accumulator.
template <int M>
__device__ __forceinline__ float4 wg_quad(const float (&acc)[M], int p, int h) {
  return make_float4(acc[8 * p + 2 * h], acc[8 * p + 2 * h + 1], acc[8 * p + 4 + 2 * h], acc[8 * p + 5 + 2 * h]);
}
// This thread's quads of the CTA tile (accumulators acc) into row-major C (row stride ldc),
// tile row 0 at C row row0, rows >= rows not stored.
template <int M>
__device__ __forceinline__ void wg_store_rows(float* C, int ldc, int row0, int rows, const float (&acc)[M]) {
  const int r = row0 + wg_row();
#pragma unroll
  for (int p = 0; p < M / 8; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (r + 8 * h < rows) *reinterpret_cast<float4*>(C + (size_t)(r + 8 * h) * ldc + wg_quad_col(p)) = wg_quad(acc, p, h);
}

// acc (this thread's N / 2 accumulators) += A B over K (K % (8 kS kB) == 0). `loadA4(row, k)`
// returns A(row, k..k+3) for a tile row (0 .. 64 kWG - 1) and k % 4 == 0. `sB`: wg_smem_floats(N,
// kS, kM == 3, kB) of shared memory (16-byte aligned); `Bimg`: wgmma_b_image(.., kS) of B in
// global memory, staged kB image blocks at a time. kM: kTf32x3 (3) or one TF32 pass (1, which
// stages only the hi plane); kAdd: k steps of 8 per IEEE add of the 3xTF32 partial (divides kS).
// kStages: shared-memory stages of B, kStages - 1 of them in flight ahead of the block being
// multiplied (the engine: 2; sB then holds kStages / 2 times wg_smem_floats). Every block ends
// with its products complete (a fold, or one pass's wait), so its stage is free after the block's
// closing barrier. Called by all 128 kWG threads; ends with a barrier.
template <int N, int kM, int kS, int kAdd, int kWG, int kB = 1, int kStages = 2, class LoadA4>
__device__ __forceinline__ void wg_tile(float* sB, int K, const float* __restrict__ Bimg, LoadA4 loadA4,
                                        float (&acc)[N / 2]) {
  static_assert(N % 16 == 0 && N <= 256, "wgmma widths: multiples of 16 up to 256");
  static_assert((kS == 2 || kS == 4) && kS % kAdd == 0, "k blocks of 2 or 4 steps; kAdd divides them");
  constexpr int kStage = wg_stage_floats(N, kS), kPlane = kS * 8 * N, kCopy = kM == 3 ? kStage : kPlane;
  static_assert(kM == 1 || kM == 3, "one TF32 pass or the 3xTF32 split");
  constexpr int kSteps = kB * kS;  // k steps of 8 per stage
  const int tid = threadIdx.x, t = tid & 3, r0 = wg_row();
  const int nsb = K / (8 * kSteps);
  auto stage = [&](int sb) {
    float* dst = sB + (sb % kStages) * kB * kCopy;
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const float* src = Bimg + static_cast<size_t>(sb * kB + j) * kStage;
      for (int i = tid; i < kCopy / 4; i += 128 * kWG) copy_async16(dst + j * kCopy + 4 * i, src + 4 * i);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  float4 ra[kSteps];  // image block j: rows r0 (ra[j kS + 0 .. kS/2)), r0 + 8; k = 8 kS kb + 2 kS t ..
  auto loadA = [&](int sb) {
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const int k = 8 * kS * (sb * kB + j) + 2 * kS * t;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < kS / 2; ++i) ra[j * kS + h * (kS / 2) + i] = loadA4(r0 + 8 * h, k + 4 * i);
    }
  };
  static_assert(kStages >= 2, "at least one stage in flight");
#pragma unroll
  for (int i = 0; i + 1 < kStages; ++i)
    if (i < nsb) stage(i);
    else asm volatile("cp.async.commit_group;\n" ::: "memory");  // empty: uniform group counts
  loadA(0);
  float part[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) part[i] = 0.0f;
  for (int sb = 0; sb < nsb; ++sb) {
    float x0[2 * kSteps], x1[2 * kSteps];  // rows r0, r0 + 8; block j at 2 kS j
#pragma unroll
    for (int j = 0; j < kB; ++j)
#pragma unroll
      for (int i = 0; i < kS / 2; ++i) {
        const float4 u = ra[j * kS + i], v = ra[j * kS + kS / 2 + i];
        float* y0 = x0 + 2 * kS * j + 4 * i;
        float* y1 = x1 + 2 * kS * j + 4 * i;
        y0[0] = u.x; y0[1] = u.y; y0[2] = u.z; y0[3] = u.w;
        y1[0] = v.x; y1[1] = v.y; y1[2] = v.z; y1[3] = v.w;
      }
    if (kStages == 2) {  // the engine's two stages, as before the ring (no empty groups)
      if (sb + 1 < nsb) {
        stage(sb + 1);
        loadA(sb + 1);
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      } else {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
      }
    } else {
      if (sb + kStages - 1 < nsb) stage(sb + kStages - 1);
      else asm volatile("cp.async.commit_group;\n" ::: "memory");
      if (sb + 1 < nsb) loadA(sb + 1);
      asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1) : "memory");  // block sb landed
    }
    wg_fence_async_smem();
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const float* buf = sB + (sb % kStages) * kB * kCopy + j * kCopy;
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        // fragment (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4): physical k 2 kS t + 2 s (+ 1)
        const int q0 = 2 * kS * j + 2 * s;
        const float v[4] = {x0[q0], x1[q0], x0[q0 + 1], x1[q0 + 1]};
        uint32_t hi[4], lo[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          hi[q] = wg_tf32(v[q]);
          lo[q] = wg_tf32_lo(v[q] - __uint_as_float(hi[q]));
        }
        const uint64_t dh = wg_desc(buf + s * 8 * N);
        if constexpr (kM == 3) {
          const uint64_t dl = wg_desc(buf + kPlane + s * 8 * N);
          wg_pin(part);
          wg_fence();
          Wgmma<N>::mma(part, lo, dh, s % kAdd != 0);
          Wgmma<N>::mma(part, hi, dl, 1);
          Wgmma<N>::mma(part, hi, dh, 1);
          if ((s + 1) % kAdd == 0) {
            wg_commit();
            wg_fold_partial(part, acc);
          }
        } else {
          wg_pin(acc);
          wg_fence();
          Wgmma<N>::mma(acc, hi, dh, 1);
        }
      }
    }
    if constexpr (kM != 3) {
      wg_commit();
      wg_wait0();
      wg_pin(acc);
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace sezm::cuda
