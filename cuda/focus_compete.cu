// Cross-focus competition, forward and backward (CPU twin: engine/so2_convolution.h's focus
// competition). Fast path: a group of Cf/4 lanes per edge, each lane one float4 of channels per
// focus, all foci's loads issued up front (the warp-per-edge kernels kept one 128-byte load in
// flight per warp: latency-bound at ~2e9 edges/s, a tenth of the bytes' bound). The warp-per-edge
// kernels remain for other shapes and for A/B (SEZM_CUDA_FC_LEGACY=1).
#include <cstdint>
#include <cstdlib>

#include "focus_compete.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxCf = 64;

// Cross-focus competition weights (docs/model.md §5.5), one warp per edge of the chunk: lanes over the
// focus channels, so the S_src rows are read coalesced; sums are xor butterflies (every lane
// gets the same bits, deterministic).
constexpr int kMaxF = 8, kFcWarps = 4;
__global__ void focus_compete_k(Dims d, BlockWDev w, int Ec, const float* __restrict__ Ssrc, float* fc_p,
                                float* alpha_fc) {
  const int i = blockIdx.x * kFcWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (i >= Ec) return;  // whole warps leave together
  const int Cf = d.Cf;
  float lam[kMaxF], mx = -INFINITY;
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    const float* x = Ssrc + ((size_t)f * Ec + i) * Cf;
    float xv[kMaxCf / 32];
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) xv[t] = lane + 32 * t < Cf ? x[lane + 32 * t] : 0.0f;
    float rho = 1.0f;
    if (w.fc_norm) {
      float s = 0.0f;
      #pragma unroll
      for (int t = 0; t < kMaxCf / 32; ++t) s += xv[t] * xv[t];
      rho = rsqrtf(warp_sum(s) / Cf + d.eps);
    }
    float l = 0.0f;
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      if (a >= Cf) continue;
      const float nu = w.fc_norm ? xv[t] * rho * w.fc_norm[f * Cf + a] : xv[t];
      l += nu * w.fc_w[a * d.F + f];
    }
    lam[f] = warp_sum(l);
    mx = fmaxf(mx, lam[f]);
  }
  float den = 0.0f;
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f)
    if (f < d.F) den += expf(lam[f] - mx);
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    if (lane != f) continue;
    const float p = expf(lam[f] - mx) / den;
    fc_p[(size_t)i * d.F + f] = p;
    alpha_fc[(size_t)i * d.F + f] = 0.98f * p + 0.02f / d.F;
  }
}

// Focus competition backward, one warp per edge (lanes over the focus channels, as the forward):
// rescales nothing (G carries alpha_fc) and produces S_src_bar. The competition's adjoint needs
// <G_f, U_f> = alpha alpha_fc <Q_f, U_f> = alpha alpha_bar (aggregate_backward): two scalars
// per (edge, focus) instead of the stack rows.
__global__ void focus_compete_backward_k(Dims d, BlockWDev w, int e0, int Ec, const float* __restrict__ Ssrc,
                                         const float* __restrict__ alpha, const float* __restrict__ alpha_bar,
                                         const float* __restrict__ fc_p, const float* __restrict__ alpha_fc,
                                         float* Ssrc_bar) {
  const int i = blockIdx.x * kFcWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (i >= Ec) return;  // whole warps leave together
  const int Cf = d.Cf;
  const size_t e = (size_t)e0 + i;
  float pbar[kMaxF], sum = 0.0f;
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    const float s = alpha[e * d.F + f] * alpha_bar[(size_t)i * d.F + f];
    pbar[f] = 0.98f * s / alpha_fc[(size_t)i * d.F + f];
    sum += fc_p[(size_t)i * d.F + f] * pbar[f];
  }
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    const float lb = fc_p[(size_t)i * d.F + f] * (pbar[f] - sum);
    const float* x = Ssrc + ((size_t)f * Ec + i) * Cf;
    float* xb = Ssrc_bar + ((size_t)f * Ec + i) * Cf;
    if (!w.fc_norm) {
      #pragma unroll
      for (int t = 0; t < kMaxCf / 32; ++t) {
        const int a = lane + 32 * t;
        if (a < Cf) xb[a] = lb * w.fc_w[a * d.F + f];
      }
      continue;
    }
    const float* scale = w.fc_norm + f * Cf;
    float xv[kMaxCf / 32], nub[kMaxCf / 32], ss = 0.0f;
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      xv[t] = a < Cf ? x[a] : 0.0f;
      nub[t] = a < Cf ? lb * w.fc_w[a * d.F + f] : 0.0f;
      ss += xv[t] * xv[t];
    }
    const float rho = rsqrtf(warp_sum(ss) / Cf + d.eps);
    float dot = 0.0f;
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      if (a < Cf) dot += nub[t] * scale[a] * xv[t] * rho;
    }
    dot = warp_sum(dot);
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      if (a < Cf) xb[a] = rho * (nub[t] * scale[a] - xv[t] * rho * dot / Cf);
    }
  }
}

// ---- fast path: G = Cf / 4 lanes per edge (Cf = 16, 32, 64), F = 2..4 foci ----
// Sum over the lane's group of G (xor butterfly inside the group: every lane of it gets the
// same bits, deterministic).
template <int G>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float f4(const float4& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

constexpr int kVecT = 128;

// As focus_compete_k, lanes g of edge i's group over channels 4g..4g+3. Groups past Ec read edge
// Ec - 1 (full warps for the shuffles) and store nothing.
template <int F, int G>
__global__ void __launch_bounds__(kVecT) focus_compete_vec_k(Dims d, BlockWDev w, int Ec, const float* __restrict__ Ssrc,
                                                             float* fc_p, float* alpha_fc) {
  constexpr int Cf = 4 * G;
  const int t = blockIdx.x * kVecT + threadIdx.x, g = threadIdx.x % G;
  const int i = t / G, ic = min(i, Ec - 1);
  float4 x[F];
#pragma unroll
  for (int f = 0; f < F; ++f) x[f] = __ldg(reinterpret_cast<const float4*>(Ssrc + ((size_t)f * Ec + ic) * Cf) + g);
  float lam[F], mx = -INFINITY;
#pragma unroll
  for (int f = 0; f < F; ++f) {
    float rho = 1.0f;
    float4 sc = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
    if (w.fc_norm) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) s += f4(x[f], k) * f4(x[f], k);
      rho = rsqrtf(group_sum<G>(s) / Cf + d.eps);
      sc = __ldg(reinterpret_cast<const float4*>(w.fc_norm + f * Cf) + g);
    }
    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int a = 4 * g + k;
      const float nu = w.fc_norm ? f4(x[f], k) * rho * f4(sc, k) : f4(x[f], k);
      l += nu * __ldg(w.fc_w + a * F + f);
    }
    lam[f] = group_sum<G>(l);
    mx = fmaxf(mx, lam[f]);
  }
  float den = 0.0f;
#pragma unroll
  for (int f = 0; f < F; ++f) den += expf(lam[f] - mx);
  if (i >= Ec) return;
#pragma unroll
  for (int f = 0; f < F; ++f) {
    if (g != f) continue;
    const float p = expf(lam[f] - mx) / den;
    fc_p[(size_t)i * F + f] = p;
    alpha_fc[(size_t)i * F + f] = 0.98f * p + 0.02f / F;
  }
}

// As focus_compete_backward_k, lanes g of edge i's group over channels 4g..4g+3; the group's lanes
// all form the (identical) per-focus scalars.
template <int F, int G>
__global__ void __launch_bounds__(kVecT) focus_compete_backward_vec_k(Dims d, BlockWDev w, int e0, int Ec,
                                                                      const float* __restrict__ Ssrc,
                                                                      const float* __restrict__ alpha,
                                                                      const float* __restrict__ alpha_bar,
                                                                      const float* __restrict__ fc_p,
                                                                      const float* __restrict__ alpha_fc,
                                                                      float* Ssrc_bar) {
  constexpr int Cf = 4 * G;
  const int t = blockIdx.x * kVecT + threadIdx.x, g = threadIdx.x % G;
  const int i = t / G, ic = min(i, Ec - 1);
  const size_t e = (size_t)e0 + ic;
  float4 x[F];
  if (w.fc_norm) {
#pragma unroll
    for (int f = 0; f < F; ++f) x[f] = __ldg(reinterpret_cast<const float4*>(Ssrc + ((size_t)f * Ec + ic) * Cf) + g);
  }
  float pbar[F], p[F], sum = 0.0f;
#pragma unroll
  for (int f = 0; f < F; ++f) {
    const float s = __ldg(alpha + e * F + f) * __ldg(alpha_bar + (size_t)ic * F + f);
    pbar[f] = 0.98f * s / __ldg(alpha_fc + (size_t)ic * F + f);
    p[f] = __ldg(fc_p + (size_t)ic * F + f);
    sum += p[f] * pbar[f];
  }
#pragma unroll
  for (int f = 0; f < F; ++f) {
    const float lb = p[f] * (pbar[f] - sum);
    float nub[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) nub[k] = lb * __ldg(w.fc_w + (4 * g + k) * F + f);
    float4 xb;
    if (!w.fc_norm) {
      xb = make_float4(nub[0], nub[1], nub[2], nub[3]);
    } else {
      const float4 sc = __ldg(reinterpret_cast<const float4*>(w.fc_norm + f * Cf) + g);
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) ss += f4(x[f], k) * f4(x[f], k);
      const float rho = rsqrtf(group_sum<G>(ss) / Cf + d.eps);
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) dot += nub[k] * f4(sc, k) * f4(x[f], k) * rho;
      dot = group_sum<G>(dot);
      float o[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] = rho * (nub[k] * f4(sc, k) - f4(x[f], k) * rho * dot / Cf);
      xb = make_float4(o[0], o[1], o[2], o[3]);
    }
    if (i < Ec) reinterpret_cast<float4*>(Ssrc_bar + ((size_t)f * Ec + i) * Cf)[g] = xb;
  }
}

bool fc_legacy() {
  static const bool on = env_on("SEZM_CUDA_FC_LEGACY");
  return on;
}
bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Runs the fast kernel for (F, Cf) through run(kernel-pointer tag), or returns false.
template <template <int, int> class K, class Run>
bool dispatch_vec(const Dims& d, Run&& run) {
  auto byF = [&](auto G) -> bool {
    constexpr int g = decltype(G)::value;
    if (d.F == 2) return run(K<2, g>::ptr(), g), true;
    if (d.F == 3) return run(K<3, g>::ptr(), g), true;
    if (d.F == 4) return run(K<4, g>::ptr(), g), true;
    return false;
  };
  if (d.Cf == 16) return byF(std::integral_constant<int, 4>{});
  if (d.Cf == 32) return byF(std::integral_constant<int, 8>{});
  if (d.Cf == 64) return byF(std::integral_constant<int, 16>{});
  return false;
}
template <int F, int G>
struct FwdK {
  static auto ptr() { return &focus_compete_vec_k<F, G>; }
};
template <int F, int G>
struct BwdK {
  static auto ptr() { return &focus_compete_backward_vec_k<F, G>; }
};

}  // namespace

void launch_focus_compete(const Dims& d, const BlockWDev& w, const FocusCompeteArgs& a, cudaStream_t s) {
  if (a.Ec == 0 || d.F < 2) return;
  if (!fc_legacy() && aligned16(a.Ssrc) && aligned16(w.fc_norm) &&
      dispatch_vec<FwdK>(d, [&](auto kernel, int G) {
        kernel<<<div_up((long)a.Ec * G, kVecT), kVecT, 0, s>>>(d, w, a.Ec, a.Ssrc, a.fc_p, a.alpha_fc);
      })) {
    SEZM_LAUNCH("focus_compete");
    return;
  }
  focus_compete_k<<<div_up(a.Ec, kFcWarps), 32 * kFcWarps, 0, s>>>(d, w, a.Ec, a.Ssrc, a.fc_p, a.alpha_fc);
  SEZM_LAUNCH("focus_compete");
}
void launch_focus_compete_backward(const Dims& d, const BlockWDev& w, const FocusCompeteArgs& a, cudaStream_t s) {
  if (a.Ec == 0 || d.F < 2) return;
  if (!fc_legacy() && aligned16(a.Ssrc) && aligned16(a.Ssrc_bar) && aligned16(w.fc_norm) &&
      dispatch_vec<BwdK>(d, [&](auto kernel, int G) {
        kernel<<<div_up((long)a.Ec * G, kVecT), kVecT, 0, s>>>(d, w, a.e0, a.Ec, a.Ssrc, a.alpha, a.alpha_bar, a.fc_p,
                                                               a.alpha_fc, a.Ssrc_bar);
      })) {
    SEZM_LAUNCH("focus_compete_backward");
    return;
  }
  focus_compete_backward_k<<<div_up(a.Ec, kFcWarps), 32 * kFcWarps, 0, s>>>(d, w, a.e0, a.Ec, a.Ssrc, a.alpha,
                                                                           a.alpha_bar, a.fc_p, a.alpha_fc,
                                                                           a.Ssrc_bar);
  SEZM_LAUNCH("focus_compete_backward");
}

}  // namespace sezm::cuda
