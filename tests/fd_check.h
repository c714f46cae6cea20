#pragma once
// Central finite-difference check of a hand-written backward (tests/test_component_backward.cpp
// explains the stencil and the tolerance): J = objective, x = its input (perturbed in place and
// restored), grad = the analytic dJ/dx. A directional derivative over all inputs plus 24 entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace sezm_test {

using V = std::vector<double>;

inline constexpr double kH = 1e-4;
inline constexpr double kTol = 1e-8;

inline V randn(size_t n, std::mt19937& g, double s = 1.0) {
  std::normal_distribution<double> nd(0.0, s);
  V v(n);
  for (double& x : v) x = nd(g);
  return v;
}

inline double dot(const double* a, const double* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Compares grad (analytic dJ/dx) with FD of J over x (perturbed in place, restored).
inline void check_grad(const std::string& what, double* x, size_t n, const std::function<double()>& J, const double* grad,
                unsigned seed = 7) {
  std::mt19937 g(seed);
  auto fd = [&](const std::function<void(double)>& shift) {
    double f[4];
    const double d[4] = {-2 * kH, -kH, kH, 2 * kH};
    for (int k = 0; k < 4; ++k) {
      shift(d[k]);
      f[k] = J();
      shift(-d[k]);
    }
    return (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * kH);
  };
  double gmax = 0;
  for (size_t i = 0; i < n; ++i) gmax = std::max(gmax, std::abs(grad[i]));
  const double tol = kTol * std::max(1.0, gmax);
  // Directional derivative over all inputs (unit-variance direction).
  const V dir = randn(n, g);
  const V x0(x, x + n);
  const double dd = fd([&](double s) {
    for (size_t i = 0; i < n; ++i) x[i] += s * dir[i];
  });
  for (size_t i = 0; i < n; ++i) x[i] = x0[i];
  const double dd_an = dot(grad, dir.data(), n);
  double err = std::abs(dd - dd_an) / std::sqrt(static_cast<double>(n));
  EXPECT_NEAR(dd, dd_an, tol * std::sqrt(static_cast<double>(n))) << what << ": directional derivative";
  // Individual entries.
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  for (int k = 0; k < std::min<int>(24, static_cast<int>(n)); ++k) {
    const size_t i = n <= 24 ? static_cast<size_t>(k) : pick(g);
    const double d = fd([&](double s) { x[i] += s; });
    x[i] = x0[i];
    err = std::max(err, std::abs(d - grad[i]));
    EXPECT_NEAR(d, grad[i], tol) << what << ": entry " << i;
  }
  EXPECT_GT(gmax, 0.0) << what << ": the gradient is identically zero (vacuous check)";
  std::printf("[bwd] %-44s n=%6zu  max|g|=%9.3g  max|fd-g|=%.2e\n", what.c_str(), n, gmax, err);
}

}  // namespace sezm_test
