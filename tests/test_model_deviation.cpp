// Model deviation of a committee (src/api/model_deviation.h) against deepmd-kit 3.2.0's own
// computation on the same checkpoints and frames (tests/data/model_devi: make_committee.py,
// README.md): first the arithmetic on deepmd-kit's per-model forces and virials, then the whole
// route with this project's engine computing the forces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/model_deviation.h"
#include "api/potential.h"
#include "common/error.h"
#include "exec_util.h"
#include "test_util.h"

namespace {

using sezm::DeviationOptions;
using sezm::DeviationRow;

const nlohmann::json& reference() {
  static const nlohmann::json ref = [] {
    std::ifstream f(sezm_test::data_path("model_devi/ref_model_devi.json"));
    return nlohmann::json::parse(f);
  }();
  return ref;
}

// forces[model][3N] of one frame -> the library's atom-major layout.
std::vector<double> interleave(const std::vector<std::vector<double>>& forces) {
  const size_t M = forces.size(), n = forces[0].size() / 3;
  std::vector<double> rows(n * M * 3);
  for (size_t i = 0; i < n; ++i)
    for (size_t m = 0; m < M; ++m)
      for (int k = 0; k < 3; ++k) rows[(i * M + m) * 3 + k] = forces[m][3 * i + k];
  return rows;
}

struct Computed {
  DeviationRow row;
  std::vector<double> atom;
};

Computed deviations(const std::vector<std::vector<double>>& forces, const std::vector<std::vector<double>>& virials,
                    const DeviationOptions& opt) {
  const int M = static_cast<int>(forces.size());
  const size_t n = forces[0].size() / 3;
  Computed c;
  c.atom.resize(n);
  const std::vector<double> rows = interleave(forces);
  sezm::force_deviation(rows.data(), M, n, opt, c.atom.data());
  sezm::ForceDeviationSums sums;
  sums.add(c.atom.data(), n);
  std::vector<double> vir;
  for (const auto& v : virials) vir.insert(vir.end(), v.begin(), v.end());
  sezm::virial_deviation(vir.data(), M, static_cast<double>(n), opt, &c.row);
  sezm::finish_force_deviation(sums, static_cast<double>(n), &c.row);
  return c;
}

// Columns 1..6 of a reference row (step, max_v, min_v, avg_v, max_f, min_f, avg_f, devi_e).
// Returns the largest relative difference.
double expect_row(const DeviationRow& r, const nlohmann::json& ref, double tol, const std::string& what) {
  double worst = 0.0;
  const double got[6] = {r.max_v, r.min_v, r.avg_v, r.max_f, r.min_f, r.avg_f};
  const char* names[6] = {"max_devi_v", "min_devi_v", "avg_devi_v", "max_devi_f", "min_devi_f", "avg_devi_f"};
  for (int c = 0; c < 6; ++c) {
    const double want = ref[c + 1].get<double>();
    EXPECT_LE(std::fabs(got[c] - want), tol * std::fabs(want)) << what << " " << names[c] << ": " << got[c]
                                                                << " vs deepmd-kit " << want;
    worst = std::max(worst, std::fabs(got[c] - want) / std::fabs(want));
  }
  return worst;
}

struct Case {
  const char* name;
  const char* table;  // in the reference file
  DeviationOptions opt;
};

std::vector<Case> cases() {
  const auto& ref = reference();
  std::vector<Case> out;
  out.push_back({"plain", "plain", {}});
  DeviationOptions f;
  f.relative_f = ref["relative_f"].get<double>();
  out.push_back({"relative", "relative_f", f});
  DeviationOptions vn;
  vn.relative_v = ref["relative_v"].get<double>();
  vn.relative_v_kind = sezm::RelativeVirial::kNorm;
  out.push_back({"relative_v (dp model-devi)", "relative_v", vn});
  DeviationOptions vc;
  vc.relative_v = ref["relative_v"].get<double>();
  vc.relative_v_kind = sezm::RelativeVirial::kPerComponent;
  out.push_back({"relative_v (pair_style deepmd)", "relative_v_per_component", vc});
  return out;
}

const nlohmann::json& table(const char* name) {
  const auto& ref = reference();
  return std::string(name) == "relative_v_per_component" ? ref[name] : ref["calc_model_devi"][name];
}

TEST(ModelDeviation, ArithmeticMatchesDeepmdKitOnItsForces) {
  const auto& ref = reference();
  const auto& frames = ref["frames"];
  const size_t M = ref["per_model"].size();
  ASSERT_EQ(M, 4u);
  double worst = 0.0, worst_atom = 0.0;
  for (size_t f = 0; f < frames.size(); ++f) {
    std::vector<std::vector<double>> forces, virials;
    for (size_t m = 0; m < M; ++m) {
      forces.push_back(ref["per_model"][m]["forces"][f].get<std::vector<double>>());
      virials.push_back(ref["per_model"][m]["virial"][f].get<std::vector<double>>());
    }
    for (const Case& c : cases()) {
      const Computed got = deviations(forces, virials, c.opt);
      const std::string what = std::string(c.name) + " frame " + std::to_string(f);
      worst = std::max(worst, expect_row(got.row, table(c.table)[f], 1e-12, what));
      if (std::string(c.table) == "plain") {
        const auto atomic = ref["calc_model_devi"]["atomic"][f].get<std::vector<double>>();
        ASSERT_EQ(atomic.size(), got.atom.size());
        for (size_t i = 0; i < atomic.size(); ++i) {
          EXPECT_LE(std::fabs(got.atom[i] - atomic[i]), 1e-12 * atomic[i]) << "atom " << i << " frame " << f;
          worst_atom = std::max(worst_atom, std::fabs(got.atom[i] - atomic[i]) / atomic[i]);
        }
      }
    }
  }
  std::printf("largest relative difference from deepmd-kit: rows %.2e, per-atom force deviations %.2e\n", worst,
              worst_atom);
}

// Partial sums over disjoint parts of the atoms (ranks) combine to the whole system's numbers.
TEST(ModelDeviation, PartialSumsMergeLikeOneRank) {
  const auto& ref = reference();
  std::vector<std::vector<double>> forces;
  for (const auto& pm : ref["per_model"]) forces.push_back(pm["forces"][1].get<std::vector<double>>());
  const size_t n = forces[0].size() / 3;
  const std::vector<double> rows = interleave(forces);
  std::vector<double> devi(n);
  sezm::force_deviation(rows.data(), 4, n, {}, devi.data());
  sezm::ForceDeviationSums whole, parts, empty_rank;
  whole.add(devi.data(), n);
  const size_t cut[4] = {0, 7, 7, n};  // the second part has no atoms
  for (int p = 0; p < 3; ++p) {
    sezm::ForceDeviationSums s;
    s.add(devi.data() + cut[p], cut[p + 1] - cut[p]);
    parts.merge(s);
  }
  parts.merge(empty_rank);
  EXPECT_EQ(parts.max, whole.max);
  EXPECT_EQ(parts.min, whole.min);
  EXPECT_NEAR(parts.sum, whole.sum, 1e-14 * whole.sum);
  EXPECT_EQ(ref["calc_model_devi"]["plain"][1][4].get<double>() > 0, true);
}

// One model: every deviation is zero; no model or no atoms: an error, not a division by zero.
TEST(ModelDeviation, DegenerateInputs) {
  const double f[6] = {1, 2, 3, -4, 5, 6}, w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  double d[2] = {-1, -1};
  sezm::force_deviation(f, 1, 2, {}, d);
  EXPECT_EQ(d[0], 0.0);
  EXPECT_EQ(d[1], 0.0);
  DeviationRow r;
  sezm::virial_deviation(w, 1, 2.0, {}, &r);
  EXPECT_EQ(r.max_v, 0.0);
  EXPECT_THROW(sezm::force_deviation(f, 0, 2, {}, d), sezm::Error);
  EXPECT_THROW(sezm::virial_deviation(w, 1, 0.0, {}, &r), sezm::Error);
}

// deepmd-kit's pair-style layout (pair_deepmd.cpp: '#' << setw(11) "step", setw(19) per title;
// setw(12) step, then " " << setw(18) << value in `scientific`), written out by hand here.
TEST(ModelDeviation, FileLayoutIsDeepmdKits) {
  EXPECT_EQ(sezm::model_deviation_header(false),
            "#       step         max_devi_v         min_devi_v         avg_devi_v         max_devi_f"
            "         min_devi_f         avg_devi_f");
  EXPECT_EQ(sezm::model_deviation_header(true),
            "#       step         max_devi_v         min_devi_v         avg_devi_v         max_devi_f"
            "         min_devi_f         avg_devi_f      atm_devi_f(N)");
  DeviationRow r{1.5e-3, 2.25e-4, 0.1, 12.0, 0.0, 3.14159265};
  const double atoms[2] = {0.5, 1e-10};
  EXPECT_EQ(sezm::model_deviation_line(1234567, r),
            "     1234567       1.500000e-03       2.250000e-04       1.000000e-01       1.200000e+01"
            "       0.000000e+00       3.141593e+00");
  EXPECT_EQ(sezm::model_deviation_line(0, r, atoms, 2).substr(12 + 6 * 19),
            "       5.000000e-01       1.000000e-10");
}

// The whole route without LAMMPS: this project's engine computes each model's forces and virial
// on each frame, the library the deviations; against deepmd-kit's calc_model_devi (float64
// engine: 1e-9 relative, the project's rule; deviations are differences of forces a few per
// cent apart, so this is tighter on the forces than it looks).
TEST(ModelDeviation, EngineCommitteeMatchesDeepmdKit) {
  const auto& ref = reference();
  std::vector<sezm::Potential> models;
  for (const auto& p : ref["models"])
    models.push_back(sezm::Potential::load(sezm_test::data_path("model_devi/" + p.get<std::string>())));
  const auto types = ref["frames"][0]["types"].get<std::vector<int>>();
  double worst = 0.0;
  for (size_t f = 0; f < ref["frames"].size(); ++f) {
    const auto& fr = ref["frames"][f];
    const auto coords = fr["coords"].get<std::vector<double>>();
    const auto cell = fr["cell"].get<std::vector<double>>();
    std::vector<std::vector<double>> forces, virials;
    for (const auto& pot : models) {
      const sezm::Evaluation e =
          pot.evaluate(coords.data(), types.data(), static_cast<int>(types.size()), cell.data(), true);
      forces.push_back(e.forces);
      virials.push_back(e.virial);
    }
    for (const Case& c : cases()) {
      const Computed got = deviations(forces, virials, c.opt);
      worst = std::max(worst, expect_row(got.row, table(c.table)[f], 1e-9,
                                         std::string("engine, ") + c.name + " frame " + std::to_string(f)));
    }
  }
  std::printf("largest relative difference of a deviation from deepmd-kit: %.2e\n", worst);
}

// sezm-bench --committee: the timing of an output step, on the test committee (two models, a
// rattled 8-atom diamond cell: deviations are non-zero).
TEST(ModelDeviation, BenchTimesACommittee) {
  using sezm_test::quote;
  const sezm_test::Exec r = sezm_test::run(quote(SEZM_BENCH_EXE) + " " +
                                           quote(sezm_test::data_path("recipes/mini_f64.pt")) +
                     " --cells 1 --repeat 1 --warmup 0 --threads 1 --committee " +
                     quote(sezm_test::data_path("model_devi/mini_devi1.pt")));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("committee of 2 models"), std::string::npos) << r.out;
  const size_t at = r.out.find("max_devi_f ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stod(r.out.substr(at + 11)), 1e-6) << r.out;
  // Model 2's basis frequencies differ from model 1's (README.md): it takes all of model 1's
  // geometry but the radial basis (Engine::compute_like); --no-share-geometry takes none.
  EXPECT_NE(r.out.find("committee geometry: shared where it agrees; of 1 other models 0 took all of model 1's "
                       "per-edge geometry, 1 all of it but the radial basis"),
            std::string::npos)
      << r.out;
  const sezm_test::Exec own = sezm_test::run(quote(SEZM_BENCH_EXE) + " " +
                                             quote(sezm_test::data_path("recipes/mini_f64.pt")) +
                                             " --cells 1 --repeat 1 --warmup 0 --threads 1 --no-share-geometry "
                                             "--committee " +
                                             quote(sezm_test::data_path("model_devi/mini_devi1.pt")));
  ASSERT_EQ(own.status, 0) << own.out;
  EXPECT_NE(own.out.find("committee geometry: not shared (--no-share-geometry); of 1 other models 0 took"),
            std::string::npos)
      << own.out;
  // The same deviations either way (the same numbers: tests/test_shared_geometry.cpp).
  const size_t at_own = own.out.find("max_devi_f ");
  ASSERT_NE(at_own, std::string::npos) << own.out;
  const auto line = [](const std::string& s, size_t at) { return s.substr(at, s.find('\n', at) - at); };
  EXPECT_EQ(line(r.out, at), line(own.out, at_own));
}

}  // namespace
