#pragma once
// Dense helpers shared by the CPU engine's components. All matrices are row-major, weights are
// stored (in, out) as in deepmd-kit, so a layer is y = x W with row vectors.
#include <cmath>
#include <vector>

#include "common/matrix.h"  // Eigen/Core (behind matrix.h's pragma on GCC 12's AVX-512 warning)

namespace sezm {

// Views over raw row-major buffers with an explicit row stride (for column slices of a tile).
template <class T>
using MatMap = Eigen::Map<Mat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using CMatMap = Eigen::Map<const Mat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class T>
inline MatMap<T> view(T* p, Eigen::Index rows, Eigen::Index cols, Eigen::Index stride) {
  return MatMap<T>(p, rows, cols, Eigen::OuterStride<>(stride));
}
template <class T>
inline CMatMap<T> view(const T* p, Eigen::Index rows, Eigen::Index cols, Eigen::Index stride) {
  return CMatMap<T>(p, rows, cols, Eigen::OuterStride<>(stride));
}
template <class T>
inline MatMap<T> view(T* p, Eigen::Index rows, Eigen::Index cols) {
  return view(p, rows, cols, cols);
}
template <class T>
inline CMatMap<T> view(const T* p, Eigen::Index rows, Eigen::Index cols) {
  return view(p, rows, cols, cols);
}

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <class T>
inline T silu(T x) {
  return x * sigmoid(x);
}
// d silu / dx = s (1 + x (1 - s))
template <class T>
inline T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

// Packed SO(3) coefficient index p(l, m) = l^2 + l + m and its degree.
inline int packed_index(int l, int m) { return l * l + l + m; }
inline int degree_of(int p) {
  int l = 0;
  while ((l + 1) * (l + 1) <= p) ++l;
  return l;
}

}  // namespace sezm

namespace sezm {

// Per-degree linear over packed node features: Y[n, d, :] (+)= X[n, d, :] W[l(d)] for
// X (N, D, Cin), Y (N, D, Cout). The transposed form (for backward) passes W^T via `transpose`.
template <class T>
void per_degree_linear(const T* X, int N, int L, int Cin, const std::vector<Mat<T>>& W, T* Y, int Cout,
                       bool accumulate = false, bool transpose = false) {
  const int D = (L + 1) * (L + 1);
  for (int l = 0; l <= L; ++l) {
    for (int m = -l; m <= l; ++m) {
      const int d = packed_index(l, m);
      auto x = view(X + static_cast<size_t>(d) * Cin, N, Cin, static_cast<Eigen::Index>(D) * Cin);
      auto y = view(Y + static_cast<size_t>(d) * Cout, N, Cout, static_cast<Eigen::Index>(D) * Cout);
      if (transpose) {
        if (accumulate) y.noalias() += x * W[l].transpose(); else y.noalias() = x * W[l].transpose();
      } else {
        if (accumulate) y.noalias() += x * W[l]; else y.noalias() = x * W[l];
      }
    }
  }
}

}  // namespace sezm
