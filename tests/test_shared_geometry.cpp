// A committee computes one per-edge geometry for its models (Engine::compute_like,
// engine/engine.h; docs/lammps.md, "Model deviation"): a follower that takes its leader's geometry
// (all of it, or all but the radial basis where the trained basis frequencies differ) gives the
// numbers it computes alone, to the bit (the same code computes the same geometry); what it took
// is observable (last_geometry_share); it takes nothing where the geometry differs (another
// cutoff, ZBL bridging), from a leader that did not keep it or computed another graph, or from
// an engine of another kind. The committee is tests/data/model_devi (mini_f64 and perturbed
// copies, whose frequencies are perturbed too) on its frames. CUDA twins at the end; they skip
// without a GPU (cuda_test_util.h).
//
// The CPU tests run on one thread, so that their bitwise comparisons hold whatever the machine's
// thread count (the engine repeats itself to the bit at any fixed count: test_repeatability.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/potential.h"
#include "cuda_test_util.h"
#include "engine/edge_geometry.h"
#include "engine/sezm_model.h"
#include "neighbor/neighbor_list.h"
#include "test_util.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

using sezm::GeometryShare;

// One OpenMP thread for the scope (the CPU engine's results are then repeatable to the bit).
class OneThread {
 public:
#ifdef _OPENMP
  OneThread() : n_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(n_); }

 private:
  int n_;
#endif
};

struct Frame {
  std::vector<double> coords, cell;
  std::vector<int> types;
};

std::vector<Frame> frames() {
  std::ifstream f(sezm_test::data_path("model_devi/ref_model_devi.json"));
  const nlohmann::json ref = nlohmann::json::parse(f);
  std::vector<Frame> out;
  for (const auto& fr : ref["frames"])
    out.push_back({fr["coords"].get<std::vector<double>>(), fr["cell"].get<std::vector<double>>(),
                   fr["types"].get<std::vector<int>>()});
  return out;
}

sezm::Graph graph_of(const Frame& f, double rcut) {
  return sezm::build_graph(f.coords.data(), f.types.data(), static_cast<int>(f.types.size()), f.cell.data(), rcut);
}

sezm::ModelW<double> weights(const std::string& rel) { return sezm::load_model_weights(sezm_test::data_path(rel)); }

// The committee's models: the leader (mini_f64), the perturbed copies (their own frequencies),
// and mini_devi1 with the leader's frequencies (a member whose basis was not trained apart).
struct Committee {
  sezm::ModelW<double> lead = weights("recipes/mini_f64.pt");
  std::vector<sezm::ModelW<double>> others;
  Committee() {
    for (const char* p : {"model_devi/mini_devi1.pt", "model_devi/mini_devi2.pt", "model_devi/mini_devi3.pt"})
      others.push_back(weights(p));
    others.push_back(others[0]);
    others.back().freqs = lead.freqs;
  }
};

// Counts the elements that differ at all, so that a failure prints one line per array.
void expect_identical(const sezm::EngineResult& a, const sezm::EngineResult& b, const std::string& what) {
  EXPECT_EQ(a.energy, b.energy) << what;
  ASSERT_EQ(a.atom_energy.size(), b.atom_energy.size()) << what;
  ASSERT_EQ(a.edge_grad.size(), b.edge_grad.size()) << what;
  size_t na = 0, ng = 0;
  for (size_t i = 0; i < a.atom_energy.size(); ++i) na += a.atom_energy[i] != b.atom_energy[i];
  for (size_t i = 0; i < a.edge_grad.size(); ++i) ng += a.edge_grad[i] != b.edge_grad[i];
  EXPECT_EQ(na, 0u) << what << ": per-atom energies that differ";
  EXPECT_EQ(ng, 0u) << what << ": edge gradient components that differ";
}

TEST(SharedGeometry, KeyNamesWhatTheGeometryReads) {
  const Committee c;
  EXPECT_EQ(sezm::edge_geometry_share(c.lead, c.lead), GeometryShare::kAll);
  EXPECT_EQ(sezm::edge_geometry_share(c.lead, c.others[3]), GeometryShare::kAll);
  for (int m = 0; m < 3; ++m)  // the copies' frequencies are perturbed with every other parameter
    EXPECT_EQ(sezm::edge_geometry_share(c.lead, c.others[m]), GeometryShare::kExceptRadialBasis) << m;
  EXPECT_EQ(sezm::edge_geometry_share(c.lead, weights("recipes/zbl_mini_f64.pt")), GeometryShare::kNone);
  const auto changed = [&](auto edit) {
    sezm::ModelW<double> w = c.lead;
    edit(w);
    return sezm::edge_geometry_share(c.lead, w);
  };
  EXPECT_EQ(changed([](auto& w) { w.cfg.rcut -= 0.5; }), GeometryShare::kNone);
  EXPECT_EQ(changed([](auto& w) { w.cfg.eps *= 2; }), GeometryShare::kNone);
  EXPECT_EQ(changed([](auto& w) { w.cfg.lmax -= 1; }), GeometryShare::kNone);
  EXPECT_EQ(changed([](auto& w) { w.cfg.env_exp_edge += 1; }), GeometryShare::kNone);
  EXPECT_EQ(changed([](auto& w) { w.cfg.zbl = true; }), GeometryShare::kNone);
  EXPECT_EQ(changed([](auto& w) { w.cfg.env_exp_rbf += 1; }), GeometryShare::kExceptRadialBasis);
  EXPECT_EQ(changed([](auto& w) { w.freqs[0] *= 1.0 + 1e-15; }), GeometryShare::kExceptRadialBasis);
  EXPECT_EQ(changed([](auto& w) { w.cfg.n_radial += 1; }), GeometryShare::kExceptRadialBasis);
}

// Every follower on every frame (energies and forces, and one energy-only call) against the same
// model alone; the leader's own result does not change when it keeps its geometry.
TEST(SharedGeometry, FollowersMatchTheirOwnComputeToTheBit) {
  const OneThread one_thread;
  const Committee c;
  sezm::CpuEngine lead(c.lead), lead_alone(c.lead);
  lead.keep_geometry(true);
  const GeometryShare expect[4] = {GeometryShare::kExceptRadialBasis, GeometryShare::kExceptRadialBasis,
                                   GeometryShare::kExceptRadialBasis, GeometryShare::kAll};
  const std::vector<Frame> fs = frames();
  int calls = 0;
  for (size_t f = 0; f < fs.size(); ++f) {
    const sezm::Graph g = graph_of(fs[f], c.lead.cfg.rcut);
    const bool grad = f != 1;
    expect_identical(lead.compute(g, grad), lead_alone.compute(g, grad), "leader, frame " + std::to_string(f));
    EXPECT_EQ(lead.last_geometry_share(), GeometryShare::kNone);
    for (size_t m = 0; m < c.others.size(); ++m) {
      sezm::CpuEngine follower(c.others[m]), alone(c.others[m]);
      const sezm::EngineResult shared = follower.compute_like(lead, g, grad);
      EXPECT_EQ(follower.last_geometry_share(), expect[m]) << "model " << m << " frame " << f;
      expect_identical(shared, alone.compute(g, grad), "model " + std::to_string(m) + " frame " + std::to_string(f));
      EXPECT_EQ(follower.compute(g, grad).energy, shared.energy);
      EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone);  // a plain compute takes nothing
      ++calls;
    }
  }
  EXPECT_EQ(calls, 16);
}

// A follower of a follower: model 3 on the geometry model 2 made (its own radial basis) or took.
TEST(SharedGeometry, AFollowerThatKeepsLeadsInTurn) {
  const OneThread one_thread;
  const Committee c;
  const sezm::Graph g = graph_of(frames()[2], c.lead.cfg.rcut);
  sezm::CpuEngine lead(c.lead), mid(c.others[3]), last(c.others[1]), alone(c.others[1]);
  lead.keep_geometry(true);
  mid.keep_geometry(true);
  lead.compute(g, true);
  mid.compute_like(lead, g, true);
  EXPECT_EQ(mid.last_geometry_share(), GeometryShare::kAll);
  expect_identical(last.compute_like(mid, g, true), alone.compute(g, true), "follower of a follower");
  EXPECT_EQ(last.last_geometry_share(), GeometryShare::kExceptRadialBasis);
}

TEST(SharedGeometry, NothingSharedWhereTheGeometryDiffers) {
  const OneThread one_thread;
  const Committee c;
  const std::vector<Frame> fs = frames();
  const sezm::Graph g0 = graph_of(fs[0], c.lead.cfg.rcut), g1 = graph_of(fs[1], c.lead.cfg.rcut);
  sezm::CpuEngine lead(c.lead);
  const auto check = [&](const sezm::ModelW<double>& w, const sezm::Graph& g, const std::string& what) {
    sezm::CpuEngine follower(w), alone(w);
    expect_identical(follower.compute_like(lead, g, true), alone.compute(g, true), what);
    EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone) << what;
  };
  lead.compute(g0, true);
  check(c.others[3], g0, "a leader that did not keep its geometry");
  lead.keep_geometry(true);
  lead.compute(g0, true);
  sezm::ModelW<double> other_cutoff = c.others[3];
  other_cutoff.cfg.rcut += 0.5;  // the leader's edges are all within it
  check(other_cutoff, g0, "another cutoff");
  check(weights("recipes/zbl_mini_f64.pt"), g0, "a ZBL model");
  check(c.others[3], g1, "a leader that computed another graph");
  // The same edges in another copy of the graph: the guard compares the edge vectors' address.
  const sezm::Graph g0_copy = g0;
  check(c.others[3], g0_copy, "another copy of the leader's graph");
  // A ZBL leader keeps nothing to share.
  sezm::CpuEngine zbl(weights("recipes/zbl_mini_f64.pt"));
  zbl.keep_geometry(true);
  zbl.compute(g0, true);
  sezm::CpuEngine follower(c.lead);
  follower.compute_like(zbl, g0, true);
  EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone);
  // keep_geometry(false) lets the geometry go.
  lead.compute(g0, true);
  lead.keep_geometry(false);
  follower.compute_like(lead, g0, true);
  EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone);
}

// CUDA: a CudaEngine follower on the same device copies the leader's uploaded graph and geometry
// (all, or all but the radial basis, which it computes with the kernel the leader's geometry
// uses); the same kernels then run on the same numbers, so the result is expected to be
// bitwise that of the follower alone, in both modes.
TEST(CudaSharedGeometry, FollowersMatchTheirOwnComputeToTheBit) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Committee c;
  const std::vector<Frame> fs = frames();
  for (int mode = 0; mode < 2; ++mode) {
    sezm::CudaEngine lead(c.lead, 0, sezm_cuda_test::cuda_mode(mode));
    lead.keep_geometry(true);  // nothing to do on CUDA; harmless
    for (size_t f = 0; f < fs.size(); ++f) {
      const sezm::Graph g = graph_of(fs[f], c.lead.cfg.rcut);
      const bool grad = f != 1;
      lead.compute(g, grad);
      for (size_t m = 0; m < c.others.size(); ++m) {
        sezm::CudaEngine follower(c.others[m], 0, sezm_cuda_test::cuda_mode(mode));
        sezm::CudaEngine alone(c.others[m], 0, sezm_cuda_test::cuda_mode(mode));
        const std::string what = std::string(sezm_cuda_test::mode_name(mode)) + " model " + std::to_string(m) +
                                 " frame " + std::to_string(f);
        const sezm::EngineResult shared = follower.compute_like(lead, g, grad);
        EXPECT_EQ(follower.last_geometry_share(),
                  m == 3 ? GeometryShare::kAll : GeometryShare::kExceptRadialBasis) << what;
        expect_identical(shared, alone.compute(g, grad), what);
      }
    }
  }
#endif
}

// A leader or a follower whose call holds its edge state per chunk (EdgeState::kChunk: the
// leader's edge buffers hold one chunk, the follower computes its own per chunk) shares the
// graph only: no geometry share is reported, and each result is bitwise that of the engine alone.
TEST(CudaSharedGeometry, PerChunkEdgeStateSharesNoGeometry) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const Committee c;
  const sezm::Graph g = graph_of(frames()[0], c.lead.cfg.rcut);
  for (const bool lead_chunk : {true, false}) {
    sezm::CudaEngine lead(c.lead, 0, sezm::CudaMode::kLean);
    lead.set_edge_state(lead_chunk ? sezm::EdgeState::kChunk : sezm::EdgeState::kKeep);
    lead.compute(g, true);
    const sezm::EdgeState fs = lead_chunk ? sezm::EdgeState::kKeep : sezm::EdgeState::kChunk;
    sezm::CudaEngine follower(c.others[3], 0, sezm::CudaMode::kLean), alone(c.others[3], 0, sezm::CudaMode::kLean);
    follower.set_edge_state(fs);
    alone.set_edge_state(fs);
    const std::string what = lead_chunk ? "per-chunk leader" : "per-chunk follower";
    expect_identical(follower.compute_like(lead, g, true), alone.compute(g, true), what);
    EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone) << what;
  }
#endif
}

TEST(CudaSharedGeometry, NothingSharedAcrossKindsOrGraphs) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const OneThread one_thread;
  const Committee c;
  const std::vector<Frame> fs = frames();
  const sezm::Graph g0 = graph_of(fs[0], c.lead.cfg.rcut), g1 = graph_of(fs[1], c.lead.cfg.rcut);
  sezm::CpuEngine cpu_lead(c.lead);
  cpu_lead.keep_geometry(true);
  cpu_lead.compute(g0, true);
  sezm::CudaEngine follower(c.others[3], 0, sezm::CudaMode::kLean), alone(c.others[3], 0, sezm::CudaMode::kLean);
  expect_identical(follower.compute_like(cpu_lead, g0, true), alone.compute(g0, true), "CPU leader");
  EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone);
  sezm::CudaEngine lead(c.lead, 0, sezm::CudaMode::kLean);
  lead.compute(g0, true);
  expect_identical(follower.compute_like(lead, g1, true), alone.compute(g1, true), "another graph");
  EXPECT_EQ(follower.last_geometry_share(), GeometryShare::kNone);
  sezm::CpuEngine cpu_follower(c.others[3]);
  cpu_follower.compute_like(lead, g0, true);
  EXPECT_EQ(cpu_follower.last_geometry_share(), GeometryShare::kNone);
  sezm::CudaEngine zbl(weights("recipes/zbl_mini_f64.pt"), 0, sezm::CudaMode::kLean);
  zbl.compute_like(lead, g0, true);
  EXPECT_EQ(zbl.last_geometry_share(), GeometryShare::kNone);
#endif
}

}  // namespace
