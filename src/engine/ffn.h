#pragma once
// Block FFN on the S2 grid (docs/model.md §5.9; backward §7.7), per node:
//   h = Xt W1[l] -> (a, b) halves;  a_hat = T a, b_hat = T b on the Lebedev grid;
//   q = P (a_hat * b_hat);  kappa = sigmoid([a0, b0] W_sg);
//   y = kappa * q;  y[l=0] += silu(a0) * b0;  out = y W2[l].
// The grid product is a Gaunt-type bilinear map, exact for the chosen rule.
// With ffn_so3_grid the non-linearity is the SO(3) grid net instead (docs/model.md §5.12):
//   h = Xt W1[l] (2 K H wide);  y = grid net (self mode, engine/grid_net.h);  out = y W2[l].
#include <vector>

#include "engine/grid_net.h"
#include "engine/lebedev.h"
#include "engine/linalg.h"
#include "model/weights.h"

namespace sezm {

// The model's constant grids: the FFN's S2 grid and, when a grid net is on (kmax >= 0), the
// SO(3) grid shared by all grid nets (they all have degree L and the same kmax, §5.10).
template <class T>
struct FFNGrid {
  Mat<T> Tm, Pm;  // (G, D), (D, G)
  bool has_so3 = false;
  SO3GridMats<T> so3;
  explicit FFNGrid(int L, int kmax = -1) : has_so3(kmax >= 0) {
    if (has_so3) so3 = SO3GridMats<T>(L, kmax);
    const S2Grid g = make_s2_grid(L);
    Tm.resize(g.G, g.D);
    Pm.resize(g.D, g.G);
    for (int i = 0; i < g.G * g.D; ++i) {
      Tm.data()[i] = static_cast<T>(g.T[i]);
      Pm.data()[i] = static_cast<T>(g.P[i]);
    }
  }
};

// Xt (N, D, C) -> out (N, D, C); h (N, D, 2H) is kept for the backward.
template <class T>
void ffn_forward(const ModelW<T>& w, const BlockW<T>& bw, const FFNGrid<T>& grid, const T* Xt, int N, T* out,
                 std::vector<T>& h) {
  const int L = w.cfg.lmax, C = w.cfg.channels, H = w.cfg.ffn_hidden(), D = w.cfg.n_coeff();
  if (bw.ffn_so3) {
    const int KH = grid.so3.K * H;
    h.resize(static_cast<size_t>(N) * D * 2 * KH);
    per_degree_linear(Xt, N, L, C, bw.ffn_w1, h.data(), 2 * KH);
    std::vector<T> y(static_cast<size_t>(N) * D * KH);
    grid_self_forward(bw.ffn_grid, grid.so3, h.data(), N, y.data());
    per_degree_linear(y.data(), N, L, KH, bw.ffn_w2, out, C);
    return;
  }
  h.resize(static_cast<size_t>(N) * D * 2 * H);
  per_degree_linear(Xt, N, L, C, bw.ffn_w1, h.data(), 2 * H);
  std::vector<T> y(static_cast<size_t>(N) * D * H);
  Mat<T> ah, bh;
  RowVec<T> pi(2 * H), kap(H);
  for (int n = 0; n < N; ++n) {
    const T* hn = h.data() + static_cast<size_t>(n) * D * 2 * H;
    auto a = view(hn, D, H, 2 * H);
    auto b = view(hn + H, D, H, 2 * H);
    ah.noalias() = grid.Tm * a;
    bh.noalias() = grid.Tm * b;
    auto yn = view(y.data() + static_cast<size_t>(n) * D * H, D, H);
    yn.noalias() = grid.Pm * ah.cwiseProduct(bh);
    pi << a.row(0), b.row(0);
    kap.noalias() = pi * bw.ffn_scalar_gate;
    for (int c = 0; c < H; ++c) {
      const T k = sigmoid(kap[c]);
      for (int d = 0; d < D; ++d) yn(d, c) *= k;
      yn(0, c) += silu(a(0, c)) * b(0, c);
    }
  }
  per_degree_linear(y.data(), N, L, H, bw.ffn_w2, out, C);
}

// out_bar (N, D, C) -> Xt_bar (N, D, C) (overwritten).
template <class T>
void ffn_backward(const ModelW<T>& w, const BlockW<T>& bw, const FFNGrid<T>& grid, const std::vector<T>& h, int N,
                  const T* out_bar, T* Xt_bar) {
  const int L = w.cfg.lmax, C = w.cfg.channels, H = w.cfg.ffn_hidden(), D = w.cfg.n_coeff();
  if (bw.ffn_so3) {
    const int KH = grid.so3.K * H;
    std::vector<T> y_bar(static_cast<size_t>(N) * D * KH), h_bar(static_cast<size_t>(N) * D * 2 * KH);
    per_degree_linear(out_bar, N, L, C, bw.ffn_w2, y_bar.data(), KH, false, true);
    grid_self_backward(bw.ffn_grid, grid.so3, h.data(), N, y_bar.data(), h_bar.data());
    per_degree_linear(h_bar.data(), N, L, 2 * KH, bw.ffn_w1, Xt_bar, C, false, true);
    return;
  }
  std::vector<T> y_bar(static_cast<size_t>(N) * D * H);
  per_degree_linear(out_bar, N, L, C, bw.ffn_w2, y_bar.data(), H, false, true);
  std::vector<T> h_bar(static_cast<size_t>(N) * D * 2 * H);
  Mat<T> ah, bh, q, Pi_bar;
  RowVec<T> pi(2 * H), kap(H), t_bar(H), pi_bar(2 * H);
  for (int n = 0; n < N; ++n) {
    const T* hn = h.data() + static_cast<size_t>(n) * D * 2 * H;
    auto a = view(hn, D, H, 2 * H);
    auto b = view(hn + H, D, H, 2 * H);
    auto yb = view(y_bar.data() + static_cast<size_t>(n) * D * H, D, H);
    T* hbn = h_bar.data() + static_cast<size_t>(n) * D * 2 * H;
    auto ab = view(hbn, D, H, 2 * H);
    auto bb = view(hbn + H, D, H, 2 * H);
    ah.noalias() = grid.Tm * a;
    bh.noalias() = grid.Tm * b;
    q.noalias() = grid.Pm * ah.cwiseProduct(bh);
    pi << a.row(0), b.row(0);
    kap.noalias() = pi * bw.ffn_scalar_gate;
    for (int c = 0; c < H; ++c) {
      const T k = sigmoid(kap[c]);
      T kbar = 0;
      for (int d = 0; d < D; ++d) kbar += yb(d, c) * q(d, c);
      t_bar[c] = kbar * k * (T(1) - k);
      kap[c] = k;
    }
    pi_bar.noalias() = t_bar * bw.ffn_scalar_gate.transpose();
    // q_bar = kappa * y_bar, then through the grid product.
    Mat<T> q_bar = yb;
    for (int c = 0; c < H; ++c) q_bar.col(c) *= kap[c];
    Pi_bar.noalias() = grid.Pm.transpose() * q_bar;
    ab.noalias() = grid.Tm.transpose() * Pi_bar.cwiseProduct(bh);
    bb.noalias() = grid.Tm.transpose() * Pi_bar.cwiseProduct(ah);
    for (int c = 0; c < H; ++c) {
      ab(0, c) += pi_bar[c] + yb(0, c) * b(0, c) * silu_grad(a(0, c));
      bb(0, c) += pi_bar[H + c] + yb(0, c) * silu(a(0, c));
    }
  }
  per_degree_linear(h_bar.data(), N, L, 2 * H, bw.ffn_w1, Xt_bar, C, false, true);
}

}  // namespace sezm
