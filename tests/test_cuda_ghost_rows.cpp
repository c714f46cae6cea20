// The CUDA engine's ghost exchange moving only the exchange's sent rows (FeatureExchange::
// sent_rows; cuda/host_support.cuh, GhostStaging; docs/multi-gpu.md) against the same engine
// moving every row: bit-identical energies and edge gradients, in both modes and both edge
// states, with one-hop (OwnerExchange) and multi-hop (ChainExchange) ghosts, on a cell where
// every atom is an image and on a supercell whose inner atoms never cross; the bytes each route
// moves; a sent list missing a needed row turns the energy non-finite. The host side alone (no
// GPU) is tests/test_ghost_rows.cpp. Every test skips without a usable GPU unless
// SEZM_GPU_TESTS_REQUIRED=1.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "api/potential.h"
#include "common/error.h"
#include "ghost_graph.h"
#include "model/weights.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

using namespace sezm_cuda_test;

#ifdef SEZM_HAVE_CUDA
// The mixed C/Cu cell (11.7 A, every atom an image within rcut 6) or its 2 x 2 x 2 supercell
// (23.4 A: the atoms deeper than 6 A inside are nobody's image), as a ghost graph.
struct GhostCase {
  sezm_test::Supercell cell;
  sezm_test::GhostGraph gg;
};
GhostCase ghost_case(int copies) {
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3];
  GhostCase g;
  g.cell = sezm_test::replicate(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), copies);
  const sezm::Graph el = sezm::build_graph(g.cell.pos.data(), g.cell.types.data(), g.cell.n, g.cell.cell.data(), 6.0);
  g.gg = sezm_test::make_ghost_graph(el, g.cell.pos.data(), g.cell.types.data());
  return g;
}

// Bytes the staging moves per call (forward and backward exchanges of every block): every row
// (owned rows down, ghosts up; all rows down and up), or the sent owned rows S and ghosts G
// (S + G forward; 2 S + G reverse).
double full_bytes(const sezm::ModelConfig& cfg, const sezm_test::GhostGraph& gg) {
  const double w = (cfg.lmax + 1) * (cfg.lmax + 1) * cfg.channels * 4.0;
  return cfg.n_blocks * w * (gg.n_total + 2.0 * gg.n_total);
}
double sent_bytes(const sezm::ModelConfig& cfg, const sezm_test::GhostGraph& gg, const std::vector<int>& sent) {
  const double w = (cfg.lmax + 1) * (cfg.lmax + 1) * cfg.channels * 4.0;
  double S = 0;
  for (int r : sent) S += r < gg.n_nodes;
  const double G = gg.n_total - gg.n_nodes;
  return cfg.n_blocks * w * ((S + G) + (2 * S + G));
}
#endif

// Parameter: bit 0 the mode (lean, fast), bit 1 the edge state (kept, per chunk).
class CudaGhostRows : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(ModesEdgeStates, CudaGhostRows, ::testing::Values(0, 1, 2, 3), [](const auto& info) {
  return std::string(mode_name(info.param & 1)) + (info.param & 2 ? "_chunk" : "_keep");
});

TEST_P(CudaGhostRows, SentRowsAreBitIdenticalToAllRows) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const sezm::ModelW<double> w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  sezm::CudaEngine gpu(w, 0, cuda_mode(GetParam() & 1));
  gpu.set_chunk_edges(700);  // several chunks
  gpu.set_edge_state(GetParam() & 2 ? sezm::EdgeState::kChunk : sezm::EdgeState::kKeep);
  for (int copies : {1, 2}) {
    SCOPED_TRACE("supercell " + std::to_string(copies));
    const GhostCase g = ghost_case(copies);
    const sezm::Graph& gv = g.gg.view();
    sezm_test::OwnerExchange<double> named(g.gg), unnamed(g.gg, false);
    if (copies == 2) ASSERT_LT(named.sent.size(), static_cast<size_t>(g.gg.n_nodes));  // rows that never cross
    const sezm::EngineResult a = gpu.compute(gv, true, &unnamed), b = gpu.compute(gv, true, &named);
    EXPECT_TRUE(std::isfinite(b.energy));
    EXPECT_EQ(a.atom_energy, b.atom_energy);
    EXPECT_EQ(a.edge_grad, b.edge_grad);
    EXPECT_EQ(a.exchange_bytes, full_bytes(w.cfg, g.gg));
    EXPECT_EQ(b.exchange_bytes, sent_bytes(w.cfg, g.gg, named.sent));
    EXPECT_GT(b.seconds_exchange, 0.0);
    EXPECT_LT(b.seconds_exchange, b.seconds_forward + b.seconds_backward);
    // energy only (forward exchanges alone), and a repeated call on the kept plan
    EXPECT_EQ(gpu.compute(gv, false, &unnamed).atom_energy, gpu.compute(gv, false, &named).atom_energy);
    EXPECT_EQ(gpu.compute(gv, true, &named).edge_grad, b.edge_grad);

    // multi-hop ghosts: the same with ghost rows forwarded onward
    sezm_test::ChainExchange<double> cnamed(g.gg), cunnamed(g.gg, false);
    ASSERT_GT(cnamed.forwarded_ghosts(), 0);
    const sezm::EngineResult ca = gpu.compute(gv, true, &cunnamed), cb = gpu.compute(gv, true, &cnamed);
    EXPECT_EQ(ca.atom_energy, cb.atom_energy);
    EXPECT_EQ(ca.edge_grad, cb.edge_grad);
    // against one hop: the same ghost values (energies to the bit); gradients folded in another order
    EXPECT_EQ(cb.atom_energy, b.atom_energy);
    const sezm::Evaluation eb = sezm::make_evaluation(gv, b, true, false), ecb = sezm::make_evaluation(gv, cb, true, false);
    EXPECT_LE(max_diff(sezm_test::fold_forces(g.gg, eb.forces), sezm_test::fold_forces(g.gg, ecb.forces)),
              1e-5 * max_abs(eb.forces));
  }
#endif
}

// A sent list missing a row the exchange reads: the host holds NaN there, so the ghosts that read
// it, and the energy, are non-finite (the front ends stop on it, naming an atom) instead of taking
// a stale number.
TEST(CudaGhostRowsMissing, MissingSentRowMakesTheEnergyNonFinite) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const sezm::ModelW<double> w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  sezm::CudaEngine gpu(w, 0, sezm::CudaMode::kLean);
  const GhostCase g = ghost_case(2);
  const sezm::Graph& gv = g.gg.view();
  sezm_test::OwnerExchange<double> ex(g.gg);
  EXPECT_TRUE(std::isfinite(gpu.compute(gv, false, &ex).energy));
  ex.sent.erase(ex.sent.begin() + ex.sent.size() / 2);
  const sezm::EngineResult r = gpu.compute(gv, true, &ex);
  EXPECT_FALSE(std::isfinite(r.energy));
  EXPECT_THROW(sezm::require_finite_result(gv, r), sezm::AtomError);
#endif
}

}  // namespace
