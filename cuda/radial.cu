// The radial MLP per edge, forward and backward (CPU twin: engine/radial_mlp.h). One thread
// per edge; the channel count compiled in for the common widths.
#include "radial.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxC = 64;  // channels supported by the per-thread MLP kernels

// The radial MLP per edge (one thread per edge). KC > 0 compiles the channel count in, so the
// per-thread vectors below live in registers (with a runtime count they sit in local memory);
// KC = 0 is the generic fallback. Every sum runs in the same order in both.
template <int KC>
__device__ __forceinline__ void radial_hidden(const Dims& d, const ModelWDev& w, const float* rbf, float* h, float* y,
                                              float& rho) {
  const int C = KC > 0 ? KC : d.C;
#pragma unroll
  for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
    if (c < C) h[c] = 0.0f;
  for (int n = 0; n < d.nr; ++n) {
    const float r = rbf[n];
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) h[c] += r * w.rad_w0[n * C + c];
  }
  rho = 1.0f;
  if (d.edge_norm) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) s += h[c] * h[c];
    rho = rsqrtf(s / C + 1e-7f);
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) y[c] = h[c] * rho * w.rad_norm[c];
  } else {
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) y[c] = h[c];
  }
}

template <int KC>
__global__ void radial_forward_k(Dims d, ModelWDev w, int E, const float* __restrict__ rbf,
                                 const float* __restrict__ env, float* rho_o) {
  constexpr int NC = KC > 0 ? KC : kMaxC;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const int C = KC > 0 ? KC : d.C;
  float h[NC], y[NC], rho;
  radial_hidden<KC>(d, w, rbf + (size_t)e * d.nr, h, y, rho);
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) y[c] = siluf_(y[c]);
  const int W = (d.L + 1) * C;
  const float en = env[e];
  for (int o = 0; o < W; ++o) {
    float m = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) m += y[c] * w.rad_w1[c * W + o];
    rho_o[(size_t)e * W + o] = en * m;
  }
}

template <int KC>
__global__ void radial_backward_k(Dims d, ModelWDev w, int E, const float* __restrict__ rbf,
                                  const float* __restrict__ env, const float* __restrict__ rho_bar, float* env_bar,
                                  float* rbf_bar) {
  constexpr int NC = KC > 0 ? KC : kMaxC;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const int C = KC > 0 ? KC : d.C;
  float h[NC], y[NC], a[NC], abar[NC], rho;
  radial_hidden<KC>(d, w, rbf + (size_t)e * d.nr, h, y, rho);
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) {
      a[c] = siluf_(y[c]);
      abar[c] = 0.0f;
    }
  const int W = (d.L + 1) * C;
  const float en = env[e];
  float eb = 0.0f;
  for (int o = 0; o < W; ++o) {
    float m = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) m += a[c] * w.rad_w1[c * W + o];
    const float rbo = rho_bar[(size_t)e * W + o];
    eb += rbo * m;
    const float mb = rbo * en;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) abar[c] += mb * w.rad_w1[c * W + o];
  }
  env_bar[e] += eb;
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) abar[c] *= silu_gradf_(y[c]);  // now y_bar
  if (d.edge_norm) {
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) dot += abar[c] * w.rad_norm[c] * h[c] * rho;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) abar[c] = rho * (abar[c] * w.rad_norm[c] - h[c] * rho * dot / C);
  }
  for (int n = 0; n < d.nr; ++n) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) s += abar[c] * w.rad_w0[n * C + c];
    rbf_bar[(size_t)e * d.nr + n] += s;
  }
}

constexpr int kThreads = 128;

}  // namespace

void launch_radial_forward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const int E = a.E;
  if (E == 0) return;
  if (d.C == 32) radial_forward_k<32><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  else if (d.C == 16) radial_forward_k<16><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  else radial_forward_k<0><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  SEZM_LAUNCH("radial_forward");
}
void launch_radial_backward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const int E = a.E;
  if (E == 0) return;
  if (d.C == 32)
    radial_backward_k<32><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar,
                                                                   a.rbf_bar);
  else if (d.C == 16)
    radial_backward_k<16><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar,
                                                                   a.rbf_bar);
  else
    radial_backward_k<0><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar,
                                                                  a.rbf_bar);
  SEZM_LAUNCH("radial_backward");
}

}  // namespace sezm::cuda
