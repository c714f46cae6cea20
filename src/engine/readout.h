#pragma once
// Final read-out, so3_readout = "none" (docs/model.md §6.1): only the l = 0 row is used,
//   z = y W1,  a = z[:H] * silu(z[H:]),  desc = y + a W2.
// so3_readout = "mlp" (docs/model.md §5.13): the full node tensor through the SO(3) grid MLP,
//   h = X W1[l];  Y = grid net (self mode, engine/grid_net.h);  desc = X(l=0) + (Y W2[l])(l=0).
#include <vector>

#include "engine/ffn.h"
#include "engine/grid_net.h"
#include "engine/linalg.h"
#include "model/weights.h"

namespace sezm {

// X (N, D, C) -> desc (N, C).
template <class T>
void readout_forward(const ModelW<T>& w, const FFNGrid<T>& grid, const T* X, int N, Mat<T>& desc) {
  const int C = w.cfg.channels, D = w.cfg.n_coeff(), H = w.cfg.ffn_hidden();
  if (w.readout_so3) {
    const int L = w.cfg.lmax, KH = grid.so3.K * H;
    std::vector<T> h(static_cast<size_t>(N) * D * 2 * KH), y(static_cast<size_t>(N) * D * KH);
    per_degree_linear(X, N, L, C, w.readout_so3_w1, h.data(), 2 * KH);
    grid_self_forward(w.readout_grid, grid.so3, h.data(), N, y.data());
    // Only row l = 0 of the residual sum is read (§5.13).
    desc = view(X, N, C, static_cast<Eigen::Index>(D) * C);
    desc.noalias() += view(y.data(), N, KH, static_cast<Eigen::Index>(D) * KH) * w.readout_so3_w2[0];
    return;
  }
  auto y = view(X, N, C, static_cast<Eigen::Index>(D) * C);
  const Mat<T> z = y * w.readout_w1;
  Mat<T> a(N, H);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < H; ++c) a(n, c) = z(n, c) * silu(z(n, H + c));
  desc = y;
  desc.noalias() += a * w.readout_w2;
}

// desc_bar (N, C) -> X_bar rows l = 0 (overwritten), other rows zeroed.
template <class T>
void readout_backward(const ModelW<T>& w, const FFNGrid<T>& grid, const T* X, int N, const Mat<T>& desc_bar,
                      T* X_bar) {
  const int C = w.cfg.channels, D = w.cfg.n_coeff(), H = w.cfg.ffn_hidden();
  if (w.readout_so3) {
    // desc_bar -> Y_bar on row l = 0 only, then back through the grid net and W1 (§7.12).
    const int L = w.cfg.lmax, KH = grid.so3.K * H;
    std::vector<T> h(static_cast<size_t>(N) * D * 2 * KH), y_bar(static_cast<size_t>(N) * D * KH, T(0));
    std::vector<T> h_bar(h.size());
    per_degree_linear(X, N, L, C, w.readout_so3_w1, h.data(), 2 * KH);
    view(y_bar.data(), N, KH, static_cast<Eigen::Index>(D) * KH).noalias() =
        desc_bar * w.readout_so3_w2[0].transpose();
    grid_self_backward(w.readout_grid, grid.so3, h.data(), N, y_bar.data(), h_bar.data());
    per_degree_linear(h_bar.data(), N, L, 2 * KH, w.readout_so3_w1, X_bar, C, false, true);
    auto yb = view(X_bar, N, C, static_cast<Eigen::Index>(D) * C);
    yb += desc_bar;
    return;
  }
  auto y = view(X, N, C, static_cast<Eigen::Index>(D) * C);
  const Mat<T> z = y * w.readout_w1;
  const Mat<T> a_bar = desc_bar * w.readout_w2.transpose();
  Mat<T> z_bar(N, 2 * H);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < H; ++c) {
      z_bar(n, c) = a_bar(n, c) * silu(z(n, H + c));
      z_bar(n, H + c) = a_bar(n, c) * z(n, c) * silu_grad(z(n, H + c));
    }
  for (size_t i = 0; i < static_cast<size_t>(N) * D * C; ++i) X_bar[i] = 0;
  auto yb = view(X_bar, N, C, static_cast<Eigen::Index>(D) * C);
  yb = desc_bar;
  yb.noalias() += z_bar * w.readout_w1.transpose();
}

}  // namespace sezm
