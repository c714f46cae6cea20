#pragma once
// sezm-stack-probe part 1, variants 104-106: the standard Hopper GEMM structure on the stack's
// products, C (rows x N) = A (rows x K) B (K x N), K = N = 128 or 192, in the 3xTF32 split: a
// warp-specialised, persistent CTA (grid = #SMs, one per SM, 384 threads) whose producer warp(s)
// stream A and B k blocks by bulk asynchronous copies into rings of stages with full / empty
// mbarriers, and two consumer warpgroups that multiply. 104 "cooperative": one ring, 128-row tiles,
// both consumer warpgroups (64 rows each) on every stage, so a B block serves 128 rows. 105
// "ping-pong": each consumer warpgroup its own 64-row tiles, ring and two producer warps, the two
// running free (one's drains and epilogue overlap the other's products; twice the B bytes per row).
// 106: 104 with A's stage fetched by one 2-D tensor-map copy (TMA, box 16 k x 128 rows) by one
// producer warp instead of 128 64-byte bulk copies, in case issuing the small copies limits 104
// (a bulk copy takes uniform-register operands: a warp issues its lanes' copies one at a time).
// Probe-only (sm_90a); the engine's tile is wg_tile (cuda/wgmma_tile.cuh, variant 100), whose
// accuracy scheme this keeps exactly.
//
// Why (docs/performance.md, 2026-12-02): variant 100 is latency-bound. Every 16-deep k block waits for
// a B-stage round trip and an A load with one block of look-ahead, and every two k steps the tile
// drains the tensor cores (wgmma.wait_group 0) to add the 3xTF32 partial in IEEE fp32. Here
//  - the producer warps run up to a ring's depth (ws_stages) of 16-deep k blocks ahead, across tile
//    boundaries: per stage one 64-byte bulk copy per A row (16 floats of one edge, contiguous; rows
//    past the end are not copied, their results not stored), 32 rows per warp, and one copy of the
//    B image's block (wgmma_b_image, kS = 2), completing on the stage's full barrier (one
//    arrive.expect_tx of its own bytes per filling warp, before its copies);
//  - the consumers do not drain per block: each product covers a column chunk of 64 (m64n64k8),
//    its 3xTF32 partial of the block's two k steps formed from zero in one of two partial buffers,
//    and the chunks are issued in turn with wgmma.wait_group 1, so that while a chunk's partial is
//    added to the accumulators the next chunk's products run. (Two 96-wide halves would need
//    acc + 2 x 48 + two blocks' fragments > 240 registers at N = 192.) A block's stage is released
//    (empty barrier, one arrival per consumer warp) once its last chunk's products completed, after
//    the first wait of the next block. The k loop runs in unrolled segments of at most 8 blocks,
//    each ending with nothing in flight (see the consumer loop for why);
//  - A stays in the register (RS) form: each thread loads its fragment rows g and g + 8 as one
//    16-byte vector each from the dense stage (rows of 16 floats: a quarter warp reads two whole
//    rows, 128 contiguous bytes, no bank conflicts) and splits them in registers, as wg_tile does
//    from global memory (the same k permutation, ws_frag_k). The SS form would need a pass over
//    shared memory to write the TF32 hi / lo planes and a barrier before the products read them.
//    No generic-proxy write reaches what the tensor cores read (B lands by bulk copy), so no
//    fence.proxy.async is needed.
// Accuracy: as wg_tile with kAdd = 2 (the products lo*hi, hi*lo, hi*hi of a block's two k steps
// from zero, then one IEEE add per accumulator), so C should match variant 100's bit for bit at N = 192.
// Registers: producer warpgroup setmaxnreg 24, consumers 240 (ptxas: 168 at entry, no spills).
// Index maps: stack_probe_ws_layout.h, checked on the CPU by tests/test_wgmma_ws_layout.cpp.
// Included by bench/stack_probe.cu only (after stack.cuh and stack_tile.cuh: Error, SEZM_CUDA, div_up).
#include <cuda.h>  // CUtensorMap (the entry point is fetched through the runtime: no libcuda link)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "stack_probe_ws_layout.h"
#include "wgmma_tile.cuh"

namespace sezm::cuda {
namespace {

__device__ __forceinline__ uint32_t ws_smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ws_bar_init(uint64_t* b, int count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ws_smem(b)), "r"(count) : "memory");
#endif
}
// The barriers' initialisation made visible to the async proxy (the bulk copies' complete_tx).
__device__ __forceinline__ void ws_bar_init_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// One arrival that also expects `bytes` of transactions in the current phase.
__device__ __forceinline__ void ws_bar_expect(uint64_t* b, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ws_smem(b)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void ws_bar_arrive(uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ws_smem(b)) : "memory");
#endif
}
// Until the phase of parity `parity` has completed (a fresh barrier: parity 1 passes at once).
__device__ __forceinline__ void ws_bar_wait(uint64_t* b, uint32_t parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(ws_smem(b)), "r"(parity)
        : "memory");
#endif
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global src to shared dst,
// completing on barrier b.
__device__ __forceinline__ void ws_bulk(float* dst, const float* src, uint32_t bytes, uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   ws_smem(dst)),
               "l"(src), "r"(bytes), "r"(ws_smem(b))
               : "memory");
#endif
}
// The box at (column x, row y) of the 2-D tensor map tm into shared dst, completing on barrier b.
// Rows past the tensor's end arrive as zeros and count as transferred bytes.
__device__ __forceinline__ void ws_tma_2d(float* dst, const CUtensorMap* tm, int x, int y, uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          ws_smem(dst)),
      "l"(reinterpret_cast<uint64_t>(tm)), "r"(x), "r"(y), "r"(ws_smem(b))
      : "memory");
#endif
}
// gridDim.x, read again where it is used (the producer warps' 24 registers hold no copy of it).
__device__ __forceinline__ int ws_grid() {
  int n;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
  return n;
}
__device__ __forceinline__ void ws_wait1() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}
template <int kRegs>
__device__ __forceinline__ void ws_regs_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void ws_regs_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

struct WsArgs {
  int rows;
  const float* A;       // rows x K, row stride lda (lda % 4 == 0, 16-byte aligned)
  int lda;
  const float* Bimg;    // wgmma_b_image(B, K, N, N, kWsKs)
  float* C;             // rows x N, row-major
};

constexpr int kWsThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kWsProducerRegs = 24, kWsConsumerRegs = 240;  // 24 x 128 + 240 x 256 = 168 x 384
// The two schedules (pp: ping-pong). Cooperative: one ring, 128-row tiles, both consumer warpgroups
// on every stage. Ping-pong: each consumer warpgroup its own 64-row tiles, ring and producer warp,
// the two running free, so that one's segment drains and epilogue overlap the other's products (at
// twice the B bytes per row).
SEZM_WG_HD constexpr int ws_rings(bool pp) { return pp ? 2 : 1; }
SEZM_WG_HD constexpr int ws_tile_rows(bool pp) { return pp ? kWsRows / 2 : kWsRows; }
// Floats of one ring stage: A (the tile's rows x 16) and the B image's block (hi, lo planes of 2 steps).
SEZM_WG_HD constexpr int ws_stage_floats(int N, bool pp) { return ws_tile_rows(pp) * kWsK + wg_stage_floats(N, kWsKs); }
// Stages per ring (one CTA per SM): cooperative 6 x 32 KiB (N = 192) or 8 x 24 KiB (N = 128);
// ping-pong 2 x 4 x 28 KiB or 2 x 5 x 20 KiB.
SEZM_WG_HD constexpr int ws_stages(int N, bool pp) { return pp ? (N > 128 ? 4 : 5) : (N > 128 ? 6 : 8); }
SEZM_WG_HD constexpr int ws_smem_bytes(int N, bool pp) {
  return ws_rings(pp) * ws_stages(N, pp) * ws_stage_floats(N, pp) * static_cast<int>(sizeof(float));
}

// kTma: A's stage by one tensor-map copy (box of 16 k x the tile's rows) instead of a bulk copy per row.
template <int N, int K, bool kPP, bool kTma>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_probe_k(WsArgs p, const __grid_constant__ CUtensorMap tmA) {
  constexpr int kRings = ws_rings(kPP), kStages = ws_stages(N, kPP), kTileRows = ws_tile_rows(kPP);
  constexpr int kNQ = N / kWsChunk, kNkb = K / kWsK;
  constexpr int kSeg = kNkb <= 8 ? kNkb : kNkb / 2;  // k blocks per unrolled segment
  constexpr int kAFloats = kTileRows * kWsK, kBFloats = wg_stage_floats(N, kWsKs), kStage = ws_stage_floats(N, kPP);
  constexpr int kConsumerWarps = kPP ? 4 : 8;  // the warps that read a ring's stages
  // The warps that fill a ring's stages: one with the tensor map; else all four of the producer
  // warpgroup, 32 A rows each (a bulk copy's operands are uniform registers, so a warp issues its
  // lanes' copies one after another: four warps issue four at a time).
  constexpr int kFillWarps = kTma ? 1 : 4 / kRings;
  static_assert(kTma || kTileRows == 32 * kFillWarps, "32 rows per filling warp");
  constexpr int kBPlane = kWsKs * 8 * N;  // the lo plane's offset in a B block
  constexpr uint32_t kRowBytes = kWsK * sizeof(float), kBBytes = kBFloats * sizeof(float);
  static_assert(N % kWsChunk == 0 && K % kWsK == 0 && kNkb % kSeg == 0 && kSeg <= 8, "whole chunks, blocks, segments");
  extern __shared__ __align__(128) float ws_dsmem[];  // 128-byte aligned stages: tensor copies' destinations
  float* const sm = ws_dsmem;
  __shared__ uint64_t full_[kRings][kStages], empty_[kRings][kStages];
  const int tid = threadIdx.x;
  const int ntiles = (p.rows + kTileRows - 1) / kTileRows;
  if (tid == 0) {
    for (int r = 0; r < kRings; ++r)
      for (int i = 0; i < kStages; ++i) {
        ws_bar_init(&full_[r][i], kFillWarps);       // each filling warp's arrive.expect_tx; its copies complete the bytes
        ws_bar_init(&empty_[r][i], kConsumerWarps);  // one arrival per consumer warp of the ring
      }
    ws_bar_init_fence();
  }
  __syncthreads();
  // Ring w's tiles: blockIdx.x kRings + w, then every gridDim.x kRings.
  if (tid < 128) {  // the producer warpgroup: warp kFillWarps w + sub fills ring w, A rows 32 sub ..
    ws_regs_dec<kWsProducerRegs>();
    if (tid >= 32 * kRings * kFillWarps) return;
    const int w = (tid >> 5) / kFillWarps, sub = (tid >> 5) % kFillWarps, lane = tid & 31;
    uint64_t* const full = full_[w];
    uint64_t* const empty = empty_[w];
    int stage = 0;
    uint32_t phase = 0;
    for (int tile = blockIdx.x * kRings + w; tile < ntiles; tile += ws_grid() * kRings) {
      const int row0 = tile * kTileRows, mine = max(0, min(32, p.rows - row0 - 32 * sub));  // this warp's rows
#pragma unroll 1
      for (int kb = 0; kb < kNkb; ++kb) {
        ws_bar_wait(&empty[stage], phase ^ 1u);  // the consumers are done with its previous block
        float* dst = sm + (w * kStages + stage) * kStage;
        if constexpr (kTma) {  // the whole box counts, rows past the end included (zeros)
          if (lane == 0) {
            ws_bar_expect(&full[stage], kBBytes + kTileRows * kRowBytes);
            ws_bulk(dst + kAFloats, p.Bimg + static_cast<size_t>(kb) * kBFloats, kBBytes, &full[stage]);
            ws_tma_2d(dst, &tmA, kb * kWsK, row0, &full[stage]);
          }
        } else {  // rows past the end are not copied: their stale results are not stored
          if (lane == 0) {  // expected before any of this warp's bytes land: tx-count never negative
            ws_bar_expect(&full[stage], (sub == 0 ? kBBytes : 0u) + static_cast<uint32_t>(mine) * kRowBytes);
            if (sub == 0) ws_bulk(dst + kAFloats, p.Bimg + static_cast<size_t>(kb) * kBFloats, kBBytes, &full[stage]);
          }
          __syncwarp();
          if (lane < mine)
            ws_bulk(dst + ws_a_offset(32 * sub + lane, 0), p.A + static_cast<size_t>(row0 + 32 * sub + lane) * p.lda + kb * kWsK,
                    kRowBytes, &full[stage]);
        }
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = tid - 128, t = ct & 3, w = kPP ? ct >> 7 : 0;
  const int ctr = kPP ? ct & 127 : ct;  // the thread among its tile's consumers
  const int ra0 = ws_row(ctr, 0), ra1 = ws_row(ctr, 1);
  const float* const ring = sm + w * kStages * kStage;
  uint64_t* const full = full_[w];
  uint64_t* const empty = empty_[w];
  const bool leader = (ct & 31) == 0;
  int stage = 0;
  uint32_t phase = 0;
  float acc[N / 2], pb[2][kWsChunk / 2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) pb[b][i] = 0.0f;  // read by the asm only (scale-d 0)
  // TF32 hi / lo fragments of two consecutive blocks (u = block parity): a block's fragments stay
  // live until its last chunk's products completed, during the next block's first chunk.
  uint32_t hi[2][kWsKs][4], lo[2][kWsKs][4];
  // The next block: wait until its stage is full, split this thread's A fragments into hi / lo[u];
  // returns its stage.
  auto next_block = [&](uint32_t (&h)[kWsKs][4], uint32_t (&l)[kWsKs][4]) {
    const int cur = stage;
    ws_bar_wait(&full[cur], phase);
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
    const float* sA = ring + cur * kStage;
    const float4 x0 = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra0, 4 * t));
    const float4 x1 = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra1, 4 * t));
    const float v0[4] = {x0.x, x0.y, x0.z, x0.w}, v1[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int s = 0; s < kWsKs; ++s) {
      // fragment (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4): k = ws_frag_k(s, t), ws_frag_k(s, t + 4)
      const float f[4] = {v0[2 * s], v1[2 * s], v0[2 * s + 1], v1[2 * s + 1]};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        h[s][e] = wg_tf32(f[e]);
        l[s][e] = wg_tf32(f[e] - __uint_as_float(h[s][e]));
      }
    }
    return cur;
  };
  // The 3xTF32 partial of chunk q of a block (stage st) from zero into d: one commit group.
  auto issue = [&](float (&d)[kWsChunk / 2], const uint32_t (&h)[kWsKs][4], const uint32_t (&l)[kWsKs][4], int st,
                   int q) {
    const float* sB = ring + st * kStage + kAFloats + ws_b_chunk_offset(q);
    wg_pin(d);
    wg_fence();
#pragma unroll
    for (int s = 0; s < kWsKs; ++s) {
      const uint64_t dh = wg_desc(sB + s * 8 * N), dl = wg_desc(sB + kBPlane + s * 8 * N);
      Wgmma<kWsChunk>::mma(d, l[s], dh, s != 0);
      Wgmma<kWsChunk>::mma(d, h[s], dl, 1);
      Wgmma<kWsChunk>::mma(d, h[s], dh, 1);
    }
    wg_commit();
  };
  // The previous group (partial d of chunk q), once complete, added to the accumulators; the group
  // just issued keeps the tensor cores busy meanwhile.
  auto fold = [&](float (&d)[kWsChunk / 2], int q) {
    ws_wait1();
    wg_pin(d);
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) {
      acc[ws_acc_index(q, i)] += d[i];
      asm volatile("" : "+f"(acc[ws_acc_index(q, i)])::"memory");  // the add before the next issue
    }
  };
  auto release = [&](int st) {  // every warp's products that read stage st have completed
    __syncwarp();
    if (leader) ws_bar_arrive(&empty[st]);
  };
  // Group g = kNQ j + q (block j of a segment, chunk q) forms its partial in buffer g % 2. The k loop
  // runs in segments of kSeg blocks, each unrolled whole and ending with nothing in flight: a
  // partial in flight across a loop's back edge makes nvcc copy its registers (phi moves) and ptxas
  // then serialises every wgmma (C7514); and one unrolled run of 12 blocks (K = N = 192) spilled.
  for (int tile = blockIdx.x * kRings + w; tile < ntiles; tile += gridDim.x * kRings) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
#pragma unroll 1
    for (int seg = 0; seg < kNkb / kSeg; ++seg) {
      int st[2];  // the stages of the current and the previous block (by block parity)
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
            if (q == 0) release(st[u ^ 1]);  // that was the previous block's last chunk
          }
        }
      }
      // The segment's last group.
      constexpr int kLast = (kNQ * kSeg - 1) & 1;
      wg_wait0();
      wg_pin(pb[kLast]);
#pragma unroll
      for (int i = 0; i < kWsChunk / 2; ++i) acc[ws_acc_index(kNQ - 1, i)] += pb[kLast][i];
      release(st[(kSeg - 1) & 1]);
    }
    const int row0 = tile * kTileRows;
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + (h ? ra1 : ra0);
        if (r < p.rows) *reinterpret_cast<float4*>(p.C + static_cast<size_t>(r) * N + wg_quad_col(q4)) = wg_quad(acc, q4, h);
      }
  }
}

// The tensor map of A (rows x K floats, row stride lda) in boxes of 16 k x kWsRows rows, no swizzle
// (the box lands as ws_a_offset's dense rows), rows past the end filled with zeros.
inline CUtensorMap ws_tensor_map_a(const float* A, int rows, int K, int lda) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  SEZM_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (fn == nullptr || q != cudaDriverEntryPointSuccess) throw Error("cuTensorMapEncodeTiled is not available");
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  CUtensorMap tm{};
  const cuuint64_t dim[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t stride[1] = {static_cast<cuuint64_t>(lda) * sizeof(float)};
  const cuuint32_t box[2] = {kWsK, kWsRows}, estride[2] = {1, 1};
  const CUresult r = reinterpret_cast<Encode>(fn)(&tm, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(A), dim, stride,
                                                  box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw Error("cuTensorMapEncodeTiled failed: " + std::to_string(static_cast<int>(r)));
  return tm;
}

// Launches variant 104 (cooperative), 105 (ping-pong) or 106 (cooperative, A by tensor map) at K = N =
// 128 or 192; returns "[smem KiB, CTAs/SM]" for the probe's line. Bimg2: wgmma_b_image(B, K, N, N, 2).
template <int N, bool kPP, bool kTma = false>
std::string launch_wgws_probe(int rows, int K, const float* A, int lda, const float* Bimg2, float* C, cudaStream_t s) {
  static_assert(!(kPP && kTma), "the tensor map's box is the cooperative tile's");
  const int bytes = ws_smem_bytes(N, kPP);
  if (K != N || lda % 4 != 0 || reinterpret_cast<uintptr_t>(A) % 16 != 0)
    throw Error("the warp-specialised tile probe needs K = N and 16-byte aligned A rows");
  auto k = wgws_probe_k<N, N, kPP, kTma>;
  static int sms = 0, per_sm = 0;  // once: keeps the attribute calls out of the timed launches
  if (sms == 0) {
    // setmaxnreg.inc waits until the CTA's pool has the registers: a pool smaller than the
    // producers' and the consumers' setmaxnreg counts would hang the kernel.
    cudaFuncAttributes fa{};
    SEZM_CUDA(cudaFuncGetAttributes(&fa, k));
    if (fa.numRegs * kWsThreads < 128 * kWsProducerRegs + 256 * kWsConsumerRegs)
      throw Error("wgws_probe_k: " + std::to_string(fa.numRegs) + " registers per thread at entry are too few for setmaxnreg");
    int dev = 0;
    SEZM_CUDA(cudaGetDevice(&dev));
    SEZM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kWsThreads, bytes));
  }
  // The tensor map, encoded again only when the operand changes (its encoding stays out of the timing).
  static CUtensorMap tm{};
  static const float* tm_a = nullptr;
  static int tm_rows = 0, tm_lda = 0;
  if (kTma && (tm_a != A || tm_rows != rows || tm_lda != lda)) {
    tm = ws_tensor_map_a(A, rows, K, lda);
    tm_a = A;
    tm_rows = rows;
    tm_lda = lda;
  }
  const int grid = std::min(div_up(div_up(rows, ws_tile_rows(kPP)), ws_rings(kPP)), sms);
  k<<<grid, kWsThreads, bytes, s>>>(WsArgs{rows, A, lda, Bimg2, C}, tm);
  SEZM_LAUNCH("wgws_probe");
  return "  [" + std::to_string(bytes / 1024) + " KiB smem, " + std::to_string(per_sm) + " CTA/SM, persistent]";
}

// Variant v: 0 cooperative (104), 1 ping-pong (105), 2 cooperative with A by tensor map (106).
template <int N>
std::string launch_wgws_probe_n(int v, int rows, int K, const float* A, int lda, const float* Bimg2, float* C,
                                cudaStream_t s) {
  switch (v) {
    case 0: return launch_wgws_probe<N, false>(rows, K, A, lda, Bimg2, C, s);
    case 1: return launch_wgws_probe<N, true>(rows, K, A, lda, Bimg2, C, s);
    default: return launch_wgws_probe<N, false, true>(rows, K, A, lda, Bimg2, C, s);
  }
}
std::string launch_wgws_probe_variant(int v, int rows, int K, int N, const float* A, int lda, const float* Bimg2,
                                      float* C, cudaStream_t s) {
  if (N == 192) return launch_wgws_probe_n<192>(v, rows, K, A, lda, Bimg2, C, s);
  if (N == 128) return launch_wgws_probe_n<128>(v, rows, K, A, lda, Bimg2, C, s);
  throw Error("the warp-specialised tile probe takes N = 128 or 192");
}

}  // namespace
}  // namespace sezm::cuda
