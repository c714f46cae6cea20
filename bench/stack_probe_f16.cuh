#pragma once
// sezm-stack-probe part 1, variant 111: the warp-specialised tile in 3xFP16 (ws_gemm's kAr3xF16,
// cuda/wgmma_ws_f16.cuh: the engine's product with Dims::stack_f16, each A row scaled by a power of
// two per 16-k block), store epilogue, against 106 (3xTF32, the same ring and schedule): time,
// useful TFLOP/s and the error of C against the exact product (double) of the first rows. The
// kernel and its launcher; the run: stack_probe_f16_runs.cuh. Included by bench/stack_probe.cu only
// (after stack_probe_ws.cuh).
#include <string>

#include "wgmma_ws_gemm.cuh"

namespace sezm::cuda {
namespace {

// p.Bimg: wgmma_b_image_f16_ws(B, K, K, K).
template <int N>
__global__ void __launch_bounds__(kWsThreads, 1) wgws_f16_probe_k(const __grid_constant__ WsProbeArgs p,
                                                                  const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N, kAr3xF16>(
      (p.rows + kWsRows - 1) / kWsRows, &tmA, [&](int i) { return WsItem{0, i * kWsRows, 0, p.Bimg}; },
      [&](int i, float (&acc)[N / 2], int ct) {
        probe_epilogue<N, kEpiStore>(p, i * kWsRows + ws_row(ct, 0), i * kWsRows + ws_row(ct, 1), acc);
      });
}
template <int N>
std::string launch_wgws_f16_probe(const WsProbeArgs& args, const float* A, int lda, cudaStream_t s) {
  const int bytes = ws_smem_bytes(N, ws_one_plane(kAr3xF16));
  const auto k = wgws_f16_probe_k<N>;
  const auto [sms, per_sm] = probe_prepare(reinterpret_cast<const void*>(k), bytes);
  const int grid = std::min(div_up(args.rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, probe_map(A, args.rows, N, lda, kWsRows));
  SEZM_LAUNCH("wgws_f16_probe");
  return probe_info(bytes, per_sm);
}

}  // namespace
}  // namespace sezm::cuda
