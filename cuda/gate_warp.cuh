#pragma once
// The output gate's backward for one (node, focus), run by one warp (CPU twin: engine/attention.h;
// docs/model.md §7.8): P_bar = gamma A_bar, gamma_bar = <A_bar, P> (lane-strided products, then the
// warp's butterfly). attention.cu's gate_backward_k and node_linear.cu (right behind the post-focus
// mix's transpose) both call it, so the two paths give the same bits.
#include "model_dev.cuh"

namespace sezm::cuda {
namespace {

__device__ __forceinline__ void gate_backward_warp(const Dims& d, int n, int f, const float* gamma, const float* P,
                                                   const float* A_bar, float* P_bar, float* gamma_bar) {
  const int lane = threadIdx.x % 32, DF = d.D * d.Cf;
  const size_t i = (size_t)n * d.F + f;
  const float g = gamma[i];
  float gb = 0.0f;
  // kB of the lane's elements at a time, every load before the stores (P_bar may alias A_bar or P
  // for all the compiler knows: loads behind stores would wait one round trip each); the products
  // are added in the order of t as before.
  constexpr int kB = 8;
  for (int t0 = lane; t0 < DF; t0 += 32 * kB) {
    float ab[kB], pv[kB];
    size_t off[kB];
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int t = t0 + 32 * k;
      off[k] = ((size_t)n * d.D + t / d.Cf) * d.Cw + f * d.Cf + t % d.Cf;
      ab[k] = t < DF ? A_bar[off[k]] : 0.0f;
      pv[k] = t < DF ? P[off[k]] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      if (t0 + 32 * k >= DF) continue;
      P_bar[off[k]] = g * ab[k];
      gb += ab[k] * pv[k];
    }
  }
  gb = warp_sum(gb);
  if (lane == 0) gamma_bar[i] = gb;
}

}  // namespace
}  // namespace sezm::cuda
