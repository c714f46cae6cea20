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
  const int lane = threadIdx.x % 32;
  const size_t i = (size_t)n * d.F + f;
  const float g = gamma[i];
  float gb = 0.0f;
  for (int t = lane; t < d.D * d.Cf; t += 32) {
    const size_t o = ((size_t)n * d.D + t / d.Cf) * d.Cw + f * d.Cf + t % d.Cf;
    P_bar[o] = g * A_bar[o];
    gb += A_bar[o] * P[o];
  }
  gb = warp_sum(gb);
  if (lane == 0) gamma_bar[i] = gb;
}

}  // namespace
}  // namespace sezm::cuda
