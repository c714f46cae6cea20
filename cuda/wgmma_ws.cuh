#pragma once
// The warp-specialised Hopper tile (sm_90a): C (work item's 128 rows x N) = A (rows x K) B (K x N),
// K = N = 128 or 192, in the 3xTF32 split or one TF32 pass (the 3xFP16 split: wgmma_ws_f16.cuh, on
// this file's ring and schedule; one product in any of them: wgmma_ws_gemm.cuh), on a persistent CTA (grid <= #SMs, one per SM, 384
// threads): a producer warp streams each item's A k blocks (one 3-D tensor-map copy, TMA, box 16 k x
// 128 rows x 1) and B image blocks (one bulk copy) into a ring of stages with full / empty mbarriers;
// two consumer warpgroups (64 rows each) multiply every stage and hand the finished accumulators
// to the caller's epilogue. Users: the stack's layers (stack_ws*.cu, Dims::stack_ws) and
// sezm-stack-probe variants 106 and 111 (bench/stack_probe_ws.cuh, stack_probe_f16.cuh). The engine's default tile is wg_tile
// (wgmma_tile.cuh), whose accuracy scheme this keeps exactly.
//
// Why (docs/performance.md, 2026-12-02: 87.9 / 108.1 useful TFLOP/s at K = N = 128 / 192 against
// wg_tile's 54.5 / 53.7): wg_tile is latency-bound, every 16-deep k block waiting for a B-stage
// round trip and an A load with one block of look-ahead, and every two k steps draining the
// tensor cores to add the 3xTF32 partial in IEEE fp32. Here
//  - the producer runs up to a ring's depth (ws_stages) of 16-deep k blocks ahead, across item
//    boundaries; a stage is A's box (rows past the tensor's end arrive as zeros and count as
//    transferred bytes; their results are not stored) and the B image's block (wgmma_b_image, kS
//    = 2), both completing on the stage's full barrier (one arrive.expect_tx before the copies);
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
//    from global memory (the same k permutation, ws_frag_k). No generic-proxy write reaches what
//    the tensor cores read (B lands by bulk copy), so no fence.proxy.async is needed.
// Accuracy: as wg_tile with kAdd = 2 (the products lo*hi, hi*lo, hi*hi of a block's two k steps
// from zero, then one IEEE add per accumulator, blocks in k order), so C matches wg_tile's bit for
// bit for the same image (kS = 2: the engine's N = 192 image; at N = 128 the engine's kS = 4 image
// groups k differently into partials, so there the bits differ by the partials' rounding).
// One TF32 pass (kAr1xTf32: `precision tf32`, Dims::tf32_one_pass; ws_product_one): wg_tile's kM = 1
// arithmetic (A rounded by cvt.rna, B's hi plane, the tensor cores accumulating over all of K); a
// stage then receives only the image block's hi plane (ws_b_floats: the same image), so the ring
// has more, smaller stages (ws_stages). The same instructions in the same order as wg_tile's one
// pass for the same image (kS = 2: N = 192), so the same bits; at N = 128 the engine's kS = 4 image
// puts other k into each 8-deep instruction, so there the bits differ by the tensor cores' rounding.
// Registers: producer warpgroup setmaxnreg 24, consumers 240 (ptxas: 168 at entry, no spills);
// the launch checks the pool (ws_prepare, wgmma_ws_host.cuh). Index maps: wgmma_ws_layout.h, checked on the CPU by
// tests/test_wgmma_ws_layout.cpp.
#include <cuda.h>  // CUtensorMap (the entry point is fetched through the runtime: no libcuda link)
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_common.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_ws_layout.h"
#include "wgmma_ws_ptx.cuh"

namespace sezm::cuda {
namespace {

// The products' arithmetic, a template argument of every kernel on the tile: 3xTF32 (the default),
// one TF32 pass (`precision tf32`, Dims::tf32_one_pass) or 3xFP16 (Dims::stack_f16,
// wgmma_ws_f16.cuh). A stage of the last two receives 16 N floats of B's block (one TF32 plane, or
// the FP16 image's hi and lo planes of 16 k: wgmma_f16_layout.h), so they share one ring layout.
constexpr int kAr3xTf32 = 0, kAr1xTf32 = 1, kAr3xF16 = 2;
SEZM_WG_HD constexpr bool ws_one_plane(int ar) { return ar != kAr3xTf32; }
SEZM_WG_HD constexpr bool ws_one_pass(int ar) { return ar == kAr1xTf32; }

constexpr int kWsThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kWsProducerRegs = 24, kWsConsumerRegs = 240;  // 24 x 128 + 240 x 256 = 168 x 384
// Floats of one ring stage: A (128 rows x 16) and the B image's block (hi, lo planes of 2 steps;
// one pass: the hi plane, ws_b_floats).
SEZM_WG_HD constexpr int ws_stage_floats(int N, bool one = false) { return kWsRows * kWsK + ws_b_floats(N, one); }
// Stages of the ring (one CTA per SM): 6 x 32 KiB (N = 192) or 8 x 24 KiB (N = 128); one pass 9 x
// 20 KiB or 12 x 16 KiB: the same ~192 KiB, so as many bytes in flight (and the same carve-out).
SEZM_WG_HD constexpr int ws_stages(int N, bool one = false) { return one ? (N > 128 ? 9 : 12) : (N > 128 ? 6 : 8); }
SEZM_WG_HD constexpr int ws_smem_bytes(int N, bool one = false) {
  return ws_stages(N, one) * ws_stage_floats(N, one) * static_cast<int>(sizeof(float));
}

// A work item of the tile: the tensor-map coordinates of its A box's first k block (x: column, y:
// row, z: outer index; k block kb is at x + 16 kb) and its B image (wgmma_b_image(B, K, N, N, 2)).
struct WsItem {
  int x, y, z;
  const float* B;
};

// A position in the ring (stage, and the parity of the phase its barriers are in), kept by the
// producer and by each consumer thread alike: both walk the same sequence of k blocks.
struct WsPipe {
  int stage = 0;
  uint32_t phase = 0;
};
template <int kStages>
__device__ __forceinline__ void ws_advance(WsPipe& pp) {
  if (++pp.stage == kStages) {
    pp.stage = 0;
    pp.phase ^= 1u;
  }
}

// Thread 0 initialises the ring's barriers; all threads of the CTA then pass a barrier.
template <int kStages>
__device__ __forceinline__ void ws_init(uint64_t (&full)[kStages], uint64_t (&empty)[kStages]) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      ws_bar_init(&full[i], 1);  // the producer's arrive.expect_tx; its copies complete the bytes
      ws_bar_init(&empty[i], 8);  // one arrival per consumer warp
    }
    ws_bar_init_fence();
  }
  __syncthreads();
}

// The producer warp's part of one product (K x N) of item `it`: its k blocks kb0 .. kb1 - 1 (by
// default all K / 16) into the ring (stages of kStage floats: A's box, then the B image's block,
// kOne: its hi plane only; !kA: the B block alone, for a product whose A the consumers hold; !kB:
// A's box alone, for a pass without a product; kARows: the rows of A's box, tmA's (64: a ring of
// one consumer warpgroup, bench/stack_probe_ws.cuh's ping-pong); kZoff > 0: also the box of tmZ
// at the same coordinates at kZoff floats into the stage, for an AX hook that reads both,
// ws_land_a; kBAt0: B's block at the stage's start, for a ring whose stages hold A's box or B's
// block, never both, ws_product_one_regs's), each once the consumers released its stage. Called by
// the 32 lanes of the producer warp; lane 0 issues the copies.
template <int N, int K, int kStages, int kStage, bool kOne = false, bool kA = true, int kZoff = 0, bool kB = true,
          int kARows = kWsRows, bool kBAt0 = false>
__device__ __forceinline__ void ws_fill(float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, const CUtensorMap* tmA,
                                        const WsItem& it, int kb0 = 0, int kb1 = K / kWsK,
                                        const CUtensorMap* tmZ = nullptr) {
  constexpr int kAFloats = kARows * kWsK, kBFloats = ws_b_floats(N, kOne), kBlock = wg_stage_floats(N, kWsKs);
  constexpr uint32_t kABytes = kAFloats * sizeof(float), kBBytes = kBFloats * sizeof(float);
  static_assert(!kBAt0 || (!kA && kZoff == 0), "B at the stage's start: a stage of B alone");
  static_assert((kBAt0 ? kBFloats : kB ? kAFloats + kBFloats : kAFloats) <= kStage && kStage % 32 == 0,
                "a stage holds what is copied into it, 128-byte aligned");
  static_assert(kZoff == 0 || (kZoff >= kAFloats + kBFloats && kZoff + kAFloats <= kStage && kZoff % 32 == 0),
                "the Z box after A and B, inside the stage, 128-byte aligned");
  constexpr uint32_t kBytes = (kA ? kABytes : 0u) + (kB ? kBBytes : 0u) + (kZoff > 0 ? kABytes : 0u);
#pragma unroll 1
  for (int kb = kb0; kb < kb1; ++kb) {
    ws_bar_wait(&empty[pp.stage], pp.phase ^ 1u);  // the consumers are done with its previous block
    float* dst = ring + pp.stage * kStage;
    if ((threadIdx.x & 31) == 0) {  // the whole box counts, rows past the end included (zeros)
      ws_bar_expect(&full[pp.stage], kBytes);
      if (kB) ws_bulk(dst + (kBAt0 ? 0 : kAFloats), it.B + static_cast<size_t>(kb) * kBlock, kBBytes, &full[pp.stage]);
      if (kA) ws_tma_3d(dst, tmA, it.x + kb * kWsK, it.y, it.z, &full[pp.stage]);
      if (kZoff > 0) ws_tma_3d(dst + kZoff, tmZ, it.x + kb * kWsK, it.y, it.z, &full[pp.stage]);
    }
    ws_advance<kStages>(pp);
  }
}

// u added to the accumulators of quad q4 of row h (the ones wg_quad reads), in IEEE fp32.
template <int M>
__device__ __forceinline__ void ws_add_quad(float (&acc)[M], int q4, int h, float4 u) {
  acc[8 * q4 + 2 * h] += u.x;
  acc[8 * q4 + 2 * h + 1] += u.y;
  acc[8 * q4 + 4 + 2 * h] += u.z;
  acc[8 * q4 + 5 + 2 * h] += u.w;
}

// A as it lands (no transform).
struct WsAsIs {
  __device__ __forceinline__ float4 operator()(int, int, float4 x) const { return x; }
};

// The consumers' part of one product (K x N): acc (this thread's N / 2 accumulators, consumer
// thread ct = threadIdx.x - 128 holding rows ws_row(ct, h) and, as wg_quad(acc, q4, h), the quads
// at columns wg_quad_col(q4)) = the item's A B, each stage released once read. `ax(row, k, x)`:
// the A operand's elements (tile row, k .. k + 3) from the landed x = A(row, k .. k + 3), applied
// in registers before the TF32 split (e.g. a gate's factor). Called by all 256 consumer threads;
// ends with nothing in flight.
// A consumer's A fragments of the ring's next block: wait until its stage is full, read this
// thread's two rows ra0, ra1 (k = 4 t ..), pass them through ax and return them in fragment order
// (step s, element e: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4), i.e. k = ws_frag_k(s, t),
// ws_frag_k(s, t + 4)) with the stage's index; ws_product and ws_product_one round / split them.
// An AX with a member kZoff > 0 (ws_fill's) is called as ax(row, k, x, zx), zx the stage's Z box's
// elements at the same place.
// A consumer's wait for the ring's next stage to be full; returns its index and moves on.
template <int kStages>
__device__ __forceinline__ int ws_wait_full(uint64_t* full, WsPipe& pp) {
  const int cur = pp.stage;
  ws_bar_wait(&full[cur], pp.phase);
  ws_advance<kStages>(pp);
  return cur;
}

// A thread's two landed quads (rows ra0, ra1; k = 4 t ..) in fragment order: step s, element e.
__device__ __forceinline__ void ws_frag_order(float4 x0, float4 x1, float (&f)[kWsKs][4]) {
  const float v0[4] = {x0.x, x0.y, x0.z, x0.w}, v1[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
  for (int s = 0; s < kWsKs; ++s) {
    f[s][0] = v0[2 * s];
    f[s][1] = v1[2 * s];
    f[s][2] = v0[2 * s + 1];
    f[s][3] = v1[2 * s + 1];
  }
}
// Fragments rounded to TF32 for one pass (cvt.rna).
__device__ __forceinline__ void ws_round_one(const float (&f)[kWsKs][4], uint32_t (&h)[kWsKs][4]) {
#pragma unroll
  for (int s = 0; s < kWsKs; ++s)
#pragma unroll
    for (int e = 0; e < 4; ++e) h[s][e] = wg_tf32(f[s][e]);
}
template <class AX, class = void>
struct WsZoff {
  static constexpr int value = 0;
};
template <class AX>
struct WsZoff<AX, decltype(void(AX::kZoff))> {
  static constexpr int value = AX::kZoff;
};
template <int kStages, int kStage, class AX>
__device__ __forceinline__ int ws_land_a(const float* ring, uint64_t* full, WsPipe& pp, int ra0, int ra1, int t, int kb,
                                         AX& ax, float (&f)[kWsKs][4], float4& raw0, float4& raw1) {
  const int cur = ws_wait_full<kStages>(full, pp);
  const float* sA = ring + cur * kStage;
  const auto a4 = [&](const float* s, int row) { return *reinterpret_cast<const float4*>(s + ws_a_offset(row, 4 * t)); };
  float4 x0, x1;
  raw0 = a4(sA, ra0);
  raw1 = a4(sA, ra1);
  if constexpr (WsZoff<AX>::value > 0) {
    constexpr int kZ = WsZoff<AX>::value;
    x0 = ax(ra0, kb * kWsK + 4 * t, raw0, a4(sA + kZ, ra0));
    x1 = ax(ra1, kb * kWsK + 4 * t, raw1, a4(sA + kZ, ra1));
  } else {
    x0 = ax(ra0, kb * kWsK + 4 * t, raw0);
    x1 = ax(ra1, kb * kWsK + 4 * t, raw1);
  }
  ws_frag_order(x0, x1, f);
  return cur;
}

// k blocks per unrolled segment of a split product's k loop (ws_split_schedule).
SEZM_WG_HD constexpr int ws_seg_blocks(int K) { return K / kWsK <= 8 ? K / kWsK : K / kWsK / 2; }

// The commit-group schedule of a split product (ws_product, 3xTF32; ws_product_f16, 3xFP16):
// group g = kNQ j + q (block j of a segment, chunk q of kNQ = N / 64) forms its partial from zero
// in pb[g % 2]; while it runs, the previous group's partial is folded into the accumulators, and a
// block's stage is released once its last chunk's group completed. The k loop runs in segments
// of ws_seg_blocks(K) blocks, each unrolled whole and ending with nothing in flight: a partial in
// flight across a loop's back edge makes nvcc copy its registers (phi moves) and ptxas then
// serialises every wgmma (C7514); and one unrolled run of 12 blocks (K = N = 192) spilled.
// The product's parts: next(u, seg, j) lands block seg * kSeg + j's A fragments into set u (the
// block's parity: a block's fragments stay live until its last chunk is folded, during the next
// block's first chunk) and returns its stage; issue(d, u, st, q) forms chunk q's partial of that
// block (stage st) in d as one commit group; fold(d, q, u) adds a completed partial of chunk q of
// the block in set u to the accumulators; release(st) frees a stage.
template <int N, int K, class Next, class Issue, class Fold, class Release>
__device__ __forceinline__ void ws_split_schedule(float (&pb)[2][kWsChunk / 2], Next next, Issue issue, Fold fold,
                                                  Release release) {
  constexpr int kNQ = N / kWsChunk, kNkb = K / kWsK, kSeg = ws_seg_blocks(K);
  static_assert(N % kWsChunk == 0 && K % kWsK == 0 && kNkb % kSeg == 0 && kSeg <= 8, "whole chunks, blocks, segments");
#pragma unroll 1
  for (int seg = 0; seg < kNkb / kSeg; ++seg) {
    int st[2];  // the stages of the current and the previous block (by block parity)
#pragma unroll
    for (int j = 0; j < kSeg; ++j) {
      const int u = j & 1;
      st[u] = next(u, seg, j);
#pragma unroll
      for (int q = 0; q < kNQ; ++q) {
        const int g = kNQ * j + q;
        issue(pb[g & 1], u, st[u], q);
        if (g > 0) {  // group g - 1: chunk q - 1 of this block, or (q == 0) the previous block's last
          ws_wait1();
          fold(pb[(g - 1) & 1], (g - 1) % kNQ, q == 0 ? u ^ 1 : u);
          if (q == 0) release(st[u ^ 1]);
        }
      }
    }
    constexpr int uLast = (kSeg - 1) & 1;  // the segment's last group
    wg_wait0();
    fold(pb[(kNQ * kSeg - 1) & 1], kNQ - 1, uLast);
    release(st[uLast]);
  }
}

// ws_land_a for block kb = seg ws_seg_blocks(K) + j of a split product (ws_product,
// ws_product_f16), with kRes its landed A (before ax) added to the accumulators as the residual
// (j a compile-time index: the residual's quad indices must be constants, or acc would live in
// local memory). Returns the block's stage.
template <int kStages, int kStage, int K, bool kRes, class AX, int M>
__device__ __forceinline__ int ws_land_split(const float* ring, uint64_t* full, WsPipe& pp, int ra0, int ra1, int t,
                                             int seg, int j, AX& ax, float (&f)[kWsKs][4], float (&acc)[M], bool res) {
  constexpr int kNkb = K / kWsK, kSeg = ws_seg_blocks(K);
  float4 r0, r1;
  const int cur = ws_land_a<kStages, kStage>(ring, full, pp, ra0, ra1, t, seg * kSeg + j, ax, f, r0, r1);
  if constexpr (kRes) {
#pragma unroll
    for (int sg = 0; sg < kNkb / kSeg; ++sg)
      if (sg == seg && res) {
        ws_add_quad(acc, sg * kSeg + j, 0, r0);
        ws_add_quad(acc, sg * kSeg + j, 1, r1);
      }
  }
  return cur;
}

// kRes (K == N): the landed A (before ax) is also the residual, added to the accumulators as it
// lands: a thread's A quad of block kb (rows ra0, ra1, k = 16 kb + 4 t) is its output quad
// (kb, h), so C = A + A B (as A's value is added among the partials, its rounding differs from
// (A B) + A's in the last bits).
// `res` false: kRes's code without the residual (a kernel whose one product serves layers with and
// without it, stack_ws_chain.cu: one copy of the code, not two).
// kARows = 64 (ws_fill's): a stage of one warpgroup's 64 rows, ct then the warpgroup's own thread
// index (0..127) and the stage's empty barrier expecting that warpgroup's 4 warps (the probe's
// ping-pong schedule, bench/stack_probe_ws.cuh).
template <int N, int K, int kStages, int kStage, class AX = WsAsIs, bool kRes = false, int kARows = kWsRows>
__device__ __forceinline__ void ws_product(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                           float (&acc)[N / 2], AX ax = AX{}, bool res = true) {
  static_assert(!kRes || K == N, "the residual is A itself");
  constexpr int kAFloats = kARows * kWsK;
  constexpr int kBPlane = kWsKs * 8 * N;  // the lo plane's offset in a B block
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  const bool leader = (ct & 31) == 0;
  float pb[2][kWsChunk / 2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int i = 0; i < kWsChunk / 2; ++i) pb[b][i] = 0.0f;  // read by the asm only (scale-d 0)
  // TF32 hi / lo fragments of two consecutive blocks (u = block parity).
  uint32_t hi[2][kWsKs][4], lo[2][kWsKs][4];
  // Block kb = seg kSeg + j into set u (ws_land_split): split this thread's A fragments into
  // hi / lo[u]; returns its stage.
  auto next_block = [&](int u, int seg, int j) {
    float f[kWsKs][4];
    const int cur = ws_land_split<kStages, kStage, K, kRes>(ring, full, pp, ra0, ra1, t, seg, j, ax, f, acc, res);
#pragma unroll
    for (int s = 0; s < kWsKs; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        hi[u][s][e] = wg_tf32(f[s][e]);
        lo[u][s][e] = wg_tf32_lo(f[s][e] - __uint_as_float(hi[u][s][e]));
      }
    return cur;
  };
  // The 3xTF32 partial of chunk q of the block in set u (stage st) from zero into d: one commit group.
  auto issue = [&](float (&d)[kWsChunk / 2], int u, int st, int q) {
    const float* sB = ring + st * kStage + kAFloats + ws_b_chunk_offset(q);
    wg_pin(d);
    wg_fence();
#pragma unroll
    for (int s = 0; s < kWsKs; ++s) {
      const uint64_t dh = wg_desc(sB + s * 8 * N), dl = wg_desc(sB + kBPlane + s * 8 * N);
      Wgmma<kWsChunk>::mma(d, lo[u][s], dh, s != 0);
      Wgmma<kWsChunk>::mma(d, hi[u][s], dl, 1);
      Wgmma<kWsChunk>::mma(d, hi[u][s], dh, 1);
    }
    wg_commit();
  };
  // A completed partial d of chunk q added to the accumulators; the group just issued keeps the
  // tensor cores busy meanwhile.
  auto fold = [&](float (&d)[kWsChunk / 2], int q, int) {
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
#pragma unroll
  for (int j = 0; j < N / 2; ++j) acc[j] = 0.0f;
  ws_split_schedule<N, K>(pb, next_block, issue, fold, release);
}

// The one pass's k loop (ws_product_one's schedule, below), block kb's TF32 fragments from
// land(h, kb), which waits for its stage and returns it; B's block kBOff floats into the stage.
template <int N, int K, int kStages, int kStage, int kBOff, class Land>
__device__ __forceinline__ void ws_product_one_loop(const float* ring, uint64_t* empty, int ct, float (&acc)[N / 2],
                                                    Land land) {
  constexpr int kNkb = K / kWsK;
  static_assert(K % kWsK == 0 && N % 16 == 0 && N <= 256 && kNkb <= 12, "whole blocks, a wgmma width, a short unroll");
  const bool leader = (ct & 31) == 0;
  uint32_t a[2][kWsKs][4];  // TF32 fragments of two consecutive blocks (block parity)
  auto release = [&](int st) {  // every warp's products that read stage st have completed
    __syncwarp();
    if (leader) ws_bar_arrive(&empty[st]);
  };
#pragma unroll
  for (int j = 0; j < N / 2; ++j) acc[j] = 0.0f;
  int st[2];  // the stages of the current and the previous block (by block parity)
#pragma unroll
  for (int j = 0; j < kNkb; ++j) {
    const int u = j & 1;
    st[u] = land(a[u], j);
    const float* sB = ring + st[u] * kStage + kBOff;
    // The registers the products read, written before the fence (the compiler may not sink the
    // writes past it): the fragments just rounded and, first, the zeroed accumulators.
    if (j == 0) wg_pin(acc);
#pragma unroll
    for (int s = 0; s < kWsKs; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[u][s][e]));
    wg_fence();
#pragma unroll
    for (int s = 0; s < kWsKs; ++s) Wgmma<N>::mma(acc, a[u][s], wg_desc(sB + s * 8 * N), 1);
    wg_commit();
    if (j > 0) {
      ws_wait1();  // the previous block's group completed: its stage and fragments are free
      release(st[u ^ 1]);
    }
  }
  wg_wait0();
  wg_pin(acc);
  release(st[(kNkb - 1) & 1]);
}

// ws_product in one TF32 pass (`precision tf32`, Dims::tf32_one_pass; wg_tile's kM = 1 arithmetic:
// A rounded to TF32 by cvt.rna in registers, B the image's hi plane as ws_fill<.., true> stages it,
// every product accumulated by the tensor cores into acc over all of K, no partials). Per block two
// m64nNk8 products of the full width (both k steps), one commit group; block j's group stays in
// flight while block j + 1's fragments are loaded and its group issued, and block j's stage is
// released once wait_group 1 after that issue says it completed. Accumulating groups may be in
// flight together (their accumulators are chained in order); a group's A fragments are kept until
// then (two sets, by block parity). The k loop is unrolled whole (<= 12 blocks; ws_product's
// segments are for its partials' registers), so nothing is in flight across a back edge.
// Arguments as ws_product's; ends with nothing in flight.
// kept (K == N, non-null): this thread's landed A quads (before ax) handed back, kept[2 kb + h]
// the quad of block kb and row ws_row(ct, h), i.e. its output quad (kb, h), in residual_load's
// layout (stack_ws_gated.cuh): the residual of a layer whose A is its input, which the epilogue
// then adds from registers (ws_multiply's kRes, the gated forward's epilogues) instead of reading it
// back from L2.
template <int N, int K, int kStages, int kStage, class AX>
__device__ __forceinline__ void ws_product_one(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                               float (&acc)[N / 2], AX ax, float4* kept = nullptr) {
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  // As ws_product's next_block, rounding only.
  auto next_block = [&](uint32_t (&h)[kWsKs][4], int kb) {
    float f[kWsKs][4];
    float4 r0, r1;
    const int cur = ws_land_a<kStages, kStage>(ring, full, pp, ra0, ra1, t, kb, ax, f, r0, r1);
    if (kept != nullptr) {
      kept[2 * kb] = r0;
      kept[2 * kb + 1] = r1;
    }
    ws_round_one(f, h);
    return cur;
  };
  ws_product_one_loop<N, K, kStages, kStage, kWsRows * kWsK>(ring, empty, ct, acc, next_block);
}

}  // namespace
}  // namespace sezm::cuda
