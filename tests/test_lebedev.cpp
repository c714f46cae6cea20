// Lebedev rules and the FFN S2 grid matrices (docs/model.md §5.9.1).
//
// Identities tested (derived here):
// - e3nn "norm" SH satisfy sum_m Y_lm(p)^2 = 1, i.e. Y_lm = sqrt(4 pi/(2l+1)) y_lm with y_lm
//   orthonormal, so the sphere MEAN (1/4pi) int Y_d Y_d' dOmega = delta_dd' / (2l+1).
//   A rule of precision p (weights summing to 1) reproduces this mean for l + l' <= p.
// - Triple means (1/4pi) int Y_a Y_b Y_c are reproduced for l_a + l_b + l_c <= p; compared
//   against an independent Gauss–Legendre (in z) x trapezoid (in phi) product rule.
// - (P T)[d,d'] = sum_g w_g sqrt(L+1)(2l+1) Y_d(p_g) Y_d'(p_g) / sqrt(L+1)
//              = (2l+1) * delta_dd'/(2l+1) = delta_dd'   (needs precision >= 2L),
//   so P T x = x for every coefficient vector x of degree <= L.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "engine/lebedev.h"

namespace {

const double kPi = 3.14159265358979323846;

int degree(int d) { return static_cast<int>(std::sqrt(double(d) + 0.5)); }

// Sphere mean of f by an exact product rule: n-point Gauss–Legendre in z, m-point trapezoid in phi.
template <class F>
double sphere_mean(F f, int n = 12, int m = 24) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    double z = std::cos(kPi * (i + 0.75) / (n + 0.5)), dp = 0.0;
    for (int it = 0; it < 100; ++it) {  // Newton on P_n
      double p0 = 1.0, p1 = z;
      for (int k = 2; k <= n; ++k) {
        const double p2 = ((2 * k - 1) * z * p1 - (k - 1) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      dp = n * (z * p1 - p0) / (z * z - 1);
      const double dz = p1 / dp;
      z -= dz;
      if (std::abs(dz) < 1e-16) break;
    }
    const double wz = 2.0 / ((1 - z * z) * dp * dp);
    for (int j = 0; j < m; ++j) {
      const double phi = 2 * kPi * j / m, r = std::sqrt(1 - z * z);
      const double p[3] = {r * std::cos(phi), r * std::sin(phi), z};
      s += wz / m * f(p);
    }
  }
  return 0.5 * s;
}

TEST(Lebedev, RulesAndWeights) {
  const int prec[3] = {3, 7, 9}, npts[3] = {6, 26, 38};
  for (int r = 0; r < 3; ++r) {
    const sezm::LebedevRule rule = sezm::lebedev_rule(prec[r]);
    EXPECT_EQ(rule.precision, prec[r]);
    ASSERT_EQ(rule.n, npts[r]);
    double ws = 0.0;
    for (int g = 0; g < rule.n; ++g) {
      ws += rule.w[g];
      const double* p = rule.xyz[g];
      EXPECT_NEAR(p[0] * p[0] + p[1] * p[1] + p[2] * p[2], 1.0, 1e-15);
    }
    EXPECT_NEAR(ws, 1.0, 1e-14);
  }
  EXPECT_THROW(sezm::lebedev_rule(5), sezm::Error);
}

TEST(Lebedev, ShNormalisation) {
  std::mt19937 g(5);
  std::normal_distribution<double> nd;
  for (int t = 0; t < 10; ++t) {
    const double p[3] = {nd(g), nd(g), nd(g)};
    double Y[16];
    sezm::e3nn_real_sh(p, 3, Y);
    for (int l = 0; l <= 3; ++l) {
      double s = 0.0;
      for (int d = l * l; d < (l + 1) * (l + 1); ++d) s += Y[d] * Y[d];
      EXPECT_NEAR(s, 1.0, 1e-14);
    }
  }
  // y is the polar axis: the m = 0 functions equal Legendre polynomials P_l(y).
  const double p[3] = {0.36, 0.48, 0.8};  // unit, y = 0.48
  double Y[16];
  sezm::e3nn_real_sh(p, 3, Y);
  EXPECT_NEAR(Y[2], 0.48, 1e-15);
  EXPECT_NEAR(Y[6], 0.5 * (3 * 0.48 * 0.48 - 1), 1e-15);
  EXPECT_NEAR(Y[12], 0.5 * 0.48 * (5 * 0.48 * 0.48 - 3), 1e-15);
}

TEST(Lebedev, IntegratesPairsAndTriplesExactly) {
  for (int prec : {3, 7, 9}) {
    const sezm::LebedevRule rule = sezm::lebedev_rule(prec);
    std::vector<double> Y(rule.n * 16);
    for (int g = 0; g < rule.n; ++g) sezm::e3nn_real_sh(rule.xyz[g], 3, &Y[g * 16]);
    for (int a = 0; a < 16; ++a)
      for (int b = 0; b < 16; ++b) {
        if (degree(a) + degree(b) > prec) continue;
        double s = 0.0;
        for (int g = 0; g < rule.n; ++g) s += rule.w[g] * Y[g * 16 + a] * Y[g * 16 + b];
        EXPECT_NEAR(s, a == b ? 1.0 / (2 * degree(a) + 1) : 0.0, 1e-14) << prec << " " << a << " " << b;
      }
    for (int a = 0; a < 16; ++a)
      for (int b = a; b < 16; ++b)
        for (int c = b; c < 16; ++c) {
          if (degree(a) + degree(b) + degree(c) > prec) continue;
          double s = 0.0;
          for (int g = 0; g < rule.n; ++g) s += rule.w[g] * Y[g * 16 + a] * Y[g * 16 + b] * Y[g * 16 + c];
          const double ref = sphere_mean([&](const double* p) {
            double y[16];
            sezm::e3nn_real_sh(p, 3, y);
            return y[a] * y[b] * y[c];
          });
          EXPECT_NEAR(s, ref, 1e-14) << prec << " " << a << " " << b << " " << c;
        }
  }
}

TEST(Lebedev, S2GridShapesAndProjection) {
  const int G[4] = {6, 6, 26, 38};
  std::mt19937 g(6);
  std::normal_distribution<double> nd;
  for (int L = 0; L <= 3; ++L) {
    const sezm::S2Grid s = sezm::make_s2_grid(L);
    const int D = (L + 1) * (L + 1);
    EXPECT_EQ(s.L, L);
    EXPECT_EQ(s.D, D);
    ASSERT_EQ(s.G, G[L]);
    ASSERT_EQ(s.T.size(), size_t(G[L] * D));
    ASSERT_EQ(s.P.size(), size_t(D * G[L]));
    // P T = I.
    for (int d = 0; d < D; ++d)
      for (int e = 0; e < D; ++e) {
        double acc = 0.0;
        for (int k = 0; k < s.G; ++k) acc += s.P[d * s.G + k] * s.T[k * D + e];
        EXPECT_NEAR(acc, d == e ? 1.0 : 0.0, 1e-13) << L << " " << d << " " << e;
      }
    // P (T x) = x for a random coefficient vector.
    std::vector<double> x(D), tx(s.G, 0.0);
    for (double& c : x) c = nd(g);
    for (int k = 0; k < s.G; ++k)
      for (int d = 0; d < D; ++d) tx[k] += s.T[k * D + d] * x[d];
    for (int d = 0; d < D; ++d) {
      double acc = 0.0;
      for (int k = 0; k < s.G; ++k) acc += s.P[d * s.G + k] * tx[k];
      EXPECT_NEAR(acc, x[d], 1e-13);
    }
    // Definitions: T[g,d] = Y_d(p_g)/sqrt(L+1), P[d,g] = w_g sqrt(L+1)(2l+1) Y_d(p_g).
    const sezm::LebedevRule rule = sezm::lebedev_rule(L <= 1 ? 3 : L == 2 ? 7 : 9);
    double Y[16];
    sezm::e3nn_real_sh(rule.xyz[s.G - 1], L, Y);
    for (int d = 0; d < D; ++d) {
      EXPECT_DOUBLE_EQ(s.T[(s.G - 1) * D + d], Y[d] / std::sqrt(L + 1.0));
      EXPECT_DOUBLE_EQ(s.P[d * s.G + s.G - 1], rule.w[s.G - 1] * std::sqrt(L + 1.0) * (2 * degree(d) + 1) * Y[d]);
    }
  }
  EXPECT_THROW(sezm::make_s2_grid(4), sezm::Error);
  EXPECT_THROW(sezm::make_s2_grid(-1), sezm::Error);
}

}  // namespace
