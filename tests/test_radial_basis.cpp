// Bessel radial basis (docs/model.md §2.3): forward vs an independent closed form, w = 0, backward vs
// central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/radial_basis.h"

namespace {

// E_7(x) written out: (1-x)^4 (1 + 4x + 10x^2 + 20x^3 + 35x^4 + 56x^5 + 84x^6), 0 for x >= 1.
double e7(double r, double rc) {
  const double x = r / rc;
  if (x >= 1.0) return 0.0;
  const double s = 1 + x * (4 + x * (10 + x * (20 + x * (35 + x * (56 + x * 84)))));
  return std::pow(1 - x, 4) * s;
}

const double kPi = 3.14159265358979323846;

std::vector<double> freqs(double rc) {
  std::vector<double> w;
  for (int n = 1; n <= 6; ++n) w.push_back(n * kPi / rc);
  w.push_back(0.0);
  w.push_back(-1.3);
  w.push_back(2.71828);
  return w;
}

TEST(RadialBasis, MatchesClosedForm) {
  const double rc = 6.0;
  const auto w = freqs(rc);
  const int n = static_cast<int>(w.size());
  std::vector<double> phi(n);
  for (double r : {1e-3, 0.7, 1.0, 2.5, 4.2, 5.0, 5.99, 6.0, 6.5}) {
    sezm::radial_basis(r, rc, 7, w.data(), n, phi.data());
    for (int i = 0; i < n; ++i)
      EXPECT_NEAR(phi[i], std::sin(w[i] * r) / r * e7(r, rc), 1e-13) << r << " " << i;
  }
}

TEST(RadialBasis, ZeroFrequencyGivesZero) {
  const double w = 0.0;
  double phi = 1.0;
  sezm::radial_basis(2.0, 6.0, 7, &w, 1, &phi);
  EXPECT_EQ(phi, 0.0);
}

TEST(RadialBasis, BackwardMatchesFiniteDifferences) {
  const double rc = 6.0, h = 1e-6;
  const auto w = freqs(rc);
  const int n = static_cast<int>(w.size());
  std::vector<double> bar(n), pp(n), pm(n);
  for (int i = 0; i < n; ++i) bar[i] = std::cos(1.0 + 0.7 * i);
  for (double r : {0.4, 1.0, 2.5, 4.2, 5.0, 5.95}) {
    double rbar = 0.25;  // accumulates
    sezm::radial_basis_backward(r, rc, 7, w.data(), n, bar.data(), &rbar);
    sezm::radial_basis(r + h, rc, 7, w.data(), n, pp.data());
    sezm::radial_basis(r - h, rc, 7, w.data(), n, pm.data());
    double fd = 0.0;
    for (int i = 0; i < n; ++i) fd += bar[i] * (pp[i] - pm[i]) / (2 * h);
    EXPECT_NEAR(rbar - 0.25, fd, 1e-8) << r;
  }
}

TEST(RadialBasis, FloatInstantiation) {
  const float wf[2] = {0.5f, 1.5f};
  const double wd[2] = {0.5, 1.5};
  float pf[2], bf[2] = {1.f, -2.f}, rf = 0.f;
  double pd[2], bd[2] = {1.0, -2.0}, rd = 0.0;
  sezm::radial_basis(2.0f, 6.0f, 7, wf, 2, pf);
  sezm::radial_basis(2.0, 6.0, 7, wd, 2, pd);
  sezm::radial_basis_backward(2.0f, 6.0f, 7, wf, 2, bf, &rf);
  sezm::radial_basis_backward(2.0, 6.0, 7, wd, 2, bd, &rd);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(pf[i], pd[i], 1e-6);
  EXPECT_NEAR(rf, rd, 1e-5);
}

}  // namespace
