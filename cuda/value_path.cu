// The SO(2) value path around the mixing stack, forward and backward side by side (CPU twin:
// engine/so2_convolution.h; docs/model.md §5.3, §5.6, §5.8; backward §7.9, §7.11): gather +
// rotate + radial conditioning, rotate-back + destination sum (its forward in
// rotate_back_aggregate.cu) and their backward (the
// source-side sums: source_backward.cu fused with the conditioning and rotation backward, or,
// SEZM_CUDA_SRCBWD_LEGACY=1 and shapes outside the warp kernels, source_sums.cu after
// launch_condition_rotate_backward). The per-edge kernels run one warp per edge (lanes over
// channels, value_path_warp.cuh) for Cw = 32, 64 or 128; the one-CTA-per-edge kernels below
// (channels over threads, per-edge sums by cta_sum) stay for the other widths. Edges arrive in
// chunks of whole destination segments, so every destination-side sum is a plain loop over its
// CSR segment; source-side sums use a per-chunk source grouping (no atomics, deterministic).
// The segment sums (rotate_back_aggregate.cu, source_backward.cu, source_sums.cu) are
// latency-bound gathers: they copy each batch of a segment's edges into shared memory with
// asynchronous copies (async_copy.cuh), then add from there in a fixed order.
#include <cstdint>

#include "cta_reduce.cuh"
#include "radial_tables.cuh"
#include "stack.cuh"
#include "value_path.cuh"
#include "aggregate_backward_warp.cuh"
#include "value_path_warp.cuh"

namespace sezm::cuda {
namespace {

template <int LT>
__host__ __device__ constexpr int kernel_size() { return (LT + 1) * (LT + 1) + LT * LT; }

// Gather H[src] rows into the edge frame for one channel: xl[j] (mmax = 1 rows).
template <int LT>
__device__ void rotate_in(const Dims& d, const float* Dce, const float* Hs, int c, float* xl) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  #pragma unroll
  for (int j = 0; j < kDm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    if (l == 0) {
      xl[j] = Hs[c];
      continue;
    }
    const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
    float v = 0.0f;
    #pragma unroll
    for (int mp = -l; mp <= l; ++mp) v += row[mp + l] * Hs[(size_t)packed(l, mp) * d.Cw + c];
    xl[j] = v;
  }
}

// One CTA (Cw threads) per edge: rotate + radial conditioning -> U0 focus-major, S_src. The wide
// radial features and the degree kernel of the chunk's edges come precomputed (launch_radial_prep),
// so the kernel needs no shared memory and no barrier.
template <int LT>
__global__ void rotate_condition_k(Dims d, BlockWDev w, int e0, int Ec, const int* __restrict__ src,
                                   const float* __restrict__ Dc, const float* __restrict__ H,
                                   const float* __restrict__ Rh_c, const float* __restrict__ kern_c,
                                   float* __restrict__ U0, float* __restrict__ Ssrc) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  const int i = blockIdx.x, e = e0 + i, c = threadIdx.x;
  const float* Rh = Rh_c + (size_t)i * (LT + 1) * d.Cw;
  const float* kern = kern_c + (size_t)i * padded_kernel_size(d);
  float xl[kMaxDm];
  rotate_in<LT>(d, Dc + (size_t)e * kDcs, H + (size_t)src[e] * kD * d.Cw, c, xl);
  const int f = c / d.Cf, cf = c % d.Cf;
  float* U = U0 + ((size_t)f * Ec + i) * d.ROW;
  #pragma unroll
  for (int o = 0; o < kDm; ++o) {
    const int lo = red_l(o, LT), mo = red_m(o, LT);
    float v;
    if (!d.degree_mixer) {
      v = xl[o] * Rh[lo * d.Cw + c];
    } else {
      v = 0.0f;
      #pragma unroll
      for (int in = 0; in < kDm; ++in) {
        if (red_m(in, LT) != mo) continue;
        v += kern[kernel_index(LT, red_l(in, LT), lo, mo)] * xl[in];
      }
      v *= w.cb[c];
    }
    if (U0) U[o * d.Cf + cf] = v;
    if (o == 0 && d.F > 1) Ssrc[((size_t)f * Ec + i) * d.Cf + cf] = v;
  }
}

// One CTA (Cw threads) per edge: Q = rho D P_bar[dst]; G = alpha alpha_fc Q (gradient wrt the
// pre-scale stack output); alpha_bar; Dc_bar from the rotate-back.
template <int LT>
__global__ void aggregate_backward_k(Dims d, int e0, int Ec, const int* __restrict__ dst, const float* __restrict__ Dc,
                                     const float* __restrict__ U, const float* __restrict__ alpha_fc,
                                     const float* __restrict__ alpha, const float* __restrict__ P_bar,
                                     float* __restrict__ Gbuf, float* __restrict__ alpha_bar,
                                     float* __restrict__ Dc_bar) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ float sh[];
  float* red = sh;                       // (dc_size + F) * Cw
  float* out = red + (kDcs + d.F) * d.Cw;  // dc_size + F
  float* redf = out + kDcs + d.F;          // Cw
  const int i = blockIdx.x, e = e0 + i, c = threadIdx.x, f = c / d.Cf, cf = c % d.Cf;
  const float* Pb = P_bar + (size_t)dst[e] * kD * d.Cw + c;
  const float* Dce = Dc + (size_t)e * kDcs;
  const float afc = d.F > 1 ? alpha_fc[(size_t)i * d.F + f] : 1.0f;
  const float a = alpha[(size_t)e * d.F + f] * afc;
  const float* u = U + ((size_t)f * Ec + i) * d.ROW + cf;
  float* G = Gbuf + ((size_t)f * Ec + i) * d.ROW + cf;
  float v[kDcs];
  #pragma unroll
  for (int k = 0; k < kDcs; ++k) v[k] = 0.0f;
  float ab = 0.0f;
  #pragma unroll
  for (int j = 0; j < kDm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    const float sc = rotate_back_scalef(l), uj = u[j * d.Cf];
    float Q;
    if (l == 0) {
      Q = Pb[0];
      v[0] += a * uj * Pb[0];
    } else {
      const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
      Q = 0.0f;
      #pragma unroll
      for (int mp = -l; mp <= l; ++mp) {
        const float pb = Pb[(size_t)packed(l, mp) * d.Cw];
        Q += row[mp + l] * pb;
        v[dc_off(l) + (m + 1) * (2 * l + 1) + mp + l] += sc * a * uj * pb;
      }
    }
    Q *= sc;
    G[j * d.Cf] = a * Q;
    ab += Q * uj;
  }
  cta_sum<kDcs>(v, red, out);
  for (int k = c; k < kDcs; k += d.Cw) Dc_bar[(size_t)e * kDcs + k] += out[k];
  // alpha_bar[f]: sum of ab over the Cf channels of focus f (segments of min(Cf, 32) lanes).
  {
    const int seg = d.Cf < 32 ? d.Cf : 32;
    const unsigned mask = d.Cw >= 32 ? 0xffffffffu : ((1u << d.Cw) - 1u);
    float t = ab * afc;
    for (int o = seg / 2; o > 0; o >>= 1) t += __shfl_xor_sync(mask, t, o, seg);
    if (c % seg == 0) redf[c / seg] = t;
    __syncthreads();
    if (c < d.F) {
      float sum = 0.0f;
      for (int q = c * d.Cf / seg; q < (c + 1) * d.Cf / seg; ++q) sum += redf[q];
      alpha_bar[(size_t)i * d.F + c] = sum;
    }
  }
}

// One CTA (Cw threads) per edge: radial conditioning and rotation backward -> Xloc_bar (for the
// source-side sum), Dc_bar, the attention logit bias's share of R_bar, and the radial adjoint
// the chunk products of launch_condition_rotate_backward turn into R_bar: with the degree mixer
// the kernel adjoint kb (written over the edge's kern row), without it Rh_bar (written over the
// edge's Rh rows, or added to R_bar when there is no hidden projection). Keeping the two
// weight products (kb W_mix^T, Rh_bar W_rh^T) out of this kernel turns ~360 weight loads per
// thread and edge into register-tiled products.
template <int LT>
__global__ void condition_rotate_backward_k(Dims d, BlockWDev w, int e0, int Ec, const int* __restrict__ src,
                                            const float* __restrict__ Dc, const float* __restrict__ H,
                                            float* __restrict__ Rh_c, float* __restrict__ kern_c,
                                            const float* __restrict__ Gbuf, const float* __restrict__ Ssrc_bar,
                                            const float* __restrict__ lbar, float* __restrict__ Xloc_bar,
                                            float* __restrict__ R_bar, float* __restrict__ Dc_bar) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ float sh[];
  const int redn = d.K > kDcs ? d.K : kDcs;
  float* red = sh;                // redn Cw
  float* kb = red + redn * d.Cw;  // redn
  float* vo = kb + redn;          // redn
  const int i = blockIdx.x, e = e0 + i, c = threadIdx.x, f = c / d.Cf, cf = c % d.Cf;
  float* Rh = Rh_c + (size_t)i * (LT + 1) * d.Cw;  // precomputed by launch_radial_prep
  float* kern = kern_c + (size_t)i * padded_kernel_size(d);
  const float* Hs = H + (size_t)src[e] * kD * d.Cw;
  const float* Dce = Dc + (size_t)e * kDcs;
  float xl[kMaxDm], ub[kMaxDm], xb[kMaxDm];
  rotate_in<LT>(d, Dce, Hs, c, xl);
  const float* g = Gbuf + ((size_t)f * Ec + i) * d.ROW + cf;
  #pragma unroll
  for (int o = 0; o < kDm; ++o) ub[o] = g[o * d.Cf];
  if (d.F > 1) ub[0] += Ssrc_bar[((size_t)f * Ec + i) * d.Cf + cf];
  if (!d.degree_mixer) {
    float rhb[LT + 1];
    #pragma unroll
    for (int l = 0; l <= LT; ++l) rhb[l] = 0.0f;
    #pragma unroll
    for (int o = 0; o < kDm; ++o) {
      const int lo = red_l(o, LT);
      xb[o] = ub[o] * Rh[lo * d.Cw + c];
      rhb[lo] += ub[o] * xl[o];
    }
    // Each thread reads and writes only its own column of the edge's rows: in place is safe.
    float* Rb = R_bar + (size_t)i * (LT + 1) * d.C;
    #pragma unroll
    for (int l = 0; l <= LT; ++l) {
      if (d.has_rh) Rh[l * d.Cw + c] = rhb[l];
      else Rb[l * d.C + c] += rhb[l];
    }
  } else {
    constexpr int K = kernel_size<LT>();
    float kpart[K];
    #pragma unroll
    for (int q = 0; q < K; ++q) kpart[q] = 0.0f;
    const float b = w.cb[c];
    #pragma unroll
    for (int in = 0; in < kDm; ++in) xb[in] = 0.0f;
    #pragma unroll
    for (int o = 0; o < kDm; ++o) {
      const int lo = red_l(o, LT), mo = red_m(o, LT);
      const float bub = b * ub[o];
      #pragma unroll
      for (int in = 0; in < kDm; ++in) {
        if (red_m(in, LT) != mo) continue;
        const int q = kernel_index(LT, red_l(in, LT), lo, mo);
        xb[in] += kern[q] * bub;
        kpart[q] += bub * xl[in];
      }
    }
    cta_sum<K>(kpart, red, kb);  // its barriers also order every read of kern before the writes
    for (int q = c; q < padded_kernel_size(d); q += d.Cw) kern[q] = q < K ? kb[q] : 0.0f;
  }
  #pragma unroll
  for (int j = 0; j < kDm; ++j) Xloc_bar[((size_t)i * kDm + j) * d.Cw + c] = xb[j];
  // Dc_bar from the rotation: sum_c xb[j] H[src, p(l_j, m'), c].
  float v[kDcs];
  #pragma unroll
  for (int k = 0; k < kDcs; ++k) v[k] = 0.0f;
  #pragma unroll
  for (int j = 0; j < kDm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    if (l == 0) continue;
    #pragma unroll
    for (int mp = -l; mp <= l; ++mp)
      v[dc_off(l) + (m + 1) * (2 * l + 1) + mp + l] += xb[j] * Hs[(size_t)packed(l, mp) * d.Cw + c];
  }
  cta_sum<kDcs>(v, red, vo);
  for (int k = c; k < kDcs; k += d.Cw) Dc_bar[(size_t)e * kDcs + k] += vo[k];
  // The attention logit bias reads R[e, 0, :]: its adjoint lands on R_bar directly.
  float* Rb = R_bar + (size_t)i * (LT + 1) * d.C;
  for (int a = c; a < d.C; a += d.Cw) {
    float s = 0.0f;
    for (int ff = 0; ff < d.F; ++ff) s += lbar[(size_t)i * d.F + ff] * w.logit_u[(size_t)ff * d.C + a];
    Rb[a] += s;
  }
}

}  // namespace

void launch_rotate_condition(const Dims& d, const BlockWDev& w, const RotateConditionArgs& a, cudaStream_t s) {
  const int Ec = a.Ec;
  if (Ec == 0 || (a.U0 == nullptr && d.F == 1)) return;  // nothing asked (fast mode's backward, one focus)
  const int nc = warp_lanes(d, a.H, a.Rh, a.U0, a.Ssrc);
  if (a.U0 != nullptr && stack_in_f16(d)) {  // U0 as binary16 rows (f16_rows.cuh) for the register-resident chain
    if (nc != 2 && nc != 4) throw Error("launch_rotate_condition: binary16 rows need the warp kernel, Cw = 64 or 128");
    if (nc == 2) rotate_condition_w<3, 2, true><<<warp_grid(Ec), 32 * kWarps, 0, s>>>(d, w, a);
    else rotate_condition_w<3, 4, true><<<warp_grid(Ec), 32 * kWarps, 0, s>>>(d, w, a);
    SEZM_LAUNCH("rotate_condition");
    return;
  }
  if (nc != 0) {
    warp_dispatch(d.L, nc, [&](auto lt, auto ncv) {
      rotate_condition_w<decltype(lt)::value, decltype(ncv)::value><<<warp_grid(Ec), 32 * kWarps, 0, s>>>(d, w, a);
    });
    SEZM_LAUNCH("rotate_condition");
    return;
  }
  if (d.L == 1)
    rotate_condition_k<1><<<Ec, d.Cw, 0, s>>>(d, w, a.e0, Ec, a.src, a.Dc, a.H, a.Rh, a.kern, a.U0, a.Ssrc);
  else if (d.L == 2)
    rotate_condition_k<2><<<Ec, d.Cw, 0, s>>>(d, w, a.e0, Ec, a.src, a.Dc, a.H, a.Rh, a.kern, a.U0, a.Ssrc);
  else
    rotate_condition_k<3><<<Ec, d.Cw, 0, s>>>(d, w, a.e0, Ec, a.src, a.Dc, a.H, a.Rh, a.kern, a.U0, a.Ssrc);
  SEZM_LAUNCH("rotate_condition");
}
void launch_aggregate_backward(const Dims& d, const AggregateBackwardArgs& a, cudaStream_t s) {
  const int Ec = a.Ec;
  if (Ec == 0) return;
  const int nc = warp_lanes(d, a.P_bar, a.U, a.Gbuf);
  if (stack_out_f16(d)) {  // U in binary16 rows (f16_rows.cuh): the warp kernel's shape (L = 3, Cf = 32)
    if (nc != 2 && nc != 4) throw Error("launch_aggregate_backward: binary16 rows need the warp kernel, Cw = 64 or 128");
    const bool g16 = stack_adj_f16(d);  // G as binary16 rows too, for the register-resident backward
    if (nc == 2 && g16) aggregate_backward_w<3, 2, true, true><<<aggregate_grid(Ec), 32 * kWarps, 0, s>>>(d, a);
    else if (nc == 2) aggregate_backward_w<3, 2, true, false><<<aggregate_grid(Ec), 32 * kWarps, 0, s>>>(d, a);
    else if (g16) aggregate_backward_w<3, 4, true, true><<<aggregate_grid(Ec), 32 * kWarps, 0, s>>>(d, a);
    else aggregate_backward_w<3, 4, true, false><<<aggregate_grid(Ec), 32 * kWarps, 0, s>>>(d, a);
    SEZM_LAUNCH("aggregate_backward");
    return;
  }
  if (nc != 0) {
    warp_dispatch(d.L, nc, [&](auto lt, auto ncv) {
      aggregate_backward_w<decltype(lt)::value, decltype(ncv)::value, false>
          <<<aggregate_grid(Ec), 32 * kWarps, 0, s>>>(d, a);
    });
    SEZM_LAUNCH("aggregate_backward");
    return;
  }
  const size_t bytes = ((size_t)(d.dc_size + d.F + 1) * d.Cw + d.dc_size + d.F) * sizeof(float);
  if (d.L == 1)
    aggregate_backward_k<1><<<Ec, d.Cw, bytes, s>>>(d, a.e0, Ec, a.dst, a.Dc, a.U, a.alpha_fc, a.alpha, a.P_bar,
                                                    a.Gbuf, a.alpha_bar, a.Dc_bar);
  else if (d.L == 2)
    aggregate_backward_k<2><<<Ec, d.Cw, bytes, s>>>(d, a.e0, Ec, a.dst, a.Dc, a.U, a.alpha_fc, a.alpha, a.P_bar,
                                                    a.Gbuf, a.alpha_bar, a.Dc_bar);
  else
    aggregate_backward_k<3><<<Ec, d.Cw, bytes, s>>>(d, a.e0, Ec, a.dst, a.Dc, a.U, a.alpha_fc, a.alpha, a.P_bar,
                                                    a.Gbuf, a.alpha_bar, a.Dc_bar);
  SEZM_LAUNCH("aggregate_backward");
}
void launch_condition_rotate_backward(const Dims& d, const BlockWDev& w, const ConditionRotateBackwardArgs& a,
                                      cudaStream_t s) {
  const int Ec = a.Ec;
  if (Ec == 0) return;
  const int nc = warp_lanes(d, a.H, a.Rh, a.Gbuf, a.Ssrc_bar, a.Xloc_bar, d.has_rh ? nullptr : a.R_bar);
  if (nc != 0) {
    warp_dispatch(d.L, nc, [&](auto lt, auto ncv) {
      condition_rotate_backward_w<decltype(lt)::value, decltype(ncv)::value>
          <<<warp_grid(Ec), 32 * kWarps, 0, s>>>(d, w, a);
    });
    SEZM_LAUNCH("condition_rotate_backward");
    launch_radial_adjoint(d, w, RadialTablesArgs{a.e0, Ec, EdgeRadialIn{}, a.Rh, a.kern, a.R_bar}, s);
    return;
  }
  const int redn = d.K > d.dc_size ? d.K : d.dc_size;
  const size_t bytes = ((size_t)redn * d.Cw + 2 * (size_t)redn) * sizeof(float);
  if (d.L == 1)
    condition_rotate_backward_k<1><<<Ec, d.Cw, bytes, s>>>(d, w, a.e0, Ec, a.src, a.Dc, a.H, a.Rh, a.kern, a.Gbuf,
                                                           a.Ssrc_bar, a.lbar, a.Xloc_bar, a.R_bar, a.Dc_bar);
  else if (d.L == 2)
    condition_rotate_backward_k<2><<<Ec, d.Cw, bytes, s>>>(d, w, a.e0, Ec, a.src, a.Dc, a.H, a.Rh, a.kern, a.Gbuf,
                                                           a.Ssrc_bar, a.lbar, a.Xloc_bar, a.R_bar, a.Dc_bar);
  else
    condition_rotate_backward_k<3><<<Ec, d.Cw, bytes, s>>>(d, w, a.e0, Ec, a.src, a.Dc, a.H, a.Rh, a.kern, a.Gbuf,
                                                           a.Ssrc_bar, a.lbar, a.Xloc_bar, a.R_bar, a.Dc_bar);
  SEZM_LAUNCH("condition_rotate_backward");
  launch_radial_adjoint(d, w, RadialTablesArgs{a.e0, Ec, EdgeRadialIn{}, a.Rh, a.kern, a.R_bar}, s);
}
}  // namespace sezm::cuda
