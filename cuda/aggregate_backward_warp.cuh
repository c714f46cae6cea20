#pragma once
// The destination sum's backward with one warp per edge (aggregate_backward_w; CPU twin:
// engine/so2_convolution.h; docs/model.md §7.11; its forward: rotate_back_aggregate.cu), on
// value_path_warp.cuh's lane layout and helpers; launched from value_path.cu.
#include "value_path_warp.cuh"

namespace sezm::cuda {
namespace {

// aggregate_backward_w's stage per warp and edge: the Wigner row and the old Dc_bar row (read by
// every lane), the lane's U rows (NC channels of each of the Dm rows; each lane reads back only
// what it copied itself) and the edge's F values of alpha and of alpha_fc (read by the lanes of
// each focus: one 4-byte copy per lane of the same few words was 29 % of the kernel's
// shared-memory wavefronts as excess, ncu 2026-12-03).
template <int LT, int NC>
struct AggStage {
  static constexpr int kDb = kStageD, kU = 2 * kStageD, kA = kU + EdgeShape<LT>::Dm * 32 * NC, kSize = kA + 96;
  static constexpr int kSc = kA + 64;  // binary16 rows: the edge's 2 F inverse scales (f16_rows.cuh)
};

// One edge of aggregate_backward_w (aggregate_backward_k's arithmetic): G, alpha_bar, Dc_bar, with
// pb = P_bar[dst]'s rows of the lane's channels and the edge's rows in the warp's stage st
// (AggStage): the sums over channels are added to the staged old Dc_bar values and stored, so no
// read of Dc_bar waits behind them (that round trip was ~12 % of the kernel's warp samples, ncu at
// 2fc6d83). kF16: U in binary16 rows (stack_out_f16), staged as halves with the rows' scales; kG16:
// G stored as binary16 rows (stack_adj_f16), each group's scale from the largest |G| of the focus's
// lanes.
template <int LT, int NC, bool kF16, bool kG16>
__device__ __forceinline__ void aggregate_backward_edge(const Dims& d, const AggregateBackwardArgs& a, int i, int f,
                                                        int cf, int lane, const float (&pb)[EdgeShape<LT>::D][NC],
                                                        const float* st) {
  using S = EdgeShape<LT>;
  using G = AggStage<LT, NC>;
  const int e = a.e0 + i;
  const float *sD = st, *sDb = st + G::kDb, *sU = st + G::kU + NC * lane;
  const float afc = d.F > 1 ? st[G::kA + 32 + f] : 1.0f;
  const float al = st[G::kA + f] * afc;
  const size_t urow = ((size_t)f * a.Ec + i) * d.ROW + cf;
  float v[S::Dcs], ab[NC], gk[kG16 ? S::Dm : 1][NC];
#pragma unroll
  for (int k = 0; k < S::Dcs; ++k) v[k] = 0.0f;
#pragma unroll
  for (int t = 0; t < NC; ++t) ab[t] = 0.0f;
#pragma unroll
  for (int j = 0; j < S::Dm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    const float sc = rotate_back_scalef(l);
    float g[NC], u[NC];
    if constexpr (kF16) {
      const __half* h = reinterpret_cast<const __half*>(st + G::kU) + j * 32 * NC + NC * lane;
      const float sc16 = st[G::kSc + 2 * f + (j <= LT ? 0 : 1)];
#pragma unroll
      for (int t = 0; t < NC; ++t) u[t] = __half2float(h[t]) * sc16;
    } else {
      ldv<NC>(sU + j * 32 * NC, u);
    }
#pragma unroll
    for (int t = 0; t < NC; ++t) {
      const float uj = u[t];
      float Q;
      if (l == 0) {
        Q = pb[0][t];
        v[0] += al * uj * pb[0][t];
      } else {
        const int r = dc_off(l) + (m + 1) * (2 * l + 1);
        Q = 0.0f;
#pragma unroll
        for (int mp = -l; mp <= l; ++mp) {
          const float x = pb[packed(l, mp)][t];
          Q += sD[r + mp + l] * x;
          v[r + mp + l] += sc * al * uj * x;
        }
      }
      Q *= sc;
      g[t] = al * Q;
      ab[t] += Q * uj;
    }
    if constexpr (kG16) {
#pragma unroll
      for (int t = 0; t < NC; ++t) gk[j][t] = g[t];
    } else {
      stv<NC>(a.Gbuf + urow + j * d.Cf, g);
    }
  }
  if constexpr (kG16) store_rows_f16<LT, NC>(d, a.Gbuf, a.Ec, i, f, cf, lane, gk);
  float* Db = a.Dc_bar + (size_t)e * S::Dcs;
  warp_sum_scatter<S::Dcs>([&](int k) { return v[k]; }, lane, [&](int k, float s) { Db[k] = sDb[k] + s; });
  // alpha_bar[f]: the lane's channels, then a butterfly over the Cf / NC lanes of focus f.
  float t_ab = 0.0f;
#pragma unroll
  for (int t = 0; t < NC; ++t) t_ab += ab[t] * afc;
  const int lanes = d.Cf / NC;
  for (int o = lanes / 2; o > 0; o >>= 1) t_ab += __shfl_xor_sync(0xffffffffu, t_ab, o);
  if (lane % lanes == 0) a.alpha_bar[(size_t)i * d.F + f] = t_ab;
}

// Backward of the destination sum: a warp takes kAggEdges consecutive edges (aggregate_grid). The
// edges are grouped by destination, so P_bar[dst]'s rows are loaded only when dst changes and the
// destinations come in one round trip (a lane each, then shuffles): the dst -> P_bar dependent
// loads (long-scoreboard stalls were 47 % of the warp samples at 2fc6d83) leave the per-edge chain.
// The next edge's rows (AggStage: Wigner row, old Dc_bar row, U rows, alpha) are copied (cp.async,
// two stages per warp) while one edge is worked on, so only the warp's first edge waits on its
// loads. Each edge's terms and sums are aggregate_backward_edge's: the bits per edge do not depend
// on the grouping.
// (kG16 holds an edge's G rows until their scales are known: four CTAs, 128 registers, no spills.)
template <int LT, int NC, bool kF16, bool kG16 = false>
__global__ void __launch_bounds__(32 * kWarps, kG16 ? 4 : kMinCtas<NC>)
    aggregate_backward_w(Dims d, AggregateBackwardArgs a) {
  using S = EdgeShape<LT>;
  using G = AggStage<LT, NC>;
  __shared__ __align__(16) float stage[kWarps][2][G::kSize];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, i0 = (blockIdx.x * kWarps + warp) * kAggEdges;
  if (i0 >= a.Ec) return;  // the whole warp: no CTA barrier below
  const int n = min(kAggEdges, a.Ec - i0), c = NC * lane, f = c / d.Cf, cf = c % d.Cf;
  const int my_dst = lane < n ? a.dst[a.e0 + i0 + lane] : -1;
  auto stage_rows = [&](int k) {
    const int i = i0 + k;
    const size_t e = (size_t)(a.e0 + i);
    float* st = stage[warp][k & 1];
    for (int x = lane; x < S::Dcs; x += 32) {
      copy_async4(st + x, a.Dc + e * S::Dcs + x);
      copy_async4(st + G::kDb + x, a.Dc_bar + e * S::Dcs + x);
    }
    if constexpr (kF16) {  // the lane's NC halves of each row, and the edge's 2 F scales
      static_assert(NC >= 2, "a lane's halves are one copy of at least 4 bytes");
      const __half* U = reinterpret_cast<const __half*>(a.U) + ((size_t)f * a.Ec + i) * d.ROW + cf;
#pragma unroll
      for (int j = 0; j < S::Dm; ++j)
        copy_async<2 * NC>(reinterpret_cast<float*>(reinterpret_cast<__half*>(st + G::kU) + j * 32 * NC + NC * lane),
                           reinterpret_cast<const float*>(U + j * d.Cf));
      if (lane < 2 * d.F) copy_async4(st + G::kSc + lane, a.U + f16_scale_at(d.F, a.Ec, d.ROW, lane % 2, lane / 2, i));
    } else {
      const float* U = a.U + ((size_t)f * a.Ec + i) * d.ROW + cf;
#pragma unroll
      for (int j = 0; j < S::Dm; ++j) copy_async<4 * NC>(st + G::kU + j * 32 * NC + c, U + j * d.Cf);
    }
    for (int x = lane; x < d.F; x += 32) {
      copy_async4(st + G::kA + x, a.alpha + e * d.F + x);
      if (d.F > 1) copy_async4(st + G::kA + 32 + x, a.alpha_fc + (size_t)i * d.F + x);
    }
    copy_async_commit();
  };
  stage_rows(0);
  float pb[S::D][NC];
  int cur = -1;
#pragma unroll 1
  for (int k = 0; k < n; ++k) {
    const int dk = __shfl_sync(0xffffffffu, my_dst, k);
    if (dk != cur) {
      load_rows<LT, NC>(a.P_bar + (size_t)dk * S::D * d.Cw + c, d.Cw, pb);
      cur = dk;
    }
    __syncwarp();  // every lane is done with the stage edge k + 1 will fill (edge k - 1's)
    if (k + 1 < n) {
      stage_rows(k + 1);
      copy_async_wait_group<1>();
    } else {
      copy_async_wait_group<0>();
    }
    __syncwarp();
    aggregate_backward_edge<LT, NC, kF16, kG16>(d, a, i0 + k, f, cf, lane, pb, stage[warp][k & 1]);
  }
}

}  // namespace
}  // namespace sezm::cuda
