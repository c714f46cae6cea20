#pragma once
// sezm-stack-probe part 1, variants 106-110: the warp-specialised persistent tile (cuda/wgmma_ws.cuh,
// the code the engine's stack layers run) on the probe's product, C (rows x N) = A (rows x K) B
// (K x N), K = N = 128 or 192, A from HBM, under two schedules and two epilogues:
//  106, cooperative (the engine's): both consumer warpgroups on one 128-row item, one ring;
//  107, ping-pong: each consumer warpgroup its own 64-row items and its own ring (half the stages),
//       filled by its own producer warp (warps 0 and 1), so that one warpgroup's epilogue can run
//       under the other's products; B's blocks travel twice as often (once per 64 rows);
//  108, 107 with the products ordered (CUTLASS's ping-pong): a warpgroup starts an item's products
//       only after the other finished its previous item's (named barriers 1 and 2), so the tensor
//       cores serve one warpgroup at a time and the epilogues alternate with them.
// Epilogues: "store" (C = A B) and "gated" (the stack's gated forward in kind: per element a
// residual read ahead, z = (A B) kept, C = z sigmoid(z) + residual: one read and two writes
// per element). Question it answers (docs/performance.md, 2026-12-03, ncu of the gated forward:
// epilogues ~37 % of the consumers' samples, the tensor cores idle meanwhile): does the ping-pong
// schedule hide them at the price of the doubled B traffic? (Variants 104, per-row bulk copies of
// A, and an older ping-pong 105 without TMA measured 44-64 useful TFLOP/s, 2026-12-02.)
// The schedules do the same arithmetic per element, so their C agree to the bit.
//  109, three identity layers chained in one launch with an item's rows kept on chip between
//       layers, against three 106 launches through HBM (below, at wgchain_probe_k);
//  110, the gated kind with the residual read from A (an L2 hit, as in the engine) and z kept by
//       the consumers' stores or by tensor-map bulk stores from shared memory (wgtma_probe_k,
//       stack_probe_ws110.cuh).
// Probe-only launcher; included by bench/stack_probe.cu only (after stack.cuh and stack_tile.cuh).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "stack_ws_gated.cuh"  // the per-thread stash slots (set_slots, slot_quad)
#include "wgmma_ws_host.cuh"

namespace sezm::cuda {
namespace {

struct WsProbeArgs {
  int rows;
  const float* Bimg;  // wgmma_b_image(B, K, N, N, kWsKs)
  float* C;           // rows x N, row-major
  const float* R;     // gated and residual epilogues: the residual, rows x N (row stride ldr)
  float* Z;           // gated epilogue: z kept, rows x N
  int ldr = 0;        // R's row stride (0: N)
};

// Epilogue kinds: a store, a gated layer's kind, an identity layer's (C = A B + R, R the layer's
// input: the chained layers' baseline through HBM, 109's twin).
constexpr int kEpiStore = 0, kEpiGated = 1, kEpiResidual = 2;

// The epilogue of a thread's rows r0, r1 (rows >= p.rows are padding), in two steps:
// probe_residual_load, the residual quads (zero past p.rows), loaded ahead of the rest so that they
// are in flight meanwhile (as the engine's residual_load); probe_epilogue_store, then C and z as kEpi
// says: kEpiStore C = acc; kEpiGated z = acc stored (kStoreZ) and C = z sigmoid(z) + residual;
// kEpiResidual C = acc + residual (IEEE, after the product).
// kLoad: how the residual is loaded: kLoadPlain (ld.global, as the engine), kLoadNoL1
// (ld.global.nc.L1::no_allocate) or kLoadCg (ld.global.cg, cached in L2 only).
constexpr int kLoadPlain = 0, kLoadNoL1 = 1, kLoadCg = 2;
template <int kLoad>
__device__ __forceinline__ float4 probe_load4(const float* a) {
  float4 v;
  if constexpr (kLoad == kLoadNoL1)
    asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(a));
  else if constexpr (kLoad == kLoadCg)
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(a));
  else
    v = *reinterpret_cast<const float4*>(a);
  return v;
}
template <int N, int kLoad = kLoadPlain>
__device__ __forceinline__ void probe_residual_load(const WsProbeArgs& p, int r0, int r1, float4 (&res)[N / 8]) {
  const size_t ldr = p.ldr > 0 ? p.ldr : N;
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      res[2 * q4 + h] = r < p.rows ? probe_load4<kLoad>(p.R + static_cast<size_t>(r) * ldr + wg_quad_col(q4))
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}
template <int N, int kEpi, bool kStoreZ = true>
__device__ __forceinline__ void probe_epilogue_store(const WsProbeArgs& p, int r0, int r1, const float (&acc)[N / 2],
                                                     const float4 (&res)[N / 8]) {
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r >= p.rows) continue;
      const size_t o = static_cast<size_t>(r) * N + wg_quad_col(q4);
      float4 v = wg_quad(acc, q4, h);
      if constexpr (kEpi == kEpiGated) {
        if constexpr (kStoreZ) *reinterpret_cast<float4*>(p.Z + o) = v;
        const float4 u = res[2 * q4 + h];
        v = make_float4(fmaf(v.x, sigmoidf_(v.x), u.x), fmaf(v.y, sigmoidf_(v.y), u.y), fmaf(v.z, sigmoidf_(v.z), u.z),
                        fmaf(v.w, sigmoidf_(v.w), u.w));
      } else if constexpr (kEpi == kEpiResidual) {
        const float4 u = res[2 * q4 + h];
        v = make_float4(v.x + u.x, v.y + u.y, v.z + u.z, v.w + u.w);
      }
      *reinterpret_cast<float4*>(p.C + o) = v;
    }
}
template <int N, int kEpi>
__device__ __forceinline__ void probe_epilogue(const WsProbeArgs& p, int r0, int r1, const float (&acc)[N / 2]) {
  float4 res[N / 8];
  if constexpr (kEpi != kEpiStore) probe_residual_load<N>(p, r0, r1, res);
  probe_epilogue_store<N, kEpi>(p, r0, r1, acc, res);
}

// The producer warpgroup's part of the probe's persistent kernels (as ws_gemm's): warp 0 runs
// fill(), the others leave. True for the producer warpgroup's threads, which then return.
template <class Fill>
__device__ __forceinline__ bool probe_producer(Fill fill) {
  if (threadIdx.x >= 128) return false;
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x < 32) fill();
  return true;
}

// 106: the cooperative schedule (ws_gemm, the engine's).
template <int N, int kEpi>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_probe_k(const __grid_constant__ WsProbeArgs p,
                                                              const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N>(
      (p.rows + kWsRows - 1) / kWsRows, &tmA, [&](int i) { return WsItem{0, i * kWsRows, 0, p.Bimg}; },
      [&](int i, float (&acc)[N / 2], int ct) {
        probe_epilogue<N, kEpi>(p, i * kWsRows + ws_row(ct, 0), i * kWsRows + ws_row(ct, 1), acc);
      });
}

// 107 / 108: ping-pong. Rows per item, floats per stage and stages per warpgroup's ring (two rings
// fill the ~224 KiB the cooperative ring uses).
constexpr int kPpRows = 64;
SEZM_WG_HD constexpr int pp_stage_floats(int N) { return kPpRows * kWsK + ws_b_floats(N, false); }
SEZM_WG_HD constexpr int pp_stages(int N) { return N > 128 ? 4 : 5; }
SEZM_WG_HD constexpr int pp_smem_bytes(int N) { return 2 * pp_stages(N) * pp_stage_floats(N) * 4; }

__device__ __forceinline__ void pp_bar_sync(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void pp_bar_arrive(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }

// A CTA's items are blockIdx.x + j gridDim.x (64 rows each); warpgroup (and producer warp) w takes
// those of j % 2 == w. kOrder: the products of item j start after those of item j - 1 completed
// (barrier 1 + w: warpgroup w waits, the other arrives once its products are done).
template <int N, int kEpi, bool kOrder>
__global__ void __launch_bounds__(kWsThreads, 1) wgpp_probe_k(const __grid_constant__ WsProbeArgs p,
                                                              const __grid_constant__ CUtensorMap tmA) {
  constexpr int kStages = pp_stages(N), kStage = pp_stage_floats(N);
  extern __shared__ __align__(128) float pp_dsmem[];
  __shared__ uint64_t full[2][kStages], empty[2][kStages];
  if (threadIdx.x == 0) {
    for (int w = 0; w < 2; ++w)
      for (int i = 0; i < kStages; ++i) {
        ws_bar_init(&full[w][i], 1);
        ws_bar_init(&empty[w][i], 4);  // one arrival per warp of the ring's warpgroup
      }
    ws_bar_init_fence();
  }
  __syncthreads();
  const int n_items = (p.rows + kPpRows - 1) / kPpRows;
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_regs_dec<kWsProducerRegs>();
    const int w = threadIdx.x >> 5;
    if (w >= 2) return;
    float* ring = pp_dsmem + w * kStages * kStage;
    for (int i = blockIdx.x + w * ws_grid(); i < n_items; i += 2 * ws_grid())
      ws_fill<N, N, kStages, kStage, false, true, 0, true, kPpRows>(ring, full[w], empty[w], pp, &tmA,
                                                                   WsItem{0, i * kPpRows, 0, p.Bimg});
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128, w = ct >> 7, lt = ct & 127;
  const float* ring = pp_dsmem + w * kStages * kStage;
  float acc[N / 2];
  for (int j = w, i = blockIdx.x + w * gridDim.x; i < n_items; j += 2, i += 2 * gridDim.x) {
    if (kOrder && j > 0) pp_bar_sync(1 + w);
    ws_product<N, N, kStages, kStage, WsAsIs, false, kPpRows>(ring, full[w], empty[w], pp, lt, acc);
    if (kOrder && i + static_cast<int>(gridDim.x) < n_items) pp_bar_arrive(2 - w);  // item j + 1 may start
    probe_epilogue<N, kEpi>(p, i * kPpRows + ws_row(lt, 0), i * kPpRows + ws_row(lt, 1), acc);
  }
}

// 109: L identity layers (X' = X + X B, the same B each layer) chained in one persistent launch
// with the activations on chip: an item's 128 rows enter once from HBM (each consumer thread its
// own quads, in the accumulators' places), stay in shared memory between layers as the gated
// kernels' per-thread stash (thread-major 16-byte slots, conflict-free; stack_ws_gated.cuh), and
// leave once. A thread's A quad of k block kb (rows ws_row(ct, h), k = 16 kb + 4 t) is its own
// output quad (kb, h) of the layer before (ws_product's kRes note), so the stash needs no barrier:
// each thread reads back only what it wrote. The ring holds B's blocks alone (kARows = 0: A never
// streams; ws_land_a's stage read is ignored by ChainAX). The residual is added after the product
// in IEEE fp32, as kEpiResidual does, so L launches of 106 with that epilogue through HBM give the
// same bits. Question: what the stack's forward would gain if a chunk pass kept an item's rows on
// chip across its layers (docs/performance.md, 2026-12-04: the chain's intermediate rows make
// ~half of its DRAM traffic).
template <int N>
SEZM_WG_HD constexpr int chain_stages() { return N > 128 ? 5 : 10; }
template <int N>
SEZM_WG_HD constexpr int chain_smem_bytes() { return (256 * (N / 2) + chain_stages<N>() * ws_b_floats(N, false)) * 4; }

struct WsChainProbeArgs {
  int rows, L;
  const float* A;  // rows x N of row stride lda: the first layer's input
  int lda;
  const float* Bimg;
  float* C;  // rows x N: the last layer's output
};

struct ChainAX {  // A's quad from this thread's stash (its previous output), not from the stage
  const float4* stash4;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4) const { return slot_quad(stash4, k & ~15, row != ra0); }
};

template <int N>
__global__ void __launch_bounds__(kWsThreads, 1) wgchain_probe_k(const __grid_constant__ WsChainProbeArgs p,
                                                                 const __grid_constant__ CUtensorMap tmA) {
  constexpr int kStages = chain_stages<N>(), kStage = ws_b_floats(N, false);
  extern __shared__ __align__(128) float ch_dsmem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  float* const ring = ch_dsmem + 256 * (N / 2);
  ws_init(full, empty);
  const int n_items = (p.rows + kWsRows - 1) / kWsRows;
  WsPipe pp;
  if (probe_producer([&] {
        for (int i = blockIdx.x; i < n_items; i += ws_grid())
#pragma unroll 1
          for (int l = 0; l < p.L; ++l)
            ws_fill<N, N, kStages, kStage, false, false, 0, true, 0>(ring, full, empty, pp, &tmA, WsItem{0, 0, 0, p.Bimg});
      }))
    return;
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float4* const stash4 = reinterpret_cast<float4*>(ch_dsmem) + ct;
  const ChainAX ax{stash4, ws_row(ct, 0)};
  float acc[N / 2];
  for (int i = blockIdx.x; i < n_items; i += gridDim.x) {
    const int r0 = i * kWsRows + ws_row(ct, 0), r1 = i * kWsRows + ws_row(ct, 1);
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = h ? r1 : r0;
        const float4 x = r < p.rows ? *reinterpret_cast<const float4*>(p.A + static_cast<size_t>(r) * p.lda + wg_quad_col(q4))
                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        acc[8 * q4 + 2 * h] = x.x;
        acc[8 * q4 + 2 * h + 1] = x.y;
        acc[8 * q4 + 4 + 2 * h] = x.z;
        acc[8 * q4 + 5 + 2 * h] = x.w;
      }
    set_slots<N / 2>(stash4, acc);
#pragma unroll 1
    for (int l = 0; l < p.L; ++l) {
      ws_product<N, N, kStages, kStage, ChainAX, false, 0>(ring, full, empty, pp, ct, acc, ax);
      const bool last = l + 1 == p.L;
#pragma unroll
      for (int J = 0; J < N / 8; ++J) {  // X' = (X B) + X, kept or (last) stored below
        const float4 x = stash4[256 * J];
        acc[4 * J] += x.x;
        acc[4 * J + 1] += x.y;
        acc[4 * J + 2] += x.z;
        acc[4 * J + 3] += x.w;
        if (!last) stash4[256 * J] = make_float4(acc[4 * J], acc[4 * J + 1], acc[4 * J + 2], acc[4 * J + 3]);
      }
    }
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = h ? r1 : r0;
        if (r < p.rows) *reinterpret_cast<float4*>(p.C + static_cast<size_t>(r) * N + wg_quad_col(q4)) = wg_quad(acc, q4, h);
      }
  }
}

// A's tensor map for (A, rows, lda) and box rows, encoded once per distinct operand (kept out of
// the timing).
inline const CUtensorMap& probe_map(const float* A, int rows, int K, int lda, uint32_t box_rows) {
  struct Entry {
    const float* a;
    int rows, K, lda;
    uint32_t box;
    CUtensorMap tm;
  };
  // (K too: a freed operand's address comes back for the next shape's.)
  static std::vector<Entry> cache;
  for (const Entry& e : cache)
    if (e.a == A && e.rows == rows && e.K == K && e.lda == lda && e.box == box_rows) return e.tm;
  const uint64_t dims[3] = {static_cast<uint64_t>(K), static_cast<uint64_t>(rows), 1};
  const uint64_t strides[2] = {static_cast<uint64_t>(lda) * sizeof(float),
                               static_cast<uint64_t>(lda) * sizeof(float) * static_cast<uint64_t>(rows)};
  cache.push_back(Entry{A, rows, K, lda, box_rows, ws_tensor_map(A, dims, strides, box_rows)});
  return cache.back().tm;
}

// The kernel's persistent grid and occupancy, once per kernel and shared-memory size.
inline std::pair<int, int> probe_prepare(const void* fn, int bytes) {
  struct Prep {
    const void* fn;
    int bytes, sms, per_sm;
  };
  static std::vector<Prep> prepared;
  for (const Prep& q : prepared)
    if (q.fn == fn && q.bytes == bytes) return {q.sms, q.per_sm};
  Prep q{fn, bytes, ws_prepare(fn, bytes, "wgws_probe_k"), 0};
  SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&q.per_sm, fn, kWsThreads, bytes));
  prepared.push_back(q);
  return {q.sms, q.per_sm};
}

inline std::string probe_info(int bytes, int per_sm) {
  return "  [" + std::to_string(bytes / 1024) + " KiB smem, " + std::to_string(per_sm) + " CTA/SM, persistent]";
}

// Variant 109 at K = N = 128 or 192 (A: rows x N of row stride lda).
template <int N>
std::string launch_wgchain_probe(const WsChainProbeArgs& args, cudaStream_t s) {
  const int bytes = chain_smem_bytes<N>();
  const auto k = wgchain_probe_k<N>;
  const auto [sms, per_sm] = probe_prepare(reinterpret_cast<const void*>(k), bytes);
  const int grid = std::min(div_up(args.rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, probe_map(args.A, args.rows, N, args.lda, kWsRows));
  SEZM_LAUNCH("wgchain_probe");
  return probe_info(bytes, per_sm);
}
std::string launch_wgchain_probe_variant(int N, const WsChainProbeArgs& args, cudaStream_t s) {
  if (N == 192) return launch_wgchain_probe<192>(args, s);
  if (N == 128) return launch_wgchain_probe<128>(args, s);
  throw Error("the chained-layers probe takes N = 128 or 192");
}

// Variants 106 (epilogue kEpi*), 107, 108 (store or gated) at K = N = 128 or 192; returns "[smem
// KiB, CTAs/SM]" for the probe's line. args.Bimg: wgmma_b_image(B, K, N, N, 2). A: rows x K of row
// stride lda (16-byte aligned rows).
template <int N, int kEpi>
std::string launch_wgws_probe(int variant, const WsProbeArgs& args, int K, const float* A, int lda, cudaStream_t s) {
  if (K != N) throw Error("the warp-specialised tile probe needs K = N");
  const bool pp = variant != 106;
  const int bytes = pp ? pp_smem_bytes(N) : ws_smem_bytes(N);
  void (*k)(const WsProbeArgs, const CUtensorMap) = wgws_probe_k<N, kEpi>;
  if constexpr (kEpi != kEpiResidual) {
    if (variant == 107) k = wgpp_probe_k<N, kEpi, false>;
    if (variant == 108) k = wgpp_probe_k<N, kEpi, true>;
  } else if (pp) {
    throw Error("the ping-pong probes take the store and gated epilogues");
  }
  const auto [sms, per_sm] = probe_prepare(reinterpret_cast<const void*>(k), bytes);
  const int grid = std::min(div_up(args.rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, probe_map(A, args.rows, K, lda, pp ? kPpRows : kWsRows));
  SEZM_LAUNCH("wgws_probe");
  return probe_info(bytes, per_sm);
}

std::string launch_wgws_probe_variant(int variant, int epi, const WsProbeArgs& args, int K, int N, const float* A,
                                      int lda, cudaStream_t s) {
  if (variant < 106 || variant > 108) throw Error("the warp-specialised tile probe's variants are 106 .. 108");
  if (N != 192 && N != 128) throw Error("the warp-specialised tile probe takes N = 128 or 192");
  const bool wide = N == 192;
  switch (epi) {
    case kEpiStore:
      return wide ? launch_wgws_probe<192, kEpiStore>(variant, args, K, A, lda, s)
                  : launch_wgws_probe<128, kEpiStore>(variant, args, K, A, lda, s);
    case kEpiGated:
      return wide ? launch_wgws_probe<192, kEpiGated>(variant, args, K, A, lda, s)
                  : launch_wgws_probe<128, kEpiGated>(variant, args, K, A, lda, s);
    default:
      return wide ? launch_wgws_probe<192, kEpiResidual>(variant, args, K, A, lda, s)
                  : launch_wgws_probe<128, kEpiResidual>(variant, args, K, A, lda, s);
  }
}

}  // namespace
}  // namespace sezm::cuda
