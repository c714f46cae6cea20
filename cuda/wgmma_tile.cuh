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
// kOverlap (Dims::stack_overlap): the same products and adds on a schedule that keeps the next
// products in flight while a partial is added ("The overlapped schedule" below).
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
// At most one committed group (the newest) still in flight: the overlapped schedule's fold.
__device__ __forceinline__ void wg_wait1() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
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
// acc[off .. off + R) += part, for a partial of half the accumulators whose products completed
// (a wait_group before): the overlapped schedule's fold (wg_tile_overlap). The adds are pinned
// between the wait and the next product's issue: sunk past it (the compiler may; nothing else orders
// them), they would read the partial's registers while the next unit's products are in flight, and
// ptxas then serializes every wgmma (C7514).
template <int R, int M>
__device__ __forceinline__ void wg_fold_half(float (&part)[R], float (&acc)[M], int off) {
  wg_pin(part);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    acc[off + i] += part[i];
    asm volatile("" : "+f"(acc[off + i])::"memory");
  }
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

// ---- The overlapped schedule (kOverlap; wg_tile_overlap) ----
// Why: wg_tile waits for ALL of a partial's products (wait_group 0) before it adds the partial to
// the accumulators, and ends each k block with a barrier, so every kAdd steps the tensor cores run
// dry for the whole chain's latency, the fold and the barrier (docs/performance.md, 2026-12-02:
// tensor pipe ~22 % busy at K = N = 192). Here the products are issued in UNITS: one fold group
// (kAdd k steps, as wg_tile's partial) times one PART of N (kParts column ranges of kW = N / kParts,
// wgmma width kW), in k order, parts in order, each unit committed as its own group into one of two
// partials (pa, pb, alternating). Unit u + 1 is issued BEFORE unit u is waited for (wait_group 1) and
// folded, so the tensor cores always hold the next unit while a partial is added. Registers: two
// partials of kW / 2 (N / 2 for halves, as wg_tile's one; fewer for N = 192, in thirds).
// Bit-identical to wg_tile: each accumulator element receives the same partials (the same wgmma
// sequence lo*hi from zero, hi*lo, hi*hi over the same k steps: a column's result does not depend
// on the instruction's width, the parts being whole 16-column groups of the image, so the column
// permutation wgmma_col stays inside a part) and adds them in the same k order. sezm-stack-probe
// variant 110 checks it bitwise (bench/stack_probe_fold.cuh).
// B: the shared memory of two k-block stages is a ring of 2 kPerBlock unit SLOTS (a unit's B: two
// planes x kAdd steps x the part's 8 kW floats, LBO / SBO as the image's), each unit's B its own
// cp.async group, kAhead = 2 kPerBlock - 2 units ahead of the unit multiplied (a whole k block or
// more, as wg_tile's next stage). A unit's slot is refilled two units later: unit u's barrier comes
// after every warp folded unit u - 2 (wait_group 1 after issuing u - 1), so slot (u - 2) is free.
// The k loop is unrolled whole for a compile-time K (kBlocks k blocks; wg_tile takes it for the
// square products K = N, the engine's main ones, and its own schedule for the rest, the small gate
// table products). Why: ptxas (CUDA 13.0) cannot follow a product in flight across a loop's back
// edge and then serializes every wgmma (C7514, "non wgmma instructions reading accumulator registers
// ..."); nor across early exits that merge with products in flight: it then keeps every block's A
// fragments live to the merge (spills, or C7511). Straight code it follows.
// The A fragments (RS form) are read by the tensor cores asynchronously: a group's are made while
// the previous group's last unit is in flight; ptxas keeps the registers of an in-flight wgmma's
// operands live until its wait_group (wg_tile relies on it within a partial too).
template <int N, int kS, int kAdd>
struct WgUnits {
  static constexpr int kParts = N >= 128 ? N / 64 : 2;  // 64-wide units from N = 128 (192: thirds)
  static constexpr int kW = N / kParts;                 // a unit's wgmma width
  static constexpr int kR = kW / 2;                     // its accumulators per thread
  static constexpr int kPerBlock = kParts * (kS / kAdd);  // units per k block of the image
  static constexpr int kSlots = 2 * kPerBlock;          // the ring: two k blocks' shared memory
  static constexpr int kAhead = kSlots - 2;             // units whose B is in flight beyond the current one
  static constexpr int kSlot = 2 * kAdd * 8 * kW;       // floats of a slot: plane p, step s at (p kAdd + s) 8 kW
  static_assert(N % kParts == 0 && kW % 16 == 0, "parts of whole 16-column groups (wgmma_col)");
};
// Copies unit u's B (image block u / kPerBlock, fold group g, part m) from the image (wgmma_b_image)
// into its slot; nothing past the last unit nu. The caller commits the group.
template <int N, int kS, int kAdd, int kThreads>
__device__ __forceinline__ void wg_copy_unit(float* sB, const float* __restrict__ Bimg, int u, int nu) {
  using U = WgUnits<N, kS, kAdd>;
  if (u >= nu) return;
  const int i = u % U::kPerBlock, g = i / U::kParts, m = i % U::kParts;
  const float* src = Bimg + static_cast<size_t>(u / U::kPerBlock) * wg_stage_floats(N, kS) + g * kAdd * 8 * N + m * 8 * U::kW;
  float* dst = sB + (u % U::kSlots) * U::kSlot;
  constexpr int kRun = 2 * U::kW, kChunks = 2 * kAdd * kRun;  // 16-byte chunks: per (plane, step), per unit
  static_assert(kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int j = 0; j < kChunks / kThreads; ++j) {
    const int c = static_cast<int>(threadIdx.x) + j * kThreads, run = c / kRun, o = 4 * (c % kRun);
    const int p = run / kAdd, s = run % kAdd;  // plane, step within the group
    copy_async16(dst + run * 8 * U::kW + o, src + (p * kS + s) * 8 * N + o);
  }
}
// One unit: wait for its B (kAhead - 1 newer groups may stay in flight), barrier (B visible to every
// thread; slot u - 2 free), `refill()` (the next copies, committed), the unit's products into the
// partial p (zeroed by the first; per step lo*hi, hi*lo, hi*hi, as wg_tile's: mma(p, s, dh, dl) with
// step s's B descriptors), committed; then, with fold_prev, wait for the previous unit and add its
// partial q to acc[qoff ..] while this one runs.
template <int kW, int kAdd, int kAhead, int M, class Refill, class Mma>
__device__ __forceinline__ void wg_run_unit(float (&p)[kW / 2], const float* slot, Refill refill, Mma mma,
                                            bool fold_prev, float (&q)[kW / 2], float (&acc)[M], int qoff) {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1) : "memory");
  wg_fence_async_smem();
  __syncthreads();
  refill();
  // The descriptors made here: the slots repeat, and the compiler would keep every one of them live
  // through the unrolled k loop (the wgmma pipeline then lacks registers: C7511).
  asm volatile("" : "+l"(slot));
  wg_pin(p);
  wg_fence();
#pragma unroll
  for (int s = 0; s < kAdd; ++s) mma(p, s, wg_desc(slot + s * 8 * kW), wg_desc(slot + (kAdd + s) * 8 * kW));
  wg_commit();
  if (fold_prev) {
    wg_wait1();
    wg_fold_half(q, acc, qoff);
  }
}

// The overlapped wg_tile (3xTF32, kB = 1) over K = 8 kS kBlocks: arguments as wg_tile's; sB the
// same two stages' floats.
template <int N, int kS, int kAdd, int kWG, int kBlocks, class LoadA4>
__device__ __forceinline__ void wg_tile_overlap(float* sB, const float* __restrict__ Bimg, LoadA4 loadA4,
                                                float (&acc)[N / 2]) {
  using U = WgUnits<N, kS, kAdd>;
  constexpr int kW = U::kW, kR = U::kR, kP = U::kPerBlock, nsb = kBlocks, nu = nsb * kP;
  const int t = threadIdx.x & 3, r0 = wg_row();
  auto issueB = [&](int u) {  // always commits a group (empty past the end): uniform counts
    wg_copy_unit<N, kS, kAdd, 128 * kWG>(sB, Bimg, u, nu);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  float4 ra[kS];  // block sb's A: rows r0 (ra[0 .. kS/2)), r0 + 8; k = 8 kS sb + 2 kS t ..
  auto loadA = [&](int sb) {
    int k = 8 * kS * sb + 2 * kS * t;
    // Here, not earlier: A's loads are non-coherent (restrict) and the unrolled k loop would let
    // the compiler hoist every block's to the top, holding all their registers (spills).
    asm volatile("" : "+r"(k));
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < kS / 2; ++i) ra[h * (kS / 2) + i] = loadA4(r0 + 8 * h, k + 4 * i);
  };
  for (int u = 0; u < U::kAhead; ++u) issueB(u);
  loadA(0);
  float pa[kR], pb[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) pa[i] = pb[i] = 0.0f;
  uint32_t hi[kS][4], lo[kS][4];  // block sb's fragments (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)
#pragma unroll
  for (int sb = 0; sb < nsb; ++sb) {
#pragma unroll
    for (int i = 0; i < kP; ++i) {
      const int g = i / U::kParts, u = sb * kP + i;
      if (i % U::kParts == 0) {  // split the group's A (physical k 2 kS t + 2 s (+ 1), as wg_tile's)
#pragma unroll
        for (int s = g * kAdd; s < (g + 1) * kAdd; ++s) {
          const int q = 2 * s;  // element q of row r0's quads, (q + 1) the next k
          const float4 u0 = ra[q / 4], u1 = ra[kS / 2 + q / 4];
          const float e0[4] = {u0.x, u0.y, u0.z, u0.w}, e1[4] = {u1.x, u1.y, u1.z, u1.w};
          const float v[4] = {e0[q % 4], e1[q % 4], e0[q % 4 + 1], e1[q % 4 + 1]};
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            hi[s][c] = wg_tf32(v[c]);
            lo[s][c] = wg_tf32(v[c] - __uint_as_float(hi[s][c]));
          }
        }
      }
      auto mma = [&](float (&d)[kR], int s, uint64_t dh, uint64_t dl) {
        Wgmma<kW>::mma(d, lo[g * kAdd + s], dh, s != 0);
        Wgmma<kW>::mma(d, hi[g * kAdd + s], dl, 1);
        Wgmma<kW>::mma(d, hi[g * kAdd + s], dh, 1);
      };
      const float* slot = sB + (u % U::kSlots) * U::kSlot;
      auto refill = [&] { issueB(u + U::kAhead); };
      const int qoff = ((u + U::kParts - 1) % U::kParts) * kR;  // unit u - 1's part
      if (u % 2 == 0) wg_run_unit<kW, kAdd, U::kAhead>(pa, slot, refill, mma, u > 0, pb, acc, qoff);
      else wg_run_unit<kW, kAdd, U::kAhead>(pb, slot, refill, mma, true, pa, acc, qoff);
      // The next block's A once this block's last group is split and the previous group's
      // fragments are free (the previous unit folded): one group's fragments fewer in flight.
      if (i == kP - U::kParts && sb + 1 < nsb) loadA(sb + 1);
    }
  }
  wg_wait0();
  if constexpr ((nu - 1) % 2 == 0) wg_fold_half(pa, acc, (U::kParts - 1) * kR);  // the last unit: the last part
  else wg_fold_half(pb, acc, (U::kParts - 1) * kR);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // the empty groups past the end
  __syncthreads();
}

// acc (this thread's N / 2 accumulators) += A B over K (K % (8 kS kB) == 0). `loadA4(row, k)`
// returns A(row, k..k+3) for a tile row (0 .. 64 kWG - 1) and k % 4 == 0. `sB`: wg_smem_floats(N,
// kS, kM == 3, kB) of shared memory (16-byte aligned); `Bimg`: wgmma_b_image(.., kS) of B in
// global memory, staged kB image blocks at a time. kM: kTf32x3 (3) or one TF32 pass (1, which
// stages only the hi plane); kAdd: k steps of 8 per IEEE add of the 3xTF32 partial (divides kS).
// kStages: shared-memory stages of B, kStages - 1 of them in flight ahead of the block being
// multiplied (the engine: 2; sB then holds kStages / 2 times wg_smem_floats). Every block ends
// with its products complete (a fold, or one pass's wait), so its stage is free after the block's
// closing barrier. kOverlap: the 3xTF32 split on the overlapped schedule (wg_tile_overlap above: the
// next half-width products in flight while a partial is folded; bit-identical results, the same
// shared memory; kB = 1, kStages unused) where K = N, this schedule otherwise; one TF32 pass has no
// partials and ignores it. Called by all 128 kWG threads; ends with a barrier.
template <int N, int kM, int kS, int kAdd, int kWG, int kB = 1, int kStages = 2, bool kOverlap = false, class LoadA4>
__device__ __forceinline__ void wg_tile(float* sB, int K, const float* __restrict__ Bimg, LoadA4 loadA4,
                                        float (&acc)[N / 2]) {
  static_assert(N % 16 == 0 && N <= 256, "wgmma widths: multiples of 16 up to 256");
  if constexpr (kOverlap && kM == 3) {
    static_assert(kB == 1, "the overlapped schedule stages one image block per k block");
    if (K == N) {  // the square products (stack.cu's main ones); the rest below
      wg_tile_overlap<N, kS, kAdd, kWG, N / (8 * kS)>(sB, Bimg, loadA4, acc);
      return;
    }
  }
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
          lo[q] = wg_tf32(v[q] - __uint_as_float(hi[q]));
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
