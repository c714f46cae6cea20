// Cross-focus competition, forward and backward (CPU twin: engine/so2_convolution.h's focus
// competition): one warp per edge of the chunk, lanes over the focus channels.
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

}  // namespace

void launch_focus_compete(const Dims& d, const BlockWDev& w, const FocusCompeteArgs& a, cudaStream_t s) {
  if (a.Ec == 0 || d.F < 2) return;
  focus_compete_k<<<div_up(a.Ec, kFcWarps), 32 * kFcWarps, 0, s>>>(d, w, a.Ec, a.Ssrc, a.fc_p, a.alpha_fc);
  SEZM_LAUNCH("focus_compete");
}
void launch_focus_compete_backward(const Dims& d, const BlockWDev& w, const FocusCompeteArgs& a, cudaStream_t s) {
  if (a.Ec == 0 || d.F < 2) return;
  focus_compete_backward_k<<<div_up(a.Ec, kFcWarps), 32 * kFcWarps, 0, s>>>(d, w, a.e0, a.Ec, a.Ssrc, a.alpha,
                                                                           a.alpha_bar, a.fc_p, a.alpha_fc,
                                                                           a.Ssrc_bar);
  SEZM_LAUNCH("focus_compete_backward");
}

}  // namespace sezm::cuda
