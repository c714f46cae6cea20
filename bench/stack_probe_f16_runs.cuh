#pragma once
// sezm-stack-probe part 1, variant 111's run (the kernel: stack_probe_f16.cuh): 106 and 111 on the
// same A and B, each one's time, useful TFLOP/s and error against the exact product. Included by
// bench/stack_probe.cu only, after DevBuf and median_ms.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// A: rows x K of row stride lda (HBM); hb: B (K x K) on the host; Bimg2: its TF32 image (kS 2) for
// 106; `exact`: the double product of the first exact.size() / K rows. K = 128 or 192.
void probe_f16_tile(int rows, int K, int lda, const float* A, const std::vector<float>& hb, const float* Bimg2,
                    const std::vector<double>& exact, int R, cudaStream_t s) {
  const std::vector<float> img = wgmma_b_image_f16_ws(hb.data(), K, K, K);
  DevBuf Bimg16(img.size());
  SEZM_CUDA(cudaMemcpy(Bimg16.p, img.data(), img.size() * sizeof(float), cudaMemcpyHostToDevice));
  const size_t n = (size_t)rows * K;
  DevBuf C(n);
  std::vector<float> c(n);
  const size_t nx = exact.size();
  const auto err_vs_exact = [&] {
    SEZM_CUDA(cudaMemcpy(c.data(), C.p, n * sizeof(float), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < nx; ++i) {
      num = std::max(num, std::fabs(c[i] - exact[i]));
      den = std::max(den, std::fabs(exact[i]));
    }
    return num / den;
  };
  std::string info;
  for (int v : {106, 111}) {
    SEZM_CUDA(cudaMemset(C.p, 0x7F, n * sizeof(float)));  // an element left unwritten shows as error
    const double ms = median_ms(R, s, [&] {
      if (v == 106)
        info = launch_wgws_probe_variant(106, kEpiStore, WsProbeArgs{rows, Bimg2, C.p, nullptr, nullptr}, K, K, A, lda, s);
      else
        info = K == 192 ? launch_wgws_f16_probe<192>(WsProbeArgs{rows, Bimg16.p, C.p, nullptr, nullptr}, A, lda, s)
                        : launch_wgws_f16_probe<128>(WsProbeArgs{rows, Bimg16.p, C.p, nullptr, nullptr}, A, lda, s);
    });
    std::printf("  K = N = %3d, %-36s %8.3f ms  %6.2f TFLOP/s  vs exact %.1e%s\n", K,
                v == 106 ? "3xTF32 WS (106)" : "3xFP16 WS, rows scaled per block (111)", ms,
                2.0 * rows * K * K / (ms * 1e9), err_vs_exact(), info.c_str());
  }
}

}  // namespace
