#pragma once
// Radial embedding MLP (docs/model.md §2.4, backward §7.2): per edge
//   h = rbf W0;  y = RMSNorm(h) (edge_norm) or h;  M = silu(y) W1,   M laid out [l*C + c].
// The model multiplies M by the edge envelope E_5 (version 1.1). Bias-free throughout.
#include <vector>

#include "engine/linalg.h"
#include "engine/norms.h"
#include "model/weights.h"

namespace sezm {

// rbf (E, n_radial) -> M (E, (L+1)C). `h` (E, C) receives the first layer's output, which is
// all the backward needs.
template <class T>
void radial_mlp_forward(const ModelW<T>& w, const T* rbf, int E, T* M, T* h) {
  const int nr = static_cast<int>(w.freqs.size()), C = w.cfg.channels;
  auto H = view(h, E, C);
  H.noalias() = view(rbf, E, nr) * w.radial_w0;
  Mat<T> a(E, C);
  for (int e = 0; e < E; ++e) {
    T* ae = a.data() + static_cast<size_t>(e) * C;
    if (w.radial_norm)
      scalar_rms_norm(h + static_cast<size_t>(e) * C, C, w.radial_norm_scale.data(), T(1e-7), ae);
    else
      for (int c = 0; c < C; ++c) ae[c] = h[static_cast<size_t>(e) * C + c];
    for (int c = 0; c < C; ++c) ae[c] = silu(ae[c]);
  }
  view(M, E, w.radial_w1.cols()).noalias() = a * w.radial_w1;
}

// rbf_bar (E, n_radial) += dM/drbf^T M_bar.
template <class T>
void radial_mlp_backward(const ModelW<T>& w, const T* h, int E, const T* M_bar, T* rbf_bar) {
  const int nr = static_cast<int>(w.freqs.size()), C = w.cfg.channels;
  Mat<T> a_bar = view(M_bar, E, w.radial_w1.cols()) * w.radial_w1.transpose();
  Mat<T> h_bar = Mat<T>::Zero(E, C);
  std::vector<T> y(C), y_bar(C);
  for (int e = 0; e < E; ++e) {
    const T* he = h + static_cast<size_t>(e) * C;
    T rho = 1;
    if (w.radial_norm)
      rho = scalar_rms_norm(he, C, w.radial_norm_scale.data(), T(1e-7), y.data());
    else
      for (int c = 0; c < C; ++c) y[c] = he[c];
    for (int c = 0; c < C; ++c) y_bar[c] = a_bar(e, c) * silu_grad(y[c]);
    if (w.radial_norm)
      scalar_rms_norm_backward(he, C, w.radial_norm_scale.data(), rho, y_bar.data(), h_bar.data() + static_cast<size_t>(e) * C);
    else
      for (int c = 0; c < C; ++c) h_bar(e, c) = y_bar[c];
  }
  view(rbf_bar, E, nr).noalias() += h_bar * w.radial_w0.transpose();
}

}  // namespace sezm
