#pragma once
// The per-edge kernels of the SO(2) value path with one warp per edge (CPU twin:
// engine/so2_convolution.h; docs/model.md §5.3, §5.6, §7.9, §7.11), included by value_path.cu,
// which launches them when warp_lanes(d, ...) allows and keeps its one-CTA-per-edge kernels for
// the other shapes, and by source_backward.cu (its per-edge part is condition_rotate_backward_w's:
// condition_backward_rh / _mixer serve both); the destination sum's backward on the same layout is
// aggregate_backward_warp.cuh. A lane owns NC = Cw / 32 adjacent wide channels of
// one focus (Cw = 32, 64 or 128), loaded and stored as one 4, 8 or 16-byte vector; kWarps edges
// per CTA.
//
// Why (issue: the CTA-per-edge kernels ran at ~1.8 TB/s, 44 % occupancy): a CTA of Cw = 64
// threads per edge held 12 KiB of shared memory for cta_sum and paid two barriers per edge sum,
// and each thread loaded the edge's 46 Wigner-row values itself. Here the per-edge sums over
// channels (Wigner-row adjoint, kernel adjoint, alpha_bar) are warp shuffles (warp_sum_scatter:
// fixed order, no shared memory, no barrier), the Wigner row and the degree kernel of the edge
// are copied once into the warp's 80 floats of shared memory by asynchronous copies issued
// behind the edge's register loads (H[src] or P_bar[dst], the stack rows), and a lane's
// channels take half (a quarter) of the load instructions. The edge's terms are the old ones,
// in the old order per channel; only the sums over channels are ordered differently (the lane's
// NC channels first, then the warp's butterfly), so results differ from the CTA kernels in the
// last bits and repeat to the bit.
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "async_copy.cuh"
#include "cta_reduce.cuh"
#include "f16_rows.cuh"
#include "value_path.cuh"

namespace sezm::cuda {
namespace {

constexpr int kWarps = 4;                 // edges (warps) per CTA: 128 threads
// CTAs per SM the backward kernels are held to (registers <= 65536 / (128 x CTAs)): for L = 3
// and Cw = 64, 96 registers, five CTAs (20 warps) per SM, no spills (ptxas, sm_90a and sm_80).
// Cw = 32 is left to ptxas: capped at 96 it spilled a few bytes for L = 3.
template <int NC>
constexpr int kMinCtas = NC == 4 ? 3 : NC == 2 ? 5 : 1;
constexpr int kStageD = 48, kStageK = 32;  // a warp's Wigner row (<= 46) and kernel row (<= 28)
constexpr int kAggEdges = 4;               // consecutive edges per warp in aggregate_backward_w

__device__ inline int kernel_index(int L, int li, int lo, int m) {
  return m == 0 ? li * (L + 1) + lo : (L + 1) * (L + 1) + (li - 1) * L + (lo - 1);
}

// The degree l of compact Wigner-row index k >= 1 (dc_off(l) <= k < dc_off(l + 1)).
__host__ __device__ constexpr int dc_degree(int k) { return k < 10 ? 1 : k < 25 ? 2 : k < 46 ? 3 : 4; }
// Compact Wigner-row index k >= 1 -> its degree l, column m' and edge-frame row j (rows m = 0, -1,
// +1 of degree l are j = l, LT + l, 2 LT + l): the Dc_bar sums of both backward kernels.
template <int LT>
__device__ __forceinline__ void dc_coords(int k, int& l, int& mp, int& j) {
  l = dc_degree(k);
  const int r = k - dc_off(l), m = r / (2 * l + 1) - 1;
  mp = r % (2 * l + 1) - l;
  j = m == 0 ? l : (m < 0 ? LT + l : 2 * LT + l);
}

template <int LT>
struct EdgeShape {
  static constexpr int Dm = 3 * LT + 1, D = (LT + 1) * (LT + 1), Dcs = 1 + 3 * (D - 1);
  static constexpr int K = (LT + 1) * (LT + 1) + LT * LT;
};

template <int NC>
__device__ __forceinline__ void ldv(const float* p, float (&v)[NC]) {
  if constexpr (NC == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
  } else if constexpr (NC == 2) {
    const float2 q = *reinterpret_cast<const float2*>(p);
    v[0] = q.x; v[1] = q.y;
  } else {
    v[0] = *p;
  }
}
template <int NC>
__device__ __forceinline__ void stv(float* p, const float (&v)[NC]) {
  if constexpr (NC == 4) *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else if constexpr (NC == 2) *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  else *p = v[0];
}

// The edge's Wigner row (and kernel row, kern != nullptr) into the warp's shared slice; waited
// for by copy_async_wait + __syncwarp before the first read.
template <int LT>
__device__ __forceinline__ void stage_edge(const float* Dce, const float* kern, int Kp, float* sD, float* sK,
                                           int lane) {
  for (int x = lane; x < EdgeShape<LT>::Dcs; x += 32) copy_async4(sD + x, Dce + x);
  if (kern != nullptr && lane < Kp) copy_async4(sK + lane, kern + lane);
}

// Gather into the edge frame: xl[j] = sum_m' D[l_j, m_j, m'] H[src, p(l_j, m')] (rotate_in's
// order).
template <int LT, int NC>
__device__ __forceinline__ void rotate_in_w(const float* sD, const float (&hs)[EdgeShape<LT>::D][NC],
                                            float (&xl)[EdgeShape<LT>::Dm][NC]) {
#pragma unroll
  for (int j = 0; j < EdgeShape<LT>::Dm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
#pragma unroll
    for (int t = 0; t < NC; ++t) {
      if (l == 0) {
        xl[j][t] = hs[0][t];
        continue;
      }
      const float* row = sD + dc_off(l) + (m + 1) * (2 * l + 1);
      float v = 0.0f;
#pragma unroll
      for (int mp = -l; mp <= l; ++mp) v += row[mp + l] * hs[packed(l, mp)][t];
      xl[j][t] = v;
    }
  }
}

template <int LT, int NC>
__device__ __forceinline__ void load_rows(const float* Hs, int Cw, float (&hs)[EdgeShape<LT>::D][NC]) {
#pragma unroll
  for (int p = 0; p < EdgeShape<LT>::D; ++p) ldv<NC>(Hs + (size_t)p * Cw, hs[p]);
}

// An edge's Dm rows of the lane's NC channels (x; focus f's lanes are d.Cf / NC adjacent ones) into
// row (f, i) of a chunk buffer of Ec edges as binary16 rows (f16_rows.cuh): each |m| group's scale
// from the largest |value| of the focus's lanes. Called by the whole warp.
template <int LT, int NC>
__device__ __forceinline__ void store_rows_f16(const Dims& d, float* buf, int Ec, int i, int f, int cf, int lane,
                                               const float (&x)[EdgeShape<LT>::Dm][NC]) {
  static_assert(NC == 2 || NC == 4, "a lane's halves are one 4- or 8-byte store");
  const int lanes = d.Cf / NC;
  float m[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < EdgeShape<LT>::Dm; ++j)
#pragma unroll
    for (int t = 0; t < NC; ++t) m[j <= LT ? 0 : 1] = fmaxf(m[j <= LT ? 0 : 1], fabsf(x[j][t]));
  for (int o = lanes / 2; o > 0; o >>= 1)
#pragma unroll
    for (int q = 0; q < 2; ++q) m[q] = fmaxf(m[q], __shfl_xor_sync(0xffffffffu, m[q], o));
  float mult[2], inv[2];
#pragma unroll
  for (int q = 0; q < 2; ++q) f16_scale(m[q], mult[q], inv[q]);
  __half* const row = reinterpret_cast<__half*>(buf) + ((size_t)f * Ec + i) * d.ROW + cf;
#pragma unroll
  for (int j = 0; j < EdgeShape<LT>::Dm; ++j) {
    const float mj = mult[j <= LT ? 0 : 1];
    __half2 h[NC / 2];
#pragma unroll
    for (int t = 0; t < NC / 2; ++t) h[t] = __floats2half2_rn(x[j][2 * t] * mj, x[j][2 * t + 1] * mj);
    if constexpr (NC == 4) *reinterpret_cast<uint2*>(row + j * d.Cf) = *reinterpret_cast<const uint2*>(h);
    else *reinterpret_cast<__half2*>(row + j * d.Cf) = h[0];
  }
  if (lane % lanes == 0)
#pragma unroll
    for (int q = 0; q < 2; ++q) buf[f16_scale_at(d.F, Ec, d.ROW, q, f, i)] = inv[q];
}

// Rotate + radial conditioning (rotate_condition_k's arithmetic) -> U0 focus-major, S_src.
// kU16: U0 as binary16 rows (stack_in_f16; S_src stays fp32).
template <int LT, int NC, bool kU16 = false>
__global__ void __launch_bounds__(32 * kWarps) rotate_condition_w(Dims d, BlockWDev w, RotateConditionArgs a) {
  using S = EdgeShape<LT>;
  __shared__ float stage[kWarps][kStageD + kStageK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, i = blockIdx.x * kWarps + warp;
  if (i >= a.Ec) return;  // the whole warp: no CTA barrier below
  const int e = a.e0 + i, c = NC * lane, f = c / d.Cf, cf = c % d.Cf;
  float *sD = stage[warp], *sK = sD + kStageD;
  float hs[S::D][NC], rh[LT + 1][NC];
  load_rows<LT, NC>(a.H + (size_t)a.src[e] * S::D * d.Cw + c, d.Cw, hs);
  if (!d.degree_mixer) {
#pragma unroll
    for (int l = 0; l <= LT; ++l) ldv<NC>(a.Rh + ((size_t)i * (LT + 1) + l) * d.Cw + c, rh[l]);
  }
  stage_edge<LT>(a.Dc + (size_t)e * S::Dcs, d.degree_mixer ? a.kern + (size_t)i * padded_kernel_size(d) : nullptr,
                 padded_kernel_size(d), sD, sK, lane);
  copy_async_wait();
  __syncwarp();
  float xl[S::Dm][NC];
  rotate_in_w<LT, NC>(sD, hs, xl);
  float b[NC];
#pragma unroll
  for (int t = 0; t < NC; ++t) b[t] = d.degree_mixer ? w.cb[c + t] : 0.0f;
  float* U = a.U0 + ((size_t)f * a.Ec + i) * d.ROW + cf;
  float vv[kU16 ? S::Dm : 1][NC];
#pragma unroll
  for (int o = 0; o < S::Dm; ++o) {
    const int lo = red_l(o, LT), mo = red_m(o, LT);
    float v[NC];
#pragma unroll
    for (int t = 0; t < NC; ++t) {
      if (!d.degree_mixer) {
        v[t] = xl[o][t] * rh[lo][t];
      } else {
        v[t] = 0.0f;
#pragma unroll
        for (int in = 0; in < S::Dm; ++in) {
          if (red_m(in, LT) != mo) continue;
          v[t] += sK[kernel_index(LT, red_l(in, LT), lo, mo)] * xl[in][t];
        }
        v[t] *= b[t];
      }
    }
    if constexpr (kU16) {
#pragma unroll
      for (int t = 0; t < NC; ++t) vv[o][t] = v[t];
    } else if (a.U0) {
      stv<NC>(U + o * d.Cf, v);
    }
    if (o == 0 && d.F > 1) stv<NC>(a.Ssrc + ((size_t)f * a.Ec + i) * d.Cf + cf, v);
  }
  if constexpr (kU16)
    if (a.U0) store_rows_f16<LT, NC>(d, a.U0, a.Ec, i, f, cf, lane, vv);
}

// Where an edge's radial adjoint goes without a degree mixer, each at the lane's first column:
// over the edge's Rh rows (hidden projection), or, without one (C == Cw), added to its R_bar rows,
// the old rows read from rb_old, row 0 stored to rb0 and rows l >= 1 to rb (source_backward.cu
// keeps row 0 in shared memory for the logit bias).
struct RhBarOut {
  float* rh;
  const float* rb_old;
  float* rb0;
  float* rb;
};

// The per-edge conditioning backward without a degree mixer (condition_rotate_backward_w's and
// source_backward_w's): xb[o] = ub[o] rh[l_o], the radial adjoint sum_o ub[o] xl[o] per degree
// (ascending o), stored as out says.
template <int LT, int NC>
__device__ __forceinline__ void condition_backward_rh(const Dims& d, const float (&ub)[EdgeShape<LT>::Dm][NC],
                                                      const float (&rh)[LT + 1][NC],
                                                      const float (&xl)[EdgeShape<LT>::Dm][NC],
                                                      float (&xb)[EdgeShape<LT>::Dm][NC], const RhBarOut& out) {
  float rhb[LT + 1][NC];
#pragma unroll
  for (int l = 0; l <= LT; ++l)
#pragma unroll
    for (int t = 0; t < NC; ++t) rhb[l][t] = 0.0f;
#pragma unroll
  for (int o = 0; o < EdgeShape<LT>::Dm; ++o) {
    const int lo = red_l(o, LT);
#pragma unroll
    for (int t = 0; t < NC; ++t) {
      xb[o][t] = ub[o][t] * rh[lo][t];
      rhb[lo][t] += ub[o][t] * xl[o][t];
    }
  }
  // The lane's own columns of the edge's rows: in place is safe.
#pragma unroll
  for (int l = 0; l <= LT; ++l) {
    if (d.has_rh) {
      stv<NC>(out.rh + (size_t)l * d.Cw, rhb[l]);
    } else {
      float r[NC];
      ldv<NC>(out.rb_old + (size_t)l * d.C, r);
#pragma unroll
      for (int t = 0; t < NC; ++t) r[t] += rhb[l][t];
      stv<NC>((l == 0 ? out.rb0 : out.rb) + (size_t)l * d.C, r);
    }
  }
}

// The per-edge conditioning backward with the degree mixer (both kernels'): xb[in] = sum_o
// K[q(in, o)] b ub[o], and the kernel row's adjoint (warp sums) written over kern, zero padding up
// to Kp. kern is the row sK was staged from: every lane's copies must have landed (both callers
// wait for them before the edge's first read).
template <int LT, int NC>
__device__ __forceinline__ void condition_backward_mixer(const float* sK, const float (&b)[NC],
                                                         const float (&ub)[EdgeShape<LT>::Dm][NC],
                                                         const float (&xl)[EdgeShape<LT>::Dm][NC],
                                                         float (&xb)[EdgeShape<LT>::Dm][NC], float* kern, int Kp,
                                                         int lane) {
  using S = EdgeShape<LT>;
  float kpart[S::K];
#pragma unroll
  for (int q = 0; q < S::K; ++q) kpart[q] = 0.0f;
#pragma unroll
  for (int in = 0; in < S::Dm; ++in)
#pragma unroll
    for (int t = 0; t < NC; ++t) xb[in][t] = 0.0f;
#pragma unroll
  for (int o = 0; o < S::Dm; ++o) {
    const int lo = red_l(o, LT), mo = red_m(o, LT);
#pragma unroll
    for (int in = 0; in < S::Dm; ++in) {
      if (red_m(in, LT) != mo) continue;
      const int q = kernel_index(LT, red_l(in, LT), lo, mo);
#pragma unroll
      for (int t = 0; t < NC; ++t) {
        const float bub = b[t] * ub[o][t];
        xb[in][t] += sK[q] * bub;
        kpart[q] += bub * xl[in][t];
      }
    }
  }
  warp_sum_scatter<S::K>([&](int q) { return kpart[q]; }, lane, [&](int q, float s) { kern[q] = s; });
  if (lane >= S::K && lane < Kp) kern[lane] = 0.0f;
}

// Backward of conditioning and rotation (condition_rotate_backward_k's arithmetic and outputs:
// Xloc_bar, Dc_bar, the logit bias's share of R_bar, and the radial adjoint written over Rh or
// kern for the chunk products of launch_condition_rotate_backward).
template <int LT, int NC>
__global__ void __launch_bounds__(32 * kWarps, kMinCtas<NC>)
    condition_rotate_backward_w(Dims d, BlockWDev w, ConditionRotateBackwardArgs a) {
  using S = EdgeShape<LT>;
  __shared__ float stage[kWarps][kStageD + kStageK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, i = blockIdx.x * kWarps + warp;
  if (i >= a.Ec) return;
  const int e = a.e0 + i, c = NC * lane, f = c / d.Cf, cf = c % d.Cf;
  float *sD = stage[warp], *sK = sD + kStageD;
  const int Kp = padded_kernel_size(d);
  float* Rh = a.Rh + (size_t)i * (LT + 1) * d.Cw + c;
  float* kern = a.kern + (size_t)i * Kp;
  float hs[S::D][NC], ub[S::Dm][NC], rh[LT + 1][NC];
  const float* Hs = a.H + (size_t)a.src[e] * S::D * d.Cw + c;
  load_rows<LT, NC>(Hs, d.Cw, hs);
  const size_t grow = ((size_t)f * a.Ec + i) * d.ROW + cf;
#pragma unroll
  for (int o = 0; o < S::Dm; ++o) ldv<NC>(a.Gbuf + grow + o * d.Cf, ub[o]);
  if (!d.degree_mixer) {
#pragma unroll
    for (int l = 0; l <= LT; ++l) ldv<NC>(Rh + (size_t)l * d.Cw, rh[l]);
  }
  if (d.F > 1) {
    float sb[NC];
    ldv<NC>(a.Ssrc_bar + ((size_t)f * a.Ec + i) * d.Cf + cf, sb);
#pragma unroll
    for (int t = 0; t < NC; ++t) ub[0][t] += sb[t];
  }
  stage_edge<LT>(a.Dc + (size_t)e * S::Dcs, d.degree_mixer ? kern : nullptr, Kp, sD, sK, lane);
  copy_async_wait();
  __syncwarp();
  float xl[S::Dm][NC], xb[S::Dm][NC];
  rotate_in_w<LT, NC>(sD, hs, xl);
  float* Rb = a.R_bar + (size_t)i * (LT + 1) * d.C;
  if (!d.degree_mixer) {
    // Without a hidden projection C == Cw, so the R_bar rows take the same vectors.
    condition_backward_rh<LT, NC>(d, ub, rh, xl, xb, RhBarOut{Rh, Rb + c, Rb + c, Rb + c});
  } else {
    float b[NC];
#pragma unroll
    for (int t = 0; t < NC; ++t) b[t] = w.cb[c + t];
    // Every lane's copy of the kernel row was waited for above (copy_async_wait + __syncwarp):
    // the row can be overwritten with its adjoint (zero padding as before).
    condition_backward_mixer<LT, NC>(sK, b, ub, xl, xb, kern, Kp, lane);
  }
  // H[src] again (L1 / L2 hits) rather than kept in registers through the conditioning: 32 fewer
  // live registers for L = 3 (no spills at five CTAs per SM).
  load_rows<LT, NC>(Hs, d.Cw, hs);
#pragma unroll
  for (int j = 0; j < S::Dm; ++j) stv<NC>(a.Xloc_bar + ((size_t)i * S::Dm + j) * d.Cw + c, xb[j]);
  // Dc_bar from the rotation: sum_c xb[j] H[src, p(l_j, m'), c], each chunk of 32 values formed
  // as it is summed (fewer live registers).
  float* Db = a.Dc_bar + (size_t)e * S::Dcs;
  warp_sum_scatter<S::Dcs>(
      [&](int k) {
        if (k == 0) return 0.0f;
        int l, mp, j;
        dc_coords<LT>(k, l, mp, j);
        float s = 0.0f;
#pragma unroll
        for (int t = 0; t < NC; ++t) s += xb[j][t] * hs[packed(l, mp)][t];
        return s;
      },
      lane, [&](int k, float s) { Db[k] += s; });
  // The attention logit bias reads R[e, 0, :]: its adjoint lands on R_bar directly, after the
  // other lanes' R_bar rows above (no hidden projection) are written.
  __syncwarp();
  for (int x = lane; x < d.C; x += 32) {
    float s = 0.0f;
    for (int ff = 0; ff < d.F; ++ff) s += a.lbar[(size_t)i * d.F + ff] * w.logit_u[(size_t)ff * d.C + x];
    Rb[x] += s;
  }
}

// NC for the warp kernels, 0 where they do not apply: Cw = 32, 64 or 128, a lane's NC channels
// inside one focus (Cf a power of two, multiple of NC), L <= 3 (the staging slices), and every
// vector-accessed array aligned to NC floats.
inline bool aligned_to(int) { return true; }
template <class... P>
inline bool aligned_to(int bytes, const void* p, P... rest) {
  return (p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0) && aligned_to(bytes, rest...);
}
// SEZM_CUDA_VALUE_CTA=1 keeps the one-CTA-per-edge kernels (timing and bit comparisons).
template <class... P>
inline int warp_lanes(const Dims& d, P... ptrs) {
  static const bool cta = env_on("SEZM_CUDA_VALUE_CTA");
  const int nc = d.Cw / 32;
  if (cta) return 0;
  if (d.Cw % 32 != 0 || (nc != 1 && nc != 2 && nc != 4)) return 0;
  if ((d.Cf & (d.Cf - 1)) != 0 || d.Cf % nc != 0 || d.L > 3 || d.L < 1) return 0;
  return aligned_to(4 * nc, ptrs...) ? nc : 0;
}

// Calls fn(LT, NC) with both as std::integral_constant, for L in 1..3 and NC in {1, 2, 4}.
template <class Fn>
void warp_dispatch(int L, int nc, Fn&& fn) {
  auto on_l = [&](auto lt) {
    if (nc == 1) fn(lt, std::integral_constant<int, 1>{});
    else if (nc == 2) fn(lt, std::integral_constant<int, 2>{});
    else fn(lt, std::integral_constant<int, 4>{});
  };
  if (L == 1) on_l(std::integral_constant<int, 1>{});
  else if (L == 2) on_l(std::integral_constant<int, 2>{});
  else on_l(std::integral_constant<int, 3>{});
}
inline dim3 warp_grid(int Ec) { return dim3((Ec + kWarps - 1) / kWarps); }
inline dim3 aggregate_grid(int Ec) { return dim3((Ec + kWarps * kAggEdges - 1) / (kWarps * kAggEdges)); }

}  // namespace
}  // namespace sezm::cuda
