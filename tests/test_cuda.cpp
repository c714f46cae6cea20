// CUDA engine, in both modes (lean, fast), against the float64 CPU engine on the same weights and
// against deepmd-kit's references; finite differences of the GPU energy; repeatability; fast vs
// lean; chunking and the ghost exchange path; ZBL bridging (the learned part alone, chunked and
// through ghost rows). Every test skips cleanly when the build has no CUDA engine or no GPU is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "ghost_graph.h"
#include "io/checkpoint.h"
#include "model/charge_spin.h"
#include "model/lora.h"
#include "model/multitask.h"
#include "model/weights.h"
#include "api/engine_factory.h"
#include "api/potential.h"
#include "engine/sezm_model.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

// Without a usable GPU the CUDA tests skip, except where SEZM_GPU_TESTS_REQUIRED=1 (the GPU
// check, tools/gpu-machine/gpu-check.sh): there a skipped GPU test would hide a broken machine or
// build, so it fails.
bool gpu_tests_required() {
  const char* v = std::getenv("SEZM_GPU_TESTS_REQUIRED");
  return v && std::string(v) == "1";
}
#ifdef SEZM_HAVE_CUDA
#define SEZM_REQUIRE_GPU()                                                         \
  do {                                                                             \
    std::string why;                                                               \
    if (!sezm::cuda_device_available(&why)) {                                      \
      if (gpu_tests_required()) FAIL() << "SEZM_GPU_TESTS_REQUIRED=1 but " << why; \
      GTEST_SKIP() << why;                                                         \
    }                                                                              \
  } while (0)
#else
#define SEZM_REQUIRE_GPU()                                                                                   \
  do {                                                                                                       \
    if (gpu_tests_required()) FAIL() << "SEZM_GPU_TESTS_REQUIRED=1 but built without the CUDA engine"; \
    GTEST_SKIP() << "built without the CUDA engine";                                                         \
  } while (0)
#endif

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// The contract of `precision tf32` against the float64 engine on the same fp32 weights, relative
// to the largest reference value (docs/performance.md, "precision tf32", has the measured errors).
constexpr double kTf32EnergyTol = 5e-3, kTf32ForceTol = 1e-2;

struct Case {
  std::string model, ref;
  bool shared;       // read from ../shared (never committed), skipped when absent
  std::string head;  // multi-task: the head, and only the reference configurations of that head
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

// Modes as plain ints so the parameter prints and names without the CUDA header: 0 lean, 1 fast.
const char* mode_name(int m) { return m ? "fast" : "lean"; }
#ifdef SEZM_HAVE_CUDA
sezm::CudaMode cuda_mode(int m) { return m ? sezm::CudaMode::kFast : sezm::CudaMode::kLean; }
#endif

// Precision as a plain int too: 0 the default (IEEE fp32), 1 `precision tf32`.
const char* precision_suffix(int p) { return p ? "_tf32" : ""; }

class CudaReference : public ::testing::TestWithParam<std::tuple<Case, int, int>> {};

// The CUDA engine computes with the checkpoint's weights rounded to fp32. The arithmetic check
// therefore compares it with the float64 CPU engine running those same fp32-rounded weights
// (E <= 1e-6, F and W <= 1e-5 relative). Against deepmd-kit's own references: float32 models
// within 1e-5; float64 models within 1e-5 for forces and virials, and the energy is reported
// with the weight-rounding share printed beside it (rounding the float64 weights alone moves the
// defaults model's energy by up to ~7e-7 relative, before any fp32 arithmetic).
// With `precision tf32` (one TF32 pass in the tile products) the same comparisons are made against
// the looser bounds of that option's contract (docs/performance.md, "precision tf32").
TEST_P(CudaReference, MatchesCpuFloat64AndDeepmd) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Case& k = std::get<0>(GetParam());
  const int mode = std::get<1>(GetParam());
  const bool tf32 = std::get<2>(GetParam()) != 0;
  const double tol_e = tf32 ? kTf32EnergyTol : 1e-6, tol_fw = tf32 ? kTf32ForceTol : 1e-5;
  const std::string mp = k.shared ? sezm_test::shared_path(k.model) : sezm_test::data_path(k.model);
  const std::string rp = k.shared ? sezm_test::shared_path(k.ref) : sezm_test::data_path(k.ref);
  if (!sezm::test::file_exists(mp) || !sezm::test::file_exists(rp)) {
    // Only ../shared's models (never committed) may be absent, even on the GPU check.
    if (!k.shared && gpu_tests_required()) FAIL() << "missing " << mp;
    GTEST_SKIP() << "missing " << mp;
  }
  sezm::Checkpoint ck = sezm::read_checkpoint(
      mp, [&](const nlohmann::json& p, const std::vector<std::string>& order) {
        return sezm::choose_head(p, order, k.head, mp).branch;
      });
  const sezm::ModelConfig cfg = sezm::parse_model_config(ck.model_params, mp);
  sezm::fold_lora(ck, cfg);  // a LoRA checkpoint's adapters, folded in double as load_model_weights does
  const sezm::SezmEngine<double> cpu_exact(sezm::load_weights<double>(ck, cfg));
  for (auto& kv : ck.tensors)
    for (double& x : kv.second.data) x = static_cast<double>(static_cast<float>(x));
  sezm::ModelW<double> w32 = sezm::load_weights<double>(ck, cfg);
  // A head's case embedding is folded into the fitting weights in double (docs/model.md §6.2);
  // the GPU holds those folded weights in fp32, so the CPU comparison uses them rounded too.
  for (auto& m : w32.fit_w) m = m.cast<float>().cast<double>();
  for (auto& v : w32.fit_b) v = v.cast<float>().cast<double>();
  w32.fit_out = w32.fit_out.cast<float>().cast<double>();
  const sezm::SezmEngine<double> cpu(w32);
  const auto ref = sezm::test::read_ref(rp);
  sezm::CudaEngine gpu(w32, 0, cuda_mode(mode));
  if (tf32) gpu.set_precision(sezm::Precision::kTf32);
  for (const auto& c : ref.configs) {
    if (c.head != k.head) continue;
    SCOPED_TRACE(c.name);
    const sezm::Graph g =
        sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.periodic ? c.cell.data() : nullptr, cfg.rcut);
    const sezm::Evaluation ref32 = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
    const double e_round = std::fabs(ref32.energy - cpu_exact.compute(g, false).energy) / std::fabs(c.energy);
    const sezm::Evaluation dev = sezm::make_evaluation(g, gpu.compute(g, true), true, false);
    const double e_cpu = std::fabs(dev.energy - ref32.energy) / std::fabs(ref32.energy);
    // Relative to the largest |reference value|; a lone atom's forces and virial are exactly zero
    // in every engine and are compared in absolute terms.
    auto rel = [](double diff, double scale) { return scale > 0 ? diff / scale : diff; };
    const double f_cpu = rel(max_diff(dev.forces, ref32.forces), max_abs(ref32.forces));
    const double w_cpu = rel(max_diff(dev.virial, ref32.virial), max_abs(ref32.virial));
    const double e_ref = std::fabs(dev.energy - c.energy) / std::fabs(c.energy);
    const double f_ref = rel(max_diff(dev.forces, c.forces), max_abs(c.forces));
    const double w_ref = rel(max_diff(dev.virial, c.virial), max_abs(c.virial));
    std::printf("[cuda %s%s %s] %-20s vs CPU f64 (same fp32 weights): E %.2e F %.2e W %.2e | vs deepmd: E %.2e "
                "(weight rounding alone %.1e) F %.2e W %.2e\n",
                mode_name(mode), tf32 ? " tf32" : "", k.model.c_str(), c.name.c_str(), e_cpu, f_cpu, w_cpu, e_ref,
                e_round, f_ref, w_ref);
    EXPECT_LE(e_cpu, tol_e);
    EXPECT_LE(f_cpu, tol_fw);
    EXPECT_LE(w_cpu, tol_fw);
    EXPECT_LE(f_ref, tol_fw);
    EXPECT_LE(w_ref, tol_fw);
    EXPECT_LE(e_ref, tf32 ? kTf32EnergyTol : 1e-5);
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaReference,
    ::testing::Combine(
        ::testing::Values(Case{"c32_l3_f2_float64.pt", "ref_c32_l3_f2_float64.json", false},
                          Case{"c32_l3_f2_float32.pt", "ref_c32_l3_f2_float32.json", false},
                          Case{"defaults_float64.pt", "ref_defaults_float64.json", false},
                          // DPA4-Mini: the SO(3) grid nets (cuda/grid_net.cu)
                          Case{"mini_float64.pt", "ref_mini_float64.json", false},
                          Case{"mini_variants/mini_v_mlp_k2.pt", "mini_variants/ref_mini_v_mlp_k2.json", false},
                          Case{"mini_variants/mini_v_branch_l3.pt", "mini_variants/ref_mini_v_branch_l3.json", false},
                          Case{"mini_variants/mini_v_ffnmlp_k0.pt", "mini_variants/ref_mini_v_ffnmlp_k0.json", false},
                          Case{"mini_variants/mini_v_ffn_only.pt", "mini_variants/ref_mini_v_ffn_only.json", false},
                          Case{"reference/models/water_pretrained.pt", "reference/forces/ref_water_pretrained.json",
                               true},
                          // multi-task heads (FiLM case embedding folded into the fitting net)
                          Case{"recipes/multitask_plain_f64.pt", "recipes/ref_multitask_plain_f64.json", false,
                               "cu_bulk"},
                          Case{"recipes/multitask_plain_f64.pt", "recipes/ref_multitask_plain_f64.json", false,
                               "carbon"},
                          Case{"recipes/multitask_mini_f64.pt", "recipes/ref_multitask_mini_f64.json", false,
                               "water_1"},
                          // deepmd-kit's recipes by 3.2.0 (tests/data/recipes/make_recipes.py)
                          Case{"recipes/mini_f64.pt", "recipes/ref_mini_f64.json", false},
                          Case{"recipes/mini_f32.pt", "recipes/ref_mini_f32.json", false},
                          Case{"recipes/lora_f32.pt", "recipes/ref_lora_f32.json", false},
                          // ZBL bridging (docs/model.md §9; cuda/bridging.cuh): close pairs, forces
                          // up to ~1e4 eV/A, compared relative to the largest reference value
                          Case{"recipes/zbl_plain_f64.pt", "recipes/ref_zbl_plain_f64.json", false},
                          Case{"recipes/zbl_mini_f64.pt", "recipes/ref_zbl_mini_f64.json", false}),
        ::testing::Values(0, 1), ::testing::Values(0, 1)),
    [](const auto& info) {
      const std::string& m = std::get<0>(info.param).model;
      const std::string& head = std::get<0>(info.param).head;
      std::string s = m.substr(m.rfind('/') + 1);
      s = s.substr(0, s.find('.'));
      return s + (head.empty() ? "" : "_" + head) + "_" + mode_name(std::get<1>(info.param)) +
             precision_suffix(std::get<2>(info.param));
    });

#ifdef SEZM_HAVE_CUDA
// A small periodic reference configuration with its edge list (rcut 6 A).
struct Small {
  sezm::test::RefConfig c;
  sezm::ModelW<double> w;
  sezm::Graph el;
  const sezm::Graph& view() const { return el; }
  const sezm::ModelW<double>& weights() const { return w; }
};
Small small_system() {
  Small s{sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3], {}, {}};
  s.w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  s.el = sezm::build_graph(s.c.coords.data(), s.c.types.data(), s.c.natoms, s.c.cell.data(), 6.0);
  return s;
}
#endif

TEST(Cuda, RepeatedRunsAreBitIdentical) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine gpu(s.weights(), 0, sezm::CudaMode::kLean);
  const sezm::Graph& g = s.view();
  const sezm::EngineResult a = gpu.compute(g, true), b = gpu.compute(g, true);
  EXPECT_EQ(a.energy, b.energy);
  EXPECT_EQ(a.atom_energy, b.atom_energy);
  EXPECT_EQ(a.edge_grad, b.edge_grad);
#endif
}

// Fast mode replays the gated layers from the kept pre-activations with the very operations the
// lean recompute performs after its GEMM, so the two modes must agree to the last bit.
TEST(Cuda, FastModeIsBitIdenticalToLean) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine lean(s.weights(), 0, sezm::CudaMode::kLean);
  sezm::CudaEngine fast(s.weights(), 0, sezm::CudaMode::kFast);
  fast.set_chunk_edges(900);  // several chunks: the kept pre-activations are addressed per chunk
  lean.set_chunk_edges(900);
  const sezm::Graph& g = s.view();
  const sezm::EngineResult a = lean.compute(g, true), b = fast.compute(g, true);
  EXPECT_EQ(a.energy, b.energy);
  EXPECT_EQ(a.edge_grad, b.edge_grad);
#endif
}

// Out of GPU memory is a sezm::Error naming the mode and the chunk and saying what to change
// (docs/errors.md), never an abort: 64 atoms on a 0.1125 A grid in a 0.45 A periodic cell (24,389
// images, within the neighbour search's limit) have ~4e7 edges within rcut 6 A, whose per-edge
// storage (kB per edge, docs/ARCHITECTURE.md) is far beyond any GPU's memory in fast mode, and in
// lean mode when the whole edge list is one chunk.
TEST(Cuda, OutOfMemoryNamesModeAndChunk) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const double a = 0.45, cell[9] = {a, 0, 0, 0, a, 0, 0, 0, a};
  std::vector<double> pos;
  for (int i = 0; i < 64; ++i)
    for (int k : {i % 4, (i / 4) % 4, i / 16}) pos.push_back(k * a / 4);
  const std::vector<int> types(64, 0);
  const sezm::Graph g = sezm::build_graph(pos.data(), types.data(), 64, cell, 6.0);
  ASSERT_GT(g.n_edges(), 30000000);
  const auto w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  for (const sezm::CudaMode mode : {sezm::CudaMode::kFast, sezm::CudaMode::kLean}) {
    sezm::CudaEngine gpu(w, 0, mode);
    if (mode == sezm::CudaMode::kLean) gpu.set_chunk_edges(g.n_edges());
    try {
      gpu.compute(g, true);
      ADD_FAILURE() << "no error for " << g.n_edges() << " edges";
    } catch (const sezm::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("out of GPU memory"), std::string::npos) << m;
      EXPECT_NE(m.find(mode == sezm::CudaMode::kFast ? "mode fast" : "mode lean"), std::string::npos) << m;
      EXPECT_NE(m.find(mode == sezm::CudaMode::kFast ? "use mode lean" : "a smaller chunk"), std::string::npos) << m;
    }
  }
#endif
}

class CudaModes : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Modes, CudaModes, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

// Mode and precision: bit 0 fast, bit 1 `precision tf32` (compared within that option's contract).
class CudaModesPrecisions : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(ModesPrecisions, CudaModesPrecisions, ::testing::Values(0, 1, 2, 3), [](const auto& info) {
  return std::string(mode_name(info.param & 1)) + precision_suffix(info.param >> 1);
});
double tol_e(int p) { return p & 2 ? kTf32EnergyTol : 1e-6; }
double tol_f(int p) { return p & 2 ? kTf32ForceTol : 1e-5; }
#ifdef SEZM_HAVE_CUDA
sezm::Precision precision_of(int p) { return p & 2 ? sezm::Precision::kTf32 : sezm::Precision::kDeviceDefault; }
#endif

TEST_P(CudaModesPrecisions, SmallChunksAgreeWithOneChunk) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine one(s.weights(), 0, cuda_mode(GetParam() & 1));
  one.set_precision(precision_of(GetParam()));
  sezm::CudaEngine many(s.weights(), 0, cuda_mode(GetParam() & 1));
  many.set_precision(precision_of(GetParam()));
  many.set_chunk_edges(700);
  const sezm::Graph& g = s.view();
  const sezm::Evaluation a = sezm::make_evaluation(g, one.compute(g, true), true, false);
  const sezm::Evaluation b = sezm::make_evaluation(g, many.compute(g, true), true, false);
  EXPECT_NEAR(a.energy, b.energy, tol_e(GetParam()) * std::fabs(a.energy));
  EXPECT_LE(max_diff(a.forces, b.forces), tol_f(GetParam()) * max_abs(a.forces));
#endif
}

// With gradients the last block runs its node steps and the read-out per chunk of destinations
// (fused with its backward); an energy-only call runs them over all nodes at once. Every node's
// arithmetic is the same either way, so the energies must agree to the last bit.
TEST_P(CudaModesPrecisions, EnergyOnlyCallMatchesTheFusedGradientCall) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine gpu(s.weights(), 0, cuda_mode(GetParam() & 1));
  gpu.set_precision(precision_of(GetParam()));
  gpu.set_chunk_edges(700);  // several chunks
  const sezm::Graph& g = s.view();
  const sezm::EngineResult a = gpu.compute(g, false), b = gpu.compute(g, true);
  EXPECT_EQ(a.energy, b.energy);
  EXPECT_EQ(a.atom_energy, b.atom_energy);
#endif
}

TEST(Cuda, GhostExchangeReproducesImagesAsEdges) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine gpu(s.weights(), 0, sezm::CudaMode::kLean);
  const sezm::Graph& el = s.el;
  const sezm::Graph& plain = s.view();
  const sezm::Evaluation a = sezm::make_evaluation(plain, gpu.compute(plain, true), true, false);
  const sezm_test::GhostGraph gg = sezm_test::make_ghost_graph(el, s.c.coords.data(), s.c.types.data());
  sezm_test::OwnerExchange<double> ex(gg);
  const sezm::Graph& gv = gg.view();
  const sezm::Evaluation b = sezm::make_evaluation(gv, gpu.compute(gv, true, &ex), true, false);
  EXPECT_NEAR(a.energy, b.energy, 1e-6 * std::fabs(a.energy));
  EXPECT_LE(max_diff(a.forces, sezm_test::fold_forces(gg, b.forces)), 1e-5 * max_abs(a.forces));
#endif
}

// No shipped or reference model pairs radial_so2_mode "none" with the radial hidden projection
// (n_focus * focus_dim != channels): the c32 weights (which have the projection) with the
// degree-channel mixer switched off reach the CUDA engine's Rh = R W_rh table and its adjoint
// product, checked against the float64 CPU engine on the same fp32-rounded weights.
TEST_P(CudaModesPrecisions, RadialModeNoneWithHiddenProjectionMatchesCpu) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const sezm::ModelW<double> w = sezm_test::c32_without_mixer(true);
  ASSERT_TRUE(w.blocks.at(0).has_radial_hidden_proj);
  const sezm::SezmEngine<double> cpu(w);
  sezm::CudaEngine gpu(w, 0, cuda_mode(GetParam() & 1));
  gpu.set_precision(precision_of(GetParam()));
  const Small s = small_system();
  const sezm::Graph& g = s.view();
  const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
  const sezm::Evaluation b = sezm::make_evaluation(g, gpu.compute(g, true), true, false);
  EXPECT_NEAR(b.energy, a.energy, tol_e(GetParam()) * std::fabs(a.energy));
  EXPECT_LE(max_diff(b.forces, a.forces), tol_f(GetParam()) * max_abs(a.forces));
  EXPECT_LE(max_diff(b.virial, a.virial), tol_f(GetParam()) * max_abs(a.virial));
#endif
}

TEST_P(CudaModes, ForcesMatchFiniteDifferencesOfGpuEnergy) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  // A 6-atom open C/Cu cluster: small energies keep fp32 round-off low; h = 5e-3 A balances the
  // O(h^2) truncation against the ~1e-6 eV fp32 noise of E (noise/h ~ 2e-4 eV/A).
  const sezm::Potential pot = sezm::Potential::load(sezm_test::data_path("c32_l3_f2_float64.pt"));
  std::vector<double> x = {0.0, 0.0, 0.0, 1.9, 0.3, -0.2, -0.4, 2.1, 0.5, 1.1, 1.2, 1.9, -1.7, -0.6, 0.9, 2.6, 2.2, 1.0};
  const std::vector<int> t = {0, 1, 0, 1, 0, 0};
  const int n = 6;
  sezm::CudaEngine gpu(sezm::load_model_weights(pot.path()), 0, cuda_mode(GetParam()));
  auto eval = [&](const std::vector<double>& p, bool f) {
    const sezm::Graph g = sezm::build_graph(p.data(), t.data(), n, nullptr, pot.config().rcut);
    return sezm::make_evaluation(g, gpu.compute(g, f), f, false);
  };
  const sezm::Evaluation ev = eval(x, true);
  const double h = 5e-3;
  double worst = 0;
  for (int i = 0; i < 3 * n; ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double fd = -(eval(xp, false).energy - eval(xm, false).energy) / (2 * h);
    worst = std::max(worst, std::fabs(fd - ev.forces[i]));
  }
  std::printf("[cuda %s] FD of GPU energy vs GPU forces: max |diff| %.2e eV/A (max |F| %.2f)\n",
              mode_name(GetParam()), worst, max_abs(ev.forces));
  EXPECT_LE(worst, 2e-3 * max_abs(ev.forces));
#endif
}

// Charge/spin conditioning (docs/model.md §10): the frame's condition is folded into the type
// table on the host, so the CUDA engine computes the conditioned model unchanged: against the
// float64 CPU engine on the same folded weights and against deepmd-kit 3.2.0, for a given
// (Q, S) and for the model's default.
TEST_P(CudaModesPrecisions, ChargeSpinModelMatchesCpuAndDeepmd) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const std::string path = sezm_test::data_path("recipes/chgspin_plain_f64.pt");
  const auto ref = sezm::test::read_ref(sezm_test::data_path("recipes/ref_chgspin_plain_f64.json"));
  int checked = 0;
  for (const auto& c : ref.configs) {
    if (c.name != "water_tric24@qn2_m3" && c.name != "water_tric24@default") continue;
    sezm::ModelW<double> w = sezm::load_model_weights(path);
    sezm::apply_charge_spin(w, c.has_charge_spin ? std::optional<sezm::ChargeSpin>(sezm::ChargeSpin{c.charge, c.spin})
                                                 : std::nullopt, path);
    sezm::CpuEngine cpu(w);
    sezm::CudaEngine gpu(w, 0, cuda_mode(GetParam() & 1));
    gpu.set_precision(precision_of(GetParam()));
    const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), w.cfg.rcut);
    const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
    const sezm::Evaluation b = sezm::make_evaluation(g, gpu.compute(g, true), true, false);
    EXPECT_NEAR(b.energy, a.energy, tol_e(GetParam()) * std::fabs(a.energy)) << c.name;
    EXPECT_LE(max_diff(b.forces, a.forces), tol_f(GetParam()) * max_abs(a.forces)) << c.name;
    EXPECT_LE(max_diff(b.virial, a.virial), tol_f(GetParam()) * max_abs(a.virial)) << c.name;
    EXPECT_NEAR(b.energy, c.energy, tol_e(GetParam()) * std::fabs(c.energy)) << c.name;
    EXPECT_LE(max_diff(b.forces, c.forces), tol_f(GetParam()) * max_abs(c.forces)) << c.name;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
#endif
}

// The CUDA engine refuses a conditioned model whose charge/spin was not applied (docs/model.md §10).
TEST(Cuda, RefusesUnappliedChargeSpin) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  try {
    sezm::CudaEngine e(sezm::load_model_weights(sezm_test::data_path("recipes/chgspin_plain_f64.pt")), 0,
                       sezm::CudaMode::kLean);
    FAIL() << "the CUDA engine took a conditioned model without its charge/spin";
  } catch (const sezm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no charge/spin condition was applied"), std::string::npos) << e.what();
  }
#endif
}

// ZBL bridging (docs/model.md §9; host side cuda/bridging.cuh, gate in the embedding and softmax
// kernels): the learned part alone (Z = 0, so that the pair term, computed in double on the host
// and ~1e4 eV/A here, cannot hide an error of the clamp or the gate) on the close-pair cells, in
// several chunks (the gate and its adjoint addressed per chunk) and through ghost rows (eta
// exchanged forward and its adjoint back), against the float64 CPU engine on the same
// fp32-rounded weights; the energy-only call gives the gradient call's energy to the last bit.
TEST_P(CudaModesPrecisions, ZblLearnedPartChunkedAndGhostsMatchCpu) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const std::string mp = sezm_test::data_path("recipes/zbl_plain_f64.pt");
  sezm::Checkpoint ck = sezm::read_checkpoint(mp);
  const sezm::ModelConfig cfg = sezm::parse_model_config(ck.model_params, mp);
  ASSERT_TRUE(cfg.zbl);
  for (auto& kv : ck.tensors)
    for (double& x : kv.second.data) x = static_cast<double>(static_cast<float>(x));
  sezm::ModelW<double> w32 = sezm::load_weights<double>(ck, cfg);
  std::fill(w32.zbl_z.begin(), w32.zbl_z.end(), 0.0);
  const sezm::SezmEngine<double> cpu(w32);
  sezm::CudaEngine gpu(w32, 0, cuda_mode(GetParam() & 1));
  gpu.set_precision(precision_of(GetParam()));
  gpu.set_chunk_edges(100);
  const auto ref = sezm::test::read_ref(sezm_test::data_path("recipes/ref_zbl_plain_f64.json"));
  int checked = 0;
  for (const auto& c : ref.configs) {
    if (c.name.rfind("zbl_", 0) != 0) continue;  // zbl_open10 (a pair inside r_inner: gate 0), zbl_tric9, zbl_tric28
    SCOPED_TRACE(c.name);
    const sezm::Graph g =
        sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.periodic ? c.cell.data() : nullptr, cfg.rcut);
    double rmin = 1e30;  // the cell reaches the clamp and the gate (r < r_outer)
    for (int e = 0; e < g.n_edges(); ++e)
      rmin = std::min(rmin, std::sqrt(g.vec[3 * e] * g.vec[3 * e] + g.vec[3 * e + 1] * g.vec[3 * e + 1] +
                                       g.vec[3 * e + 2] * g.vec[3 * e + 2]));
    ASSERT_LT(rmin, cfg.bridging_r_outer);
    if (c.periodic) ASSERT_GT(g.n_edges(), 3 * 100);  // the cells: several chunks of at most 100 edges
    const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
    const sezm::EngineResult full = gpu.compute(g, true);
    EXPECT_EQ(gpu.compute(g, false).energy, full.energy);
    const sezm::Evaluation b = sezm::make_evaluation(g, full, true, false);
    std::printf("[cuda %s] zbl learned part %-10s vs CPU f64: E %.2e F %.2e W %.2e (max |F| %.3g)\n",
                mode_name(GetParam() & 1), c.name.c_str(), std::fabs(b.energy - a.energy) / std::fabs(a.energy),
                max_diff(b.forces, a.forces) / max_abs(a.forces), max_diff(b.virial, a.virial) / max_abs(a.virial),
                max_abs(a.forces));
    EXPECT_NEAR(b.energy, a.energy, tol_e(GetParam()) * std::fabs(a.energy));
    EXPECT_LE(max_diff(b.forces, a.forces), tol_f(GetParam()) * max_abs(a.forces));
    EXPECT_LE(max_diff(b.virial, a.virial), tol_f(GetParam()) * max_abs(a.virial));
    if (c.periodic) {
      const sezm_test::GhostGraph gg = sezm_test::make_ghost_graph(g, c.coords.data(), c.types.data());
      ASSERT_GT(gg.n_total, gg.n_nodes);
      sezm_test::OwnerExchange<double> ex(gg);
      const sezm::Graph& gv = gg.view();
      const sezm::Evaluation h = sezm::make_evaluation(gv, gpu.compute(gv, true, &ex), true, false);
      EXPECT_EQ(ex.forwards, cfg.n_blocks + 1);  // + the gate's eta
      EXPECT_EQ(ex.reverses, cfg.n_blocks + 1);
      EXPECT_NEAR(h.energy, a.energy, tol_e(GetParam()) * std::fabs(a.energy));
      EXPECT_LE(max_diff(sezm_test::fold_forces(gg, h.forces), a.forces), tol_f(GetParam()) * max_abs(a.forces));
      EXPECT_LE(max_diff(h.virial, a.virial), tol_f(GetParam()) * max_abs(a.virial));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3);
#endif
}

// DPA4-Mini (SO(3) grid nets, cuda/grid_net.cu) on the 192-atom water cell with chunks of 2000
// edges: the fused last block runs the message-node net, the grid FFN and the grid read-out on
// node ranges that start mid-cell; the energy-only call runs them on all nodes at once (same
// arithmetic per node: bit-identical energies); and both match the float64 CPU engine on the
// same fp32-rounded weights.
TEST_P(CudaModesPrecisions, MiniChunkedAndEnergyOnlyMatchCpu) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const std::string mp = sezm_test::data_path("mini_float64.pt");
  sezm::Checkpoint ck = sezm::read_checkpoint(mp);
  const sezm::ModelConfig cfg = sezm::parse_model_config(ck.model_params, mp);
  for (auto& kv : ck.tensors)
    for (double& x : kv.second.data) x = static_cast<double>(static_cast<float>(x));
  const sezm::ModelW<double> w32 = sezm::load_weights<double>(ck, cfg);
  const sezm::SezmEngine<double> cpu(w32);
  sezm::CudaEngine gpu(w32, 0, cuda_mode(GetParam() & 1));
  gpu.set_precision(precision_of(GetParam()));
  gpu.set_chunk_edges(2000);
  const auto ref = sezm::test::read_ref(sezm_test::data_path("ref_mini_float64.json"));
  for (const auto& c : ref.configs) {
    if (c.name != "water192_lmp") continue;
    const sezm::Graph g =
        sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.periodic ? c.cell.data() : nullptr, cfg.rcut);
    const sezm::EngineResult e_only = gpu.compute(g, false), full = gpu.compute(g, true);
    EXPECT_EQ(e_only.energy, full.energy);
    EXPECT_EQ(e_only.atom_energy, full.atom_energy);
    const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
    const sezm::Evaluation b = sezm::make_evaluation(g, full, true, false);
    EXPECT_NEAR(b.energy, a.energy, tol_e(GetParam()) * std::fabs(a.energy));
    EXPECT_LE(max_diff(b.forces, a.forces), tol_f(GetParam()) * max_abs(a.forces));
    EXPECT_LE(max_diff(b.virial, a.virial), tol_f(GetParam()) * max_abs(a.virial));
  }
#endif
}

TEST(Cuda, NoDeviceIsAnErrorNotAFallback) {
#ifdef SEZM_HAVE_CUDA
  std::string why;
  if (sezm::cuda_device_available(&why)) {
    // With a GPU present, asking for a device that does not exist must fail loudly.
    const sezm::Potential pot = sezm::Potential::load(sezm_test::data_path("c32_l3_f2_float64.pt"));
    EXPECT_THROW(sezm::CudaEngine(sezm::load_model_weights(pot.path()), 999, sezm::CudaMode::kLean), sezm::Error);
  } else {
    const sezm::Potential pot = sezm::Potential::load(sezm_test::data_path("c32_l3_f2_float64.pt"));
    try {
      sezm::CudaEngine e(sezm::load_model_weights(pot.path()), 0, sezm::CudaMode::kLean);
      FAIL() << "constructed a CUDA engine without a usable GPU";
    } catch (const sezm::Error& e) {
      EXPECT_NE(std::string(e.what()).find("device cuda"), std::string::npos) << e.what();
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA engine";
#endif
}

// The factory, which every front end uses: device cuda without a usable device (or without the
// CUDA engine in this build) is an Error naming the device, never a CPU fallback.
TEST(EngineFactory, CudaWithoutAUsableDeviceIsAnError) {
  std::string why;
  if (sezm::cuda_available(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  sezm::EngineOptions opt;
  opt.device = sezm::Device::kCuda;
  try {
    sezm::make_engine(sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt")), opt);
    FAIL() << "made a CUDA engine without a usable GPU";
  } catch (const sezm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device cuda"), std::string::npos) << e.what();
  }
}

TEST(EngineFactory, CpuEngineIsTheReference) {
  const std::string path = sezm_test::data_path("c32_l3_f2_float64.pt");
  const auto engine = sezm::make_engine(sezm::load_model_weights(path), sezm::EngineOptions{});
  EXPECT_EQ(engine->description().rfind("cpu, float64", 0), 0u) << engine->description();
  EXPECT_EQ(engine->peak_device_bytes(), 0u);
  EXPECT_EQ(engine->chunk_edges(), 0);
  // Same numbers as the Potential (which holds a factory engine too) on a reference cell.
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3];
  const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), engine->config().rcut);
  const sezm::Evaluation a = sezm::make_evaluation(g, engine->compute(g, true), true, false);
  const sezm::Evaluation b = sezm::Potential::load(path).evaluate(c.coords.data(), c.types.data(), c.natoms,
                                                                  c.cell.data(), true);
  // Not bit for bit: with several OpenMP threads the CPU backward's per-thread sums are not in a
  // fixed order from call to call (nor were they before the factory).
  EXPECT_NEAR(a.energy, b.energy, 1e-12 * std::fabs(a.energy));
  EXPECT_LE(max_diff(a.forces, b.forces), 1e-12 * max_abs(a.forces));
  EXPECT_LE(max_diff(a.virial, b.virial), 1e-12 * max_abs(a.virial));
}

}  // namespace
