#pragma once
// sezm-stack-probe part 1, variant 110: wg_tile's overlapped schedule (kOverlap,
// cuda/wgmma_tile.cuh "The overlapped schedule"; SEZM_CUDA_STACK_OVERLAP=1 in the engine) at the
// engine's shape (64 rows, one warpgroup, two CTAs per SM), timed, and checked BITWISE against
// variant 100, the same tile on its plain schedule (the overlapped one must give identical C: the
// same partials, folded in the same order).
// Included by bench/stack_probe.cu only, after stack.cuh and stack_tile.cuh (probe_a4 is not
// visible here: A(row, k) is read from HBM, rows past the end as zeros, as the engine's tile reads
// them). Probe-only: N = K = 96, 128 or 192.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sezm::cuda {
namespace {

// C = A B over `rows` rows with wg_tile at the engine's shape (kS = wg_ks(N), two B stages),
// plain (kOverlap false: variant 100's tile) or overlapped; A from HBM or made on chip.
template <int N, bool kOverlap, bool kHbmA>
__global__ void __launch_bounds__(128, 2)
    wgfold_probe_k(int rows, int K, const float* __restrict__ A, int lda, const float* __restrict__ Bimg, float* C) {
  extern __shared__ float4 smem4[];
  const int row0 = blockIdx.x * 64;
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  wg_tile<N, 3, wg_ks(N), 2, 1, 1, 2, kOverlap>(
      reinterpret_cast<float*>(smem4), K, Bimg,
      [&](int r, int k) {
        const int row = row0 + r;
        if (!kHbmA) {  // as probe_a4's on-chip A
          const float v = 1e-3f * (float)((row * 7 + k) & 63);
          return make_float4(v, v + 1e-3f, v - 1e-3f, v + 2e-3f);
        }
        return row < rows ? ld4(A + (size_t)row * lda + k) : zero4();
      },
      acc);
  wg_store_rows(C, N, row0, rows, acc);
}

template <int N>
void launch_fold_probe(bool overlap, bool hbm_a, int rows, int K, const float* A, int lda, const float* Bimg, float* C,
                       cudaStream_t s) {
  const size_t bytes = (size_t)wg_smem_floats(N, wg_ks(N), true) * sizeof(float);
  auto k = overlap ? (hbm_a ? wgfold_probe_k<N, true, true> : wgfold_probe_k<N, true, false>)
                   : (hbm_a ? wgfold_probe_k<N, false, true> : wgfold_probe_k<N, false, false>);
  SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  k<<<div_up(rows, 64), 128, bytes, s>>>(rows, K, A, lda, Bimg, C);
  SEZM_LAUNCH("wgfold_probe");
}

// Variant 110 at N = K: the plain tile's C (A from HBM) as the reference, then the overlapped
// tile's, compared bit for bit (C prefilled with 3.4e38, so that an element left unwritten shows),
// and both timed. `time_ms(launch)`: the probe's median timer. Bimg: wgmma_b_image (kS = wg_ks(K)).
template <class Timer>
void run_fold_probe(int rows, int K, const float* A, int lda, const float* Bimg, float* C, cudaStream_t s,
                    Timer time_ms) {
  auto launch = [&](bool overlap, bool hbm) {
    if (K == 192) launch_fold_probe<192>(overlap, hbm, rows, K, A, lda, Bimg, C, s);
    else if (K == 128) launch_fold_probe<128>(overlap, hbm, rows, K, A, lda, Bimg, C, s);
    else if (K == 96) launch_fold_probe<96>(overlap, hbm, rows, K, A, lda, Bimg, C, s);
    else throw Error("the overlapped tile probe takes N = K = 96, 128 or 192");
  };
  const size_t n = (size_t)rows * K;
  std::vector<float> ref(n), got(n);
  for (bool overlap : {false, true}) {
    SEZM_CUDA(cudaMemset(C, 0x7F, n * sizeof(float)));
    launch(overlap, true);
    SEZM_CUDA(cudaStreamSynchronize(s));
    SEZM_CUDA(cudaMemcpy((overlap ? got : ref).data(), C, n * sizeof(float), cudaMemcpyDeviceToHost));
  }
  size_t differ = 0;
  double maxd = 0.0;
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
      ++differ;
      maxd = std::max(maxd, (double)std::fabs(got[i] - ref[i]));
    }
  const char* name = "3xTF32 wgmma overlapped (110)";
  for (bool hbm : {true, false}) {
    const double ms_plain = time_ms([&] { launch(false, hbm); });
    const double ms = time_ms([&] { launch(true, hbm); });
    std::printf("  K = N = %3d, %-32s A %-9s %8.3f ms  %6.2f TFLOP/s  (plain %8.3f ms)", K, name,
                hbm ? "from HBM" : "on chip", ms, 2.0 * rows * K * K / (ms * 1e9), ms_plain);
    if (hbm)
      std::printf("  vs variant 100: max|diff| %.1e, %zu of %zu elements differ%s", maxd, differ, n,
                  differ == 0 ? " (bit-identical)" : " (NOT bit-identical)");
    std::printf("\n");
  }
}

}  // namespace
}  // namespace sezm::cuda
