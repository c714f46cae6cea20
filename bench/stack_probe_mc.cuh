#pragma once
// sezm-stack-probe part 1, variants "cluster multicast": the engine's warpgroup tile shape (64 rows
// of one warpgroup, two CTAs per SM, k blocks of wg_ks(N), the 3xTF32 split, A from registers) with
// its B stream shared by a cluster of two CTAs: each CTA copies half of every B block from L2 with
// one bulk copy multicast into both CTAs' shared memory (cp.async.bulk ... .multicast::cluster), so
// an SM reads half the B bytes from L2. Question it answers (docs/performance.md): is the tile
// bound by the L2 -> SM stream of the weights' image, which every 64-row CTA reads whole?
// Pipeline per CTA: two stage buffers, each with a "full" barrier (one local arrival with the
// block's byte count; both halves complete its transaction) and an "empty" barrier (two arrivals:
// this CTA and its peer are done reading the buffer). Block sb + 1 is issued during block sb, once
// both CTAs are done with block sb - 1 (the other buffer). Included by bench/stack_probe.cu only
// (after stack_tile.cuh); probe-only, sm_90a.
#include <cstdint>

#include "wgmma_tile.cuh"
#include "wgmma_ws_ptx.cuh"  // ws_smem and the CTA-local mbarrier steps

namespace sezm::cuda {
namespace {

__device__ __forceinline__ uint32_t mc_rank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ void mc_cluster_sync() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
// One arrival on the barrier at the same offset in cluster CTA `cta` (this one or the peer).
__device__ __forceinline__ void mc_bar_arrive(uint64_t* b, uint32_t cta) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" ::"r"(ws_smem(b)),
      "r"(cta)
      : "memory");
#endif
}
__device__ __forceinline__ void mc_bar_wait(uint64_t* b, uint32_t parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(ws_smem(b)), "r"(parity)
        : "memory");
#endif
}
// `bytes` from global src into shared dst of both CTAs of the cluster, completing on their barrier b.
__device__ __forceinline__ void mc_copy(float* dst, const float* src, uint32_t bytes, uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::
          "r"(ws_smem(dst)),
      "l"(src), "r"(bytes), "r"(ws_smem(b)), "h"(static_cast<uint16_t>(3))
      : "memory");
#endif
}

// A(row, k..k+3) as sezm-stack-probe's other variants take it (probe_a4 there): from HBM, or made
// in registers.
template <bool kHbmA>
__device__ __forceinline__ float4 mc_a4(const float* __restrict__ A, int lda, int rows, int row, int k) {
  if (kHbmA) return row < rows ? *reinterpret_cast<const float4*>(A + (size_t)row * lda + k) : make_float4(0.f, 0.f, 0.f, 0.f);
  const float v = 1e-3f * (float)((row * 7 + k) & 63);
  return make_float4(v, v + 1e-3f, v - 1e-3f, v + 2e-3f);
}

template <int N, bool kHbmA>
__global__ void __launch_bounds__(128, 2)
    wgmc_probe_k(int rows, int K, const float* __restrict__ A, int lda, const float* __restrict__ Bimg, float* C) {
  constexpr int kS = wg_ks(N), kAdd = 2, kStage = wg_stage_floats(N, kS), kPlane = kS * 8 * N;
  constexpr uint32_t kBytes = kStage * sizeof(float);
  extern __shared__ float4 smem4[];
  float* sB = reinterpret_cast<float*>(smem4);  // two stages of kStage floats
  __shared__ uint64_t full[2], empty[2];
  const int tid = threadIdx.x, t = tid & 3, r0 = wg_row(), row0 = blockIdx.x * 64;
  const uint32_t rank = mc_rank(), peer = rank ^ 1u;
  const int nsb = K / (8 * kS);
  if (tid == 0) {
    ws_bar_init(&full[0], 1);
    ws_bar_init(&full[1], 1);
    ws_bar_init(&empty[0], 2);
    ws_bar_init(&empty[1], 2);
    ws_bar_init_fence();
  }
  mc_cluster_sync();  // both CTAs' barriers exist before any copy or remote arrival
  auto issue = [&](int sb) {  // thread 0: this CTA's half of block sb, into buffer sb & 1 of both
    const int half = kStage / 2;
    ws_bar_expect(&full[sb & 1], kBytes);
    mc_copy(sB + (sb & 1) * kStage + rank * half, Bimg + (size_t)sb * kStage + rank * half, kBytes / 2,
            &full[sb & 1]);
  };
  if (tid == 0) {
    issue(0);
    if (nsb > 1) issue(1);
  }
  float acc[N / 2], part[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = part[i] = 0.0f;
  float4 ra[kS];
  auto loadA = [&](int sb) {
    const int k = 8 * kS * sb + 2 * kS * t;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < kS / 2; ++i) ra[h * (kS / 2) + i] = mc_a4<kHbmA>(A, lda, rows, row0 + r0 + 8 * h, k + 4 * i);
  };
  loadA(0);
  for (int sb = 0; sb < nsb; ++sb) {
    float x0[2 * kS], x1[2 * kS];
#pragma unroll
    for (int i = 0; i < kS / 2; ++i) {
      const float4 u = ra[i], v = ra[kS / 2 + i];
      x0[4 * i] = u.x; x0[4 * i + 1] = u.y; x0[4 * i + 2] = u.z; x0[4 * i + 3] = u.w;
      x1[4 * i] = v.x; x1[4 * i + 1] = v.y; x1[4 * i + 2] = v.z; x1[4 * i + 3] = v.w;
    }
    if (sb + 1 < nsb) loadA(sb + 1);
    mc_bar_wait(&full[sb & 1], (sb >> 1) & 1);
    const float* buf = sB + (sb & 1) * kStage;
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      const float v[4] = {x0[2 * s], x1[2 * s], x0[2 * s + 1], x1[2 * s + 1]};
      uint32_t hi[4], lo[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        hi[q] = wg_tf32(v[q]);
        lo[q] = wg_tf32(v[q] - __uint_as_float(hi[q]));
      }
      const uint64_t dh = wg_desc(buf + s * 8 * N), dl = wg_desc(buf + kPlane + s * 8 * N);
      wg_pin(part);
      wg_fence();
      Wgmma<N>::mma(part, lo, dh, s % kAdd != 0);
      Wgmma<N>::mma(part, hi, dl, 1);
      Wgmma<N>::mma(part, hi, dh, 1);
      // While the tensor cores work: once both CTAs are done with block sb - 1, its buffer takes
      // block sb + 1 (blocks 0 and 1 were issued up front).
      if (s == 0 && tid == 0 && sb >= 1 && sb + 1 < nsb) {
        mc_bar_wait(&empty[(sb - 1) & 1], ((sb - 1) >> 1) & 1);
        issue(sb + 1);
      }
      if ((s + 1) % kAdd == 0) {
        wg_commit();
        wg_fold_partial(part, acc);
      }
    }
    __syncthreads();  // every warp's products of this block are complete (the folds waited)
    if (tid == 0) {
      mc_bar_arrive(&empty[sb & 1], rank);
      mc_bar_arrive(&empty[sb & 1], peer);
    }
  }
  wg_store_rows(C, N, row0, rows, acc);
  mc_cluster_sync();  // no copy or arrival of the peer still targets this CTA's shared memory
}

// Grid rounded up to whole clusters (the extra CTA's rows lie past `rows`: read as A's last rows /
// zeros, not stored).
template <int N>
void launch_wgmc_probe(bool hbm_a, int rows, int K, const float* A, int lda, const float* Bimg, float* C,
                       cudaStream_t s) {
  const size_t bytes = 2 * (size_t)wg_stage_floats(N, wg_ks(N)) * sizeof(float);
  auto k = hbm_a ? wgmc_probe_k<N, true> : wgmc_probe_k<N, false>;
  SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3((div_up(rows, 64) + 1) / 2 * 2);
  cfg.blockDim = dim3(128);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;  // a launch attribute: __cluster_dims__ does not compile for sm_80
  attr.val.clusterDim.x = 2;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  SEZM_CUDA(cudaLaunchKernelEx(&cfg, k, rows, K, A, lda, Bimg, C));
  SEZM_LAUNCH("wgmc_probe");
}

}  // namespace
}  // namespace sezm::cuda
