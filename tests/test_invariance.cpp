// Symmetries of the potential, checked on the float64 families: rotation + translation
// (E invariant, F -> R F, W -> R W R^T), zero net force, atom permutation, separability of
// far-apart atoms, and replica invariance of a periodic cell. Expected values come from the
// symmetry applied to a first evaluation, never from a stored output. Tolerances: the two
// evaluations differ only by rounding (different coordinates / summation orders), ~1e-14
// relative; 1e-10 relative to the largest |value| leaves room for the network's
// amplification of that rounding while any symmetry breaking would show at >= 1e-6.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "model_test_util.h"

namespace {

using namespace sezm_test;

constexpr double kTol = 1e-10;

class Invariance : public testing::TestWithParam<std::string> {
 protected:
  const sezm::Potential& pot() {
    const sezm::Potential* p = model(GetParam());
    EXPECT_NE(p, nullptr);
    return *p;
  }
};

System cluster6() { return open_cluster({0, 1, 0, 0, 1, 1}, 2.6, 1.4, 21); }
System triclinic5() {
  return periodic_system({4.1, 0, 0, 0.9, 3.9, 0, -0.6, 1.2, 4.3},
                         {0, 0, 0, 0.5, 0.5, 0, 0.5, 0, 0.5, 0, 0.5, 0.5, 0.25, 0.25, 0.25}, {0, 1, 1, 0, 0}, 0.15, 22);
}

void check_rotated(const sezm::Potential& p, const System& s, unsigned seed) {
  std::mt19937 g(seed);
  const Mat3 R = random_rotation(g);
  const double shift[3] = {1.7, -3.2, 0.45};
  System r = s;
  r.pos = rotate_rows(R, s.pos);
  for (size_t i = 0; i < r.pos.size(); ++i) r.pos[i] += shift[i % 3];
  if (!s.cell.empty()) r.cell = rotate_rows(R, s.cell);
  const sezm::Evaluation a = evaluate(p, s), b = evaluate(p, r);
  ASSERT_EQ(a.n_edges, b.n_edges);
  EXPECT_NEAR(b.energy, a.energy, kTol * std::abs(a.energy));
  EXPECT_LE(max_abs_diff(b.atom_energy, a.atom_energy), kTol * max_abs(a.atom_energy));
  EXPECT_LE(max_abs_diff(b.forces, rotate_rows(R, a.forces)), kTol * max_abs(a.forces));
  EXPECT_LE(max_abs_diff(b.virial, conjugate(R, a.virial)), kTol * max_abs(a.virial));
  // The rotation must actually move things (else the test proves nothing).
  EXPECT_GT(max_abs_diff(b.forces, a.forces), 1e-3 * max_abs(a.forces));
}

TEST_P(Invariance, RotationTranslationOpenCluster) { check_rotated(pot(), cluster6(), 1); }
TEST_P(Invariance, RotationTranslationPeriodicTriclinic) { check_rotated(pot(), triclinic5(), 2); }

TEST_P(Invariance, NetForceZero) {
  for (const System& s : {cluster6(), triclinic5()}) {
    const sezm::Evaluation ev = evaluate(pot(), s);
    for (int a = 0; a < 3; ++a) {
      double sum = 0;
      for (int i = 0; i < s.n(); ++i) sum += ev.forces[3 * i + a];
      EXPECT_NEAR(sum, 0.0, 1e-12 * s.n() * max_abs(ev.forces));
    }
  }
}

TEST_P(Invariance, OpenClusterVirialIsSumOfRTimesF) {
  // Open system: W_ab = sum_i r_i,a F_i,b exactly (reference/README.md), an independent route
  // from the per-edge form W = -sum_e g_e v_e^T.
  const System s = cluster6();
  const sezm::Evaluation ev = evaluate(pot(), s);
  std::vector<double> w(9, 0.0);
  for (int i = 0; i < s.n(); ++i)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) w[3 * a + b] += s.pos[3 * i + a] * ev.forces[3 * i + b];
  EXPECT_LE(max_abs_diff(ev.virial, w), 1e-12 * max_abs(w) * s.n());
}

TEST_P(Invariance, Permutation) {
  for (const System& s : {cluster6(), triclinic5()}) {
    std::vector<int> perm(s.n());
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 g(5);
    std::shuffle(perm.begin(), perm.end(), g);
    System q = s;
    for (int i = 0; i < s.n(); ++i) {  // new atom i is old atom perm[i]
      q.types[i] = s.types[perm[i]];
      for (int a = 0; a < 3; ++a) q.pos[3 * i + a] = s.pos[3 * perm[i] + a];
    }
    const sezm::Evaluation a = evaluate(pot(), s), b = evaluate(pot(), q);
    EXPECT_NEAR(b.energy, a.energy, kTol * std::abs(a.energy));
    for (int i = 0; i < s.n(); ++i) {
      EXPECT_NEAR(b.atom_energy[i], a.atom_energy[perm[i]], kTol * max_abs(a.atom_energy));
      for (int k = 0; k < 3; ++k)
        EXPECT_NEAR(b.forces[3 * i + k], a.forces[3 * perm[i] + k], kTol * max_abs(a.forces));
    }
    EXPECT_LE(max_abs_diff(b.virial, a.virial), kTol * max_abs(a.virial));
  }
}

TEST_P(Invariance, FarApartAtomsAreSeparable) {
  const double rc = pot().config().rcut;
  for (int t0 = 0; t0 < 2; ++t0)
    for (int t1 = 0; t1 < 2; ++t1) {
      System one;
      one.types = {t0};
      one.pos = {0.3, -0.2, 0.1};
      System other;
      other.types = {t1};
      other.pos = {5.0, 7.0, -1.0};
      System two;
      two.types = {t0, t1};
      two.pos = {0.3, -0.2, 0.1, 0.3 + rc + 0.5, -0.2, 0.1};
      const sezm::Evaluation e0 = evaluate(pot(), one), e1 = evaluate(pot(), other), e2 = evaluate(pot(), two);
      EXPECT_EQ(e2.n_edges, 0u);
      // Equal up to rounding (the matrix kernels differ between 1 and 2 rows).
      EXPECT_NEAR(e2.atom_energy[0], e0.energy, 1e-13 * std::abs(e0.energy));
      EXPECT_NEAR(e2.atom_energy[1], e1.energy, 1e-13 * std::abs(e1.energy));
      EXPECT_NEAR(e2.energy, e0.energy + e1.energy, 1e-13 * (std::abs(e0.energy) + std::abs(e1.energy)));
      for (double f : e2.forces) EXPECT_EQ(f, 0.0);
      for (double w : e2.virial) EXPECT_EQ(w, 0.0);
      // The same lone atom in a periodic box larger than rcut: no images, same energy.
      System boxed = one;
      boxed.cell = {rc + 1, 0, 0, 0, rc + 2, 0, 0, 0, rc + 1.5};
      const sezm::Evaluation eb = evaluate(pot(), boxed);
      EXPECT_EQ(eb.n_edges, 0u);
      EXPECT_NEAR(eb.energy, e0.energy, 1e-13 * std::abs(e0.energy));
      // And the energy of an atom that does have neighbours differs (the check is not vacuous).
      System near = two;
      near.pos[3] = 0.3 + 2.0;
      EXPECT_GT(std::abs(evaluate(pot(), near).energy - e0.energy - e1.energy), 1e-6);
    }
}

TEST_P(Invariance, Supercell2x2x2) {
  const System s = periodic_system({3.6, 0, 0, 0.4, 3.5, 0, -0.3, 0.5, 3.8},
                                   {0, 0, 0, 0.5, 0.5, 0, 0.1, 0.55, 0.5}, {0, 1, 1}, 0.12, 31);
  System big;
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 2; ++y)
      for (int z = 0; z < 2; ++z)
        for (int i = 0; i < s.n(); ++i) {
          big.types.push_back(s.types[i]);
          for (int a = 0; a < 3; ++a)
            big.pos.push_back(s.pos[3 * i + a] + x * s.cell[a] + y * s.cell[3 + a] + z * s.cell[6 + a]);
        }
  big.cell = s.cell;
  for (double& c : big.cell) c *= 2;
  const sezm::Evaluation a = evaluate(pot(), s), b = evaluate(pot(), big);
  EXPECT_EQ(b.n_edges, 8 * a.n_edges);
  EXPECT_NEAR(b.energy, 8 * a.energy, kTol * std::abs(8 * a.energy));
  for (int r = 0; r < 8; ++r)
    for (int i = 0; i < s.n(); ++i) {
      const int j = r * s.n() + i;
      EXPECT_NEAR(b.atom_energy[j], a.atom_energy[i], kTol * max_abs(a.atom_energy));
      for (int k = 0; k < 3; ++k) EXPECT_NEAR(b.forces[3 * j + k], a.forces[3 * i + k], kTol * max_abs(a.forces));
    }
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(b.virial[k], 8 * a.virial[k], kTol * 8 * max_abs(a.virial));
}

INSTANTIATE_TEST_SUITE_P(Models, Invariance,
                         testing::Values("c32_l3_f2_float64.pt", "defaults_float64.pt", "mini_float64.pt"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           return i.param.substr(0, i.param.find('.'));
                         });

}  // namespace
