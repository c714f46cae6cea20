// Engine-assembled forces (Engine::compute_forces, EngineResult::forces): add_forces_virial and
// require_finite_result on such a result (CPU, no engine), the default compute_forces (the CPU
// engine returns dE/dv), and the CUDA engine's device assembly (cuda/force_assembly.cu) against
// the host's assemble_forces_virial on the same dE/dv: with one chunk and several, the edge state
// kept and per chunk, through ghost rows (CudaForceAssembly), a committee follower, and a bridged
// model, whose forces stay on the host (CudaForces). The GPU tests skip without a usable GPU
// (cuda_test_util.h).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "api/engine_factory.h"
#include "api/potential.h"
#include "common/error.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "ghost_graph.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

using namespace sezm_cuda_test;

sezm::Graph two_edge_graph() {
  sezm::Graph g;
  g.n_nodes = g.n_total = 3;
  g.src = {1, 2};
  g.dst = {0, 1};
  g.dst_offsets = {0, 1, 2, 2};
  g.vec = {1, 0, 0, 0, 1, 0};
  g.types = {0, 0, 0};
  return g;
}

// A result that carries its forces is added as it is; one without them is assembled from dE/dv.
TEST(ForceAssembly, AddForcesVirialTakesEitherResult) {
  const sezm::Graph g = two_edge_graph();
  sezm::EngineResult edges;
  edges.edge_grad = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  std::vector<double> f0(9, 1.0), w0(9, 2.0), a0(27, 3.0);
  sezm::assemble_forces_virial(g, edges.edge_grad.data(), f0.data(), w0.data(), a0.data());
  std::vector<double> f1(9, 1.0), w1(9, 2.0), a1(27, 3.0);
  sezm::add_forces_virial(g, edges, f1.data(), w1.data(), a1.data());
  EXPECT_EQ(f0, f1);
  EXPECT_EQ(w0, w1);
  EXPECT_EQ(a0, a1);

  sezm::EngineResult assembled;
  assembled.forces.assign(9, 0.5);
  assembled.virial.assign(9, 0.25);
  std::vector<double> f(9, 1.0), w(9, 2.0);
  sezm::add_forces_virial(g, assembled, f.data(), w.data(), nullptr);
  EXPECT_EQ(f, std::vector<double>(9, 1.5));
  EXPECT_EQ(w, std::vector<double>(9, 2.25));
  std::vector<double> a(27, 0.0);
  EXPECT_THROW(sezm::add_forces_virial(g, assembled, f.data(), w.data(), a.data()), sezm::Error);
  assembled.atom_virial.assign(27, 0.125);
  sezm::add_forces_virial(g, assembled, f.data(), w.data(), a.data());
  EXPECT_EQ(a, std::vector<double>(27, 0.125));
}

// A non-finite assembled force is an error naming its atom.
TEST(ForceAssembly, NonFiniteAssembledForceNamesTheAtom) {
  const sezm::Graph g = two_edge_graph();
  sezm::EngineResult r;
  r.atom_energy = {-1, -2, -3};
  r.forces.assign(9, 0.0);
  r.virial.assign(9, 0.0);
  EXPECT_NO_THROW(sezm::require_finite_result(g, r));
  r.forces[7] = NAN;
  try {
    sezm::require_finite_result(g, r);
    ADD_FAILURE() << "no error for a NaN force";
  } catch (const sezm::AtomError& e) {
    EXPECT_EQ(e.atom(), 2);
    EXPECT_EQ(e.other(), -1);
  }
}

// The default compute_forces (the CPU engine) is compute(g, true): dE/dv, no forces.
TEST(ForceAssembly, CpuEngineReturnsEdgeGradients) {
  const std::unique_ptr<sezm::Engine> e =
      sezm::make_engine(sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt")), {});
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3];
  const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), 6.0);
  const sezm::EngineResult a = e->compute_forces(g, true), b = e->compute(g, true);
  EXPECT_TRUE(a.forces.empty());
  EXPECT_EQ(a.edge_grad, b.edge_grad);
}

#ifdef SEZM_HAVE_CUDA
struct Small {
  sezm::test::RefConfig c;
  sezm::ModelW<double> w;
  sezm::Graph g;
};
Small small_system() {
  Small s{sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3], {}, {}};
  s.w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  s.g = sezm::build_graph(s.c.coords.data(), s.c.types.data(), s.c.natoms, s.c.cell.data(), 6.0);
  return s;
}

// The device's forces, virial and per-atom virial against the host's assembly of the same
// engine's dE/dv (the engine repeats its dE/dv to the bit). Forces: the host's single-thread
// order (under 65,536 edges), so equal to the bit; the virials: other orders, equal to rounding.
void expect_matches_host(sezm::CudaEngine& gpu, const sezm::Graph& g, sezm::FeatureExchange<double>* ex_edges,
                         sezm::FeatureExchange<double>* ex_forces, sezm::FeatureExchange<double>* ex_atoms,
                         const std::string& what) {
  ASSERT_LT(g.n_edges(), 65536) << what;
  const sezm::EngineResult r = gpu.compute(g, true, ex_edges);
  const size_t n3 = 3 * static_cast<size_t>(g.n_total), n9 = 9 * static_cast<size_t>(g.n_total);
  std::vector<double> f(n3, 0.0), w(9, 0.0), fa(n3, 0.0), wa(9, 0.0), av(n9, 0.0);
  sezm::assemble_forces_virial(g, r.edge_grad.data(), f.data(), w.data(), nullptr);
  sezm::assemble_forces_virial(g, r.edge_grad.data(), fa.data(), wa.data(), av.data());

  const sezm::EngineResult d = gpu.compute_forces(g, false, ex_forces);
  EXPECT_TRUE(d.edge_grad.empty()) << what;
  EXPECT_TRUE(d.atom_virial.empty()) << what;
  EXPECT_EQ(d.atom_energy, r.atom_energy) << what;
  EXPECT_EQ(d.forces, f) << what;
  ASSERT_EQ(d.virial.size(), 9u) << what;
  EXPECT_LE(max_diff(d.virial, w), 1e-10 * max_abs(w)) << what;

  const sezm::EngineResult da = gpu.compute_forces(g, true, ex_atoms);
  EXPECT_EQ(da.forces, d.forces) << what;  // repeatable, and the same sums with the per-atom virial
  EXPECT_EQ(da.virial, d.virial) << what;
  ASSERT_EQ(da.atom_virial.size(), n9) << what;
  // The host's per-atom pass adds each node's terms in edge order, in-edges and source edges
  // interleaved: other orders than the device's, so equal to rounding (with cancellation).
  EXPECT_LE(max_diff(da.forces, fa), 1e-9 * max_abs(fa)) << what;
  EXPECT_LE(max_diff(da.atom_virial, av), 1e-9 * max_abs(av)) << what;
  // The per-atom virial sums to the virial.
  for (int k = 0; k < 9; ++k) {
    double s = 0, sa = 0;
    for (int i = 0; i < g.n_total; ++i) {
      s += da.atom_virial[9 * static_cast<size_t>(i) + k];
      sa += std::fabs(da.atom_virial[9 * static_cast<size_t>(i) + k]);
    }
    EXPECT_NEAR(s, da.virial[k], 1e-9 * sa + 1e-300) << what << " component " << k;
  }
}
#endif

class CudaForceAssembly : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Modes, CudaForceAssembly, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

TEST_P(CudaForceAssembly, DeviceForcesMatchHostAssembly) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine gpu(s.w, 0, cuda_mode(GetParam()));
  expect_matches_host(gpu, s.g, nullptr, nullptr, nullptr, "one chunk");
  // Several chunks (a source's edges in several segments), then many (short segments batched).
  gpu.set_chunk_edges(700);
  expect_matches_host(gpu, s.g, nullptr, nullptr, nullptr, "chunks of 700 edges");
  gpu.set_chunk_edges(60);
  expect_matches_host(gpu, s.g, nullptr, nullptr, nullptr, "chunks of 60 edges");
  gpu.set_chunk_edges(700);
  gpu.set_edge_state(sezm::EdgeState::kChunk);
  expect_matches_host(gpu, s.g, nullptr, nullptr, nullptr, "edge state per chunk");
  // Ghost rows: forces on the ghosts too (the caller folds them into their owners).
  const sezm_test::GhostGraph gg = sezm_test::make_ghost_graph(s.g, s.c.coords.data(), s.c.types.data());
  ASSERT_GT(gg.n_total, gg.n_nodes);
  sezm_test::OwnerExchange<double> e1(gg), e2(gg), e3(gg);
  gpu.set_edge_state(sezm::EdgeState::kKeep);
  expect_matches_host(gpu, gg.view(), &e1, &e2, &e3, "ghost rows");
#endif
}

// A committee follower on the leader's geometry assembles the same forces as on its own.
TEST(CudaForces, CommitteeFollowerMatchesItsOwnCall) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Small s = small_system();
  sezm::CudaEngine lead(s.w, 0, sezm::CudaMode::kLean), follower(s.w, 0, sezm::CudaMode::kLean),
      alone(s.w, 0, sezm::CudaMode::kLean);
  lead.compute_forces(s.g, false);
  const sezm::EngineResult a = follower.compute_forces_like(lead, s.g, false);
  EXPECT_EQ(follower.last_geometry_share(), sezm::GeometryShare::kAll);
  const sezm::EngineResult b = alone.compute_forces(s.g, false);
  EXPECT_EQ(a.forces, b.forces);
  EXPECT_EQ(a.virial, b.virial);
#endif
}

// A bridged model maps dE/dv on the host (cuda/bridging.cuh): compute_forces returns dE/dv, the
// same as compute(g, true).
TEST(CudaForces, BridgedModelReturnsEdgeGradients) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const sezm::ModelW<double> w = sezm::load_model_weights(sezm_test::data_path("recipes/zbl_plain_f64.pt"));
  const std::vector<int> types = {0, 3, 2, 3, 1, 0, 2};
  const std::vector<double> pos = {0, 0, 0,  0.42, 0.05, 0.1,  2.1, 0.2, -0.3,  2.3, 0.75, -0.2,  -0.4, 2.2, 0.6,
                                   0.2, 2.3, 1.3,  -1.9, -0.8, 1.1};
  const sezm::Graph g = sezm::build_graph(pos.data(), types.data(), 7, nullptr, w.cfg.rcut);
  sezm::CudaEngine gpu(w, 0, sezm::CudaMode::kLean);
  const sezm::EngineResult a = gpu.compute_forces(g, false), b = gpu.compute(g, true);
  EXPECT_TRUE(a.forces.empty());
  EXPECT_EQ(a.edge_grad, b.edge_grad);
#endif
}

}  // namespace
