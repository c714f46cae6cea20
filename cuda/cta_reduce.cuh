#pragma once
// CTA-wide sums shared by the attention and value-path kernels (no -rdc: every TU that calls a
// device function sees its definition). Deterministic: fixed orders throughout.
#include <algorithm>

#include "cuda_common.cuh"

namespace sezm::cuda {
namespace {

// CTA-wide sums of a per-thread register vector. Threads are taken in their linear order (x
// fastest, as warps are formed), so 2-D blocks work too. The thread count is a power of two
// below 32 or a multiple of 32 (checked at engine construction for Cw; softmax_backward's Cw x R
// keeps it). Full warps reduce-scatter: at each butterfly step a lane keeps one half of its
// vector and trades the other, so N values cost ~N shuffles instead of 5 N and every lane ends
// with N/32 warp sums; one shared-memory pass then adds the warps. Fixed order: deterministic.
// One reduce-scatter step: lanes whose bit O is set keep the upper half t[H..2H) (moved down),
// the others the lower half; each adds its partner's copy of the half it keeps.
template <int H, int O, int NP>
__device__ __forceinline__ void rs_step(float (&t)[NP], int lane, int& base) {
  const bool upper = lane & O;
  if (upper) base += H;
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const float send = upper ? t[k] : t[k + H];
    const float keep = upper ? t[k + H] : t[k];
    t[k] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}

template <int N>
__device__ __forceinline__ void cta_sum(const float (&v)[N], float* red, float* out) {
  const int nt = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int width = nt >= 32 ? 32 : nt, lane = tid % width, warp = tid / width;
  if (nt >= 32) {
    constexpr int NP = (N + 31) / 32 * 32;
    float t[NP];
#pragma unroll
    for (int k = 0; k < NP; ++k) t[k] = k < N ? v[k] : 0.0f;
    int base = 0;  // original index of t[0] on this lane after the steps so far
    rs_step<NP / 2, 16>(t, lane, base);
    rs_step<NP / 4, 8>(t, lane, base);
    rs_step<NP / 8, 4>(t, lane, base);
    rs_step<NP / 16, 2>(t, lane, base);
    rs_step<NP / 32, 1>(t, lane, base);
#pragma unroll
    for (int k = 0; k < NP / 32; ++k)
      if (base + k < N) red[warp * N + base + k] = t[k];
  } else {
    const unsigned mask = (1u << nt) - 1u;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float t = v[k];
      for (int o = width / 2; o > 0; o >>= 1) t += __shfl_xor_sync(mask, t, o, width);
      if (lane == 0) red[warp * N + k] = t;
    }
  }
  __syncthreads();
  const int nw = (nt + width - 1) / width;
  for (int k = tid; k < N; k += nt) {
    float t = 0.0f;
    for (int w = 0; w < nw; ++w) t += red[w * N + k];
    out[k] = t;
  }
  __syncthreads();
}

// Warp-wide sums for the one-warp-per-edge kernels (value_path_warp.cuh): no shared memory, no
// barrier. The N values go in chunks of 32: a chunk padded to P (a power of two) is
// reduce-scattered over the lane bits 16, 8, .. 32/P (one value per lane left), the lower lane
// bits then add by a plain butterfly; lane owns(P) then holds the full sum of value C0 + base.
// Fixed order (deterministic); N values cost ~N shuffles.
template <int H, int O, int NP>
__device__ __forceinline__ void rs_steps(float (&t)[NP], int lane, int& base) {
  rs_step<H, O>(t, lane, base);
  if constexpr (H > 1) rs_steps<H / 2, O / 2>(t, lane, base);
}
__host__ __device__ constexpr int pow2_ceil(int n) { return n <= 1 ? 1 : 2 * pow2_ceil((n + 1) / 2); }

// val(k) gives the lane's value k (called with constants, chunk by chunk: a chunk's values are
// formed only when it is summed, so at most 32 of them are live); sink(k, sum) is called once per
// value k < N, by one lane.
template <int N, int C0 = 0, class Val, class Sink>
__device__ __forceinline__ void warp_sum_scatter(Val&& val, int lane, Sink&& sink) {
  constexpr int n = N - C0 < 32 ? N - C0 : 32, P = pow2_ceil(n);
  float t[P];
#pragma unroll
  for (int k = 0; k < P; ++k) t[k] = k < n ? val(C0 + k) : 0.0f;
  int base = 0;
  if constexpr (P > 1) rs_steps<P / 2, 16>(t, lane, base);
#pragma unroll
  for (int o = 16 / P; o > 0; o >>= 1) t[0] += __shfl_xor_sync(0xffffffffu, t[0], o);
  if (lane % (32 / P) == 0 && base < n) sink(C0 + base, t[0]);
  if constexpr (C0 + 32 < N) warp_sum_scatter<N, C0 + 32>(val, lane, sink);
}

// Thread rows over a segment's edges for the softmax backward and the source-side sums: 8, fewer
// when Cw x 8 would pass the 1024 threads of a CTA.
inline int edge_rows(const Dims& d) { return std::max(1, std::min(8, 1024 / d.Cw)); }

}  // namespace
}  // namespace sezm::cuda
