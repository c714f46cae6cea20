// The SO(2) value path around the mixing stack, forward and backward side by side (CPU twin:
// engine/so2_convolution.h; docs/model.md §5.3, §5.6, §5.8; backward §7.9, §7.11): gather +
// rotate + radial conditioning, rotate-back + destination sum and their backward (the
// source-side sums: source_backward.cu fused with the conditioning and rotation backward, or,
// SEZM_CUDA_SRCBWD_LEGACY=1 and shapes outside the warp kernels, source_sums.cu after
// launch_condition_rotate_backward). The per-edge kernels run one warp per edge (lanes over
// channels, value_path_warp.cuh) for Cw = 32, 64 or 128; the one-CTA-per-edge kernels below
// (channels over threads, per-edge sums by cta_sum) stay for the other widths. Edges arrive in
// chunks of whole destination segments, so every destination-side sum is a plain loop over its
// CSR segment; source-side sums use a per-chunk source grouping (no atomics, deterministic).
// The segment sums are latency-bound gathers: they first copy each batch of a segment's edges
// into shared memory with asynchronous copies (copy_async16/4), then add from there in the old
// fixed order.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "async_copy.cuh"
#include "cta_reduce.cuh"
#include "radial_tables.cuh"
#include "value_path.cuh"
#include "value_path_warp.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxDm = 10, kMaxD = 16;

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
    U[o * d.Cf + cf] = v;
    if (o == 0 && d.F > 1) Ssrc[((size_t)f * Ec + i) * d.Cf + cf] = v;
  }
}

// One CTA per (centre, focus), Cf x kAggRows threads: P[n, p, c] = sum_e alpha rho_l D^T
// (alpha_fc U). A chunk holds only ~100 centres, so the focus and the in-edges are spread over
// CTAs and R thread rows to keep the GPU busy; partial sums are added in a fixed order
// (deterministic).
// 8 rows: 16 rows for focus width 32 was measured slower on the H200 (6.3 vs 5.9 ms per 4096-atom
// call); double partials of at most 57 KiB (sm_89 allows 99 KiB).
//
// Memory-level parallelism (issue 16: 77 % of the warp cycles waited on memory when each thread
// row walked its ~20 edges with an edge's 10 U values, 46 Wigner-row values, alpha and alpha_fc
// loaded one edge after the other): the segment is walked in batches of B edges (B a multiple
// of R, chosen by the launcher). All the CTA's threads copy a batch's data into shared memory:
// the U rows of focus f of B consecutive edges are one contiguous range of B ROW floats
// (focus-major U), copied as 16-byte quads, the Wigner rows, another contiguous range, and the
// scales alpha, alpha_fc, all by asynchronous copies (copy_async16/4: every copy of a thread in
// flight at once, no registers held), into one of two slots: the next batch's copies are issued
// before this one's are waited for, so they overlap its sums (ncu, 512 atoms: the barrier
// after a batch's copies held 19 % of the samples with one slot). After a barrier each
// thread row adds its edges from shared memory only. Row y still takes the segment's edges
// y, y + R, ... in that order, so the sums, and the bits, are the old ones. The staging area
// shares the dynamic shared memory with the partial sums (the batch loop's last barrier orders
// every read of it before the partials are written). 64 registers for L = 3 (ptxas, sm_90): four
// 256-thread CTAs per SM (three at 70), so a 32768-edge chunk's ~400 CTAs run in one wave.
//
// DR (double Wigner rows, the default; SEZM_CUDA_AGG_F32ROWS=1 keeps the fp32 rows above for
// comparison): adding the rounded fp32 product row x v into the double sum converts every
// product, 46 per edge and channel, and fp32 -> fp64 conversions run at 16 per clock and SM:
// ~0.9 ms of conversions alone per 4096-atom call (647,168 edges, two blocks), next to ~1 ms of
// loads. DR converts each staged Wigner-row value once per CTA (a pass after the copy, one more
// barrier per batch) and each v once per row j, then adds the exact product (24 x 24 significant
// bits fit a double) with a double FMA: ~10 conversions per edge and channel instead of 46, and
// at least as accurate. It needs 70 registers (64 spill) and 12 bytes of staging per row value,
// so it runs 6 thread rows by default: four 192-thread CTAs per SM (528 slots on an H200); larger
// chunks take more rows where that saves a mostly idle wave (aggregate_rows).
constexpr int kAggRows = 8, kAggRowsDR = 6;

// The staging of one batch of B edges (a slot; two of them, the batch after the one being added
// in flight): U rows (B ROW), Wigner rows (B kDcs), alpha and alpha_fc (B each), each region a
// multiple of four floats so the next slot's U rows stay 16-byte aligned.
struct AggSlot {
  int U, D, A, Afc, size;
  __host__ __device__ AggSlot(const Dims& d, int B) {
    auto r4 = [](int n) { return (n + 3) / 4 * 4; };
    U = 0; D = r4(B * d.ROW); A = D + r4(B * d.dc_size); Afc = A + B; size = r4(Afc + B);
  }
};

template <int LT, bool DR>
__global__ void __launch_bounds__(512) rotate_back_aggregate_k(Dims d, int n0, int e0, int Ec, int B,
                                                               const int* __restrict__ off,
                                                               const float* __restrict__ Dc,
                                                               const float* __restrict__ U,
                                                               const float* __restrict__ alpha_fc,
                                                               const float* __restrict__ alpha,
                                                               float* __restrict__ P) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ __align__(16) double part[];  // (R - 1) x kD x Cf; before that the staging area:
  double* sDd = part;                             // DR: the batch's B x kDcs Wigner rows in double
  const AggSlot sl(d, B);
  float* slots = reinterpret_cast<float*>(DR ? sDd + (B * kDcs + 1) / 2 * 2 : part);  // two AggSlots
  const int n = n0 + blockIdx.x, f = blockIdx.y, cf = threadIdx.x, c = f * d.Cf + cf, y = threadIdx.y;
  const int R = blockDim.y, tid = y * d.Cf + cf, nt = R * d.Cf;
  // U is a chunk buffer and ROW = Dm Cf a multiple of 4: quads unless a caller passes an odd base.
  const bool quads = (reinterpret_cast<uintptr_t>(U) & 15) == 0;
  double acc[kMaxD];  // the destination sum feeds every later step: keep it in double
  #pragma unroll
  for (int p = 0; p < kD; ++p) acc[p] = 0.0;
  const int beg = off[n], end = off[n + 1];
  // Batch b0's copies into slot `to` (issued, not waited for).
  auto stage = [&](int b0, float* to) {
    const int nb = min(B, end - b0);
    const float* Ub = U + ((size_t)f * Ec + (b0 - e0)) * d.ROW;
    if (quads) {
      for (int x = tid; x < nb * d.ROW / 4; x += nt) copy_async16(to + sl.U + 4 * x, Ub + 4 * x);
    } else {
      for (int x = tid; x < nb * d.ROW; x += nt) copy_async4(to + sl.U + x, Ub + x);
    }
    for (int x = tid; x < nb * kDcs; x += nt) copy_async4(to + sl.D + x, Dc + (size_t)b0 * kDcs + x);
    for (int k = tid; k < nb; k += nt) {
      copy_async4(to + sl.A + k, alpha + (size_t)(b0 + k) * d.F + f);
      if (d.F > 1) copy_async4(to + sl.Afc + k, alpha_fc + (size_t)(b0 + k - e0) * d.F + f);
    }
  };
  if (beg < end) stage(beg, slots);
  copy_async_commit();
  for (int b0 = beg, t = 0; b0 < end; b0 += B, ++t) {
    const int nb = min(B, end - b0);
    // The next batch's copies go out first (its slot's last reader, batch t - 1, ended with the
    // barrier below), then this batch's are waited for: the loads overlap this batch's sums.
    if (b0 + B < end) stage(b0 + B, slots + ((t + 1) & 1) * sl.size);
    copy_async_commit();
    copy_async_wait_group<1>();
    __syncthreads();
    const float* st = slots + (t & 1) * sl.size;
    const float *sU = st + sl.U, *sD = st + sl.D, *sA = st + sl.A, *sAfc = st + sl.Afc;
    if constexpr (DR) {
      #pragma unroll 1
      for (int x = tid; x < nb * kDcs; x += nt) sDd[x] = (double)sD[x];
      __syncthreads();
    }
    for (int k = y; k < nb; k += R) {
      const float a = sA[k] * (d.F > 1 ? sAfc[k] : 1.0f);
      const float* u = sU + (size_t)k * d.ROW + cf;
      #pragma unroll
      for (int j = 0; j < kDm; ++j) {
        const int l = red_l(j, LT), m = red_m(j, LT);
        const float v = a * rotate_back_scalef(l) * u[j * d.Cf];
        if (l == 0) {
          acc[0] += v;
          continue;
        }
        const int r = k * kDcs + dc_off(l) + (m + 1) * (2 * l + 1);
        if constexpr (DR) {
          const double dv = v;
          #pragma unroll
          for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] = fma(sDd[r + mp + l], dv, acc[packed(l, mp)]);
        } else {
          #pragma unroll
          for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] += sD[r + mp + l] * v;
        }
      }
    }
    __syncthreads();  // the next batch's copies (or the partials) overwrite what was read here
  }
  if (y > 0) {
    #pragma unroll
    for (int p = 0; p < kD; ++p) part[((size_t)(y - 1) * kD + p) * d.Cf + cf] = acc[p];
  }
  __syncthreads();
  if (y == 0) {
    #pragma unroll
    for (int p = 0; p < kD; ++p) {
      for (int yy = 1; yy < R; ++yy) acc[p] += part[((size_t)(yy - 1) * kD + p) * d.Cf + cf];
      P[((size_t)n * kD + p) * d.Cw + c] = (float)acc[p];
    }
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
  if (Ec == 0) return;
  const int nc = warp_lanes(d, a.H, a.Rh, a.U0, a.Ssrc);
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
namespace {
// The kernel's shared memory for `rows` thread rows and its staging batch B (below).
size_t aggregate_bytes(const Dims& d, int rows, bool dr, int* B_out) {
  auto staging = [&](int B) {
    return (dr ? (size_t)(B * d.dc_size + 1) / 2 * 2 * sizeof(double) : 0) + 2 * (size_t)AggSlot(d, B).size * sizeof(float);
  };
  const size_t part = (size_t)(rows - 1) * d.D * d.Cf * sizeof(double);
  const size_t budget = part > 56 * 1024 ? part : 56 * 1024;
  int B = 16 / rows * rows;
  if (B < rows) B = rows;
  while (B > rows && staging(B) > budget) B -= rows;
  *B_out = B;
  return part > staging(B) ? part : staging(B);
}

// Thread rows per CTA: kAggRowsDR (kAggRows with fp32 rows) unless the chunk's centres x F CTAs
// would leave the last wave mostly idle. A CTA's time goes as its segment over its rows, so the
// launch takes the rows (6, 8 or 12 with double rows) with the fewest waves per row: on an H200
// (C.pt, L = 3, Cf = 32) 6 rows run 528 CTAs at once, 8 rows 396, 12 rows 264; a 57344-edge chunk's
// ~726 CTAs take two waves of 6 rows (one of them a third full) or two of 8. The rows set which
// thread row adds which edge, so the last bits of P may differ between choices (the sums are in
// double and rounded to fp32 once); fixed for a given GPU, model and chunk. SEZM_CUDA_AGG_ROWS=R
// forces R rows (R Cf <= 512).
int aggregate_rows(const Dims& d, int centres, bool dr) {
  static const int forced = [] {
    const char* v = std::getenv("SEZM_CUDA_AGG_ROWS");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (forced >= 1 && forced * d.Cf <= 512) return forced;  // the kernel's launch bound
  if (!dr) return kAggRows;
  const long ctas = static_cast<long>(centres) * d.F;
  int best = kAggRowsDR;
  double best_cost = 0.0;
  for (int rows : {kAggRowsDR, 8, 12}) {
    if (rows * d.Cf > 512) continue;
    int B = 0;
    const size_t bytes = aggregate_bytes(d, rows, dr, &B);
    const void* fn = d.L == 1   ? reinterpret_cast<const void*>(rotate_back_aggregate_k<1, true>)
                     : d.L == 2 ? reinterpret_cast<const void*>(rotate_back_aggregate_k<2, true>)
                                : reinterpret_cast<const void*>(rotate_back_aggregate_k<3, true>);
    const int slots = resident_grid(fn, d.Cf * rows, bytes, std::numeric_limits<int>::max());
    if (slots == 0) continue;
    const double cost = static_cast<double>((ctas + slots - 1) / slots) / rows;
    if (rows == kAggRowsDR || cost < best_cost) best = rows, best_cost = cost;
  }
  return best;
}
}  // namespace

void launch_rotate_back_aggregate(const Dims& d, const AggregateArgs& a, cudaStream_t s) {
  if (a.n1 <= a.n0) return;
  static const bool f32rows = env_on("SEZM_CUDA_AGG_F32ROWS");
  const bool dr = !f32rows;
  const int rows = aggregate_rows(d, a.n1 - a.n0, dr);
  const dim3 block(d.Cf, rows), grid(a.n1 - a.n0, d.F);
  // Staging batch B (aggregate_bytes): the largest multiple of the row count up to 16 edges whose
  // two slots (AggSlot) and double Wigner rows fit in 56 KiB, or in the partial sums' area where
  // that is larger (L = 3, C_f = 32, DR: 12 edges for 6 or 12 rows, 38.8 KiB; 16 for 8 rows,
  // 51.8 KiB).
  int B = 0;
  const size_t bytes = aggregate_bytes(d, rows, dr, &B);
  auto launch = [&](auto lt, auto drv) {
    constexpr int LT = decltype(lt)::value;
    constexpr bool DR = decltype(drv)::value;
    if (bytes > 48 * 1024)  // focus width 64: 57 KiB of partial sums (fp32 rows)
      SEZM_CUDA(cudaFuncSetAttribute(rotate_back_aggregate_k<LT, DR>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)bytes));
    rotate_back_aggregate_k<LT, DR><<<grid, block, bytes, s>>>(d, a.n0, a.e0, a.Ec, B, a.off, a.Dc, a.U, a.alpha_fc,
                                                               a.alpha, a.P);
  };
  auto on_l = [&](auto drv) {
    if (d.L == 1) launch(std::integral_constant<int, 1>{}, drv);
    else if (d.L == 2) launch(std::integral_constant<int, 2>{}, drv);
    else launch(std::integral_constant<int, 3>{}, drv);
  };
  if (dr) on_l(std::true_type{});
  else on_l(std::false_type{});
  SEZM_LAUNCH("rotate_back_aggregate");
}
void launch_aggregate_backward(const Dims& d, const AggregateBackwardArgs& a, cudaStream_t s) {
  const int Ec = a.Ec;
  if (Ec == 0) return;
  const int nc = warp_lanes(d, a.P_bar, a.U, a.Gbuf);
  if (nc != 0) {
    warp_dispatch(d.L, nc, [&](auto lt, auto ncv) {
      aggregate_backward_w<decltype(lt)::value, decltype(ncv)::value><<<aggregate_grid(Ec), 32 * kWarps, 0, s>>>(d, a);
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
