#pragma once
// sezm-stack-probe part 1, variants 8-13: the SS warpgroup tile (cuda/wgmma_tile_ss.cuh, sm_90a),
// A staged from HBM into shared memory by cp.async, at K = N = 128 or 192. Included by
// bench/stack_probe.cu only, after stack.cuh and stack_tile.cuh (st4, div_up, Error, SEZM_CUDA);
// probe-only: the engine does not use the SS tile.
#include <cuda_runtime.h>

#include <string>

#include "wgmma_tile_ss.cuh"

namespace sezm::cuda {
namespace {

// One SS probe configuration: the arithmetic (3xTF32 or one pass), the k block (kS steps of 8),
// the CTA's warpgroups (64 rows each) and the k steps per IEEE add of the 3xTF32 partial (kAdd:
// each add waits for the tensor cores, wgmma.wait_group 0).
struct SsVariant {
  int kM, kS, kWG, kAdd;
  const char* name;
};
// Variants 8.. of part 1, in order. Shared memory per CTA (wgss_smem_floats, 3 A stages) at N = 192 /
// 128, ptxas's registers (sm_90a, no spills) and the CTAs per SM they allow (228 KiB and 64 Ki
// registers per SM; the probe prints what the occupancy calculator says):
constexpr SsVariant kSsVariants[] = {
    {3, 2, 1, 2, "3xTF32 wgmma SS, 64 rows, k16"},   // 68 / 52 KiB, 224 / 160 registers: 2 / 3 CTAs/SM
    {3, 4, 1, 2, "3xTF32 wgmma SS, 64 rows, k32"},   // 136 / 104 KiB, 255 / 168: 1 / 2
    {3, 4, 2, 2, "3xTF32 wgmma SS, 128 rows, k32"},  // 176 / 144 KiB, 255 / 168: 1 / 1
    {1, 4, 1, 2, "1xTF32 wgmma SS, 64 rows, k32"},   // 72 / 56 KiB, 142 / 112: 3 / 4
    {1, 4, 2, 2, "1xTF32 wgmma SS, 128 rows, k32"},  // 96 / 80 KiB, 142 / 112: 1 / 2
    {3, 4, 1, 4, "3xTF32 SS, 64 rows, k32, add/4"},  // as the second, one partial add per 4 k steps
};
constexpr int kSsVariantCount = sizeof(kSsVariants) / sizeof(kSsVariants[0]);

// C = A B over `rows` rows (A row-major, row stride lda floats, from HBM; rows past the end read
// the last row, their results not stored), B the natural-order image for kS.
template <int N, int kM, int kS, int kWG, int kAdd>
__global__ void __launch_bounds__(128 * kWG, kWG == 1 ? 2 : 1)
    wgss_probe_k(int rows, int K, const float* __restrict__ A, int lda, const float* __restrict__ Bimg, float* C) {
  extern __shared__ float4 smem4[];
  const int row0 = blockIdx.x * 64 * kWG, last = rows - 1 - row0;
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  wgss_tile<N, kM, kS, kAdd, kWG>(
      reinterpret_cast<float*>(smem4), K,
      [&](int r, int k) { return A + (size_t)(row0 + (r < last ? r : last)) * lda + k; }, Bimg, acc);
  wg_store_rows(C, N, row0, rows, acc);
}

// Launches one configuration; returns "[smem KiB, CTAs/SM]" for the probe's line.
template <int N, int kM, int kS, int kWG, int kAdd = 2>
std::string launch_wgss_probe(int rows, int K, const float* A, int lda, const float* Bimg, float* C, cudaStream_t s) {
  const size_t bytes = (size_t)wgss_smem_floats(N, kS, kWG, 3, kM == 3) * sizeof(float);
  auto k = wgss_probe_k<N, kM, kS, kWG, kAdd>;
  SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  if (K % (8 * kS) != 0) throw Error("the SS tile probe needs K % (8 kS) == 0");
  k<<<dim3(div_up(rows, 64 * kWG)), 128 * kWG, bytes, s>>>(rows, K, A, lda, Bimg, C);
  SEZM_LAUNCH("wgss_probe");
  int per_sm = 0;
  SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 128 * kWG, bytes));
  return "  [" + std::to_string(bytes / 1024) + " KiB smem, " + std::to_string(per_sm) + " CTA/SM]";
}

template <int N>
std::string launch_wgss_probe_n(int v, int rows, int K, const float* A, int lda, const float* Bimg2,
                                const float* Bimg4, float* C, cudaStream_t s) {
  switch (v) {
    case 0: return launch_wgss_probe<N, 3, 2, 1>(rows, K, A, lda, Bimg2, C, s);
    case 1: return launch_wgss_probe<N, 3, 4, 1>(rows, K, A, lda, Bimg4, C, s);
    case 2: return launch_wgss_probe<N, 3, 4, 2>(rows, K, A, lda, Bimg4, C, s);
    case 3: return launch_wgss_probe<N, 1, 4, 1>(rows, K, A, lda, Bimg4, C, s);
    case 4: return launch_wgss_probe<N, 1, 4, 2>(rows, K, A, lda, Bimg4, C, s);
    default: return launch_wgss_probe<N, 3, 4, 1, 4>(rows, K, A, lda, Bimg4, C, s);
  }
}

// SS variant v (0 .. kSsVariantCount - 1) at N = K = 128 or 192; Bimg2 / Bimg4: B's natural-order
// images for k blocks of 2 / 4 steps.
std::string launch_wgss_probe_variant(int v, int rows, int K, int N, const float* A, int lda, const float* Bimg2,
                                      const float* Bimg4, float* C, cudaStream_t s) {
  if (N == 192) return launch_wgss_probe_n<192>(v, rows, K, A, lda, Bimg2, Bimg4, C, s);
  if (N == 128) return launch_wgss_probe_n<128>(v, rows, K, A, lda, Bimg2, Bimg4, C, s);
  throw Error("the SS warpgroup tile probe takes N = 128 or 192");
}

}  // namespace
}  // namespace sezm::cuda
