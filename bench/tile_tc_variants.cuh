#pragma once
// Probe-only variants of the stack's tensor-core tile product (cuda/stack_tile.cuh, tile_mma), to
// measure what a deeper k tile, a second shared-memory stage and fewer IEEE adds of the 3xTF32
// partials buy before any of it goes into the engine. Same thread/fragment layout, swizzle and
// accumulator quads as tile_mma (tile_row / tile_col), so for_each_quad reads the result.
//   BK:      k depth of a staged tile (16 in the engine; 32 halves the barriers);
//   kAcc:    3xTF32 only: k8 steps whose products accumulate in the tensor cores before one IEEE
//            add (1 in the engine; each extra step adds a truncating accumulation);
//   kStages: 1 (stage, barrier, multiply, barrier, as the engine) or 2 (multiply stage s while
//            the next tile is staged into stage s ^ 1: one barrier per k tile).
#include "stack_tile.cuh"

namespace sezm::cuda {
namespace {

template <int BK, int kM>
__host__ __device__ constexpr int tcv_a_stage() { return (kM == kTf32x3 ? 2 : 1) * 64 * (BK + 4); }
template <int BK, int kM>
__host__ __device__ constexpr int tcv_b_stage(int np) { return (kM == kTf32x3 ? 2 : 1) * BK * np; }
template <int BK, int kM, int kStages>
__host__ __device__ constexpr int tcv_floats(int np) { return kStages * (tcv_a_stage<BK, kM>() + tcv_b_stage<BK, kM>(np)); }

template <int NC4, int kM, int BK, int kAcc, int kStages, class LoadA4>
__device__ __forceinline__ void tile_mma_tcv(float* smem, int K, int N, const float* __restrict__ B, LoadA4 loadA4,
                                             float (&acc)[4][4 * NC4]) {
  constexpr int BM = 64, AR = BK + 4, NP = 64 * NC4;
  constexpr int kAPer = BM * BK / 4 / kThreads;
  constexpr int kBPer = (BK * NP / 4 + kThreads - 1) / kThreads;
  constexpr int kAS = tcv_a_stage<BK, kM>(), kLoA = BM * AR;
  constexpr int KP = kM == kTf32x3 ? kAcc : 1;
  static_assert(BK % (8 * KP) == 0, "k steps per IEEE add must divide the k tile");
  const int np = NP;
  const int stage_floats = kAS + tcv_b_stage<BK, kM>(np);
  const int tid = threadIdx.x;
  float4 ra[kAPer], rb[kBPer];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (BK / 4), k4 = (idx % (BK / 4)) * 4;
      ra[i] = (k0 + k4 < K) ? loadA4(r, k0 + k4) : zero4();
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads, k = idx / (NP / 4), n4 = (idx % (NP / 4)) * 4;
      rb[j] = (idx < BK * NP / 4 && k0 + k < K && n4 < N)
                  ? __ldg(reinterpret_cast<const float4*>(B + (size_t)(k0 + k) * N + n4))
                  : zero4();
    }
  };
  auto stash = [&](int st) {
    float* As = smem + st * stage_floats;
    float* Bs = As + kAS;
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (BK / 4), k4 = (idx % (BK / 4)) * 4;
      const float4 hi = tf32_hi(ra[i]);
      st4(As + r * AR + k4, hi);
      if (kM == kTf32x3) st4(As + kLoA + r * AR + k4, tf32_lo(ra[i], hi));
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads;
      if (idx >= BK * NP / 4) continue;
      const int k = idx / (NP / 4), n4 = (idx % (NP / 4)) * 4, o = k * NP + (n4 ^ (bs_swizzle(k) & ~3));
      const float4 v = (k & 1) ? make_float4(rb[j].z, rb[j].w, rb[j].x, rb[j].y) : rb[j];
      const float4 hi = tf32_hi(v);
      st4(Bs + o, hi);
      if (kM == kTf32x3) st4(Bs + BK * NP + o, tf32_lo(v, hi));
    }
  };
  auto multiply = [&](int st) {
    const float* As = smem + st * stage_floats;
    const float* Bs = As + kAS;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wrow = (warp >> 2) * 32, wcol = 16 * (warp & 3), sw = bs_swizzle(t);
#pragma unroll
    for (int kk0 = 0; kk0 < BK; kk0 += 8 * KP) {
      uint32_t ah[KP][2][4], al[KP][2][4];
#pragma unroll
      for (int s = 0; s < KP; ++s)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const float* p = As + (wrow + 16 * mt + g) * AR + kk0 + 8 * s + t;
          const int off[4] = {0, 8 * AR, 4, 8 * AR + 4};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            ah[s][mt][q] = bits(p[off[q]]);
            if (kM == kTf32x3) al[s][mt][q] = bits(p[kLoA + off[q]]);
          }
        }
#pragma unroll
      for (int j = 0; j < NC4; ++j)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int col = (64 * j + wcol + 4 * (g >> 1) + 2 * nt + (g & 1)) ^ sw;
          uint32_t bh[KP][2], bl[KP][2];
#pragma unroll
          for (int s = 0; s < KP; ++s) {
            const float* q0 = Bs + (kk0 + 8 * s + t) * NP + col;
            bh[s][0] = bits(q0[0]);
            bh[s][1] = bits(q0[4 * NP]);
            if (kM == kTf32x3) {
              bl[s][0] = bits(q0[BK * NP]);
              bl[s][1] = bits(q0[BK * NP + 4 * NP]);
            }
          }
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            float *c0 = &acc[2 * mt][4 * j + 2 * nt], *c2 = &acc[2 * mt + 1][4 * j + 2 * nt];
            if (kM == kTf32x3) {
              float p0, p1, p2, p3;
              mma_m16n8k8_from0(p0, p1, p2, p3, al[0][mt], bh[0][0], bh[0][1]);
              mma_m16n8k8(p0, p1, p2, p3, ah[0][mt], bl[0][0], bl[0][1]);
              mma_m16n8k8(p0, p1, p2, p3, ah[0][mt], bh[0][0], bh[0][1]);
#pragma unroll
              for (int s = 1; s < KP; ++s) {
                mma_m16n8k8(p0, p1, p2, p3, al[s][mt], bh[s][0], bh[s][1]);
                mma_m16n8k8(p0, p1, p2, p3, ah[s][mt], bl[s][0], bl[s][1]);
                mma_m16n8k8(p0, p1, p2, p3, ah[s][mt], bh[s][0], bh[s][1]);
              }
              c0[0] += p0; c0[1] += p1; c2[0] += p2; c2[1] += p3;
            } else {
              mma_m16n8k8(c0[0], c0[1], c2[0], c2[1], ah[0][mt], bh[0][0], bh[0][1]);
            }
          }
        }
    }
  };
  const int nk = (K + BK - 1) / BK;
  if (kStages == 1) {
    fetch(0);
    for (int kt = 0; kt < nk; ++kt) {
      stash(0);
      __syncthreads();
      if (kt + 1 < nk) fetch((kt + 1) * BK);
      multiply(0);
      __syncthreads();
    }
  } else {
    fetch(0);
    stash(0);
    __syncthreads();
    for (int kt = 0; kt < nk; ++kt) {
      if (kt + 1 < nk) fetch((kt + 1) * BK);
      multiply(kt & 1);
      if (kt + 1 < nk) stash((kt + 1) & 1);
      __syncthreads();
    }
  }
}

// C = A B with a variant of the tensor-core tile (probe kernel twin of tile_probe_k).
template <int NC4, int kM, int BK, int kAcc, int kStages>
__global__ void __launch_bounds__(kThreads, 2)
    tcv_probe_k(int rows, int K, int N, const float* __restrict__ A, int lda, const float* __restrict__ B, float* C) {
  extern __shared__ float4 smem4[];
  const int row0 = blockIdx.x * 64;
  float acc[4][4 * NC4];
  zero<4, NC4>(acc);
  tile_mma_tcv<NC4, kM, BK, kAcc, kStages>(
      reinterpret_cast<float*>(smem4), K, N, B,
      [&](int r, int k) { return row0 + r < rows ? ld4(A + (size_t)(row0 + r) * lda + k) : zero4(); }, acc);
  for_each_quad<4, NC4, kM>(row0, rows, N, [&](int r, int j, int row, int c) {
    st4(C + (size_t)row * N + c, quad<4, NC4>(acc, r, j));
  });
}

template <int NC4, int kM, int BK, int kAcc, int kStages>
void launch_tcv(int rows, int K, int N, const float* A, int lda, const float* B, float* C, cudaStream_t s) {
  const size_t bytes = (size_t)tcv_floats<BK, kM, kStages>(64 * NC4) * sizeof(float);
  const void* fn = (const void*)tcv_probe_k<NC4, kM, BK, kAcc, kStages>;
  if (bytes > 48 * 1024) SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  tcv_probe_k<NC4, kM, BK, kAcc, kStages><<<div_up(rows, 64), kThreads, bytes, s>>>(rows, K, N, A, lda, B, C);
  SEZM_LAUNCH("tcv_probe");
}

}  // namespace
}  // namespace sezm::cuda
