#pragma once
// sezm-stack-probe part 1, variant 106: the warp-specialised persistent tile (cuda/wgmma_ws.cuh,
// the code the engine runs under SEZM_CUDA_STACK_WS=1) on the probe's product, C (rows x N) = A
// (rows x K) B (K x N), K = N = 128 or 192, A from HBM. (Variants 104, per-row bulk copies of A,
// and 105, ping-pong consumer warpgroups, measured 44-64 against 106's 88-108 useful TFLOP/s on
// the H200, docs/performance.md 2026-12-02, and were dropped when the tile moved to cuda/.)
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
};

template <int N>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_probe_k(const __grid_constant__ WsProbeArgs p,
                                                              const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N>(
      (p.rows + kWsRows - 1) / kWsRows, &tmA, [&](int i) { return WsItem{0, i * kWsRows, 0, p.Bimg}; },
      [&](int i, float (&acc)[N / 2], int ct) {
        ws_for_each_quad(acc, ct, [&](int row, int col, float4 v) {
          const int r = i * kWsRows + row;
          if (r < p.rows) *reinterpret_cast<float4*>(p.C + static_cast<size_t>(r) * N + col) = v;
        });
      });
}

// Variant 106 at K = N = 128 or 192; returns "[smem KiB, CTAs/SM]" for the probe's line. Bimg2:
// wgmma_b_image(B, K, N, N, 2). A: rows x K of row stride lda (16-byte aligned rows).
template <int N>
std::string launch_wgws_probe(int rows, int K, const float* A, int lda, const float* Bimg2, float* C, cudaStream_t s) {
  const int bytes = ws_smem_bytes(N);
  if (K != N) throw Error("the warp-specialised tile probe needs K = N");
  auto k = wgws_probe_k<N>;
  static int sms = 0, per_sm = 0;  // once: keeps the attribute calls out of the timed launches
  if (sms == 0) {
    sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "wgws_probe_k");
    SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kWsThreads, bytes));
  }
  // The tensor map, encoded again only when the operand changes (its encoding stays out of the timing).
  static CUtensorMap tm{};
  static const float* tm_a = nullptr;
  static int tm_rows = 0, tm_lda = 0;
  if (tm_a != A || tm_rows != rows || tm_lda != lda) {
    const uint64_t dims[3] = {static_cast<uint64_t>(K), static_cast<uint64_t>(rows), 1};
    const uint64_t strides[2] = {static_cast<uint64_t>(lda) * sizeof(float),
                                 static_cast<uint64_t>(lda) * sizeof(float) * static_cast<uint64_t>(rows)};
    tm = ws_tensor_map(A, dims, strides);
    tm_a = A;
    tm_rows = rows;
    tm_lda = lda;
  }
  const int grid = std::min(div_up(rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(WsProbeArgs{rows, Bimg2, C}, tm);
  SEZM_LAUNCH("wgws_probe");
  return "  [" + std::to_string(bytes / 1024) + " KiB smem, " + std::to_string(per_sm) + " CTA/SM, persistent]";
}

std::string launch_wgws_probe_variant(int rows, int K, int N, const float* A, int lda, const float* Bimg2, float* C,
                                      cudaStream_t s) {
  if (N == 192) return launch_wgws_probe<192>(rows, K, A, lda, Bimg2, C, s);
  if (N == 128) return launch_wgws_probe<128>(rows, K, A, lda, Bimg2, C, s);
  throw Error("the warp-specialised tile probe takes N = 128 or 192");
}

}  // namespace
}  // namespace sezm::cuda
