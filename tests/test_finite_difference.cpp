// Forces and virial against central finite differences of the energy, on small systems of
// every float64 family (and the water model when ../shared has it):
//   F_{i,a} = -dE/dx_{i,a};   W_{kj} = -dE/d eps_{kj} with positions and cell mapped by (I + eps)
// (W = -sum_e g_e v_e^T, LAMMPS sign; v_e -> (I + eps) v_e under the strain).
//
// Stencil: the fourth-order central difference
//   f'(0) ~ [f(-2h) - 8 f(-h) + 8 f(h) - f(2h)] / (12 h),
// truncation h^4 f^(5) / 30, rounding ~ 1.5 dE / h for a noise dE in the computed energy.
// Measured on these systems (c32 / defaults, random weights with large high derivatives):
// the force error falls as h^4 down to h ~ 1e-4 (4e-3: 4e-7, 1e-3: 2e-9, 2.5e-4: 1e-11
// relative) and grows as 1/h below (rounding). Hence h = 1e-4 Å (strain 1e-4) for them; the
// water model (|E| ~ 400 eV, |F| ~ 1e-4 eV/Å here) is rounding-dominated, so h = 1e-3.
// Tolerance: kRel = 1e-9 relative to the largest |F| (|W|), ~10-100x above the truncation
// at these h, plus the rounding bound 1.5 * 8 ulp(|E|) / h (8 ulps of noise in E). Any real
// gradient error (a dropped term, a wrong sign) is >= 1e-4 relative.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "engine/sezm_model.h"
#include "neighbor/neighbor_list.h"

namespace {

using namespace sezm_test;

constexpr double kRel = 1e-9;
constexpr double kRound = 1.5 * 8 * 2.220446049250313e-16;

struct FdCase {
  std::string model;  // key for sezm_test::model()
  std::string system;
  std::string label;
  double h = 1e-4;
};

void PrintTo(const FdCase& c, std::ostream* os) { *os << c.label; }

System make_system(const std::string& name) {
  if (name == "cubic2_selfimages")  // a = 3.4 Å < 2 rcut: each atom sees dozens of its own images
    return periodic_system({3.4, 0, 0, 0, 3.4, 0, 0, 0, 3.4}, {0, 0, 0, 0.5, 0.45, 0.55}, {0, 1}, 0.12, 11);
  if (name == "triclinic3")
    return periodic_system({4.1, 0, 0, 1.1, 3.8, 0, 0.7, -0.9, 3.9}, {0, 0, 0, 0.5, 0.5, 0, 0.05, 0.45, 0.55},
                           {1, 0, 1}, 0.1, 12);
  if (name == "open5_mixed") return open_cluster({0, 1, 0, 1, 1}, 2.2, 1.3, 13);
  ADD_FAILURE() << name;
  return {};
}

class FiniteDifference : public testing::TestWithParam<FdCase> {};

TEST_P(FiniteDifference, ForcesAndVirial) {
  const FdCase& fc = GetParam();
  const sezm::Potential* pot = model(fc.model);
  if (pot == nullptr) GTEST_SKIP() << "optional model absent: " << fc.model;
  const System s0 = make_system(fc.system);
  const sezm::Evaluation ev = evaluate(*pot, s0);
  ASSERT_GT(ev.n_edges, 0u);
  const double kH = fc.h, noise = kRound * std::abs(ev.energy) / kH;

  // Forces, every component.
  double f_err = 0;
  const double f_scale = max_abs(ev.forces);
  for (int i = 0; i < 3 * s0.n(); ++i) {
    const double dE = fd4(
        [&](double d) {
          System s = s0;
          s.pos[i] += d;
          return evaluate(*pot, s, false).energy;
        },
        kH);
    f_err = std::max(f_err, std::abs(-dE - ev.forces[i]) / f_scale);
    EXPECT_NEAR(ev.forces[i], -dE, kRel * f_scale + noise) << "component " << i;
  }

  // Virial through a homogeneous deformation (I + eps) of positions and cell.
  double w_err = 0;
  const double w_scale = max_abs(ev.virial);
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 3; ++j) {
      const double dE = strain_derivative(s0, k, j, kH, [&](const System& s) { return evaluate(*pot, s, false).energy; });
      w_err = std::max(w_err, std::abs(-dE - ev.virial[3 * k + j]) / w_scale);
      EXPECT_NEAR(ev.virial[3 * k + j], -dE, kRel * w_scale + noise) << "virial " << k << j;
    }
  RecordProperty("max_rel_force_fd", std::to_string(f_err));
  RecordProperty("max_rel_virial_fd", std::to_string(w_err));
  std::printf("[fd] %-40s N=%d edges=%5zu  E=%.5g  max|F|=%.3g  force %.2e  virial %.2e\n", fc.label.c_str(), s0.n(),
              ev.n_edges, ev.energy, f_scale, f_err, w_err);
}

// radial_so2_mode "none" with the radial hidden projection: no shipped or reference model has
// the pair, so the c32 weights (which have the projection) run with the degree-channel mixer
// switched off. Forces of the open cluster against the same stencil.
TEST(FiniteDifferenceVariant, RadialModeNoneWithHiddenProjection) {
  const sezm::ModelW<double> w = c32_without_mixer(false);
  ASSERT_TRUE(w.blocks.at(0).has_radial_hidden_proj);
  const sezm::SezmEngine<double> engine(w);
  auto eval = [&](const System& s, bool forces) {
    const sezm::Graph g = sezm::build_graph(s.pos.data(), s.types.data(), s.n(), s.cell_ptr(), w.cfg.rcut);
    return sezm::make_evaluation(g, engine.compute(g, forces), forces, false);
  };
  const System s0 = make_system("open5_mixed");
  const sezm::Evaluation ev = eval(s0, true);
  ASSERT_GT(ev.n_edges, 0u);
  // The switch must matter: the mixer-free model is a different function.
  const double e_mixer = evaluate(*model("c32_l3_f2_float64.pt"), s0, false).energy;
  ASSERT_GT(std::abs(ev.energy - e_mixer), 1e-6 * std::abs(e_mixer));
  const double kH = 1e-4, noise = kRound * std::abs(ev.energy) / kH, f_scale = max_abs(ev.forces);
  for (int i = 0; i < 3 * s0.n(); ++i) {
    const double dE = fd4(
        [&](double d) {
          System s = s0;
          s.pos[i] += d;
          return eval(s, false).energy;
        },
        kH);
    EXPECT_NEAR(ev.forces[i], -dE, kRel * f_scale + noise) << "component " << i;
  }
}

std::vector<FdCase> fd_cases() {
  std::vector<FdCase> out;
  const std::vector<std::pair<std::string, std::string>> models = {
      {"c32_l3_f2_float64.pt", "c32_f64"}, {"defaults_float64.pt", "defaults_f64"},
      {"mini_float64.pt", "mini_f64"}, {kWaterModel, "water"},
      // a multi-task head: its FiLM case embedding folded into the fitting weights (docs/model.md §6.2)
      {"recipes/multitask_plain_f64.pt#carbon", "multitask_carbon"}};
  for (const auto& [m, tag] : models)
    for (const char* sys : {"cubic2_selfimages", "triclinic3", "open5_mixed"}) out.push_back({m, sys, tag + "_" + sys, m == kWaterModel ? 1e-3 : 1e-4});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Small, FiniteDifference, testing::ValuesIn(fd_cases()),
                         [](const testing::TestParamInfo<FdCase>& i) { return i.param.label; });

}  // namespace
