// ZBL bridging (docs/model.md §9): the inner clamp and the bridging switch (shape and
// derivatives), the ZBL pair term (derivative, and its share against deepmd-kit 3.2.0's own
// ZBL share of the atomic energies), and the whole bridged model's forces and virial against
// central finite differences, with the pair term and without it (the learned part alone, where
// the clamp and the source gate act), plus the ghost-row exchange of the gate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "engine/bridging.h"
#include "engine/sezm_model.h"
#include "engine/zbl.h"
#include "ghost_graph.h"
#include "model_test_util.h"
#include "neighbor/neighbor_list.h"

namespace {

using namespace sezm_test;

const char* kZblModel = "recipes/zbl_plain_f64.pt";
const char* kZblRef = "recipes/ref_zbl_plain_f64.json";

TEST(Bridging, ClampAndSwitchShape) {
  const double ri = 0.5, ro = 0.8;
  double c, dc, s, ds;
  // Frozen zone: c = r_inner, flat; switch 0.
  for (double r : {0.05, 0.3, 0.5}) {
    sezm::inner_clamp(r, ri, ro, &c, &dc);
    EXPECT_EQ(c, ri);
    EXPECT_EQ(dc, 0.0);
    sezm::bridging_switch(c, ri, ro, &s, &ds);
    EXPECT_EQ(s, 0.0);
    EXPECT_EQ(ds, 0.0);
  }
  // Identity zone: c = r exactly; switch 1.
  for (double r : {0.8, 1.3, 5.9}) {
    sezm::inner_clamp(r, ri, ro, &c, &dc);
    EXPECT_EQ(c, r);
    EXPECT_EQ(dc, 1.0);
    sezm::bridging_switch(r, ri, ro, &s, &ds);
    EXPECT_EQ(s, 1.0);
    EXPECT_EQ(ds, 0.0);
  }
  // Transition: derivatives against finite differences; c and s continuous at both ends.
  for (double r : {0.52, 0.6, 0.65, 0.71, 0.79}) {
    sezm::inner_clamp(r, ri, ro, &c, &dc);
    const double fd_c = fd4([&](double d) { double a, b; sezm::inner_clamp(r + d, ri, ro, &a, &b); return a; }, 1e-4);
    EXPECT_NEAR(dc, fd_c, 1e-9) << r;
    EXPECT_GT(c, ri);
    EXPECT_LT(c, ro);
    sezm::bridging_switch(r, ri, ro, &s, &ds);
    const double fd_s = fd4([&](double d) { double a, b; sezm::bridging_switch(r + d, ri, ro, &a, &b); return a; }, 1e-4);
    EXPECT_NEAR(ds, fd_s, 1e-8) << r;
  }
  const double e = 1e-9;
  sezm::inner_clamp(ri + e, ri, ro, &c, &dc);
  EXPECT_NEAR(c, ri, 1e-12);
  sezm::inner_clamp(ro - e, ri, ro, &c, &dc);
  EXPECT_NEAR(c, ro, 1e-8);
  EXPECT_NEAR(dc, 1.0, 1e-6);
}

TEST(Bridging, ZblPairDerivative) {
  for (const auto& [zi, zj] : std::vector<std::pair<double, double>>{{1, 1}, {6, 29}, {8, 1}, {29, 29}})
    for (double r : {0.2, 0.45, 0.7, 1.5, 3.0, 5.9}) {
      double v, dv;
      sezm::zbl_pair(r, zi, zj, &v, &dv);
      EXPECT_GT(v, 0.0);
      EXPECT_LT(dv, 0.0);
      const double fd = fd4([&](double d) { double a, b; sezm::zbl_pair(r + d, zi, zj, &a, &b); return a; }, 1e-5);
      EXPECT_NEAR(dv, fd, 1e-8 * std::abs(dv)) << zi << " " << zj << " r " << r;
    }
}

// The pair term alone against deepmd-kit's ZBL share (its DeepPot with and without the
// inter_potential; tests/data/recipes/README.md): per-atom energies, half of each pair on each atom.
TEST(Bridging, ZblShareMatchesDeepmdKit) {
  const sezm::Potential* pot = model(kZblModel);
  ASSERT_NE(pot, nullptr);
  const sezm::ModelW<double> w = sezm::load_model_weights(data_path(kZblModel));
  ASSERT_EQ(w.zbl_z, (std::vector<double>{6, 29, 8, 1}));
  const auto ref = sezm::test::read_ref(data_path(kZblRef));
  int checked = 0;
  for (const auto& c : ref.configs) {
    ASSERT_EQ(c.zbl_atom_energy.size(), size_t(c.natoms)) << c.name;
    const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms,
                                            c.periodic ? c.cell.data() : nullptr, w.cfg.rcut);
    std::vector<double> ae(c.natoms, 0.0);
    const double total = sezm::zbl_forward_backward(g, w.zbl_z, ae.data(), nullptr);
    double ref_total = 0;
    for (double x : c.zbl_atom_energy) ref_total += x;
    EXPECT_NEAR(total, ref_total, 1e-12 * std::max(1.0, std::abs(ref_total))) << c.name;
    EXPECT_LE(max_abs_diff(ae, c.zbl_atom_energy), 1e-12 * std::max(1.0, max_abs(c.zbl_atom_energy))) << c.name;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

// Pairs inside r_inner (0.5), in the transition zone and beyond, open and periodic (a close
// pair across the boundary). The clamp and the gate act only on such pairs.
System bridged_system(bool periodic) {
  System s;
  if (periodic) {
    s.cell = {5.2, 0, 0, 0.6, 5.0, 0, -0.4, 0.5, 5.3};
    s.types = {1, 1, 0, 3, 3, 2, 3, 0};
    s.pos = {0.1, 0.2, 0.3,  5.0, 0.35, 0.25,  2.6, 2.4, 2.5,  3.05, 2.5, 2.45,  2.2, 2.75, 2.6,
             1.2, 3.9, 1.4,  1.75, 4.2, 1.55,  3.9, 1.2, 4.1};
  } else {
    s.types = {0, 3, 2, 3, 1, 0, 2};
    s.pos = {0, 0, 0,  0.42, 0.05, 0.1,  2.1, 0.2, -0.3,  2.3, 0.75, -0.2,  -0.4, 2.2, 0.6,
             0.2, 2.3, 1.3,  -1.9, -0.8, 1.1};
  }
  return s;
}

struct BridgedEval {
  const sezm::SezmEngine<double>& engine;
  sezm::Evaluation operator()(const System& s, bool forces) const {
    const sezm::Graph g = sezm::build_graph(s.pos.data(), s.types.data(), s.n(), s.cell_ptr(), engine.config().rcut);
    return sezm::make_evaluation(g, engine.compute(g, forces), forces, false);
  }
};

void check_fd(const BridgedEval& eval, const System& s0, const char* label) {
  const sezm::Evaluation ev = eval(s0, true);
  const double kH = 1e-4, noise = 1.5 * 8 * 2.220446049250313e-16 * std::abs(ev.energy) / kH;
  const double f_scale = max_abs(ev.forces), w_scale = max_abs(ev.virial);
  double f_err = 0, w_err = 0;
  for (int i = 0; i < 3 * s0.n(); ++i) {
    const double dE = fd4([&](double d) { System s = s0; s.pos[i] += d; return eval(s, false).energy; }, kH);
    f_err = std::max(f_err, std::abs(-dE - ev.forces[i]) / f_scale);
    EXPECT_NEAR(ev.forces[i], -dE, 1e-9 * f_scale + noise) << label << " component " << i;
  }
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 3; ++j) {
      const double dE = strain_derivative(s0, k, j, kH, [&](const System& s) { return eval(s, false).energy; });
      w_err = std::max(w_err, std::abs(-dE - ev.virial[3 * k + j]) / w_scale);
      EXPECT_NEAR(ev.virial[3 * k + j], -dE, 1e-9 * w_scale + noise) << label << " virial " << k << j;
    }
  std::printf("[fd] %-28s N=%d E=%.6g max|F|=%.3g  force %.2e  virial %.2e\n", label, s0.n(), ev.energy, f_scale, f_err,
              w_err);
}

class BridgedModel : public testing::TestWithParam<bool> {};

// The whole bridged model (learned part + ZBL).
TEST_P(BridgedModel, ForcesAndVirialFiniteDifference) {
  const sezm::SezmEngine<double> engine(sezm::load_model_weights(data_path(kZblModel)));
  check_fd(BridgedEval{engine}, bridged_system(GetParam()), GetParam() ? "zbl model, periodic" : "zbl model, open");
}

// The learned part alone (Z = 0 switches the pair term off): the clamp and the source gate,
// whose forces would otherwise hide under the pair term's.
TEST_P(BridgedModel, LearnedPartFiniteDifference) {
  sezm::ModelW<double> w = sezm::load_model_weights(data_path(kZblModel));
  std::fill(w.zbl_z.begin(), w.zbl_z.end(), 0.0);
  const sezm::SezmEngine<double> engine(w);
  const System s = bridged_system(GetParam());
  EXPECT_LT(max_abs(BridgedEval{engine}(s, true).forces), 1e3);  // no pair term left
  check_fd(BridgedEval{engine}, s, GetParam() ? "learned part, periodic" : "learned part, open");
}

INSTANTIATE_TEST_SUITE_P(OpenAndPeriodic, BridgedModel, testing::Bool());

// Beyond r_outer the clamp and the gate are identities: the learned part of the bridged model
// equals the same weights without bridging; with a close pair they differ.
TEST(Bridging, IdentityBeyondOuterRadius) {
  sezm::ModelW<double> w = sezm::load_model_weights(data_path(kZblModel));
  std::fill(w.zbl_z.begin(), w.zbl_z.end(), 0.0);
  sezm::ModelW<double> plain = w;
  plain.cfg.zbl = false;
  const sezm::SezmEngine<double> bridged(w), unbridged(plain);
  const System far = open_cluster({0, 1, 2, 3, 0, 3}, 2.4, 1.0, 5);
  const sezm::Evaluation a = BridgedEval{bridged}(far, true), b = BridgedEval{unbridged}(far, true);
  EXPECT_NEAR(a.energy, b.energy, 1e-13 * std::abs(b.energy));
  EXPECT_LE(max_abs_diff(a.forces, b.forces), 1e-12 * max_abs(b.forces));
  const System close = bridged_system(false);
  EXPECT_GT(std::abs(BridgedEval{bridged}(close, false).energy - BridgedEval{unbridged}(close, false).energy), 1e-6);
}

// The gate's per-node product through ghost rows (the LAMMPS path): the same energies, forces
// and virial as the standalone graph, where periodic images are edges onto owned atoms.
TEST(Bridging, GhostExchangeReproducesImagesAsEdges) {
  const sezm::Potential* pot = model(kZblModel);
  ASSERT_NE(pot, nullptr);
  const System s = bridged_system(true);
  const sezm::Graph el = sezm::build_graph(s.pos.data(), s.types.data(), s.n(), s.cell_ptr(), pot->config().rcut);
  const sezm::Evaluation a = sezm::make_evaluation(el, pot->engine().compute(el, true), true, false);
  const sezm_test::GhostGraph gg = sezm_test::make_ghost_graph(el, s.pos.data(), s.types.data());
  ASSERT_GT(gg.n_total, gg.n_nodes);
  sezm_test::OwnerExchange<double> ex(gg);
  const sezm::Graph& gv = gg.view();
  const sezm::Evaluation b = sezm::make_evaluation(gv, pot->engine().compute(gv, true, &ex), true, false);
  EXPECT_EQ(ex.forwards, pot->config().n_blocks + 1);  // + the gate's eta
  EXPECT_EQ(ex.reverses, pot->config().n_blocks + 1);
  EXPECT_NEAR(a.energy, b.energy, 1e-12 * std::abs(a.energy));
  for (int i = 0; i < s.n(); ++i) EXPECT_NEAR(a.atom_energy[i], b.atom_energy[i], 1e-12 * max_abs(a.atom_energy));
  const std::vector<double> fb = sezm_test::fold_forces(gg, b.forces);
  for (int i = 0; i < 3 * s.n(); ++i) EXPECT_NEAR(a.forces[i], fb[i], 1e-11 * max_abs(a.forces)) << i;
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(a.virial[k], b.virial[k], 1e-11 * max_abs(a.virial)) << k;
}

}  // namespace
