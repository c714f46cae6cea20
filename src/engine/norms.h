#pragma once
// RMS norms of SeZM (docs/model.md §5.2, backward §7.6; radial RMSNorm §2.4, backward §7.2).
//  - EquivariantRMSNorm on one node's packed (D, C) features: centre the l = 0 row over
//    channels, one RMS per node mixing all degrees with weights 1/((2l+1)(L+1)C), scale per
//    (degree, channel), bias on l = 0.
//  - ScalarRMSNorm / RMSNorm on a vector of width C: no centring, no bias.
#include "engine/linalg.h"
#include "model/weights.h"

namespace sezm {

// y = EqRMSNorm(x) for one node; returns rho = (v + eps)^(-1/2) for the backward.
template <class T>
T equivariant_rms_norm(const T* x, int L, int C, const EquivariantRMSNormW<T>& w, T* y) {
  T mean0 = 0;
  for (int c = 0; c < C; ++c) mean0 += x[c];
  mean0 /= C;
  T v = 0;
  for (int l = 0; l <= L; ++l) {
    T s = 0;
    for (int d = l * l; d < (l + 1) * (l + 1); ++d)
      for (int c = 0; c < C; ++c) {
        const T xt = d == 0 ? x[c] - mean0 : x[d * C + c];
        s += xt * xt;
      }
    v += s / T((2 * l + 1) * (L + 1) * C);
  }
  const T rho = T(1) / std::sqrt(v + w.eps);
  for (int l = 0; l <= L; ++l)
    for (int d = l * l; d < (l + 1) * (l + 1); ++d)
      for (int c = 0; c < C; ++c) {
        const T xt = d == 0 ? x[c] - mean0 : x[d * C + c];
        y[d * C + c] = xt * rho * w.scale(l, c) + (d == 0 ? w.bias[c] : T(0));
      }
  return rho;
}

// x_bar (+)= d EqRMSNorm / dx^T y_bar, recomputing the centred input from x.
template <class T>
void equivariant_rms_norm_backward(const T* x, int L, int C, const EquivariantRMSNormW<T>& w, T rho,
                                   const T* y_bar, T* x_bar) {
  T mean0 = 0;
  for (int c = 0; c < C; ++c) mean0 += x[c];
  mean0 /= C;
  auto xt = [&](int d, int c) { return d == 0 ? x[c] - mean0 : x[d * C + c]; };
  T sigma = 0;  // sum y_bar s x_hat
  for (int l = 0; l <= L; ++l)
    for (int d = l * l; d < (l + 1) * (l + 1); ++d)
      for (int c = 0; c < C; ++c) sigma += y_bar[d * C + c] * w.scale(l, c) * xt(d, c) * rho;
  T row0_mean = 0;
  for (int l = 0; l <= L; ++l) {
    const T beta = T(1) / T((2 * l + 1) * (L + 1) * C);
    for (int d = l * l; d < (l + 1) * (l + 1); ++d)
      for (int c = 0; c < C; ++c) {
        const T g = rho * (y_bar[d * C + c] * w.scale(l, c) - beta * xt(d, c) * rho * sigma);
        if (d == 0) row0_mean += g;
        x_bar[d * C + c] += g;
      }
  }
  // Un-centre the scalar row: the mean over channels was subtracted in the forward.
  row0_mean /= C;
  for (int c = 0; c < C; ++c) x_bar[c] -= row0_mean;
}

// y = x / sqrt(mean(x^2) + eps) * scale; returns rho = 1/sqrt(mean(x^2) + eps).
template <class T>
T scalar_rms_norm(const T* x, int C, const T* scale, T eps, T* y) {
  T s = 0;
  for (int c = 0; c < C; ++c) s += x[c] * x[c];
  const T rho = T(1) / std::sqrt(s / C + eps);
  for (int c = 0; c < C; ++c) y[c] = x[c] * rho * scale[c];
  return rho;
}

// x_bar += rho (y_bar s - x_hat <y_bar s, x_hat> / C), x_hat = x rho.
template <class T>
void scalar_rms_norm_backward(const T* x, int C, const T* scale, T rho, const T* y_bar, T* x_bar) {
  T dot = 0;
  for (int c = 0; c < C; ++c) dot += y_bar[c] * scale[c] * x[c] * rho;
  for (int c = 0; c < C; ++c) x_bar[c] += rho * (y_bar[c] * scale[c] - x[c] * rho * dot / C);
}

}  // namespace sezm
