#pragma once
// One SeZM interaction block (docs/model.md §5.1; backward §7.6–§7.11):
//   H  = pre_focus_mix(X)                      (all nodes: sources may be ghosts)
//   P  = sum_{e->n} alpha_e M_e                (SO(2) value path per edge tile, attention)
//   A  = gamma * P;  A += MN(A, H)              (message-node grid net, message_node_so3, §5.11)
//   X1 = X + EqRMSNorm_post(post_focus_mix(A))
//   Y  = X1 + FFN(EqRMSNorm_pre(X1))
// Edge work runs over tiles of whole destination segments, so a tile owns the softmax of its
// centres and its P rows; tiles run in parallel (OpenMP). The backward adds its source-side
// terms edge by edge in edge order (block_backward), so the result does not depend on the thread
// count. The forward keeps nothing per edge beyond alpha: the backward recomputes each tile's
// value path on the fly.
#include <array>
#include <vector>

#include "engine/threads.h"

#include "engine/attention.h"
#include "engine/ffn.h"
#include "engine/norms.h"
#include "engine/so2_convolution.h"

namespace sezm {

// Tiles of whole destination segments with about `target` edges each.
inline std::vector<int> make_edge_tiles(const Graph& t, int target = 256) {
  std::vector<int> b{0};
  for (int n = 0; n < t.n_nodes; ++n) {
    const int end = t.dst_offsets[n + 1];
    if (end - b.back() >= target || n + 1 == t.n_nodes) b.push_back(end);
  }
  if (b.back() != t.n_edges()) b.push_back(t.n_edges());
  return b;
}

template <class T>
struct BlockCache {
  std::vector<T> H;          // (n_total, D, Cw)
  AttentionState<T> att;
  std::vector<T> P;          // (n_nodes, D, Cw) ungated aggregate
  std::vector<T> O;          // (n_nodes, D, C)  post_focus_mix output (post-norm input)
  std::vector<T> post_rho;   // (n_nodes)
  std::vector<T> X1;         // (n_nodes, D, C)
  std::vector<T> pre_rho;    // (n_nodes)
  std::vector<T> Xt;         // (n_nodes, D, C)  FFN input
  std::vector<T> ffn_h;      // (n_nodes, D, 2H)
};

// l = 0 radial features projected to the wide width, (E, Cw).
template <class T>
Mat<T> radial_l0_hidden(const ModelW<T>& w, const BlockW<T>& bw, const BlockRadial<T>& R, int E) {
  const int L = w.cfg.lmax, C = w.cfg.channels;
  Mat<T> R0(E, C);  // R's degree-0 rows
  for (int e = 0; e < E; ++e) R.row(e, 0, L, C, R0.data() + static_cast<size_t>(e) * C);
  auto R0v = view(static_cast<const T*>(R0.data()), E, C, C);
  if (bw.has_radial_hidden_proj) return R0v * bw.radial_hidden_proj;
  return R0;
}

template <class T>
void block_forward(const ModelW<T>& w, const BlockW<T>& bw, const FFNGrid<T>& grid, const Graph& t,
                   const EdgeGeometry<T>& geo, const std::vector<int>& tiles, const T* X, const BlockRadial<T>& R,
                   T* Y, BlockCache<T>& bc) {
  const ModelConfig& cfg = w.cfg;
  const int L = cfg.lmax, C = cfg.channels, Cw = cfg.wide(), Cf = cfg.focus_width(), F = cfg.n_focus;
  const int D = cfg.n_coeff(), N = t.n_nodes;
  bc.H.resize(static_cast<size_t>(t.n_total) * D * Cw);
  per_degree_linear(X, t.n_total, L, C, bw.pre_focus_mix, bc.H.data(), Cw);
  attention_node_forward(w, bw, t, bc.H.data(), bc.att);
  attention_softmax_forward(w, bw, t, geo.env.data(), geo.gate.empty() ? nullptr : geo.gate.data(),
                            radial_l0_hidden(w, bw, R, t.n_edges()), bc.att);

  bc.P.assign(static_cast<size_t>(N) * D * Cw, T(0));
  const int ntiles = static_cast<int>(tiles.size()) - 1;
  ParallelErrors errors;  // nothing may leave the region (threads.h)
#pragma omp parallel
  {
    SO2Tile<T> s;
#pragma omp for schedule(dynamic)
    for (int it = 0; it < ntiles; ++it) {
      errors.run([&] {
        so2_tile_forward(w, bw, t, geo, bc.H.data(), R, tiles[it], tiles[it + 1] - tiles[it], s);
        for (int i = 0; i < s.Ec; ++i) {
          const int e = s.e0 + i;
          T* Pn = bc.P.data() + static_cast<size_t>(t.dst[e]) * D * Cw;
          const T* Me = s.M.data() + static_cast<size_t>(i) * D * Cw;
          for (int d = 0; d < D; ++d)
            for (int c = 0; c < Cw; ++c) Pn[d * Cw + c] += bc.att.alpha(e, c / Cf) * Me[d * Cw + c];
        }
      });
    }
  }
  errors.rethrow();

  // Gate, post mix, post norm, residual; then the FFN branch.
  std::vector<T> A(bc.P.size());
  for (int n = 0; n < N; ++n)
    for (int d = 0; d < D; ++d)
      for (int c = 0; c < Cw; ++c) {
        const size_t i = (static_cast<size_t>(n) * D + d) * Cw + c;
        A[i] = bc.att.gamma(n, c / Cf) * bc.P[i];
      }
  (void)F;
  if (bw.has_message_node) {
    // Query = the gated aggregate, context = pre_focus_mix(x) of the destination (§5.11).
    std::vector<T> Z(A.size());
    grid_cross_forward(bw.message_node, grid.so3, L, A.data(), bc.H.data(), N, Z.data());
    for (size_t i = 0; i < A.size(); ++i) A[i] += Z[i];
  }
  bc.O.resize(static_cast<size_t>(N) * D * C);
  per_degree_linear(A.data(), N, L, Cw, bw.post_focus_mix, bc.O.data(), C);
  bc.X1.resize(bc.O.size());
  bc.Xt.resize(bc.O.size());
  bc.post_rho.resize(N);
  bc.pre_rho.resize(N);
  std::vector<T> tmp(static_cast<size_t>(D) * C);
  for (int n = 0; n < N; ++n) {
    const size_t o = static_cast<size_t>(n) * D * C;
    bc.post_rho[n] = equivariant_rms_norm(&bc.O[o], L, C, bw.post_so2_norm, tmp.data());
    for (int i = 0; i < D * C; ++i) bc.X1[o + i] = X[o + i] + tmp[i];
    bc.pre_rho[n] = equivariant_rms_norm(&bc.X1[o], L, C, bw.pre_ffn_norm, &bc.Xt[o]);
  }
  ffn_forward(w, bw, grid, bc.Xt.data(), N, Y, bc.ffn_h);
  for (size_t i = 0; i < bc.X1.size(); ++i) Y[i] += bc.X1[i];
}

// Y_bar (n_nodes rows) -> X_bar (n_total rows, overwritten); accumulates R_bar (E, L+1, C)
// and the geometry adjoints (env, D).
template <class T>
void block_backward(const ModelW<T>& w, const BlockW<T>& bw, const FFNGrid<T>& grid, const Graph& t,
                    const EdgeGeometry<T>& geo, const std::vector<int>& tiles, const BlockRadial<T>& R,
                    const BlockCache<T>& bc,
                    const T* Y_bar, T* X_bar, T* R_bar, EdgeGeometryGrad<T>& gb) {
  const ModelConfig& cfg = w.cfg;
  const int L = cfg.lmax, C = cfg.channels, Cw = cfg.wide(), Cf = cfg.focus_width(), F = cfg.n_focus;
  const int D = cfg.n_coeff(), N = t.n_nodes, NT = t.n_total;

  // FFN branch and the two norms -> X1_bar, then O_bar -> A_bar.
  std::vector<T> Xt_bar(static_cast<size_t>(N) * D * C), X1_bar(Y_bar, Y_bar + static_cast<size_t>(N) * D * C);
  ffn_backward(w, bw, grid, bc.ffn_h, N, Y_bar, Xt_bar.data());
  std::vector<T> O_bar(static_cast<size_t>(N) * D * C, T(0));
  for (int n = 0; n < N; ++n) {
    const size_t o = static_cast<size_t>(n) * D * C;
    equivariant_rms_norm_backward(&bc.X1[o], L, C, bw.pre_ffn_norm, bc.pre_rho[n], &Xt_bar[o], &X1_bar[o]);
    equivariant_rms_norm_backward(&bc.O[o], L, C, bw.post_so2_norm, bc.post_rho[n], &X1_bar[o], &O_bar[o]);
  }
  std::vector<T> A_bar(static_cast<size_t>(N) * D * Cw);
  per_degree_linear(O_bar.data(), N, L, C, bw.post_focus_mix, A_bar.data(), Cw, false, true);
  std::vector<T> Hmn_bar;  // message-node adjoint of its context H (rows < N)
  if (bw.has_message_node) {
    std::vector<T> A(A_bar.size()), A_bar_in(A_bar);
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d)
        for (int c = 0; c < Cw; ++c) {
          const size_t i = (static_cast<size_t>(n) * D + d) * Cw + c;
          A[i] = bc.att.gamma(n, c / Cf) * bc.P[i];
        }
    Hmn_bar.assign(A_bar.size(), T(0));
    // The residual A + MN(A, H): A_bar keeps the identity term and gains the query adjoint.
    grid_cross_backward(bw.message_node, grid.so3, L, A.data(), bc.H.data(), N, A_bar_in.data(), A_bar.data(),
                        Hmn_bar.data());
  }
  // Output gate.
  std::vector<T> P_bar(A_bar.size());
  Mat<T> gamma_bar = Mat<T>::Zero(N, F);
  for (int n = 0; n < N; ++n)
    for (int d = 0; d < D; ++d)
      for (int c = 0; c < Cw; ++c) {
        const size_t i = (static_cast<size_t>(n) * D + d) * Cw + c;
        P_bar[i] = bc.att.gamma(n, c / Cf) * A_bar[i];
        gamma_bar(n, c / Cf) += A_bar[i] * bc.P[i];
      }

  // Edge tiles: recompute the value path, aggregation and softmax backward, value-path backward.
  // The source-side sums (H_bar[src] += D^T Xloc_bar, k_bar[src] += lbar q[dst] / sqrt(Cf)) are
  // added edge by edge in edge order on any number of threads: the tiles go in waves of one per
  // thread; after a wave, thread r adds the wave's edges whose source is in its share of the
  // nodes, tile by tile. So the result is the one-thread result to the bit whatever the thread
  // count, and a thread holds two tiles' adjoints (one wave's while the next is computed: one
  // barrier per wave), not a copy of H_bar (tests/test_repeatability.cpp).
  const int nth = engine_threads();
  std::vector<T> H_bar(static_cast<size_t>(NT) * D * Cw, T(0));
  Mat<T> k_bar = Mat<T>::Zero(NT, F * Cf);
  Mat<T> q_bar = Mat<T>::Zero(NT, F * Cf);
  struct TileAdjoint {
    int e0 = 0, Ec = 0;
    Mat<T> Xloc_bar, lbar;  // (Ec, Dm Cw), (Ec, F)
  };
  std::vector<std::array<TileAdjoint, 2>> slots(nth);
  const T* env = geo.env.data();
  const T* gate = geo.gate.empty() ? nullptr : geo.gate.data();
  const int ntiles = static_cast<int>(tiles.size()) - 1;
  ParallelErrors errors;  // nothing may leave the region (threads.h)
#pragma omp parallel num_threads(nth)
  {
    const int tid = engine_thread_id(), team = engine_team_size();
    const int n0 = static_cast<int>(static_cast<long long>(NT) * tid / team);
    const int n1 = static_cast<int>(static_cast<long long>(NT) * (tid + 1) / team);
    SO2Tile<T> s;
    Mat<T> M_bar, alpha_bar, Rhat_bar;
    for (int wave = 0; wave * team < ntiles; ++wave) {
      TileAdjoint& mine = slots[tid][wave & 1];
      mine.Ec = 0;
      const int it = wave * team + tid;
      if (it < ntiles) errors.run([&] {
        const int e0 = tiles[it], Ec = tiles[it + 1] - e0;
        so2_tile_forward(w, bw, t, geo, bc.H.data(), R, e0, Ec, s);
        M_bar.resize(Ec, D * Cw);
        alpha_bar.setZero(Ec, F);
        for (int i = 0; i < Ec; ++i) {
          const int e = e0 + i;
          const T* Pb = P_bar.data() + static_cast<size_t>(t.dst[e]) * D * Cw;
          const T* Me = s.M.data() + static_cast<size_t>(i) * D * Cw;
          T* Mb = M_bar.data() + static_cast<size_t>(i) * D * Cw;
          for (int d = 0; d < D; ++d)
            for (int c = 0; c < Cw; ++c) {
              const int f = c / Cf;
              Mb[d * Cw + c] = bc.att.alpha(e, f) * Pb[d * Cw + c];
              alpha_bar(i, f) += Pb[d * Cw + c] * Me[d * Cw + c];
            }
        }
        Rhat_bar.setZero(Ec, (L + 1) * Cw);
        Mat<T> Rhat0_bar = Mat<T>::Zero(Ec, Cw);
        attention_softmax_backward(w, bw, t, env, gate, bc.att, e0, e0 + Ec, alpha_bar, q_bar, mine.lbar, Rhat0_bar,
                                   gb.env.data(), gb.gate.empty() ? nullptr : gb.gate.data());
        Rhat_bar.leftCols(Cw) = Rhat0_bar;
        so2_tile_backward(w, bw, t, geo, bc.H.data(), s, M_bar, mine.Xloc_bar, R_bar, &Rhat_bar, gb);
        mine.e0 = e0;
        mine.Ec = Ec;
      });
#pragma omp barrier
      errors.run([&] {
        for (int r = 0; r < team; ++r) {
          const TileAdjoint& a = slots[r][wave & 1];
          for (int i = 0; i < a.Ec; ++i) {
            const int e = a.e0 + i;
            if (t.src[e] < n0 || t.src[e] >= n1) continue;
            attention_key_backward(w, t, env, gate, bc.att, e, a.lbar.data() + static_cast<size_t>(i) * F, k_bar);
            so2_rotation_source_backward(cfg, t, geo, e, a.Xloc_bar.data() + static_cast<size_t>(i) * a.Xloc_bar.cols(),
                                         H_bar.data());
          }
        }
      });
    }
  }
  errors.rethrow();
  for (size_t j = 0; j < Hmn_bar.size(); ++j) H_bar[j] += Hmn_bar[j];
  attention_node_backward(w, bw, t, bc.H.data(), bc.att, q_bar, k_bar, gamma_bar, H_bar.data());
  per_degree_linear(H_bar.data(), NT, L, Cw, bw.pre_focus_mix, X_bar, C, false, true);
  for (size_t i = 0; i < X1_bar.size(); ++i) X_bar[i] += X1_bar[i];
}

}  // namespace sezm
