#pragma once
// Final read-out, so3_readout = "none" (docs/model.md §6.1): only the l = 0 row is used,
//   z = y W1,  a = z[:H] * silu(z[H:]),  desc = y + a W2.
#include "engine/linalg.h"
#include "model/weights.h"

namespace sezm {

// X (N, D, C) -> desc (N, C).
template <class T>
void readout_forward(const ModelW<T>& w, const T* X, int N, Mat<T>& desc) {
  const int C = w.cfg.channels, D = w.cfg.n_coeff(), H = w.cfg.ffn_hidden();
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
void readout_backward(const ModelW<T>& w, const T* X, int N, const Mat<T>& desc_bar, T* X_bar) {
  const int C = w.cfg.channels, D = w.cfg.n_coeff(), H = w.cfg.ffn_hidden();
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
