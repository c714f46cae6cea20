#pragma once
// sezm-stack-probe part 1, variants 106-108: the warp-specialised persistent tile (cuda/wgmma_ws.cuh,
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
// Probe-only launcher; included by bench/stack_probe.cu only (after stack.cuh and stack_tile.cuh).
#include <algorithm>
#include <cstdint>
#include <string>

#include "wgmma_ws_host.cuh"

namespace sezm::cuda {
namespace {

struct WsProbeArgs {
  int rows;
  const float* Bimg;  // wgmma_b_image(B, K, N, N, kWsKs)
  float* C;           // rows x N, row-major
  const float* R;     // gated epilogue: the residual, rows x N
  float* Z;           // gated epilogue: z kept, rows x N
};

// The epilogue of a thread's rows r0, r1 (rows >= p.rows are padding): kGated 0 stores C = acc;
// 1: residuals loaded first (in flight during the rest, as the engine's residual_load), z stored,
// C = z sigmoid(z) + residual.
template <int N, bool kGated>
__device__ __forceinline__ void probe_epilogue(const WsProbeArgs& p, int r0, int r1, const float (&acc)[N / 2]) {
  float4 res[N / 8];
  if constexpr (kGated) {
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = h ? r1 : r0;
        res[2 * q4 + h] = r < p.rows ? *reinterpret_cast<const float4*>(p.R + static_cast<size_t>(r) * N + wg_quad_col(q4))
                                     : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
  }
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r >= p.rows) continue;
      const size_t o = static_cast<size_t>(r) * N + wg_quad_col(q4);
      float4 v = wg_quad(acc, q4, h);
      if constexpr (kGated) {
        *reinterpret_cast<float4*>(p.Z + o) = v;
        const float4 u = res[2 * q4 + h];
        v = make_float4(fmaf(v.x, sigmoidf_(v.x), u.x), fmaf(v.y, sigmoidf_(v.y), u.y), fmaf(v.z, sigmoidf_(v.z), u.z),
                        fmaf(v.w, sigmoidf_(v.w), u.w));
      }
      *reinterpret_cast<float4*>(p.C + o) = v;
    }
}

// 106: the cooperative schedule (ws_gemm, the engine's).
template <int N, bool kGated>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_probe_k(const __grid_constant__ WsProbeArgs p,
                                                              const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N>(
      (p.rows + kWsRows - 1) / kWsRows, &tmA, [&](int i) { return WsItem{0, i * kWsRows, 0, p.Bimg}; },
      [&](int i, float (&acc)[N / 2], int ct) {
        probe_epilogue<N, kGated>(p, i * kWsRows + ws_row(ct, 0), i * kWsRows + ws_row(ct, 1), acc);
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
template <int N, bool kGated, bool kOrder>
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
    probe_epilogue<N, kGated>(p, i * kPpRows + ws_row(lt, 0), i * kPpRows + ws_row(lt, 1), acc);
  }
}

// Variant 106 (+ gated: 106 g), 107, 108 at K = N = 128 or 192; returns "[smem KiB, CTAs/SM]" for
// the probe's line. Bimg2: wgmma_b_image(B, K, N, N, 2). A: rows x K of row stride lda (16-byte
// aligned rows).
template <int N, bool kGated>
std::string launch_wgws_probe(int variant, const WsProbeArgs& args, int K, const float* A, int lda, cudaStream_t s) {
  if (K != N) throw Error("the warp-specialised tile probe needs K = N");
  const bool pp = variant != 106;
  const int bytes = pp ? pp_smem_bytes(N) : ws_smem_bytes(N);
  const auto k = variant == 106 ? wgws_probe_k<N, kGated>
                 : variant == 107 ? wgpp_probe_k<N, kGated, false>
                                  : wgpp_probe_k<N, kGated, true>;
  struct Prep {
    const void* fn;
    int sms, per_sm;
  };
  static std::vector<Prep> prepared;  // once per kernel: keeps the attribute calls out of the timed launches
  auto it = std::find_if(prepared.begin(), prepared.end(), [&](const Prep& q) { return q.fn == (const void*)k; });
  if (it == prepared.end()) {
    Prep q{reinterpret_cast<const void*>(k), ws_prepare(reinterpret_cast<const void*>(k), bytes, "wgws_probe_k"), 0};
    SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&q.per_sm, k, kWsThreads, bytes));
    prepared.push_back(q);
    it = prepared.end() - 1;
  }
  // The tensor maps (128- and 64-row boxes), encoded again only when the operand changes (their
  // encoding stays out of the timing).
  static CUtensorMap tm[2]{};
  static const float* tm_a = nullptr;
  static int tm_rows = 0, tm_lda = 0;
  const int rows = args.rows;
  if (tm_a != A || tm_rows != rows || tm_lda != lda) {
    const uint64_t dims[3] = {static_cast<uint64_t>(K), static_cast<uint64_t>(rows), 1};
    const uint64_t strides[2] = {static_cast<uint64_t>(lda) * sizeof(float),
                                 static_cast<uint64_t>(lda) * sizeof(float) * static_cast<uint64_t>(rows)};
    tm[0] = ws_tensor_map(A, dims, strides);
    tm[1] = ws_tensor_map(A, dims, strides, kPpRows);
    tm_a = A;
    tm_rows = rows;
    tm_lda = lda;
  }
  const int grid = std::min(div_up(rows, kWsRows), it->sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, tm[pp ? 1 : 0]);
  SEZM_LAUNCH("wgws_probe");
  return "  [" + std::to_string(bytes / 1024) + " KiB smem, " + std::to_string(it->per_sm) + " CTA/SM, persistent]";
}

std::string launch_wgws_probe_variant(int variant, bool gated, const WsProbeArgs& args, int K, int N, const float* A,
                                      int lda, cudaStream_t s) {
  if (variant < 106 || variant > 108) throw Error("the warp-specialised tile probe's variants are 106 .. 108");
  if (N == 192) return gated ? launch_wgws_probe<192, true>(variant, args, K, A, lda, s)
                             : launch_wgws_probe<192, false>(variant, args, K, A, lda, s);
  if (N == 128) return gated ? launch_wgws_probe<128, true>(variant, args, K, A, lda, s)
                             : launch_wgws_probe<128, false>(variant, args, K, A, lda, s);
  throw Error("the warp-specialised tile probe takes N = 128 or 192");
}

}  // namespace
}  // namespace sezm::cuda
