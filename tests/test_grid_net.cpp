// The SO(3) Wigner-D grid and the grid nets (docs/model.md §5.10-§5.13, backward §7.12).
// - The grid of L = 2, kmax = 1 against deepmd-kit's own matrices: the norms and sums of A and B
//   that deepmd-kit's SO3GridProjector gives (Frobenius norms, sums of |entries|) and its
//   non-zero entries of the rows g = 0..3 (the spot check of the Mini spec, 6 digits).
// - Exactness, for every (L, kmax) the config accepts: B A = I on the live (d, p) slots, zero
//   rows/columns on the dead ones (|k_p| > l), and equivariance of the grid product,
//   B(A Du (.) A Dv) = D B(A u (.) A v) for a random rotation D acting on the m index of every
//   frame (holds only if the quadrature integrates the triple products exactly).
// - Each grid net's backward (glu, mlp, branch with 1 and 3 branches; self and cross modes)
//   against central finite differences of its forward, random weights and inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/grid_net.h"
#include "engine/so3_grid.h"
#include "engine/wigner_d.h"
#include "fd_check.h"

namespace {

using namespace sezm;
using sezm_test::check_grad;
using sezm_test::dot;
using sezm_test::randn;
using V = std::vector<double>;

TEST(SO3Grid, MatchesDeepmdKitChecksumsL2K1) {
  const SO3Grid g = make_so3_grid(2, 1);
  EXPECT_EQ(g.G, 104);
  EXPECT_EQ(g.J, 27);
  EXPECT_EQ(g.P, 26);
  EXPECT_EQ(g.n_gamma, 4);
  EXPECT_EQ(g.precision, 7);
  EXPECT_EQ(g.frames, (std::vector<int>{0, -1, 1}));
  double fa = 0, sa = 0, fb = 0, sb = 0;
  for (double a : g.A) { fa += a * a; sa += std::abs(a); }
  for (double b : g.B) { fb += b * b; sb += std::abs(b); }
  // deepmd-kit's values (SO3GridProjector(lmax=2, kmax=1), float64).
  EXPECT_NEAR(std::sqrt(fa), 26.981475126463696, 1e-13 * 27);
  EXPECT_NEAR(sa, 980.9879841902332, 1e-13 * 981);
  EXPECT_NEAR(std::sqrt(fb), 1.0057868277409032, 1e-13);
  EXPECT_NEAR(sb, 34.25619154555635, 1e-13 * 35);

  // Rows g = 0..3 (Lebedev point 0 ~ x-hat, gamma = 0, pi/2, pi, 3pi/2): deepmd-kit's non-zero
  // entries (l, m, k) -> value; every other entry of these rows is zero.
  struct Nz { int l, m, k; double v; };
  const double c = 0.866025;
  const std::vector<std::vector<Nz>> rows = {
      {{0, 0, 0, 1}, {1, -1, -1, 1}, {1, 0, 1, 1}, {1, 1, 0, -1}, {2, -2, -1, -1}, {2, 0, 0, -0.5}, {2, 1, 1, -1}, {2, 2, 0, c}},
      {{0, 0, 0, 1}, {1, -1, 1, 1}, {1, 0, -1, -1}, {1, 1, 0, -1}, {2, -2, 1, -1}, {2, 0, 0, -0.5}, {2, 1, -1, 1}, {2, 2, 0, c}},
      {{0, 0, 0, 1}, {1, -1, -1, -1}, {1, 0, 1, -1}, {1, 1, 0, -1}, {2, -2, -1, 1}, {2, 0, 0, -0.5}, {2, 1, 1, 1}, {2, 2, 0, c}},
      {{0, 0, 0, 1}, {1, -1, 1, -1}, {1, 0, -1, 1}, {1, 1, 0, -1}, {2, -2, 1, 1}, {2, 0, 0, -0.5}, {2, 1, -1, -1}, {2, 2, 0, c}}};
  auto pos = [&](int k) { return k == 0 ? 0 : k < 0 ? 2 * -k - 1 : 2 * k; };
  for (int gi = 0; gi < 4; ++gi) {
    std::vector<double> expect(g.J, 0.0);
    for (const Nz& z : rows[gi]) expect[(z.l * z.l + z.l + z.m) * g.K + pos(z.k)] = z.v;
    for (int j = 0; j < g.J; ++j)
      EXPECT_NEAR(g.A[static_cast<size_t>(gi) * g.J + j], expect[j], expect[j] != 0 ? 1e-6 : 1e-12)
          << "g " << gi << " j " << j;
  }
}

// A random rotation's Wigner blocks applied to the packed m index of a framed (J, c) field.
Mat<double> rotate_framed(const Mat<double>& X, const std::vector<double>& Dr, int L, int K) {
  Mat<double> Y = Mat<double>::Zero(X.rows(), X.cols());
  for (int l = 0; l <= L; ++l)
    for (int m = -l; m <= l; ++m)
      for (int mp = -l; mp <= l; ++mp) {
        const double dv = Dr[wigner_offset(l) + (m + l) * (2 * l + 1) + (mp + l)];
        for (int p = 0; p < K; ++p)
          Y.row((l * l + l + m) * K + p) += dv * X.row((l * l + l + mp) * K + p);
      }
  return Y;
}

TEST(SO3Grid, ExactForEveryAcceptedDegreeAndFrameOrder) {
  std::mt19937 rng(5);
  for (int L = 1; L <= 3; ++L)
    for (int kmax = 0; kmax <= L; ++kmax) {
      const SO3GridMats<double> gm(L, kmax);
      const SO3Grid g = make_so3_grid(L, kmax);
      const Mat<double> BA = gm.B * gm.A;
      double err = 0;
      for (int d = 0; d < g.D; ++d)
        for (int p = 0; p < g.K; ++p) {
          const int l = static_cast<int>(std::sqrt(static_cast<double>(d)));
          const bool live = std::abs(g.frames[p]) <= l;
          const int j = d * g.K + p;
          for (int j2 = 0; j2 < g.J; ++j2) err = std::max(err, std::abs(BA(j, j2) - (live && j2 == j ? 1.0 : 0.0)));
        }
      EXPECT_LT(err, 1e-13) << "B A - I, L " << L << " kmax " << kmax;
      // Equivariance of the grid product under a random rotation.
      const int c = 3;
      const Mat<double> u = Eigen::Map<const Mat<double>>(randn(g.J * c, rng).data(), g.J, c);
      const Mat<double> v = Eigen::Map<const Mat<double>>(randn(g.J * c, rng).data(), g.J, c);
      V qv = randn(4, rng);
      std::vector<double> Dr(wigner_size(L));
      wigner_d(qv.data(), L, Dr.data(), 0.0);
      auto phi = [&](const Mat<double>& a, const Mat<double>& b) -> Mat<double> {
        const Mat<double> Fa = gm.A * a, Fb = gm.A * b;
        return gm.B * Fa.cwiseProduct(Fb);
      };
      const Mat<double> lhs = phi(rotate_framed(u, Dr, L, g.K), rotate_framed(v, Dr, L, g.K));
      const Mat<double> rhs = rotate_framed(phi(u, v), Dr, L, g.K);
      EXPECT_LT((lhs - rhs).cwiseAbs().maxCoeff(), 1e-12 * std::max(1.0, rhs.cwiseAbs().maxCoeff()))
          << "equivariance, L " << L << " kmax " << kmax;
    }
}

GridNetW<double> random_net(GridOp op, bool cross, int C, int n_br, int L, int K, std::mt19937& rng) {
  auto mat = [&](int r, int c, double s) {
    return Mat<double>(Eigen::Map<const Mat<double>>(randn(static_cast<size_t>(r) * c, rng, s).data(), r, c));
  };
  GridNetW<double> w;
  w.op = op;
  w.cross = cross;
  w.C = C;
  w.n_br = op == GridOp::Branch ? n_br : 1;
  w.scalar_gate = mat(2 * C, C, 0.5);
  if (op == GridOp::MLP) {
    const int cin = cross ? C : 2 * C;
    w.left = mat(cin, 2 * C, 0.4);
    w.right = mat(cin, 2 * C, 0.4);
    w.out = mat(2 * C, C, 0.4);
  } else if (op == GridOp::Branch) {
    w.left = mat(C, w.n_br * C, 0.4);
    w.right = mat(C, w.n_br * C, 0.4);
    w.router = mat(2 * C, w.n_br, 1.0);
    w.out = mat(C, C, 0.4);
  }
  if (cross) {
    for (int l = 0; l <= L; ++l) {
      w.expand.push_back(mat(C, K * C, 0.5));
      w.contract.push_back(mat(K * C, C, 0.5));
    }
    w.residual_scale = mat(1, C, 1.0);
  }
  return w;
}

struct NetCase {
  GridOp op;
  int n_br;
  const char* name;
};

TEST(GridNet, BackwardMatchesFiniteDifferences) {
  const NetCase cases[] = {{GridOp::Product, 1, "glu"}, {GridOp::MLP, 1, "mlp"}, {GridOp::Branch, 1, "branch1"},
                           {GridOp::Branch, 3, "branch3"}};
  const int lk[][2] = {{2, 1}, {1, 0}, {3, 2}};
  std::mt19937 rng(11);
  const int N = 2, C = 4;
  for (const auto& [L, kmax] : lk) {
    const SO3GridMats<double> gm(L, kmax);
    const int D = gm.D, K = gm.K;
    for (const NetCase& nc : cases)
      for (const bool cross : {false, true}) {
        const GridNetW<double> w = random_net(nc.op, cross, C, nc.n_br, L, K, rng);
        const std::string tag = std::string(cross ? "cross " : "self ") + nc.name + " L" + std::to_string(L) +
                                " k" + std::to_string(kmax);
        if (!cross) {
          V h = randn(static_cast<size_t>(N) * D * 2 * K * C, rng, 0.7), y(static_cast<size_t>(N) * D * K * C);
          const V W = randn(y.size(), rng);
          V hb(h.size());
          auto J = [&] {
            grid_self_forward(w, gm, h.data(), N, y.data());
            return dot(W.data(), y.data(), y.size());
          };
          grid_self_backward(w, gm, h.data(), N, W.data(), hb.data());
          check_grad("grid net " + tag + " d/d h", h.data(), h.size(), J, hb.data());
        } else {
          V q = randn(static_cast<size_t>(N) * D * C, rng, 0.7), x = randn(q.size(), rng, 0.7), z(q.size());
          const V W = randn(z.size(), rng);
          V qb(q.size(), 0.0), xb(q.size(), 0.0);
          auto J = [&] {
            grid_cross_forward(w, gm, L, q.data(), x.data(), N, z.data());
            return dot(W.data(), z.data(), z.size());
          };
          grid_cross_backward(w, gm, L, q.data(), x.data(), N, W.data(), qb.data(), xb.data());
          check_grad("grid net " + tag + " d/d query", q.data(), q.size(), J, qb.data());
          check_grad("grid net " + tag + " d/d context", x.data(), x.size(), J, xb.data());
        }
      }
  }
}

// The router is live for n_br > 1: the branch weights change with the scalars, so the output is
// not the n_br = 1 product of any fixed branch (guards against a router silently dropped).
TEST(GridNet, RouterSoftmaxIsLiveForSeveralBranches) {
  std::mt19937 rng(3);
  const int L = 2, C = 4, N = 1;
  const SO3GridMats<double> gm(L, 1);
  GridNetW<double> w = random_net(GridOp::Branch, false, C, 3, L, gm.K, rng);
  V h = randn(static_cast<size_t>(gm.D) * 2 * gm.K * C, rng), y1(static_cast<size_t>(gm.D) * gm.K * C), y2(y1.size());
  grid_self_forward(w, gm, h.data(), N, y1.data());
  w.router *= 3.0;  // sharper routing, same branches
  grid_self_forward(w, gm, h.data(), N, y2.data());
  double diff = 0;
  for (size_t i = 0; i < y1.size(); ++i) diff = std::max(diff, std::abs(y1[i] - y2[i]));
  EXPECT_GT(diff, 1e-6);
}

}  // namespace
