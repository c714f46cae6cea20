#pragma once
// sezm-stack-probe part 1, variants 111 / 112 (EXPERIMENT, branch exp-f16): the warp-specialised tile
// on the FP16 tensor cores (cuda/wgmma_ws_f16.cuh), each A row scaled by a power of two, store
// epilogue: 111 the 3x split against 106 (3xTF32, the same ring and schedule), 112 one pass against
// 106 in one TF32 pass: time, useful TFLOP/s and the
// error of C against the exact product (double) of the first rows, beside 106's. The question it
// answers: does the FP16 tile (half the tensor-core work of 3xTF32 per useful flop) run faster at
// the stack's shapes with 3xTF32's accuracy (cuda/wgmma_f16_layout.h)?
// The kernel and its launcher; the run: stack_probe_f16_runs.cuh. Included by bench/stack_probe.cu only
// (after stack_probe_ws.cuh).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "wgmma_ws_f16.cuh"

namespace sezm::cuda {
namespace {

struct WsF16ProbeArgs {
  int rows;
  const float* Bimg;  // wgmma_b_image_f16(B, K, N, N, 1 / binv), as floats
  float* C;           // rows x N, row-major
  const float* rs;    // the rows' scales (powers of two)
  float binv;         // 1 / the image's scale
};

template <int N, bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_f16_probe_k(const __grid_constant__ WsF16ProbeArgs p,
                                                                  const __grid_constant__ CUtensorMap tmA) {
  ws_gemm_f16<N, kOne>(
      (p.rows + kWsRows - 1) / kWsRows, &tmA, [&](int i) { return WsItem{0, i * kWsRows, 0, p.Bimg}; },
      [&](int i, float (&acc)[N / 2], int ct) {
        const WsProbeArgs q{p.rows, nullptr, p.C, nullptr, nullptr};
        probe_epilogue<N, kEpiStore>(q, i * kWsRows + ws_row(ct, 0), i * kWsRows + ws_row(ct, 1), acc);
      },
      p.rs, p.rows, p.binv);
}

// 111 (3x split) or 112 (one pass, kOne).
template <int N, bool kOne>
std::string launch_wgws_f16_probe(const WsF16ProbeArgs& args, const float* A, int lda, cudaStream_t s) {
  const int bytes = ws_f16_smem_bytes(N, kOne);
  const auto k = wgws_f16_probe_k<N, kOne>;
  const auto [sms, per_sm] = probe_prepare(reinterpret_cast<const void*>(k), bytes);
  const int grid = std::min(div_up(args.rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, probe_map(A, args.rows, N, lda, kWsRows));
  SEZM_LAUNCH("wgws_f16_probe");
  return probe_info(bytes, per_sm);
}

// 106 in one TF32 pass (ws_gemm's kOne, the engine's `precision tf32` product): 112's baseline.
template <int N>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_one_probe_k(const __grid_constant__ WsProbeArgs p,
                                                                  const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N, true>(
      (p.rows + kWsRows - 1) / kWsRows, &tmA, [&](int i) { return WsItem{0, i * kWsRows, 0, p.Bimg}; },
      [&](int i, float (&acc)[N / 2], int ct) {
        probe_epilogue<N, kEpiStore>(p, i * kWsRows + ws_row(ct, 0), i * kWsRows + ws_row(ct, 1), acc);
      });
}
template <int N>
std::string launch_wgws_one_probe(const WsProbeArgs& args, const float* A, int lda, cudaStream_t s) {
  const int bytes = ws_smem_bytes(N, true);
  const auto k = wgws_one_probe_k<N>;
  const auto [sms, per_sm] = probe_prepare(reinterpret_cast<const void*>(k), bytes);
  const int grid = std::min(div_up(args.rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, probe_map(A, args.rows, N, lda, kWsRows));
  SEZM_LAUNCH("wgws_one_probe");
  return probe_info(bytes, per_sm);
}

}  // namespace
}  // namespace sezm::cuda
