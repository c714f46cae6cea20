// CUDA engine, in both modes (lean, fast) and, where the comparison allows, both precisions:
// finite differences of the GPU energy; repeatability; fast vs lean; chunking and the ghost
// exchange path; ZBL bridging (the learned part alone, chunked and through ghost rows); the
// DPA4-Mini grid nets; charge/spin. The reference-model comparisons are in
// test_cuda_reference.cpp; out of memory, the default chunk and the engine factory in
// test_cuda_engine_options.cpp. Every test skips without a CUDA engine or a usable GPU, unless
// SEZM_GPU_TESTS_REQUIRED=1 (cuda_test_util.h).
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

#include "cuda_test_util.h"
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

using namespace sezm_cuda_test;

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

// Fast mode keeps the stack output and the gated pre-activations of its forward, which lean mode's
// backward recomputes with the same kernels, so the two modes must agree to the last bit.
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

// EdgeState::kChunk (the per-edge geometry, radial features, env-seed edge state and their
// adjoints recomputed per chunk, docs/ARCHITECTURE.md "Device memory per edge") against the kept
// edge state at the same chunks, several of them, with gradients, energy only, and through ghost
// rows: the forward's arithmetic per edge and per node is the same, so the per-atom energies
// agree to the bit; the forces differ only in the order in which the geometry adjoints are summed
// (each (block, chunk) share is mapped into dE/dv at once), so they agree to fp32 rounding.
TEST_P(CudaModesPrecisions, ChunkEdgeStateMatchesKeptEdgeState) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine keep(s.weights(), 0, cuda_mode(GetParam() & 1));
  sezm::CudaEngine chunk(s.weights(), 0, cuda_mode(GetParam() & 1));
  for (sezm::CudaEngine* e : {&keep, &chunk}) {
    e->set_precision(precision_of(GetParam()));
    e->set_chunk_edges(700);
  }
  keep.set_edge_state(sezm::EdgeState::kKeep);
  chunk.set_edge_state(sezm::EdgeState::kChunk);
  chunk.set_node_batch(1);  // node steps in batches of the most centres of a chunk: several batches
  const sezm::Graph& g = s.view();
  const sezm::EngineResult a = keep.compute(g, true), b = chunk.compute(g, true);
  EXPECT_EQ(keep.last_edge_state(), sezm::EdgeState::kKeep);
  EXPECT_EQ(chunk.last_edge_state(), sezm::EdgeState::kChunk);
  EXPECT_EQ(a.atom_energy, b.atom_energy);
  const sezm::Evaluation fa = sezm::make_evaluation(g, a, true, false), fb = sezm::make_evaluation(g, b, true, false);
  EXPECT_LE(max_diff(fa.forces, fb.forces), 1e-5 * max_abs(fa.forces));
  EXPECT_LE(max_diff(fa.virial, fb.virial), 1e-5 * max_abs(fa.virial));
  EXPECT_EQ(keep.compute(g, false).atom_energy, chunk.compute(g, false).atom_energy);
  // repeated per-chunk calls are bit-identical (the buffers persist; nothing stale is read)
  const sezm::EngineResult b2 = chunk.compute(g, true);
  EXPECT_EQ(b.atom_energy, b2.atom_energy);
  EXPECT_EQ(b.edge_grad, b2.edge_grad);
  // ghost rows: the per-chunk route against the kept one on the same ghost graph
  const sezm_test::GhostGraph gg = sezm_test::make_ghost_graph(s.el, s.c.coords.data(), s.c.types.data());
  sezm_test::OwnerExchange<double> ex_a(gg), ex_b(gg);
  const sezm::Graph& gv = gg.view();
  const sezm::EngineResult ga = keep.compute(gv, true, &ex_a), gb = chunk.compute(gv, true, &ex_b);
  EXPECT_EQ(ga.atom_energy, gb.atom_energy);
  const sezm::Evaluation ea = sezm::make_evaluation(gv, ga, true, false);
  const sezm::Evaluation eb = sezm::make_evaluation(gv, gb, true, false);
  EXPECT_LE(max_diff(ea.forces, eb.forces), 1e-5 * max_abs(ea.forces));
#endif
}

// kAuto keeps the edge state when the call fits the device with it (any small system does), and
// switching an engine between the two routes call by call changes nothing but the route.
TEST(Cuda, AutoEdgeStateKeepsWhatFitsAndRoutesSwitch) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine gpu(s.weights(), 0, sezm::CudaMode::kLean);
  gpu.set_chunk_edges(700);
  const sezm::Graph& g = s.view();
  const sezm::EngineResult a = gpu.compute(g, true);
  EXPECT_EQ(gpu.last_edge_state(), sezm::EdgeState::kKeep);
  EXPECT_NE(gpu.description().find("edge state auto (keep in the latest call)"), std::string::npos)
      << gpu.description();
  gpu.set_edge_state(sezm::EdgeState::kChunk);
  const sezm::EngineResult b = gpu.compute(g, true);
  EXPECT_EQ(gpu.last_edge_state(), sezm::EdgeState::kChunk);
  gpu.set_edge_state(sezm::EdgeState::kKeep);
  const sezm::EngineResult c = gpu.compute(g, true);
  EXPECT_EQ(a.atom_energy, b.atom_energy);
  EXPECT_EQ(a.edge_grad, c.edge_grad);
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
  sezm::ModelW<double> w32 = fp32_rounded_weights(sezm_test::data_path("recipes/zbl_plain_f64.pt"));
  const sezm::ModelConfig& cfg = w32.cfg;
  ASSERT_TRUE(cfg.zbl);
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
  const sezm::ModelW<double> w32 = fp32_rounded_weights(sezm_test::data_path("mini_float64.pt"));
  const sezm::ModelConfig& cfg = w32.cfg;
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

}  // namespace
