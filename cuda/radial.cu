// The radial MLP per edge, forward and backward (CPU twin: engine/radial_mlp.h). The forward
// runs one thread per edge, the backward four (below); the channel count compiled in for the
// common widths.
#include <cstdint>

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
  // 16-byte weight loads: C % 4 == 0 (model_dev.cuh limits), every tensor 128-byte aligned.
  const float4* w0 = reinterpret_cast<const float4*>(w.rad_w0);
  for (int n = 0; n < d.nr; ++n) {
    const float r = rbf[n];
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); c += 4)
      if (c < C) {
        const float4 wv = __ldg(w0 + (n * C + c) / 4);
        h[c] += r * wv.x;
        h[c + 1] += r * wv.y;
        h[c + 2] += r * wv.z;
        h[c + 3] += r * wv.w;
      }
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

// The backward runs kTpe = 4 threads per edge (issue 16: one thread per edge held 227 registers,
// 12.5 % occupancy, and issued one uniform weight load per FMA). With g = W1 rho_bar (C values,
// W = (L+1) C outputs summed), a_bar = env g and env_bar = sum_c a_c g_c: the same sums of
// products a_c W1_co rho_bar_o as sum_o rho_bar_o (a W1)_o, grouped so that the layer's output
// m = a W1 is never formed (half the FMAs). Lane t of an edge's group owns the output quads
// q = t, t + 4, ... (C % 4 == 0, model_dev.cuh limits) and adds g_c += rho_bar[4q..4q+3] .
// W1[c, 4q..4q+3] with one 16-byte weight load per four FMAs (W1 is 16 KiB for C = 32 and stays
// in L1; every tensor is 128-byte aligned, device_weights.cpp). The four partial g are then added
// by a two-step xor butterfly, a fixed order that gives every lane of the group the same bits
// (fp addition is commutative), so the lanes' identical tails (SiLU and norm backward) share the
// rbf_bar rows n = t, t + 4, ... between them. Each lane forms the hidden layer itself (nr C
// FMAs) rather than exchanging it; h waits in shared memory through the loop. Sums over o now
// run as four interleaved partials and env_bar is summed over c last: changes of fp32 rounding
// order only, every accumulator fp32 as before, and still one fixed order (docs/ARCHITECTURE.md
// "CUDA engine": repeated runs bit-identical).
constexpr int kTpe = 4, kBwdThreads = 128;

template <int KC>
__global__ void __launch_bounds__(kBwdThreads) radial_backward_k(Dims d, ModelWDev w, int E,
                                                                 const float* __restrict__ rbf,
                                                                 const float* __restrict__ env,
                                                                 const float* __restrict__ rho_bar, float* env_bar,
                                                                 float* rbf_bar) {
  constexpr int NC = KC > 0 ? KC : kMaxC;
  const int gi = blockIdx.x * blockDim.x + threadIdx.x, t = gi % kTpe;
  const bool live = gi / kTpe < E;
  const int e = live ? gi / kTpe : E - 1;  // a dead group shadows the last edge and writes nothing
  const int C = KC > 0 ? KC : d.C;
  float rho;
  __shared__ float hs[NC][kBwdThreads];  // one column per thread: no barrier
  {
    float h[NC], y[NC];
    radial_hidden<KC>(d, w, rbf + (size_t)e * d.nr, h, y, rho);
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) hs[c][threadIdx.x] = h[c];
  }
  float g[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) g[c] = 0.0f;
  const int nq = (d.L + 1) * C / 4;  // output quads per edge
  const float4* w1 = reinterpret_cast<const float4*>(w.rad_w1);  // row c: quads c nq .. c nq + nq - 1
  const float4* rb = reinterpret_cast<const float4*>(rho_bar) + (size_t)e * nq;
  for (int q = t; q < nq; q += kTpe) {
    const float4 r = rb[q];
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) {
        const float4 wv = __ldg(w1 + (size_t)c * nq + q);
        g[c] += r.x * wv.x;
        g[c] += r.y * wv.y;
        g[c] += r.z * wv.z;
        g[c] += r.w * wv.w;
      }
  }
  // The group's four lanes are consecutive lanes of one warp, and every lane of the warp is here.
#pragma unroll
  for (int o = 1; o < kTpe; o <<= 1) {
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) g[c] += __shfl_xor_sync(0xffffffffu, g[c], o);
  }
  // y from h as radial_hidden forms it (the same expression, so the same bits); a = SiLU(y).
  const float en = env[e];
  float eb = 0.0f, abar[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) {
      const float y = d.edge_norm ? hs[c][threadIdx.x] * rho * w.rad_norm[c] : hs[c][threadIdx.x];
      eb += siluf_(y) * g[c];
      abar[c] = en * g[c] * silu_gradf_(y);  // y_bar
    }
  if (live && t == 0) env_bar[e] += eb;
  if (d.edge_norm) {
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) dot += abar[c] * w.rad_norm[c] * hs[c][threadIdx.x] * rho;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) abar[c] = rho * (abar[c] * w.rad_norm[c] - hs[c][threadIdx.x] * rho * dot / C);
  }
  for (int n = t; n < d.nr; n += kTpe) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) s += abar[c] * w.rad_w0[n * C + c];
    if (live) rbf_bar[(size_t)e * d.nr + n] += s;
  }
}

constexpr int kThreads = 128;

// The kernels read W0, W1 and rho_bar rows as 16-byte quads: C % 4 == 0 (model_dev.cuh limits)
// and 16-byte aligned bases (device_weights.cpp aligns every tensor to 128 bytes).
void check_quads(const Dims& d, const ModelWDev& w, const float* rows, const char* what) {
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (d.C % 4 != 0 || misaligned(w.rad_w0) || misaligned(w.rad_w1) || misaligned(rows))
    throw Error(std::string(what) + ": radial weights and rows need C % 4 == 0 and 16-byte alignment");
}

}  // namespace

void launch_radial_forward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const int E = a.E;
  if (E == 0) return;
  check_quads(d, w, nullptr, "radial_forward");
  if (d.C == 32) radial_forward_k<32><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  else if (d.C == 16) radial_forward_k<16><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  else radial_forward_k<0><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  SEZM_LAUNCH("radial_forward");
}
void launch_radial_backward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const int E = a.E;
  if (E == 0) return;
  check_quads(d, w, a.rho_bar, "radial_backward");
  const int blocks = div_up(E, kBwdThreads / kTpe);
  if (d.C == 32)
    radial_backward_k<32><<<blocks, kBwdThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar);
  else if (d.C == 16)
    radial_backward_k<16><<<blocks, kBwdThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar);
  else
    radial_backward_k<0><<<blocks, kBwdThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar);
  SEZM_LAUNCH("radial_backward");
}

}  // namespace sezm::cuda
