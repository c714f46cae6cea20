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
// L = 3 with C <= 32): element j of the node's lane is i = lane + 32 j, the old thread
// lane + 32 (j % 4)'s (j / 4)-th, so every partial sum takes the same terms in the same order and
// every output has the bits of the loops above. The lane's values are loaded once, all at a time,
// and the pair's second norm takes the first's outputs from registers: the loops above walk global
// memory one dependent element after another, a critical path that set the time of the per-chunk
// launches.
constexpr int kRegPer = 16;

// Who runs one node's norms: one warp (kTeam = 1; it holds all 16 elements j of its lane), or a
// team of four warps (kTeam = kVirt), warp w holding the elements j = 4 m + w, i.e. the old CTA's
// warp w, each warp a quarter of the dependent arithmetic. A team's total adds the four warps'
// butterflies in the order w = 0..3 through shared memory, which is warp_total's order: the same
// bits either way. (The per-chunk linears of the fused block have one node per CTA of four warps,
// of which one ran the norms: most of the launch, ncu 2026-12-03.)
template <int kTeam>
struct NormTeam {
  static_assert(kTeam == 1 || kTeam == kVirt, "a node's norms: one warp or a team of kVirt");
  static constexpr int kPer = kRegPer / kTeam;  // elements per lane
  int w = 0;                // the warp's place in the team
  double* slots = nullptr;  // 2 kTeam doubles of shared memory, the team's own (kTeam > 1)
  int round = 0;            // which half of the slots the next total uses
  __device__ int j(int m) const { return kTeam == 1 ? m : kTeam * m + w; }
  __device__ int acc(int m) const { return kTeam == 1 ? m % kVirt : 0; }  // the partial j % 4 adds into
  __device__ bool first() const { return w == 0 && threadIdx.x % 32 == 0; }
  // Every warp of the CTA calls total equally often (a CTA barrier); a slot half is written again
  // only after the next total's barrier, by which every read of it is done.
  __device__ double total(const double (&v)[kVirt]) {
    if constexpr (kTeam == 1) {
      return warp_total(v);
    } else {
      const double s = warp_sum(v[0]);
      double* sl = slots + (round++ & 1) * kTeam;
      if (threadIdx.x % 32 == 0) sl[w] = s;
      __syncthreads();
      double t = 0.0;
#pragma unroll
      for (int u = 0; u < kTeam; ++u) t += sl[u];
      return t;
    }
  }
};

// The scalar row's mean from the lane's values (scalar_mean's terms and order).
template <int kTeam>
__device__ __forceinline__ double scalar_mean_reg(NormTeam<kTeam>& tm, int C, const float (&x)[NormTeam<kTeam>::kPer],
                                                  int lane) {
  double m[kVirt] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int k = 0; k < NormTeam<kTeam>::kPer; ++k)
    if (lane + 32 * tm.j(k) < C) m[tm.acc(k)] += x[k];
  return tm.total(m) / C;
}

// eq_norm_forward_warp on the lane's values x; y (and, with res, the residual added) into yv.
template <int kTeam>
__device__ __forceinline__ void eq_norm_forward_reg(NormTeam<kTeam>& tm, int L, int C,
                                                    const float (&x)[NormTeam<kTeam>::kPer], const float* scale,
                                                    const float* bias, float eps,
                                                    const float (&res)[NormTeam<kTeam>::kPer], bool has_res,
                                                    float (&yv)[NormTeam<kTeam>::kPer], float* rho_o, bool live) {
  constexpr int kPer = NormTeam<kTeam>::kPer;
  const int lane = threadIdx.x % 32, DC = (L + 1) * (L + 1) * C;
  const double mean0 = scalar_mean_reg(tm, C, x, lane);
  double v[kVirt] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = lane + 32 * tm.j(k);
    if (i >= DC) continue;
    const int p = i / C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[k] - mean0 : x[k];
    v[tm.acc(k)] += xt * xt / (double)((2 * l + 1) * (L + 1) * C);
  }
  const double rho = 1.0 / sqrt(tm.total(v) + eps);
  if (live && tm.first()) *rho_o = (float)rho;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = lane + 32 * tm.j(k);
    if (i >= DC) continue;
    const int p = i / C, c = i % C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[k] - mean0 : x[k];
    yv[k] = (float)(xt * rho * scale[l * C + c] + (p == 0 ? bias[c] : 0.0f) + (has_res ? res[k] : 0.0f));
  }
}

// eq_norm_backward_warp on the lane's values: xb += its transpose of yb (xb's fp32 rounding steps
// as the loop's: += g, then the scalar row's -= row0).
template <int kTeam>
__device__ __forceinline__ void eq_norm_backward_reg(NormTeam<kTeam>& tm, int L, int C,
                                                     const float (&x)[NormTeam<kTeam>::kPer], const float* scale,
                                                     double rho, const float (&yb)[NormTeam<kTeam>::kPer],
                                                     float (&xb)[NormTeam<kTeam>::kPer]) {
  constexpr int kPer = NormTeam<kTeam>::kPer;
  const int lane = threadIdx.x % 32, DC = (L + 1) * (L + 1) * C;
  const double mean0 = scalar_mean_reg(tm, C, x, lane);
  double sg[kVirt] = {0.0, 0.0, 0.0, 0.0}, r0[kVirt] = {0.0, 0.0, 0.0, 0.0};
  float ys[kPer];  // yb s in fp32, formed once (the loops form the same product twice)
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = lane + 32 * tm.j(k);
    ys[k] = 0.0f;
    if (i >= DC) continue;
    const int p = i / C, l = degree_of_packed(p);
    const double xt = p == 0 ? x[k] - mean0 : x[k];
    ys[k] = yb[k] * scale[l * C + i % C];
    sg[tm.acc(k)] += ys[k] * xt * rho;
  }
  const double sigma = tm.total(sg);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = lane + 32 * tm.j(k);
    if (i >= DC) continue;
    const int p = i / C, l = degree_of_packed(p);
    const double beta = 1.0 / (double)((2 * l + 1) * (L + 1) * C);
    const double xt = p == 0 ? x[k] - mean0 : x[k];
    const double g = rho * (ys[k] - beta * xt * rho * sigma);
    if (p == 0) r0[tm.acc(k)] += g;
    xb[k] += (float)g;
  }
  const double row0 = tm.total(r0) / C;
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (lane + 32 * tm.j(k) < C) xb[k] -= (float)row0;
}

// The lane's values of a node row (zeros past DC, never read).
template <int kTeam>
__device__ __forceinline__ void load_reg(const NormTeam<kTeam>& tm, int DC, const float* src,
                                         float (&v)[NormTeam<kTeam>::kPer]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < NormTeam<kTeam>::kPer; ++k) {
    const int i = lane + 32 * tm.j(k);
    v[k] = i < DC ? src[i] : 0.0f;
  }
}
template <int kTeam>
__device__ __forceinline__ void store_reg(const NormTeam<kTeam>& tm, int DC, const float (&v)[NormTeam<kTeam>::kPer],
                                          float* dst) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < NormTeam<kTeam>::kPer; ++k) {
    const int i = lane + 32 * tm.j(k);
    if (i < DC) dst[i] = v[k];
  }
}

// X1 = norm_post(O) + X, Xt = norm_pre(X1) on node n with D C <= 32 kRegPer (the second norm
// takes the first's outputs from registers). A team whose node is past the end (live false)
// still takes part in the totals (barriers) with node n's values and stores nothing.
template <int kTeam = 1>
__device__ __forceinline__ void eq_norm_pair_forward_node_reg(const EqNormPairArgs& a, int n,
                                                              NormTeam<kTeam> tm = {}, bool live = true) {
  constexpr int kPer = NormTeam<kTeam>::kPer;
  const int DC = (a.L + 1) * (a.L + 1) * a.C;
  const size_t o = (size_t)n * DC;
  float x[kPer], r[kPer], y[kPer];
  load_reg(tm, DC, a.O + o, x);
  load_reg(tm, DC, a.X + o, r);
  eq_norm_forward_reg(tm, a.L, a.C, x, a.post_scale, a.post_bias, a.post_eps, r, true, y, a.post_rho + n, live);
  if (live) store_reg(tm, DC, y, a.X1 + o);
  eq_norm_forward_reg(tm, a.L, a.C, y, a.pre_scale, a.pre_bias, a.pre_eps, r, false, x, a.pre_rho + n, live);
  if (live) store_reg(tm, DC, x, a.Xt + o);
}

// X1_bar += norm_pre^T(t), then t = norm_post^T(X1_bar) on node n with D C <= 32 kRegPer (t from
// zero, as the separate launches' memset left it: the same bits).
template <int kTeam = 1>
__device__ __forceinline__ void eq_norm_pair_backward_node_reg(const EqNormPairBackwardArgs& a, int n,
                                                               NormTeam<kTeam> tm = {}, bool live = true) {
  constexpr int kPer = NormTeam<kTeam>::kPer;
  const int DC = (a.L + 1) * (a.L + 1) * a.C;
  const size_t o = (size_t)n * DC;
  float x[kPer], t[kPer], xb[kPer];
  load_reg(tm, DC, a.X1 + o, x);
  load_reg(tm, DC, a.t + o, t);
  load_reg(tm, DC, a.X1_bar + o, xb);
  eq_norm_backward_reg(tm, a.L, a.C, x, a.pre_scale, a.pre_rho[n], t, xb);
  if (live) store_reg(tm, DC, xb, a.X1_bar + o);
  load_reg(tm, DC, a.O + o, x);
#pragma unroll
  for (int k = 0; k < kPer; ++k) t[k] = 0.0f;
  eq_norm_backward_reg(tm, a.L, a.C, x, a.post_scale, a.post_rho[n], xb, t);
  if (live) store_reg(tm, DC, t, a.t + o);
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
