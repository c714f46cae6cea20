#pragma once
// dpa4_ener fitting net (docs/model.md §6.2): GLU hidden layers with bias,
//   y = z W_k + b_k,  z' = y[:H_k] * silu(y[H_k:]),  o = z_last W_out (no bias),
// and AE_n = o_n + bias_atom_e[t_n] + out_bias[t_n] (the bias kept in double).
#include <vector>

#include "engine/linalg.h"
#include "model/weights.h"

namespace sezm {

template <class T>
struct FittingCache {
  std::vector<Mat<T>> y;  // per hidden layer, (N, 2H_k) pre-activation
  std::vector<Mat<T>> z;  // layer inputs, z[0] = desc
};

template <class T>
void fitting_forward(const ModelW<T>& w, const Mat<T>& desc, const int* types, double* atom_energy,
                     FittingCache<T>& fc) {
  const int N = static_cast<int>(desc.rows());
  fc.y.clear();
  fc.z.assign(1, desc);
  for (size_t k = 0; k < w.fit_w.size(); ++k) {
    Mat<T> y = fc.z.back() * w.fit_w[k];
    y.rowwise() += w.fit_b[k].transpose();
    const int H = static_cast<int>(y.cols() / 2);
    Mat<T> z(N, H);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < H; ++c) z(n, c) = y(n, c) * silu(y(n, H + c));
    fc.y.push_back(std::move(y));
    fc.z.push_back(std::move(z));
  }
  const Vec<T> o = fc.z.back() * w.fit_out;
  for (int n = 0; n < N; ++n) atom_energy[n] = static_cast<double>(o[n]) + w.atom_bias[types[n]];
}

// dE/d desc with dE/dAE_n = 1.
template <class T>
void fitting_backward(const ModelW<T>& w, const FittingCache<T>& fc, Mat<T>& desc_bar) {
  const int N = static_cast<int>(fc.z[0].rows());
  Mat<T> z_bar = Vec<T>::Ones(N) * w.fit_out.transpose();
  for (int k = static_cast<int>(w.fit_w.size()) - 1; k >= 0; --k) {
    const Mat<T>& y = fc.y[k];
    const int H = static_cast<int>(y.cols() / 2);
    Mat<T> y_bar(N, 2 * H);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < H; ++c) {
        y_bar(n, c) = z_bar(n, c) * silu(y(n, H + c));
        y_bar(n, H + c) = z_bar(n, c) * y(n, c) * silu_grad(y(n, H + c));
      }
    z_bar = y_bar * w.fit_w[k].transpose();
  }
  desc_bar = z_bar;
}

}  // namespace sezm
