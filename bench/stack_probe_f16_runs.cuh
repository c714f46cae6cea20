#pragma once
// sezm-stack-probe part 1, variants 111 / 112's run (EXPERIMENT, branch exp-f16; the kernels:
// stack_probe_f16.cuh): 106 and 111, then 106 in one TF32 pass and 112, on the same A and B, each
// one's time, useful TFLOP/s and error against the exact product. Included by bench/stack_probe.cu only, after DevBuf and median_ms.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// A: rows x K of row stride lda (HBM); hb: B (K x K) on the host; Bimg2: its TF32 image (kS 2) for
// 106; `exact`: the double product of the first exact.size() / K rows. K = 128 or 192.
void probe_f16_tile(int rows, int K, int lda, const float* A, const std::vector<float>& hb, const float* Bimg2,
                    const std::vector<double>& exact, int R, cudaStream_t s) {
  // B's scale: its max into [2^7, 2^8); each row's the same (from A's first K columns).
  float bmax = 0.0f;
  for (float x : hb) bmax = std::fmax(bmax, std::fabs(x));
  const float bs = std::ldexp(1.0f, 7 - std::ilogb(bmax));
  const std::vector<uint16_t> img = wgmma_b_image_f16(hb.data(), K, K, K, bs);
  DevBuf Bimg16((img.size() + 1) / 2);
  SEZM_CUDA(cudaMemcpy(Bimg16.p, img.data(), img.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  std::vector<float> ha((size_t)rows * lda), rs(rows, 1.0f);
  SEZM_CUDA(cudaMemcpy(ha.data(), A, ha.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int r = 0; r < rows; ++r) {
    float m = 0.0f;
    for (int k = 0; k < K; ++k) m = std::fmax(m, std::fabs(ha[(size_t)r * lda + k]));
    if (m > 0.0f) rs[r] = std::ldexp(1.0f, 7 - std::ilogb(m));
  }
  DevBuf Rs(rows);
  SEZM_CUDA(cudaMemcpy(Rs.p, rs.data(), rs.size() * sizeof(float), cudaMemcpyHostToDevice));
  const size_t n = (size_t)rows * K;
  DevBuf C106(n), C111(n);
  std::vector<float> c(n);
  const size_t nx = exact.size();
  const auto err_vs_exact = [&](const float* dev) {
    SEZM_CUDA(cudaMemcpy(c.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < nx; ++i) {
      num = std::max(num, std::fabs(c[i] - exact[i]));
      den = std::max(den, std::fabs(exact[i]));
    }
    return num / den;
  };
  std::string info;
  SEZM_CUDA(cudaMemset(C106.p, 0x7F, n * sizeof(float)));
  const double ms106 = median_ms(R, s, [&] {
    info = launch_wgws_probe_variant(106, kEpiStore, WsProbeArgs{rows, Bimg2, C106.p, nullptr, nullptr}, K, K, A, lda, s);
  });
  const double e106 = err_vs_exact(C106.p);
  std::printf("  K = N = %3d, 3xTF32 WS (106)              %8.3f ms  %6.2f TFLOP/s  vs exact %.1e%s\n", K, ms106,
              2.0 * rows * K * K / (ms106 * 1e9), e106, info.c_str());
  SEZM_CUDA(cudaMemset(C111.p, 0x7F, n * sizeof(float)));  // an element left unwritten shows as error
  const WsF16ProbeArgs a{rows, Bimg16.p, C111.p, Rs.p, 1.0f / bs};
  const double ms111 = median_ms(R, s, [&] {
    info = K == 192 ? launch_wgws_f16_probe<192, false>(a, A, lda, s) : launch_wgws_f16_probe<128, false>(a, A, lda, s);
  });
  const double e111 = err_vs_exact(C111.p);
  std::printf("  K = N = %3d, 3xFP16 WS, rows scaled (111) %8.3f ms  %6.2f TFLOP/s  vs exact %.1e%s\n", K, ms111,
              2.0 * rows * K * K / (ms111 * 1e9), e111, info.c_str());
  // One pass: 106's tile in one TF32 pass, then 112 (one FP16 pass).
  SEZM_CUDA(cudaMemset(C106.p, 0x7F, n * sizeof(float)));
  const WsProbeArgs a1{rows, Bimg2, C106.p, nullptr, nullptr};
  const double ms1 = median_ms(R, s, [&] {
    info = K == 192 ? launch_wgws_one_probe<192>(a1, A, lda, s) : launch_wgws_one_probe<128>(a1, A, lda, s);
  });
  const double e1 = err_vs_exact(C106.p);
  std::printf("  K = N = %3d, 1xTF32 WS (106, one pass)    %8.3f ms  %6.2f TFLOP/s  vs exact %.1e%s\n", K, ms1,
              2.0 * rows * K * K / (ms1 * 1e9), e1, info.c_str());
  SEZM_CUDA(cudaMemset(C111.p, 0x7F, n * sizeof(float)));
  const double ms112 = median_ms(R, s, [&] {
    info = K == 192 ? launch_wgws_f16_probe<192, true>(a, A, lda, s) : launch_wgws_f16_probe<128, true>(a, A, lda, s);
  });
  const double e112 = err_vs_exact(C111.p);
  std::printf("  K = N = %3d, 1xFP16 WS, rows scaled (112) %8.3f ms  %6.2f TFLOP/s  vs exact %.1e%s\n", K, ms112,
              2.0 * rows * K * K / (ms112 * 1e9), e112, info.c_str());
}

}  // namespace
