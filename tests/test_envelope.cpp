// C3 cutoff envelope (docs/model.md §2.2): printed test values (§8), boundary behaviour,
// closed-form derivative vs central finite differences, incomplete-beta identity.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/envelope.h"

namespace {

using sezm::envelope;
using sezm::envelope_dr;

// I_y(4, p) for integer p: sum_{j=4}^{p+3} C(p+3, j) y^j (1-y)^{p+3-j} (binomial tail).
double incomplete_beta_4p(double y, int p) {
  const int n = p + 3;
  double s = 0.0;
  for (int j = 4; j <= n; ++j) {
    double c = 1.0;
    for (int i = 0; i < j; ++i) c = c * (n - i) / (i + 1);
    s += c * std::pow(y, j) * std::pow(1.0 - y, n - j);
  }
  return s;
}

TEST(Envelope, SpecTestValues) {
  const double rc = 6.0;
  EXPECT_NEAR(envelope(1.0, rc, 5), 0.995391208466697, 1e-15);
  EXPECT_NEAR(envelope(2.5, rc, 5), 0.7994609403094218, 1e-15);
  EXPECT_NEAR(envelope(5.0, rc, 5), 0.03065641194177715, 1e-15);
  EXPECT_NEAR(envelope(1.0, rc, 7), 0.9997324785347763, 1e-15);
  EXPECT_NEAR(envelope(2.5, rc, 7), 0.9317891264763667, 1e-15);
  EXPECT_NEAR(envelope(5.0, rc, 7), 0.0697278425544886, 1e-15);
}

TEST(Envelope, ClampAndEndpoints) {
  for (int p : {1, 3, 5, 7}) {
    EXPECT_EQ(envelope(0.0, 6.0, p), 1.0);
    EXPECT_EQ(envelope(-0.5, 6.0, p), 1.0);
    EXPECT_EQ(envelope(6.0, 6.0, p), 0.0);
    EXPECT_EQ(envelope(7.5, 6.0, p), 0.0);
    EXPECT_EQ(envelope_dr(6.0, 6.0, p), 0.0);
    EXPECT_EQ(envelope_dr(7.5, 6.0, p), 0.0);
  }
}

TEST(Envelope, IncompleteBetaIdentity) {
  for (int p : {2, 5, 7})
    for (double x = 0.0; x < 1.0; x += 0.0625)
      EXPECT_NEAR(envelope(x * 4.5, 4.5, p), incomplete_beta_4p(1.0 - x, p), 1e-14) << p << " " << x;
}

TEST(Envelope, DerivativeMatchesFiniteDifferences) {
  const double rc = 6.0, h = 1e-5;
  for (int p : {5, 7})
    for (double r : {0.3, 1.0, 2.5, 3.7, 5.0, 5.9}) {
      const double fd = (envelope(r + h, rc, p) - envelope(r - h, rc, p)) / (2 * h);
      EXPECT_NEAR(envelope_dr(r, rc, p), fd, 1e-9) << p << " " << r;
    }
}

TEST(Envelope, ValueAndThreeDerivativesVanishAtCutoff) {
  const double rc = 6.0, h = 1e-3;
  for (int p : {5, 7}) {
    auto E = [&](double r) { return envelope(r, rc, p); };
    const double d1 = (E(rc + h) - E(rc - h)) / (2 * h);
    const double d2 = (E(rc + h) - 2 * E(rc) + E(rc - h)) / (h * h);
    const double d3 = (E(rc + 2 * h) - 2 * E(rc + h) + 2 * E(rc - h) - E(rc - 2 * h)) / (2 * h * h * h);
    EXPECT_EQ(E(rc), 0.0);
    // Near rc, E = K s^4 + O(s^5) with s = (rc - r)/rc and K = C(p+3,4) (the series at x = 1),
    // and E = 0 beyond rc. The stencils then evaluate to K h^3/(2 rc^4), K h^2/rc^4 and
    // 7 K h/rc^4 at leading order: O(h^3), O(h^2), O(h), i.e. the derivatives vanish at rc.
    // A non-vanishing k-th derivative would give an O(1) stencil value instead.
    const double K = (p + 3) * (p + 2) * (p + 1) * p / 24.0, rc4 = rc * rc * rc * rc;
    EXPECT_LT(std::abs(d1), 1.1 * K * h * h * h / (2 * rc4));
    EXPECT_LT(std::abs(d2), 1.1 * K * h * h / rc4);
    EXPECT_LT(std::abs(d3), 1.1 * 7 * K * h / rc4);
    // The analytic derivative is continuous to 0 from inside.
    EXPECT_LT(std::abs(envelope_dr(rc - h, rc, p)), 1e-9);
  }
}

TEST(Envelope, FloatInstantiation) {
  EXPECT_NEAR(envelope(2.5f, 6.0f, 5), 0.7994609403094218f, 1e-6f);
  EXPECT_NEAR(envelope_dr(2.5f, 6.0f, 5), float(envelope_dr(2.5, 6.0, 5)), 1e-6f);
}

}  // namespace
