#pragma once
// The equivariant RMS norms of one node, run by one warp (CPU twin: engine/norms.h; docs/model.md
// §5.2.1, backward §7.6): used by node_steps.cu's norm kernels and by node_linear.cu, which runs
// the block's two norms right behind the linear that feeds them.
#include "node_steps.cuh"

namespace sezm::cuda {
namespace {

// The norms: a warp per node. They ran one 128-thread CTA per node (a node's
// 512 values, two or three dependent sums, a few hundred CTAs per chunk); the warp replays those
// threads as lane + 32 w (w = 0..3) and their CTA total (cta_total: each warp's butterfly, then
// the warps in order), so every sum and output keeps its bits. Each lane only ever touches the
// elements i = lane (mod 32), so a lane reads back its own writes (no barrier between the steps).
constexpr int kVirt = 4;  // the old CTA's 128 threads per lane: lane + 32 w

__device__ __forceinline__ double warp_total(const double (&v)[kVirt]) {
  double t = 0.0;
#pragma unroll
  for (int w = 0; w < kVirt; ++w) t += warp_sum(v[w]);
  return t;
}

// The mean of the node's scalar row x[0 .. C) (the warp's lanes each take the channels lane + 32 w,
// the partials added as warp_total adds them).
__device__ __forceinline__ double scalar_mean(int C, const float* x, int lane) {
  double m[kVirt];
#pragma unroll
  for (int w = 0; w < kVirt; ++w) {
    m[w] = 0.0;
    for (int c = lane + 32 * w; c < C; c += (32 * kVirt)) m[w] += x[c];
  }
  return warp_total(m) / C;
}

// y = EqRMSNorm(x) (+ residual) on one node (docs/model.md §5.2.1); x, y, res at the node's rows.
__device__ void eq_norm_forward_warp(int L, int C, const float* x, const float* scale, const float* bias, float eps,
                                     float* y, float* rho_o, const float* res) {
  const int lane = threadIdx.x % 32, D = (L + 1) * (L + 1), DC = D * C;
  double v[kVirt];
  const double mean0 = scalar_mean(C, x, lane);
#pragma unroll
  for (int w = 0; w < kVirt; ++w) {
    v[w] = 0.0;  // sum over degrees of the degree's mean square / (L+1)
    for (int i = lane + 32 * w; i < DC; i += (32 * kVirt)) {
      const int p = i / C, l = degree_of_packed(p);
      const double xt = p == 0 ? x[i] - mean0 : x[i];
      v[w] += xt * xt / (double)((2 * l + 1) * (L + 1) * C);
    }
  }
  const double rho = 1.0 / sqrt(warp_total(v) + eps);
  if (lane == 0) *rho_o = (float)rho;
  for (int i = lane; i < DC; i += 32) {
    const int p = i / C, c = i % C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[i] - mean0 : x[i];
    y[i] = (float)(xt * rho * scale[l * C + c] + (p == 0 ? bias[c] : 0.0f) + (res ? res[i] : 0.0f));
  }
}

// xb += dEqRMSNorm^T yb on one node (docs/model.md §7.6).
__device__ void eq_norm_backward_warp(int L, int C, const float* x, const float* scale, double rho, const float* yb,
                                      float* xb) {
  const int lane = threadIdx.x % 32, D = (L + 1) * (L + 1), DC = D * C;
  double sg[kVirt], r0[kVirt];
  const double mean0 = scalar_mean(C, x, lane);
#pragma unroll
  for (int w = 0; w < kVirt; ++w) {
    sg[w] = 0.0;
    for (int i = lane + 32 * w; i < DC; i += (32 * kVirt)) {
      const int p = i / C, l = degree_of_packed(p);
      const double xt = p == 0 ? x[i] - mean0 : x[i];
      sg[w] += yb[i] * scale[l * C + i % C] * xt * rho;
    }
  }
  const double sigma = warp_total(sg);
#pragma unroll
  for (int w = 0; w < kVirt; ++w) {
    r0[w] = 0.0;
    for (int i = lane + 32 * w; i < DC; i += (32 * kVirt)) {
      const int p = i / C, l = degree_of_packed(p);
      const double beta = 1.0 / (double)((2 * l + 1) * (L + 1) * C);
      const double xt = p == 0 ? x[i] - mean0 : x[i];
      const double g = rho * (yb[i] * scale[l * C + i % C] - beta * xt * rho * sigma);
      if (p == 0) r0[w] += g;
      xb[i] += (float)g;
    }
  }
  const double row0 = warp_total(r0) / C;
  for (int c = lane; c < C; c += 32) xb[c] -= (float)row0;
}

// Register-resident form of the two norms for nodes of at most 32 kRegPer values (D C <= 512:
// L = 3 with C <= 32): lane element j is i = lane + 32 j, the old thread lane + 32 (j % 4)'s
// (j / 4)-th, so every partial sum takes the same terms in the same order and every output has
// the bits of the loops above. The lane's values are loaded once, all at a time, and the pair's
// second norm takes the first's outputs from registers: the loops above walk global memory one
// dependent element after another, a critical path that set the time of the per-chunk launches.
constexpr int kRegPer = 16;

// The scalar row's mean from the lane's values (scalar_mean's terms and order).
__device__ __forceinline__ double scalar_mean_reg(int C, const float (&x)[kRegPer], int lane) {
  double m[kVirt] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int j = 0; j < kRegPer; ++j)
    if (lane + 32 * j < C) m[j % kVirt] += x[j];
  return warp_total(m) / C;
}

// eq_norm_forward_warp on the lane's values x; y (and, with res, the residual added) into yv.
__device__ __forceinline__ void eq_norm_forward_reg(int L, int C, const float (&x)[kRegPer], const float* scale,
                                                    const float* bias, float eps, const float (&res)[kRegPer],
                                                    bool has_res, float (&yv)[kRegPer], float* rho_o) {
  const int lane = threadIdx.x % 32, DC = (L + 1) * (L + 1) * C;
  const double mean0 = scalar_mean_reg(C, x, lane);
  double v[kVirt] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int j = 0; j < kRegPer; ++j) {
    const int i = lane + 32 * j;
    if (i >= DC) continue;
    const int p = i / C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[j] - mean0 : x[j];
    v[j % kVirt] += xt * xt / (double)((2 * l + 1) * (L + 1) * C);
  }
  const double rho = 1.0 / sqrt(warp_total(v) + eps);
  if (lane == 0) *rho_o = (float)rho;
#pragma unroll
  for (int j = 0; j < kRegPer; ++j) {
    const int i = lane + 32 * j;
    if (i >= DC) continue;
    const int p = i / C, c = i % C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[j] - mean0 : x[j];
    yv[j] = (float)(xt * rho * scale[l * C + c] + (p == 0 ? bias[c] : 0.0f) + (has_res ? res[j] : 0.0f));
  }
}

// eq_norm_backward_warp on the lane's values: xb += its transpose of yb (xb's fp32 rounding steps
// as the loop's: += g, then the scalar row's -= row0).
__device__ __forceinline__ void eq_norm_backward_reg(int L, int C, const float (&x)[kRegPer], const float* scale,
                                                     double rho, const float (&yb)[kRegPer], float (&xb)[kRegPer]) {
  const int lane = threadIdx.x % 32, DC = (L + 1) * (L + 1) * C;
  const double mean0 = scalar_mean_reg(C, x, lane);
  double sg[kVirt] = {0.0, 0.0, 0.0, 0.0}, r0[kVirt] = {0.0, 0.0, 0.0, 0.0};
  float ys[kRegPer];  // yb s in fp32, formed once (the loops form the same product twice)
#pragma unroll
  for (int j = 0; j < kRegPer; ++j) {
    const int i = lane + 32 * j;
    ys[j] = 0.0f;
    if (i >= DC) continue;
    const int p = i / C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[j] - mean0 : x[j];
    ys[j] = yb[j] * scale[l * C + i % C];
    sg[j % kVirt] += ys[j] * xt * rho;
  }
  const double sigma = warp_total(sg);
#pragma unroll
  for (int j = 0; j < kRegPer; ++j) {
    const int i = lane + 32 * j;
    if (i >= DC) continue;
    const int p = i / C, l = degree_of_packed(p);
    const double beta = 1.0 / (double)((2 * l + 1) * (L + 1) * C);
    const double xt = p == 0 ? x[j] - mean0 : x[j];
    const double g = rho * (ys[j] - beta * xt * rho * sigma);
    if (p == 0) r0[j % kVirt] += g;
    xb[j] += (float)g;
  }
  const double row0 = warp_total(r0) / C;
#pragma unroll
  for (int j = 0; j < kRegPer; ++j)
    if (lane + 32 * j < C) xb[j] -= (float)row0;
}

// The lane's values of a node row (zeros past DC, never read).
__device__ __forceinline__ void load_reg(int DC, const float* src, float (&v)[kRegPer]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kRegPer; ++j) v[j] = lane + 32 * j < DC ? src[lane + 32 * j] : 0.0f;
}
__device__ __forceinline__ void store_reg(int DC, const float (&v)[kRegPer], float* dst) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kRegPer; ++j)
    if (lane + 32 * j < DC) dst[lane + 32 * j] = v[j];
}

// X1 = norm_post(O) + X, Xt = norm_pre(X1) on node n with D C <= 32 kRegPer (the second norm
// takes the first's outputs from registers).
__device__ __forceinline__ void eq_norm_pair_forward_node_reg(const EqNormPairArgs& a, int n) {
  const int DC = (a.L + 1) * (a.L + 1) * a.C;
  const size_t o = (size_t)n * DC;
  float x[kRegPer], r[kRegPer], y[kRegPer];
  load_reg(DC, a.O + o, x);
  load_reg(DC, a.X + o, r);
  eq_norm_forward_reg(a.L, a.C, x, a.post_scale, a.post_bias, a.post_eps, r, true, y, a.post_rho + n);
  store_reg(DC, y, a.X1 + o);
  eq_norm_forward_reg(a.L, a.C, y, a.pre_scale, a.pre_bias, a.pre_eps, r, false, x, a.pre_rho + n);
  store_reg(DC, x, a.Xt + o);
}

// X1_bar += norm_pre^T(t), then t = norm_post^T(X1_bar) on node n with D C <= 32 kRegPer (t from
// zero, as the separate launches' memset left it: the same bits).
__device__ __forceinline__ void eq_norm_pair_backward_node_reg(const EqNormPairBackwardArgs& a, int n) {
  const int DC = (a.L + 1) * (a.L + 1) * a.C;
  const size_t o = (size_t)n * DC;
  float x[kRegPer], t[kRegPer], xb[kRegPer];
  load_reg(DC, a.X1 + o, x);
  load_reg(DC, a.t + o, t);
  load_reg(DC, a.X1_bar + o, xb);
  eq_norm_backward_reg(a.L, a.C, x, a.pre_scale, a.pre_rho[n], t, xb);
  store_reg(DC, xb, a.X1_bar + o);
  load_reg(DC, a.O + o, x);
#pragma unroll
  for (int j = 0; j < kRegPer; ++j) t[j] = 0.0f;
  eq_norm_backward_reg(a.L, a.C, x, a.post_scale, a.post_rho[n], xb, t);
  store_reg(DC, t, a.t + o);
}

// Any node size: the register form where it fits, else the loops above on global memory.
__device__ __forceinline__ void eq_norm_pair_forward_node(const EqNormPairArgs& a, int n) {
  const int DC = (a.L + 1) * (a.L + 1) * a.C;
  if (DC <= 32 * kRegPer) return eq_norm_pair_forward_node_reg(a, n);
  const size_t o = (size_t)n * DC;
  eq_norm_forward_warp(a.L, a.C, a.O + o, a.post_scale, a.post_bias, a.post_eps, a.X1 + o, a.post_rho + n, a.X + o);
  eq_norm_forward_warp(a.L, a.C, a.X1 + o, a.pre_scale, a.pre_bias, a.pre_eps, a.Xt + o, a.pre_rho + n, nullptr);
}
__device__ __forceinline__ void eq_norm_pair_backward_node(const EqNormPairBackwardArgs& a, int n) {
  const int DC = (a.L + 1) * (a.L + 1) * a.C;
  if (DC <= 32 * kRegPer) return eq_norm_pair_backward_node_reg(a, n);
  const size_t o = (size_t)n * DC;
  eq_norm_backward_warp(a.L, a.C, a.X1 + o, a.pre_scale, a.pre_rho[n], a.t + o, a.X1_bar + o);
  for (int i = threadIdx.x % 32; i < DC; i += 32) a.t[o + i] = 0.0f;  // the memset's zeros
  eq_norm_backward_warp(a.L, a.C, a.O + o, a.post_scale, a.post_rho[n], a.X1_bar + o, a.t + o);
}

}  // namespace
}  // namespace sezm::cuda
