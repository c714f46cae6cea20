#pragma once
// The register-tiled fp32 inner product of the SO(2) stack (`tile_mma`) and its tile geometry,
// shared by the stack layers (stack.cu), the per-chunk radial tables (radial_tables.cu) and the
// tile probe (bench/stack_probe.cu). Everything here is inlined into its callers (no -rdc).
// Numerics: IEEE fp32 FFMA (no TF32). `tile_mma` is the one place to swap for a tensor-core
// split later: operands are staged in shared memory, A k-major and B (k, n).
#include "model_dev.cuh"

namespace sezm::cuda {
namespace {

// CTA: 256 threads as 16 thread-rows x 16 thread-columns. Thread (ty, tx) owns the TR rows
// ty*TR.. and the NC4 column quads 64 j + 4 tx (j < NC4): per k step TR/4 + NC4 16-byte shared
// loads feed 4 * TR * NC4 FFMA. TR = 4 (64-row tiles): measured on the H200 at 4096 atoms, two
// such CTAs per SM (<= 128 registers) beat one 128-row CTA (TR = 8, ~220 registers) by 11 ms per
// call, and the 64-row tile fits every supported GPU's shared memory.
// A warp is 4 thread-rows x 8 thread-columns (not 2 x 16): its B reads per column quad are then
// 128 contiguous bytes (one shared-memory wavefront instead of two) and its A reads 64 bytes, so
// a k step costs 1 + NC4 wavefronts instead of 1 + 2 NC4 against the same FFMA count. Measured:
// no change in time; the product runs at the rate of cuBLAS's fp32 SGEMM at these shapes
// (bench/stack_probe.cu, docs/performance.md), not at a shared-memory bound.
constexpr int kBK = 16, kThreads = 256, kTC = 16, kTRw = kThreads / kTC;
static_assert(kThreads == 256 && kTC == 16, "tile_tx/tile_ty assume 8 warps as 4 x 8 thread blocks");
__device__ __forceinline__ int tile_tx() { return (threadIdx.x & 7) | (((threadIdx.x >> 5) & 1) << 3); }
__device__ __forceinline__ int tile_ty() { return ((threadIdx.x >> 3) & 3) | ((threadIdx.x >> 6) << 2); }

template <int TR>
struct Tile {
  static constexpr int BM = TR * kTRw;
  static constexpr int AS = BM + 4;  // As row stride (k-major)
};

// Row strides of the per-edge tables Zs, S and T: = 16 (mod 32) floats, so the eight threads of
// a 16-byte access phase (two rows x four column quads, as tile_mma's operand load reads them)
// fall in distinct banks; an unpadded stride of a multiple of 32 made that a 2-way conflict, and
// the backward's former scalar reads of S an 8-way one.
__host__ __device__ inline int bank_stride(int n) { return n + ((16 - n % 32) + 32) % 32; }

struct StackSmem {
  float* As;  // kBK x AS, k-major (a thread's rows are contiguous)
  float* Bs;  // kBK x NP (N padded to a multiple of 64 with zeros)
  float* Zs;  // BM x zst  (Cf used: scalar pre-activation, forward; z_bar scalar row, backward)
  float* S;   // BM x sst  (L*Cf used: gate sigmoids)
  float* T;   // BM x sst  (eta, backward only)
  int zst, sst;
};

inline int pad64(int n) { return (n + 63) / 64 * 64; }

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float4 zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }

// acc[r][4j+q] += sum_k A(row0 + TR*ty + r, k) B(k, 64j + 4tx + q). `loadA4(row, k)` returns
// A(row, k..k+3) (the prologue: the raw activation, or the gradient with the gates applied).
// K % 4 == 0 and N % 4 == 0 for every supported model. The next k-tile is fetched into registers
// while the current one is multiplied, so global latency hides behind the FFMAs.
template <int TR, int NC4, int kUnroll = 4, class LoadA4>
__device__ __forceinline__ void tile_mma(const StackSmem& sm, int K, int N, const float* __restrict__ B, LoadA4 loadA4,
                                         float (&acc)[TR][4 * NC4]) {
  constexpr int BM = Tile<TR>::BM, AS = Tile<TR>::AS, NP = 64 * NC4;
  constexpr int kAPer = BM * kBK / 4 / kThreads;
  constexpr int kBPer = (kBK * NP / 4 + kThreads - 1) / kThreads;
  const int tid = threadIdx.x, tx = tile_tx(), ty = tile_ty();
  float4 ra[kAPer], rb[kBPer];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      ra[i] = (k0 + k4 < K) ? loadA4(r, k0 + k4) : zero4();
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads, k = idx / (NP / 4), n4 = (idx % (NP / 4)) * 4;
      rb[j] = (idx < kBK * NP / 4 && k0 + k < K && n4 < N)
                  ? __ldg(reinterpret_cast<const float4*>(B + (size_t)(k0 + k) * N + n4))
                  : zero4();
    }
  };
  auto stash = [&]() {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      sm.As[(k4 + 0) * AS + r] = ra[i].x;
      sm.As[(k4 + 1) * AS + r] = ra[i].y;
      sm.As[(k4 + 2) * AS + r] = ra[i].z;
      sm.As[(k4 + 3) * AS + r] = ra[i].w;
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads;
      if (idx < kBK * NP / 4) st4(sm.Bs + idx * 4, rb[j]);  // row k = idx / (NP/4): stride NP
    }
  };
  fetch(0);
  for (int k0 = 0; k0 < K; k0 += kBK) {
    stash();
    __syncthreads();
    if (k0 + kBK < K) fetch(k0 + kBK);
#pragma unroll kUnroll
    for (int k = 0; k < kBK; ++k) {
      float a[TR], b[4 * NC4];
#pragma unroll
      for (int q = 0; q < TR / 4; ++q) {
        const float4 v = ld4(sm.As + k * AS + ty * TR + 4 * q);
        a[4 * q] = v.x; a[4 * q + 1] = v.y; a[4 * q + 2] = v.z; a[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < NC4; ++j) {
        const float4 v = ld4(sm.Bs + k * NP + 64 * j + 4 * tx);
        b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < TR; ++r)
#pragma unroll
        for (int c = 0; c < 4 * NC4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
}

template <int TR, int NC4>
__device__ __forceinline__ void zero(float (&acc)[TR][4 * NC4]) {
#pragma unroll
  for (int r = 0; r < TR; ++r)
#pragma unroll
    for (int i = 0; i < 4 * NC4; ++i) acc[r][i] = 0.0f;
}

// Calls f(r, j, row, c) for each of the thread's column quads inside the tile (row < Ec,
// c + 3 < N): accumulators acc[r][4j..4j+3] belong to edge `row`, columns c..c+3.
template <int TR, int NC4, class F>
__device__ __forceinline__ void for_each_quad(int row0, int Ec, int N, F f) {
  const int tx = tile_tx(), ty = tile_ty();
#pragma unroll
  for (int r = 0; r < TR; ++r) {
    const int row = row0 + ty * TR + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = 64 * j + 4 * tx;
      if (c < N) f(r, j, row, c);
    }
  }
}

// The thread's quads of a row-major table (row stride ld) at `base`, as for_each_quad visits them,
// with every load issued before any is used: an epilogue that loads, adds and stores one quad at a
// time waits a memory round trip per quad (its stores may alias the later loads).
template <int TR, int NC4>
__device__ __forceinline__ void load_quads(int row0, int Ec, int N, const float* base, size_t ld,
                                           float4 (&v)[TR][NC4]) {
  const int tx = tile_tx(), ty = tile_ty();
#pragma unroll
  for (int r = 0; r < TR; ++r) {
    const int row = row0 + ty * TR + r;
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = 64 * j + 4 * tx;
      v[r][j] = (row < Ec && c < N) ? ld4(base + (size_t)row * ld + c) : zero4();
    }
  }
}

template <int TR, int NC4>
__device__ __forceinline__ float4 quad(const float (&acc)[TR][4 * NC4], int r, int j) {
  return make_float4(acc[r][4 * j], acc[r][4 * j + 1], acc[r][4 * j + 2], acc[r][4 * j + 3]);
}

}  // namespace
}  // namespace sezm::cuda
