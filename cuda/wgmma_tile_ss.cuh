#pragma once
// The stack's tile product on Hopper's warpgroup tensor cores with BOTH operands in shared memory
// (the "SS" form of wgmma: A and B by descriptor), sm_90a: C (64 kWG rows x N) += A B per CTA of kWG
// warpgroups, in the 3xTF32 split or one TF32 pass. Named twin of wgmma_tile.cuh (`wg_tile`, A from
// registers); the engine's forward layers run their two main products on it (stack.cu, kSS;
// Dims::stack_ss), sezm-stack-probe part 1 its variants 8-13. It shares wg_tile's helpers (fences,
// waits, descriptors, the accumulator layout).
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
// (several microseconds) to land. kOverlap: wgss_tile_overlap, the overlapped schedule of wgmma_tile.cuh
// with A's copy and split at each block's second unit.
#include <cstdint>

#include "wgmma_tile.cuh"

namespace sezm::cuda {

namespace {

__device__ __forceinline__ void wgss_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void wgss_cp_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
// This thread's chunks of a landed A stage `st`: TF32 hi in place and, with kLo (the 3xTF32 split),
// lo into the lo plane `lo` (both tiles below).
template <int kS, int kChunksPerThread, int kThreads, bool kLo>
__device__ __forceinline__ void wgss_split(float* st, float* lo, int tid) {
#pragma unroll
  for (int j = 0; j < kChunksPerThread; ++j) {
    const int i = tid + j * kThreads, o = wgss_a_offset(wgss_chunk_row(i, kS), wgss_chunk_k(i, kS), kS);
    const float4 x = *reinterpret_cast<const float4*>(st + o);
    const float4 h = make_float4(wg_tf32f(x.x), wg_tf32f(x.y), wg_tf32f(x.z), wg_tf32f(x.w));
    *reinterpret_cast<float4*>(st + o) = h;
    if constexpr (kLo)
      *reinterpret_cast<float4*>(lo + o) =
          make_float4(wg_tf32f(x.x - h.x), wg_tf32f(x.y - h.y), wg_tf32f(x.z - h.z), wg_tf32f(x.w - h.w));
  }
}
// The overlapped schedule of the SS tile (kOverlap; the why, the units and the B ring:
// wgmma_tile.cuh, "The overlapped schedule"), 3xTF32, K = 8 kS kBlocks, arguments as wgss_tile's.
// A keeps its three stages and two lo planes; its copy and split move to the block's second unit:
// cp.async groups are one per unit, unit x's carrying B(x + kAhead) and, for the second unit of a
// block (x % kPerBlock == 1), A(x / kPerBlock + 2). At block kb's second unit, after its barrier,
// every warp has retired block kb - 1's last unit (wait_group 1 at unit kb P), so A stage
// (kb + 2) % 3 = (kb - 1) % 3 and lo plane (kb + 1) % 2 = (kb - 1) % 2 are free: issue A(kb + 2),
// and after the unit's products are issued, wait for A(kb + 1) (the group of unit (kb - 1) P + 1:
// P newer) and split it; the next unit's barrier publishes the split.
template <int N, int kS, int kAdd, int kWG, int kBlocks, class APtr>
__device__ __forceinline__ void wgss_tile_overlap(float* smem, APtr aPtr, const float* __restrict__ Bimg,
                                                  float (&acc)[N / 2]) {
  using U = WgUnits<N, kS, kAdd>;
  constexpr int kW = U::kW, kR = U::kR, kP = U::kPerBlock, nkb = kBlocks, nu = nkb * kP;
  constexpr int kStages = 3, kThreads = 128 * kWG;
  constexpr int kA = wgss_a_stage_floats(kWG, kS), kChunksPerThread = kA / 4 / kThreads;
  static_assert(kChunksPerThread * 4 * kThreads == kA, "whole chunks per thread");
  static_assert(kP >= 2 && U::kAhead >= kP, "A's copy at a block's second unit, A(1) among the first groups");
  float* const sB = smem;
  float* const sA = sB + 2 * wg_stage_floats(N, kS);
  float* const sL = sA + kStages * kA;  // the lo planes
  const int tid = threadIdx.x, w = tid >> 7;
  auto copyA = [&](int kb) {  // into the open group
    if (kb < nkb) {
      float* dst = sA + (kb % kStages) * kA;
#pragma unroll
      for (int j = 0; j < kChunksPerThread; ++j) {
        const int i = tid + j * kThreads, row = wgss_chunk_row(i, kS), k = wgss_chunk_k(i, kS);
        copy_async16(dst + wgss_a_offset(row, k, kS), aPtr(row, 8 * kS * kb + k));
      }
    }
  };
  // This thread's chunks of block kb (landed): TF32 hi in place, lo into lo plane kb % 2 (as wgss_tile).
  auto split = [&](int kb) {
    wgss_split<kS, kChunksPerThread, kThreads, true>(sA + (kb % kStages) * kA, sL + (kb & 1) * kA, tid);
    wg_fence_async_smem();
  };
  // The prologue: the groups of units -kAhead .. -1 (B(0 .. kAhead - 1)), A(0) in the first, A(1)
  // in that of unit 1 - P, as the steady state places it.
  for (int x = -U::kAhead; x < 0; ++x) {
    wg_copy_unit<N, kS, kAdd, kThreads>(sB, Bimg, x + U::kAhead, nu);
    if (x == -U::kAhead) copyA(0);
    if (x == 1 - kP) copyA(1);
    wgss_cp_commit();
  }
  asm volatile("cp.async.wait_group %0;\n" ::"n"(U::kAhead - 1) : "memory");  // B(0), A(0)
  split(0);
  float pa[kR], pb[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) pa[i] = pb[i] = 0.0f;
#pragma unroll
  for (int kb = 0; kb < nkb; ++kb) {
    const float* aHi = sA + (kb % kStages) * kA + wgss_a_step_offset(w, 0, kS);
    const float* aLo = sL + (kb & 1) * kA + wgss_a_step_offset(w, 0, kS);
#pragma unroll
    for (int i = 0; i < kP; ++i) {
      const int g = i / U::kParts, u = kb * kP + i;
      auto mma = [&](float (&d)[kR], int s, uint64_t bh, uint64_t bl) {
        const uint64_t ah = wg_desc(aHi + 512 * (g * kAdd + s)), al = wg_desc(aLo + 512 * (g * kAdd + s));
        WgmmaSS<kW>::mma(d, al, bh, s != 0);
        WgmmaSS<kW>::mma(d, ah, bl, 1);
        WgmmaSS<kW>::mma(d, ah, bh, 1);
      };
      const float* slot = sB + (u % U::kSlots) * U::kSlot;
      auto refill = [&] {
        wg_copy_unit<N, kS, kAdd, kThreads>(sB, Bimg, u + U::kAhead, nu);
        if (i == 1) copyA(kb + 2);
        wgss_cp_commit();
      };
      auto background = [&] {
        if (i == 1 && kb + 1 < nkb) {
          asm volatile("cp.async.wait_group %0;\n" ::"n"(kP) : "memory");  // A(kb + 1)
          split(kb + 1);
        }
      };
      const int qoff = ((u + U::kParts - 1) % U::kParts) * kR;  // unit u - 1's part
      if (u % 2 == 0) wg_run_unit<kW, kAdd, U::kAhead>(pa, slot, refill, mma, background, u > 0, pb, acc, qoff);
      else wg_run_unit<kW, kAdd, U::kAhead>(pb, slot, refill, mma, background, true, pa, acc, qoff);
    }
  }
  wg_wait0();
  if constexpr ((nu - 1) % 2 == 0) wg_fold_half(pa, acc, (U::kParts - 1) * kR);  // the last unit: the last part
  else wg_fold_half(pb, acc, (U::kParts - 1) * kR);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // the empty groups past the end
  __syncthreads();
}

// acc (this thread's N / 2 accumulators) += A B over K (K % (8 kS) == 0). `aPtr(row, k)`: the
// 16-byte-aligned global address of A(row, k..k+3), row < 64 kWG (rows past the end: any readable
// address, e.g. the last row's; their results are not stored), k % 4 == 0. `smem`: wgss_smem_floats
// (N, kS, kWG, 3, kM == 3) floats of shared memory, 16-byte aligned. `Bimg`: wgmma_b_image_natural
// (.., kS) of B in global memory. kM: 3 (3xTF32) or 1 (one TF32 pass, A rounded with cvt.rna as
// wg_tile does, only B's hi plane staged); kAdd: k steps per IEEE add of the partial (divides kS).
// kOverlap: the 3xTF32 split on the overlapped schedule (wgss_tile_overlap above; bit-identical, the
// same shared memory) where K = N; one TF32 pass ignores it. Called by all 128 kWG threads; ends
// with a barrier.
template <int N, int kM, int kS, int kAdd, int kWG, bool kOverlap = false, class APtr>
__device__ __forceinline__ void wgss_tile(float* smem, int K, APtr aPtr, const float* __restrict__ Bimg,
                                          float (&acc)[N / 2]) {
  static_assert(N % 16 == 0 && N <= 256, "wgmma widths: multiples of 16 up to 256");
  if constexpr (kOverlap && kM == 3) {
    if (K == N) {  // the square products (stack.cu's forward)
      wgss_tile_overlap<N, kS, kAdd, kWG, N / (8 * kS)>(smem, aPtr, Bimg, acc);
      return;
    }
  }
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
    wgss_split<kS, kChunksPerThread, kThreads, kM == 3>(sA + (kb % kStages) * kA, sL + (kb & 1) * kA, tid);
    wg_fence_async_smem();
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
        wg_pin(part);
        wg_fence();
#pragma unroll
        for (int s = g * kAdd; s < (g + 1) * kAdd; ++s) {
          const uint64_t ah = wg_desc(aHi + 512 * s), al = wg_desc(aLo + 512 * s);
          const uint64_t bh = wg_desc(bHi + s * 8 * N), bl = wg_desc(bHi + kBPlane + s * 8 * N);
          WgmmaSS<N>::mma(part, al, bh, s != g * kAdd);
          WgmmaSS<N>::mma(part, ah, bl, 1);
          WgmmaSS<N>::mma(part, ah, bh, 1);
        }
        wg_commit();
        if (g == 0) background();
        wg_fold_partial(part, acc);
      }
    } else {
      wg_pin(acc);
      wg_fence();
#pragma unroll
      for (int s = 0; s < kS; ++s) WgmmaSS<N>::mma(acc, wg_desc(aHi + 512 * s), wg_desc(bHi + s * 8 * N), 1);
      wg_commit();
      background();
      wg_wait0();
      wg_pin(acc);
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace sezm::cuda
