// End-to-end check on the shipped potentials (potentials/C.pt, potentials/Cu.pt): the
// validation RMSEs of the 48 deepmd-kit validation frames (tests/data/valid/<elem>, copied from
// ../shared/potentials/training/<elem>/valid) must reproduce deepmd-kit's own figures
// (eval.json, `dp test` definitions) to 1e-3 relative:
//   energy RMSE per atom = sqrt(mean_f (E_pred - E_label)^2) / N,
//   force RMSE = sqrt(mean over all frames, atoms and components of (F_pred - F_label)^2).
// Both RMSEs are model errors (meV, 0.1 eV/Å), so a 1e-3 relative match needs our predictions
// to track deepmd-kit's to ~1e-5 eV/atom and ~1e-4 eV/Å on every frame. Skipped when the
// potentials are absent (they live in the repository's potentials/, not in tests/data).
// Cost: the longest tests of the suite (C: 48 x 216 atoms, ~34k edges a frame; Cu: 48 x 108
// atoms), about a minute or two each on 2 cores with the default native build; they cannot be
// split into fast pieces, as only the whole set is comparable with eval.json (deepmd-kit gives
// no per-frame figures). SEZM_SKIP_SLOW_TESTS=1 skips them for quick local iterations.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "npy.h"

namespace {

using namespace sezm_test;

class ValidationRMSE : public testing::TestWithParam<std::string> {};

TEST_P(ValidationRMSE, MatchesDeepmdKitEvalJson) {
  const std::string elem = GetParam();
  const char* skip = std::getenv("SEZM_SKIP_SLOW_TESTS");
  if (skip && std::string(skip) == "1") GTEST_SKIP() << "SEZM_SKIP_SLOW_TESTS=1";
  const sezm::Potential* pot = model("repo:potentials/" + elem + ".pt");
  if (pot == nullptr) GTEST_SKIP() << "potentials/" << elem << ".pt absent";
  const std::string dir = data_path("valid/" + elem + "/");
  const NpyArray box = read_npy(dir + "box.npy"), coord = read_npy(dir + "coord.npy");
  const NpyArray energy = read_npy(dir + "energy.npy"), force = read_npy(dir + "force.npy");
  std::ifstream ej(dir + "eval.json");
  const nlohmann::json ev = nlohmann::json::parse(ej);
  std::vector<int> types;
  std::ifstream tr(dir + "type.raw");
  for (int t; tr >> t;) types.push_back(t);
  std::ifstream tm(dir + "type_map.raw");
  std::vector<std::string> type_map;
  for (std::string s; tm >> s;) type_map.push_back(s);
  const int N = static_cast<int>(types.size()), F = static_cast<int>(energy.data.size());
  ASSERT_EQ(N, ev.at("natoms").get<int>());
  ASSERT_EQ(F, ev.at("nframes").get<int>());
  ASSERT_EQ(coord.data.size(), static_cast<size_t>(F) * 3 * N);
  ASSERT_EQ(force.data.size(), coord.data.size());
  ASSERT_EQ(box.data.size(), static_cast<size_t>(F) * 9);
  std::vector<int> model_types(N);
  for (int i = 0; i < N; ++i) model_types[i] = pot->type_index(type_map.at(types[i]));

  const auto t0 = std::chrono::steady_clock::now();
  double se = 0, sf = 0;
  for (int f = 0; f < F; ++f) {
    const sezm::Evaluation r =
        pot->evaluate(&coord.data[3 * static_cast<size_t>(N) * f], model_types.data(), N, &box.data[9 * f], true);
    se += (r.energy - energy.data[f]) * (r.energy - energy.data[f]);
    for (int k = 0; k < 3 * N; ++k) {
      const double d = r.forces[k] - force.data[3 * static_cast<size_t>(N) * f + k];
      sf += d * d;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double e_rmse = std::sqrt(se / F) / N, f_rmse = std::sqrt(sf / (3.0 * N * F));
  const double e_ref = ev.at("energy_rmse_per_atom_eV"), f_ref = ev.at("force_rmse_eV_per_A");
  std::printf("[valid] %-2s %d frames x %d atoms in %.1f s: energy RMSE/atom %.6e (deepmd-kit %.6e, rel %.1e), "
              "force RMSE %.6e (deepmd-kit %.6e, rel %.1e)\n",
              elem.c_str(), F, N, secs, e_rmse, e_ref, std::abs(e_rmse / e_ref - 1), f_rmse, f_ref,
              std::abs(f_rmse / f_ref - 1));
  RecordProperty("energy_rmse_per_atom", std::to_string(e_rmse));
  RecordProperty("force_rmse", std::to_string(f_rmse));
  EXPECT_NEAR(e_rmse, e_ref, 1e-3 * e_ref);
  EXPECT_NEAR(f_rmse, f_ref, 1e-3 * f_ref);
}

INSTANTIATE_TEST_SUITE_P(Potentials, ValidationRMSE, testing::Values("C", "Cu"));

}  // namespace
