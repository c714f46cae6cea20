#pragma once
// The stack's tile product on Hopper's warpgroup tensor cores with BOTH operands in shared memory
// (the "SS" form of wgmma: A and B by descriptor), sm_90a: C (64 kWG rows x N) += A B per CTA of kWG
// warpgroups, in the 3xTF32 split or one TF32 pass. Named twin of wgmma_tile.cuh (`wg_tile`, A from
// registers); probe-only for now (sezm-stack-probe part 1, variants 8-12): the engine does not use
// it, and it shares no code with wg_tile on purpose (that tile changes on its own).
//
// Why (docs/performance.md, "the stack on Hopper's warpgroup tensor cores"): wg_tile loads A from
// HBM into registers, synchronously, with only 8 warps per SM to hide the latency and the registers
// held while the loads are in flight: 64 useful TFLOP/s at K = N = 192 with A from HBM, 81 with A
// made in registers. Here A is copied by cp.async (16-byte chunks, no registers held) into shared
// memory, kStages k blocks in flight, laid out as the instruction reads it (wgss_a_offset,
// wgmma_layout.h: K-major core matrices, NATURAL k order, so a 16-byte chunk of 4 consecutive k
// is one core-matrix row and needs no permutation). For the 3xTF32 split each thread splits the
// chunks it copied itself, once they land, into a TF32 hi plane (in place) and a lo plane, while the
// tensor cores work on the previous block; the products lo*hi, hi*lo, hi*hi then read A's planes
// by descriptor. B is wgmma_b_image_natural (natural k order to match A; the column permutation
// wgmma_col kept, so a thread's accumulators are the same quads as wg_tile's), two stages deep.
// Accuracy as wg_tile: the products of kAdd k steps are formed from zero in a partial (lo*hi and
// hi*lo first, then hi*hi) and added to the accumulators with IEEE adds.
//
// The pipeline, per k block kb (a block is 8 kS k; cp.async groups are per thread, in order):
//   issue B(kb + 1), commit; issue A(kb + 2) into A stage (kb + 2) % 3, commit;
//   issue the products of block kb's first kAdd steps, commit;
//   meanwhile: cp.async.wait_group 1 (B(kb + 1) and A(kb + 1) landed; A(kb + 2) stays in flight),
//   split A(kb + 1) (this thread's own chunks: no barrier needed), fence.proxy.async;
//   wait for the products, add the partial; the block's further steps; barrier.
// The barrier ends every block: the split's writes are then visible to the tensor cores, and every
// warpgroup's products of block kb have completed before block kb + 3's A or kb + 2's B overwrite
// their stages. Three A stages: with B in the same per-thread group sequence, wait_group can leave
// exactly one group (A(kb + 2)) in flight, so a fourth stage would not deepen the stream (it would
// need B decoupled, e.g. a bulk copy on an mbarrier); each A block has one whole block's products
// (several microseconds) to land.
#include <cstdint>

#include "async_copy.cuh"
#include "wgmma_layout.h"
#include "wgmma_ops.cuh"

namespace sezm::cuda {

namespace {

__device__ __forceinline__ void wgss_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgss_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgss_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous
// product's issue and wait.
template <int M>
__device__ __forceinline__ void wgss_pin(float (&d)[M]) {
#pragma unroll
  for (int i = 0; i < M; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Generic-proxy shared-memory writes (cp.async, the split's stores) made visible to the tensor
// cores' (async-proxy) reads; each writing thread fences before the barrier.
__device__ __forceinline__ void wgss_fence_async_smem() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgss_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void wgss_cp_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
// Shared-memory matrix descriptor, no swizzle (layout type 0 in bits 62-63, base offset 0): start
// address >> 4 in bits 0-13, LBO >> 4 (k-adjacent core matrices) in bits 16-29, SBO >> 4 (8-row
// groups) in bits 32-45 (PTX ISA, "Matrix Descriptor"); the same for A's planes and B's.
__device__ __forceinline__ uint64_t wgss_desc(const float* smem) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((a & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(kWgLboBytes >> 4) << 16) |
         (static_cast<uint64_t>(kWgSboBytes >> 4) << 32);
}
// x rounded to TF32 (nearest, ties away), as a float (low 13 bits zero).
__device__ __forceinline__ float wgss_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// The accumulator layout is the instruction's, whatever feeds A: this thread's two rows (0 .. 64
// kWG - 1) of the CTA tile are r and r + 8; its quad p (N / 16 per row) holds logical columns
// 16 p + 4 (tid % 4) .. + 3 (wgmma_col).
__device__ __forceinline__ int wgss_row() {
  const int tid = threadIdx.x;
  return 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + ((tid & 31) >> 2);
}
__device__ __forceinline__ int wgss_quad_col(int p) { return 16 * p + 4 * (threadIdx.x & 3); }
template <int M>
__device__ __forceinline__ float4 wgss_quad(const float (&acc)[M], int p, int h) {
  return make_float4(acc[8 * p + 2 * h], acc[8 * p + 2 * h + 1], acc[8 * p + 4 + 2 * h], acc[8 * p + 5 + 2 * h]);
}

// acc (this thread's N / 2 accumulators) += A B over K (K % (8 kS) == 0). `aPtr(row, k)`: the
// 16-byte-aligned global address of A(row, k..k+3), row < 64 kWG (rows past the end: any readable
// address, e.g. the last row's; their results are not stored), k % 4 == 0. `smem`: wgss_smem_floats
// (N, kS, kWG, 3, kM == 3) floats of shared memory, 16-byte aligned. `Bimg`: wgmma_b_image_natural
// (.., kS) of B in global memory. kM: 3 (3xTF32) or 1 (one TF32 pass, A rounded with cvt.rna as
// wg_tile does, only B's hi plane staged); kAdd: k steps per IEEE add of the partial (divides kS).
// Called by all 128 kWG threads; ends with a barrier.
template <int N, int kM, int kS, int kAdd, int kWG, class APtr>
__device__ __forceinline__ void wgss_tile(float* smem, int K, APtr aPtr, const float* __restrict__ Bimg,
                                          float (&acc)[N / 2]) {
  static_assert(N % 16 == 0 && N <= 256, "wgmma widths: multiples of 16 up to 256");
  static_assert((kS == 2 || kS == 4) && kS % kAdd == 0, "k blocks of 2 or 4 steps; kAdd divides them");
  static_assert(kM == 1 || kM == 3, "one TF32 pass or the 3xTF32 split");
  static_assert(kWG == 1 || kWG == 2, "one or two warpgroups");
  constexpr int kStages = 3, kThreads = 128 * kWG;
  constexpr int kBStage = wg_stage_floats(N, kS), kBPlane = kS * 8 * N, kBCopy = kM == 3 ? kBStage : kBPlane;
  constexpr int kA = wgss_a_stage_floats(kWG, kS), kChunksPerThread = kA / 4 / kThreads;  // = kS
  static_assert(kChunksPerThread * 4 * kThreads == kA, "whole chunks per thread");
  float* const sB = smem;
  float* const sA = sB + 2 * kBCopy;
  float* const sL = sA + kStages * kA;  // the lo planes (3xTF32)
  const int tid = threadIdx.x, w = tid >> 7;
  const int nkb = K / (8 * kS);
  auto issueB = [&](int kb) {
    float* dst = sB + (kb & 1) * kBCopy;
    const float* src = Bimg + static_cast<size_t>(kb) * kBStage;
    for (int i = tid; i < kBCopy / 4; i += kThreads) copy_async16(dst + 4 * i, src + 4 * i);
    wgss_cp_commit();
  };
  auto issueA = [&](int kb) {  // always commits a group (empty past the last block)
    if (kb < nkb) {
      float* dst = sA + (kb % kStages) * kA;
#pragma unroll
      for (int j = 0; j < kChunksPerThread; ++j) {
        const int i = tid + j * kThreads, row = wgss_chunk_row(i, kS), k = wgss_chunk_k(i, kS);
        copy_async16(dst + wgss_a_offset(row, k, kS), aPtr(row, 8 * kS * kb + k));
      }
    }
    wgss_cp_commit();
  };
  // This thread's chunks of block kb (landed): TF32 hi in place, lo (3xTF32) into lo plane kb % 2.
  auto split = [&](int kb) {
    float* st = sA + (kb % kStages) * kA;
    float* lo = sL + (kb & 1) * kA;
#pragma unroll
    for (int j = 0; j < kChunksPerThread; ++j) {
      const int i = tid + j * kThreads, o = wgss_a_offset(wgss_chunk_row(i, kS), wgss_chunk_k(i, kS), kS);
      const float4 x = *reinterpret_cast<const float4*>(st + o);
      const float4 h = make_float4(wgss_tf32(x.x), wgss_tf32(x.y), wgss_tf32(x.z), wgss_tf32(x.w));
      *reinterpret_cast<float4*>(st + o) = h;
      if constexpr (kM == 3)
        *reinterpret_cast<float4*>(lo + o) =
            make_float4(wgss_tf32(x.x - h.x), wgss_tf32(x.y - h.y), wgss_tf32(x.z - h.z), wgss_tf32(x.w - h.w));
    }
    wgss_fence_async_smem();
  };
  issueB(0);
  issueA(0);
  issueA(1);
  wgss_cp_wait1();  // B(0), A(0)
  split(0);
  __syncthreads();
  float part[kM == 3 ? N / 2 : 1];
  for (int kb = 0; kb < nkb; ++kb) {
    const bool more = kb + 1 < nkb;
    if (more) {
      issueB(kb + 1);
      issueA(kb + 2);
    }
    const float* aHi = sA + (kb % kStages) * kA + wgss_a_step_offset(w, 0, kS);
    const float* aLo = sL + (kb & 1) * kA + wgss_a_step_offset(w, 0, kS);
    const float* bHi = sB + (kb & 1) * kBCopy;
    // While the products of the block's first steps run: land and split the next block's A.
    auto background = [&] {
      if (more) {
        wgss_cp_wait1();
        split(kb + 1);
      }
    };
    if constexpr (kM == 3) {
#pragma unroll
      for (int g = 0; g < kS / kAdd; ++g) {
        wgss_pin(part);
        wgss_fence();
#pragma unroll
        for (int s = g * kAdd; s < (g + 1) * kAdd; ++s) {
          const uint64_t ah = wgss_desc(aHi + 512 * s), al = wgss_desc(aLo + 512 * s);
          const uint64_t bh = wgss_desc(bHi + s * 8 * N), bl = wgss_desc(bHi + kBPlane + s * 8 * N);
          WgmmaSS<N>::mma(part, al, bh, s != g * kAdd);
          WgmmaSS<N>::mma(part, ah, bl, 1);
          WgmmaSS<N>::mma(part, ah, bh, 1);
        }
        wgss_commit();
        if (g == 0) background();
        wgss_wait0();
        wgss_pin(part);
#pragma unroll
        for (int i = 0; i < N / 2; ++i) acc[i] += part[i];
      }
    } else {
      wgss_pin(acc);
      wgss_fence();
#pragma unroll
      for (int s = 0; s < kS; ++s) WgmmaSS<N>::mma(acc, wgss_desc(aHi + 512 * s), wgss_desc(bHi + s * 8 * N), 1);
      wgss_commit();
      background();
      wgss_wait0();
      wgss_pin(acc);
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace sezm::cuda
