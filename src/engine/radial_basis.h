#pragma once
// Bessel radial basis of SeZM (docs/model.md §2.3), forward and backward.
//
//   phi_n(r) = sin(w_n r) / r * E_{p_rbf}(r / rcut),   n = 0..n-1,
// with the frequencies w_n read from the checkpoint (`radial_basis.adam_freqs`, used as is:
// any real value, w_n = 0 gives phi_n = 0). No sqrt(2/rcut) or other normalisation.
// r is the safe norm r_e = sqrt(|v|^2 + eps^2) > 0 (docs/model.md §2.1); p_rbf = env_exp[0] = 7.
// Backward: *r_bar += sum_n phi_bar[n] dphi_n/dr with
//   dphi_n/dr = (w_n cos(w_n r)/r - sin(w_n r)/r^2) E + sin(w_n r)/r dE/dr.

#include <cmath>

#include "engine/envelope.h"

namespace sezm {

template <class T>
inline void radial_basis(T r, T rcut, int p_rbf, const T* freqs, int n, T* phi) {
  const T env_over_r = envelope(r, rcut, p_rbf) / r;
  for (int i = 0; i < n; ++i) phi[i] = std::sin(freqs[i] * r) * env_over_r;
}

template <class T>
inline void radial_basis_backward(T r, T rcut, int p_rbf, const T* freqs, int n, const T* phi_bar,
                                  T* r_bar) {
  const T inv_r = T(1) / r;
  const T env = envelope(r, rcut, p_rbf);
  const T denv = envelope_dr(r, rcut, p_rbf);
  T acc = T(0);
  for (int i = 0; i < n; ++i) {
    const T w = freqs[i];
    const T s = std::sin(w * r), c = std::cos(w * r);
    acc += phi_bar[i] * ((w * c - s * inv_r) * inv_r * env + s * inv_r * denv);
  }
  *r_bar += acc;
}

}  // namespace sezm
