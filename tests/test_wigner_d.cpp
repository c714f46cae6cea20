// Edge frames and real Wigner-D blocks (docs/model.md §3, §7.5). Expected values come from
// docs/model.md §8's printed test vectors, from identities (orthogonality, homomorphism,
// equivariance against an independently written C_lm), or from central finite differences.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "engine/wigner_d.h"

namespace {

using Vec3 = std::array<double, 3>;
using Quat = std::array<double, 4>;
constexpr int kL = sezm::kWignerMaxL;
const double kEps = 1e-7;

Quat qmul(const Quat& a, const Quat& b) {  // Hamilton product, (w, x, y, z)
  return {a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
          a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
          a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
          a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]};
}

Quat normalized(Quat q) {
  const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  for (double& c : q) c /= n;
  return q;
}

Quat random_quat(std::mt19937& g) {
  std::normal_distribution<double> nd;
  return normalized({nd(g), nd(g), nd(g), nd(g)});
}

Vec3 random_unit(std::mt19937& g) {
  std::normal_distribution<double> nd;
  Vec3 u{nd(g), nd(g), nd(g)};
  const double n = std::sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
  for (double& c : u) c /= n;
  return u;
}

// eps = 0: exact re-normalisation, so identity checks are not blurred by deepmd's eps floor
// (q / sqrt(|q|^2 + eps^2) scales the degree-2l polynomial D^l by ~(1 - l eps^2), ~1e-13 at l = 6).
std::vector<double> wigner(const Quat& q, int L = kL, double eps = 0.0) {
  std::vector<double> D(sezm::wigner_size(L));
  sezm::wigner_d(q.data(), L, D.data(), eps);
  return D;
}

// ---- independent C_lm of docs/model.md §3.1: Rodrigues' formula, explicit factorials, atan2 ----

double factorial(int n) { return n <= 1 ? 1.0 : n * factorial(n - 1); }

// P_l^m(z) with the Condon–Shortley phase: (-1)^m (1-z^2)^{m/2} d^{l+m}/dz^{l+m} (z^2-1)^l / (2^l l!),
// with sin_theta = sqrt(1-z^2) passed in (computed as hypot(x, y) to stay accurate near the poles).
double assoc_legendre(int l, int m, double z, double sin_theta) {
  std::vector<double> c(2 * l + 1, 0.0);  // coefficients of (z^2-1)^l in powers of z
  for (int k = 0; k <= l; ++k)
    c[2 * k] = factorial(l) / (factorial(k) * factorial(l - k)) * (((l - k) % 2) ? -1.0 : 1.0);
  for (int d = 0; d < l + m; ++d)
    for (int i = 0; i + 1 < static_cast<int>(c.size()); ++i) c[i] = c[i + 1] * (i + 1);
  double s = 0.0;
  for (int i = 2 * l - (l + m); i >= 0; --i) s = s * z + c[i];
  return ((m % 2) ? -1.0 : 1.0) * std::pow(sin_theta, m) * s / (std::pow(2.0, l) * factorial(l));
}

double racah_C(int l, int m, const Vec3& u) {
  const double phi = std::atan2(u[1], u[0]);
  const double st = std::hypot(u[0], u[1]);
  const int am = std::abs(m);
  if (m == 0) return assoc_legendre(l, 0, u[2], st);
  const double n = std::sqrt(2 * factorial(l - am) / factorial(l + am));
  return m > 0 ? n * assoc_legendre(l, am, u[2], st) * std::cos(am * phi)
               : -n * assoc_legendre(l, am, u[2], st) * std::sin(am * phi);
}

// Closed forms (docs/model.md §3.1) for l <= 3, m = -l..l.
std::vector<double> racah_closed(int l, const Vec3& u) {
  const double x = u[0], y = u[1], z = u[2];
  const double s3 = std::sqrt(3.0), s6 = std::sqrt(6.0), s10 = std::sqrt(10.0), s15 = std::sqrt(15.0);
  switch (l) {
    case 0: return {1.0};
    case 1: return {y, z, -x};
    case 2: return {-s3 * x * y, s3 * y * z, 0.5 * (3 * z * z - 1), -s3 * x * z, s3 / 2 * (x * x - y * y)};
    default:
      return {s10 / 4 * y * (3 * x * x - y * y), -s15 * x * y * z, s6 / 4 * y * (5 * z * z - 1),
              0.5 * z * (5 * z * z - 3), -s6 / 4 * x * (5 * z * z - 1), s15 / 2 * z * (x * x - y * y),
              -s10 / 4 * x * (x * x - 3 * y * y)};
  }
}

Vec3 rotate(const Quat& q, const Vec3& u) {
  double R[9];
  sezm::quaternion_to_rotation(q.data(), R);
  return {R[0] * u[0] + R[1] * u[1] + R[2] * u[2], R[3] * u[0] + R[4] * u[1] + R[5] * u[2],
          R[6] * u[0] + R[7] * u[1] + R[8] * u[2]};
}

Quat edge_q(const Vec3& v) {
  Quat q;
  sezm::edge_quaternion(v.data(), kEps, q.data());
  return q;
}

// Directions including the chart singularities and the smooth-step region around -z.
std::vector<Vec3> edge_vectors() {
  return {{1.0, -2.0, 0.5},  {0.3, 0.4, 2.0},     {0.0, 0.0, 1.7},        {0.0, 0.0, -2.2},
          {1e-4, -2e-4, -1.0}, {2e-9, 1e-9, -3.0}, {-3e-5, 1e-5, 1.0},     {0.7, -0.2, -0.9},
          {-1.1, 0.2, -1e-3}, {0.0, 2.5, 0.0},    {-0.6, -0.5, -2.9},     {5.0, 1e-3, 0.2}};
}

TEST(WignerD, OffsetsAndSizes) {
  EXPECT_EQ(sezm::wigner_offset(0), 0);
  EXPECT_EQ(sezm::wigner_offset(1), 1);
  EXPECT_EQ(sezm::wigner_offset(2), 10);
  EXPECT_EQ(sezm::wigner_offset(3), 35);
  EXPECT_EQ(sezm::wigner_size(3), 84);
  int s = 0;
  for (int l = 0; l <= kL; ++l) s += (2 * l + 1) * (2 * l + 1);
  EXPECT_EQ(sezm::wigner_size(kL), s);
}

TEST(WignerD, EdgeQuaternionSpecVector) {
  const Quat q = edge_q({1.0, -2.0, 0.5});
  const Quat ref{-0.7468320636957196, 0.45393274260120337, 0.42992571460259044, -0.22660717939637562};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(q[i], ref[i], 1e-15);
}

TEST(WignerD, EdgeFrameSendsEdgeToPlusZ) {
  for (const Vec3& v : edge_vectors()) {
    const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    const Vec3 r = rotate(edge_q(v), {v[0] / n, v[1] / n, v[2] / n});
    EXPECT_NEAR(r[0], 0.0, 1e-13);
    EXPECT_NEAR(r[1], 0.0, 1e-13);
    EXPECT_NEAR(r[2], 1.0, 1e-13);
  }
}

TEST(WignerD, SpecTestVectorsL1L2) {
  const Quat q = normalized({0.9, 0.1, -0.3, 0.2});
  const auto D = wigner(q, 2, kEps);  // deepmd's default floor
  const double d1[9] = {0.8947368421052628, -0.3157894736842105, -0.31578947368421056,
                        0.06315789473684214, 0.7894736842105263, -0.6105263157894737,
                        0.4421052631578947, 0.5263157894736842, 0.7263157894736841};
  const double d2row[5] = {0.5102493074792243, 0.33130193905817157, -0.2878754804823618,
                           -0.395567867036011, -0.6249307479224376};
  EXPECT_EQ(D[0], 1.0);
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(D[1 + i], d1[i], 2e-14);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(D[10 + j], d2row[j], 2e-14);
}

TEST(WignerD, L1IsPermutedSignedRotation) {
  std::mt19937 g(7);
  const int perm[3] = {1, 2, 0};
  const double s[3] = {-1, -1, 1};
  for (int t = 0; t < 5; ++t) {
    const Quat q = random_quat(g);
    const auto D = wigner(q, 1);
    double R[9];
    sezm::quaternion_to_rotation(q.data(), R);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_NEAR(D[1 + 3 * i + j], s[i] * s[j] * R[3 * perm[i] + perm[j]], 1e-15);
  }
}

TEST(WignerD, Orthogonal) {
  std::mt19937 g(1);
  for (int t = 0; t < 5; ++t) {
    const auto D = wigner(random_quat(g));
    for (int l = 0; l <= kL; ++l) {
      const int n = 2 * l + 1;
      const double* B = D.data() + sezm::wigner_offset(l);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0.0;
          for (int k = 0; k < n; ++k) s += B[i * n + k] * B[j * n + k];
          EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-13) << l;
        }
    }
  }
}

TEST(WignerD, Homomorphism) {
  std::mt19937 g(2);
  for (int t = 0; t < 5; ++t) {
    const Quat q1 = random_quat(g), q2 = random_quat(g);
    const auto D1 = wigner(q1), D2 = wigner(q2), D12 = wigner(qmul(q1, q2));
    for (int l = 0; l <= kL; ++l) {
      const int n = 2 * l + 1, o = sezm::wigner_offset(l);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0.0;
          for (int k = 0; k < n; ++k) s += D1[o + i * n + k] * D2[o + k * n + j];
          EXPECT_NEAR(D12[o + i * n + j], s, 1e-13) << l;
        }
    }
  }
}

TEST(WignerD, RacahShMatchesClosedAndGeneralForms) {
  std::mt19937 g(3);
  std::vector<Vec3> us{{0, 0, 1}, {0, 0, -1}, {1, 0, 0}};
  for (int t = 0; t < 6; ++t) us.push_back(random_unit(g));
  std::vector<double> C((kL + 1) * (kL + 1));
  for (const Vec3& u : us) {
    sezm::real_sh_racah(u.data(), kL, C.data());
    for (int l = 0; l <= kL; ++l)
      for (int m = -l; m <= l; ++m) {
        EXPECT_NEAR(C[l * l + l + m], racah_C(l, m, u), 1e-13) << l << " " << m;
        if (l <= 3) {
          EXPECT_NEAR(C[l * l + l + m], racah_closed(l, u)[m + l], 1e-14) << l << " " << m;
        }
      }
  }
}

TEST(WignerD, EquivarianceAgainstIndependentSh) {
  std::mt19937 g(4);
  for (int t = 0; t < 4; ++t) {
    const Quat q = random_quat(g);
    const Vec3 u = random_unit(g), Ru = rotate(q, u);
    const auto D = wigner(q);
    for (int l = 0; l <= kL; ++l) {
      const int n = 2 * l + 1, o = sezm::wigner_offset(l);
      for (int i = 0; i < n; ++i) {
        double s = 0.0;
        for (int j = 0; j < n; ++j) s += D[o + i * n + j] * racah_C(l, j - l, u);
        EXPECT_NEAR(s, racah_C(l, i - l, Ru), 1e-12) << l << " " << i;
      }
    }
  }
}

TEST(WignerD, ZonalRowOfEdgeFrameIsRacahSh) {
  for (const Vec3& v : edge_vectors()) {
    const double nv = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    const Vec3 u{v[0] / nv, v[1] / nv, v[2] / nv};
    const auto D = wigner(edge_q(v));
    for (int l = 0; l <= kL; ++l) {
      const int n = 2 * l + 1, o = sezm::wigner_offset(l);
      for (int j = 0; j < n; ++j) EXPECT_NEAR(D[o + l * n + j], racah_C(l, j - l, u), 1e-12) << l << " " << j;
    }
  }
}

TEST(WignerD, PureZRotation) {
  for (double gam : {0.3, 1.7, -2.4}) {
    const auto D = wigner({std::cos(gam / 2), 0.0, 0.0, std::sin(gam / 2)});
    for (int l = 0; l <= kL; ++l) {
      const int n = 2 * l + 1;
      const double* B = D.data() + sezm::wigner_offset(l);
      auto at = [&](int mi, int mj) { return B[(mi + l) * n + (mj + l)]; };
      EXPECT_NEAR(at(0, 0), 1.0, 1e-14);
      for (int m = 1; m <= l; ++m) {
        EXPECT_NEAR(at(m, m), std::cos(m * gam), 1e-14);
        EXPECT_NEAR(at(-m, -m), std::cos(m * gam), 1e-14);
        EXPECT_NEAR(at(-m, m), -std::sin(m * gam), 1e-14);
        EXPECT_NEAR(at(m, -m), std::sin(m * gam), 1e-14);
      }
    }
  }
}

TEST(WignerD, GeneratorsL1MatchSpec) {
  const double Jx[9] = {0, -1, 0, 1, 0, 0, 0, 0, 0};
  const double Jy[9] = {0, 0, 0, 0, 0, 1, 0, -1, 0};
  const double Jz[9] = {0, 0, -1, 0, 0, 0, 1, 0, 0};
  const double* ref[3] = {Jx, Jy, Jz};
  for (int a = 0; a < 3; ++a)
    for (int i = 0; i < 9; ++i) EXPECT_NEAR(sezm::wigner_generator(1, a)[i], ref[a][i], 1e-15) << a << " " << i;
}

TEST(WignerD, GeneratorsAreDerivativesOfD) {
  // J^l_a = d/dt D^l(q_a(t)) at 0, by central differences; also antisymmetric.
  const double h = 1e-5;
  for (int a = 0; a < 3; ++a) {
    Quat qp{std::cos(h / 2), 0, 0, 0}, qm{std::cos(h / 2), 0, 0, 0};
    qp[1 + a] = std::sin(h / 2);
    qm[1 + a] = -std::sin(h / 2);
    const auto Dp = wigner(qp), Dm = wigner(qm);
    for (int l = 0; l <= kL; ++l) {
      const int n = 2 * l + 1, o = sezm::wigner_offset(l);
      const double* J = sezm::wigner_generator(l, a);
      for (int i = 0; i < n * n; ++i) {
        EXPECT_NEAR(J[i], (Dp[o + i] - Dm[o + i]) / (2 * h), 1e-8) << a << " " << l << " " << i;
        EXPECT_EQ(J[i], -J[(i % n) * n + i / n]);
      }
    }
  }
}

// Roll-invariant scalar of D(q_e(v)) for the tilt-formula backward (see the test below).
struct RollInvariantScalar {
  int L;
  std::vector<double> c, w, x, y, k;  // c_l, w (packed p(l,m')), x and y (packed), k_{l,|m|<=1}

  explicit RollInvariantScalar(int L_) : L(L_) {
    const int n = (L + 1) * (L + 1);
    for (int l = 0; l <= L; ++l) {
      c.push_back(0.3 + 0.2 * l);
      k.push_back(0.7 - 0.1 * l);  // k_{l,0}
      k.push_back(-0.4 + 0.3 * l);  // k_{l,1} (same on m = -1 and m = +1)
    }
    for (int p = 0; p < n; ++p) {
      w.push_back(std::sin(1.0 + 0.9 * p));
      x.push_back(std::cos(0.3 + 1.3 * p));
      y.push_back(std::sin(2.0 - 0.7 * p));
    }
  }
  double kdiag(int l, int m) const { return std::abs(m) > 1 ? 0.0 : k[2 * l + std::abs(m)]; }

  // E = sum_l [ c_l sum_m' D^l_{0m'} w_{lm'} + (D^l x_l)^T K_l (D^l y_l) ].
  double value(const std::vector<double>& D) const {
    double e = 0.0;
    for (int l = 0; l <= L; ++l) {
      const int n = 2 * l + 1, o = sezm::wigner_offset(l), p0 = l * l;
      for (int j = 0; j < n; ++j) e += c[l] * D[o + l * n + j] * w[p0 + j];
      for (int i = 0; i < n; ++i) {
        double dx = 0.0, dy = 0.0;
        for (int j = 0; j < n; ++j) {
          dx += D[o + i * n + j] * x[p0 + j];
          dy += D[o + i * n + j] * y[p0 + j];
        }
        e += kdiag(l, i - l) * dx * dy;
      }
    }
    return e;
  }
  // dE/dD^l = c_l e_0 w^T + K_l D^l (y x^T + x y^T): non-zero only on rows |m| <= 1.
  std::vector<double> grad(const std::vector<double>& D) const {
    std::vector<double> G(D.size(), 0.0);
    for (int l = 0; l <= L; ++l) {
      const int n = 2 * l + 1, o = sezm::wigner_offset(l), p0 = l * l;
      for (int j = 0; j < n; ++j) G[o + l * n + j] += c[l] * w[p0 + j];
      for (int i = 0; i < n; ++i) {
        const double kk = kdiag(l, i - l);
        if (kk == 0.0) continue;
        double dx = 0.0, dy = 0.0;
        for (int j = 0; j < n; ++j) {
          dx += D[o + i * n + j] * x[p0 + j];
          dy += D[o + i * n + j] * y[p0 + j];
        }
        for (int j = 0; j < n; ++j) G[o + i * n + j] += kk * (dy * x[p0 + j] + dx * y[p0 + j]);
      }
    }
    return G;
  }
};

// The tilt formula drops the roll about the local z axis, so it is only exact for scalars that do
// not change under D -> D_z(gamma) D. RollInvariantScalar is such a scalar: row m' = 0 of
// D_z(gamma) is e_0 (the zonal row is untouched), and K_l = diag(k_{|m|}) is a multiple of the
// identity on every (m, -m) pair, on which D_z(gamma) acts as a 2x2 rotation, so
// D_z^T K D_z = K and (D x)^T K (D y) is unchanged.
TEST(WignerD, BackwardMatchesFiniteDifferences) {
  for (int L : {1, 3, 6}) {
    const RollInvariantScalar f(L);
    auto energy = [&](const Vec3& v) { return f.value(wigner(edge_q(v), L)); };
    for (const Vec3& v : edge_vectors()) {
      const auto D = wigner(edge_q(v), L);
      const auto Dbar = f.grad(D);
      double vbar[3] = {0.5, -0.25, 0.125};  // accumulates
      sezm::wigner_d_backward(v.data(), kEps, D.data(), L, Dbar.data(), vbar);
      const double nv = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
      const double h = 1e-5 * nv;
      for (int a = 0; a < 3; ++a) {
        Vec3 vp = v, vm = v;
        vp[a] += h;
        vm[a] -= h;
        const double fd = (energy(vp) - energy(vm)) / (2 * h);
        EXPECT_NEAR(vbar[a] - (a == 0 ? 0.5 : a == 1 ? -0.25 : 0.125), fd, 1e-8 * (1.0 + std::abs(fd)))
            << "L=" << L << " v=(" << v[0] << "," << v[1] << "," << v[2] << ") a=" << a;
      }
    }
  }
}

TEST(WignerD, FloatInstantiation) {
  const Quat qd = edge_q({0.3, -1.2, 0.8});
  const float vf[3] = {0.3f, -1.2f, 0.8f};
  float qf[4], Rf[9], Df[84], Cf[16], bar[84] = {}, vbar[3] = {0, 0, 0};
  sezm::edge_quaternion(vf, 1e-7f, qf);
  sezm::quaternion_to_rotation(qf, Rf);
  sezm::wigner_d(qf, 3, Df);
  const float u[3] = {0.f, 0.6f, 0.8f};
  sezm::real_sh_racah(u, 3, Cf);
  bar[35 + 3 * 7 + 2] = 1.f;
  sezm::wigner_d_backward(vf, 1e-7f, Df, 3, bar, vbar);
  const auto Dd = wigner(qd, 3);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(qf[i], qd[i], 1e-6);
  for (int i = 0; i < 84; ++i) EXPECT_NEAR(Df[i], Dd[i], 2e-6);
}

}  // namespace
