// The command-line front ends as a user runs them: sezm-eval on structure files written from
// deepmd-kit's reference configurations (its --json output against deepmd-kit 3.2.0's own
// numbers, <= 1e-9 relative, as test_reference.cpp does for the library), sezm-bench on the
// same checkpoint, and both refusing a model they cannot compute with exit code 1 and the
// cause on stderr.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec_util.h"
#include "model_test_util.h"

using namespace sezm_test;

namespace {

// Extended XYZ of a reference configuration, coordinates to 17 significant digits (exact).
std::string write_xyz(const sezm::test::RefConfig& c, const std::vector<std::string>& type_map) {
  const std::string path = temp_path(c.name + ".xyz");
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fprintf(f, "%d\n", c.natoms);
  if (c.periodic) {
    std::fprintf(f, "Lattice=\"");
    for (int k = 0; k < 9; ++k) std::fprintf(f, k ? " %.17g" : "%.17g", c.cell[k]);
    std::fprintf(f, "\" Properties=species:S:1:pos:R:3 pbc=\"T T T\"\n");
  } else {
    std::fprintf(f, "Properties=species:S:1:pos:R:3\n");
  }
  for (int i = 0; i < c.natoms; ++i)
    std::fprintf(f, "%s %.17g %.17g %.17g\n", type_map.at(c.types[i]).c_str(), c.coords[3 * i],
                 c.coords[3 * i + 1], c.coords[3 * i + 2]);
  std::fclose(f);
  return path;
}

const char* kModel = "dp320/c32_l3_f2_float64_dp320.pt";
const char* kRef = "dp320/ref_c32_l3_f2_float64_dp320.json";

}  // namespace

TEST(Cli, SezmEvalJsonMatchesDeepmdKit320) {
  const sezm::test::RefFile ref = sezm::test::read_ref(data_path(kRef));
  ASSERT_EQ(ref.configs.size(), 5u);
  for (const auto& c : ref.configs) {
    const std::string xyz = write_xyz(c, ref.type_map);
    const Exec r = run(quote(SEZM_EVAL_EXE) + " " + quote(data_path(kModel)) + " " + quote(xyz) +
                      " --json --atom-virial");
    ASSERT_EQ(r.status, 0) << c.name << ": " << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const double energy = j.at("energy");
    const auto ae = j.at("atom_energy").get<std::vector<double>>();
    const auto f = j.at("forces").get<std::vector<double>>();
    const auto w = j.at("virial").get<std::vector<double>>();
    const auto aw = j.at("atom_virial").get<std::vector<double>>();
    ASSERT_EQ(ae.size(), size_t(c.natoms));
    ASSERT_EQ(aw.size(), 9 * size_t(c.natoms));
    EXPECT_LE(std::abs(energy - c.energy), 1e-9 * std::abs(c.energy)) << c.name;
    EXPECT_LE(max_abs_diff(ae, c.atom_energy), 1e-9 * max_abs(c.atom_energy)) << c.name;
    EXPECT_LE(max_abs_diff(f, c.forces), 1e-9 * max_abs(c.forces)) << c.name;
    EXPECT_LE(max_abs_diff(w, c.virial), 1e-9 * max_abs(c.virial)) << c.name;
    for (int k = 0; k < 9; ++k) {  // per-atom virials sum to the virial
      double s = 0;
      for (int i = 0; i < c.natoms; ++i) s += aw[9 * i + k];
      EXPECT_NEAR(s, c.virial[k], 1e-9 * max_abs(c.virial)) << c.name << " virial " << k;
    }
    std::remove(xyz.c_str());
  }
}

TEST(Cli, SezmEvalRefusesUnsupportedModel) {
  const sezm::test::RefFile ref = sezm::test::read_ref(data_path(kRef));
  const std::string xyz = write_xyz(ref.configs.front(), ref.type_map);
  // A Mini config with so3_readout "glu", which the engines refuse (tests/data/synthetic).
  const Exec r = run(quote(SEZM_EVAL_EXE) + " " + quote(data_path("synthetic/synthetic_unsupported.pt")) + " " + quote(xyz));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("sezm-eval: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("synthetic_unsupported.pt: unsupported option descriptor.so3_readout = \"glu\""),
            std::string::npos) << r.out;
  std::remove(xyz.c_str());
}

TEST(Cli, SezmBenchRunsDeepmdKit320Checkpoint) {
  const Exec r = run(quote(SEZM_BENCH_EXE) + " " + quote(data_path(kModel)) +
                    " --cells 1 --repeat 1 --warmup 0 --threads 1 --element Cu --lattice fcc");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fcc 1^3 cells, 4 atoms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("energy+forces+virial: median"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("E/atom "), std::string::npos) << r.out;
}

TEST(Cli, SezmBenchRefusesUnsupportedModel) {
  const Exec r = run(quote(SEZM_BENCH_EXE) + " " + quote(data_path("synthetic/synthetic_unsupported.pt")) + " --cells 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("sezm-bench: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unsupported option descriptor.so3_readout = \"glu\""), std::string::npos) << r.out;
}

// Multi-task: --head picks the branch (here by a name in another case), the JSON names it, and
// the numbers are deepmd-kit 3.2.0's DeepPot(head=...) ones (tests/data/recipes/make_recipes.py).
TEST(Cli, SezmEvalHeadMatchesDeepmdKit320) {
  const std::string model = data_path("recipes/multitask_plain_f64.pt");
  const sezm::test::RefFile ref = sezm::test::read_ref(data_path("recipes/ref_multitask_plain_f64.json"));
  int checked = 0;
  for (const auto& c : ref.configs) {
    if (c.name.rfind("tric_small12@", 0) != 0 && c.name.rfind("h2o_cu_c_open@", 0) != 0) continue;
    const std::string xyz = write_xyz(c, ref.type_map);
    const std::string request = c.head == "carbon" ? "Carbon" : "bulk";  // case / alias
    const Exec r = run(quote(SEZM_EVAL_EXE) + " " + quote(model) + " " + quote(xyz) + " --json --atom-virial --head " +
                       request);
    ASSERT_EQ(r.status, 0) << c.name << ": " << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("head"), c.head);
    EXPECT_NE(j.at("head_reason").get<std::string>().find("head " + c.head), std::string::npos) << j.dump();
    const auto f = j.at("forces").get<std::vector<double>>();
    const auto aw = j.at("atom_virial").get<std::vector<double>>();
    EXPECT_LE(std::abs(j.at("energy").get<double>() - c.energy), 1e-9 * std::abs(c.energy)) << c.name << " " << c.head;
    EXPECT_LE(max_abs_diff(j.at("atom_energy").get<std::vector<double>>(), c.atom_energy), 1e-9 * max_abs(c.atom_energy));
    EXPECT_LE(max_abs_diff(f, c.forces), 1e-9 * max_abs(c.forces)) << c.name << " " << c.head;
    EXPECT_LE(max_abs_diff(j.at("virial").get<std::vector<double>>(), c.virial), 1e-9 * max_abs(c.virial));
    EXPECT_LE(max_abs_diff(aw, c.atom_virial), 1e-9 * max_abs(c.atom_virial));
    std::remove(xyz.c_str());
    ++checked;
  }
  EXPECT_EQ(checked, 4);  // two configurations x two heads
}

TEST(Cli, SezmEvalNamesTheHeadAndRefusesAnUnknownOne) {
  const std::string model = data_path("recipes/multitask_plain_f64.pt");
  const sezm::test::RefFile ref = sezm::test::read_ref(data_path("recipes/ref_multitask_plain_f64.json"));
  const std::string xyz = write_xyz(ref.configs.front(), ref.type_map);
  const Exec ok = run(quote(SEZM_EVAL_EXE) + " " + quote(model) + " " + quote(xyz) + " --head cu_bulk");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("head      : multi-task model: head cu_bulk (as requested)"), std::string::npos) << ok.out;
  const Exec bad = run(quote(SEZM_EVAL_EXE) + " " + quote(model) + " " + quote(xyz) + " --head nope");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("sezm-eval: "), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("no head or alias named 'nope'; heads (branch and aliases): cu_bulk (aliases CuBulk, bulk), carbon"),
            std::string::npos)
      << bad.out;
  const Exec none = run(quote(SEZM_EVAL_EXE) + " " + quote(model) + " " + quote(xyz));
  EXPECT_EQ(none.status, 1) << none.out;
  EXPECT_NE(none.out.find("no branch aliased \"Default\""), std::string::npos) << none.out;
  std::remove(xyz.c_str());
}

// Charge/spin (docs/model.md §10): --charge-spin reproduces deepmd-kit's numbers for that
// (Q, S); without it the model's default applies (and says so); a model without the embedding
// refuses the option.
TEST(Cli, SezmEvalChargeSpin) {
  const sezm::test::RefFile ref = sezm::test::read_ref(data_path("recipes/ref_chgspin_plain_f64.json"));
  const std::string model = data_path("recipes/chgspin_plain_f64.pt");
  int checked = 0;
  for (const auto& c : ref.configs) {
    if (c.name.rfind("h2o_cu_c_open@", 0) != 0) continue;
    const std::string xyz = write_xyz(c, ref.type_map);
    char cs[96] = "";
    if (c.has_charge_spin) std::snprintf(cs, sizeof cs, " --charge-spin %g %g", c.charge, c.spin);
    const Exec r = run(quote(SEZM_EVAL_EXE) + " " + quote(model) + " " + quote(xyz) + " --json" + cs);
    ASSERT_EQ(r.status, 0) << c.name << ": " << r.out;
    // stderr carries one line naming the charge/spin used; the JSON follows it.
    ASSERT_NE(r.out.find("sezm-eval: charge/spin "), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_LE(std::abs(j.at("energy").get<double>() - c.energy), 1e-9 * std::abs(c.energy)) << c.name;
    EXPECT_LE(max_abs_diff(j.at("forces").get<std::vector<double>>(), c.forces), 1e-9 * max_abs(c.forces)) << c.name;
    const Exec text = run(quote(SEZM_EVAL_EXE) + " " + quote(model) + " " + quote(xyz) + cs);
    ASSERT_EQ(text.status, 0) << text.out;
    EXPECT_NE(text.out.find(c.has_charge_spin ? "(--charge-spin)" : "charge/spin -1 2 (the model's default_chg_spin"),
              std::string::npos)
        << text.out;
    std::remove(xyz.c_str());
    ++checked;
  }
  EXPECT_EQ(checked, 4);

  const sezm::test::RefFile plain = sezm::test::read_ref(data_path(kRef));
  const std::string xyz = write_xyz(plain.configs.front(), plain.type_map);
  const Exec r = run(quote(SEZM_EVAL_EXE) + " " + quote(data_path(kModel)) + " " + quote(xyz) + " --charge-spin 0 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("charge_spin was given, but the model has no charge/spin embedding"), std::string::npos) << r.out;
  // A conditioned model without default_chg_spin (deepmd-kit 3.2.0 raises "charge_spin is required").
  const Exec nodef = run(quote(SEZM_EVAL_EXE) + " " + quote(data_path("recipes/chgspin_mini_f64.pt")) + " " + quote(xyz));
  EXPECT_EQ(nodef.status, 1) << nodef.out;
  EXPECT_NE(nodef.out.find("has no default_chg_spin; give them"), std::string::npos) << nodef.out;
  const Exec bad = run(quote(SEZM_EVAL_EXE) + " " + quote(data_path(kModel)) + " " + quote(xyz) + " --charge-spin 0");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--charge-spin needs two numbers"), std::string::npos) << bad.out;
  std::remove(xyz.c_str());
}
