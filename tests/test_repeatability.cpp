// The CPU engine gives the same bits on any number of threads, and so repeats itself to the bit
// (a LAMMPS run repeats itself whatever OMP_NUM_THREADS is): every sum over edges that lands on
// one value runs in edge order, as one thread adds it. The source-side sums of the block backward
// go edge by edge after each wave of tiles (engine/interaction_block.h), the force assembly's by
// ranges of sources (engine/engine.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/sezm_model.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// n OpenMP threads for the scope.
class Threads {
 public:
#ifdef _OPENMP
  explicit Threads(int n) : n_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(n_); }

 private:
  int n_;
#else
  explicit Threads(int) {}
#endif
};

// At least four threads: more than CI's two cores, so that they finish their tiles in a
// different order from run to run.
int at_least_four_threads() {
#ifdef _OPENMP
  return omp_get_max_threads() < 4 ? 4 : omp_get_max_threads();
#else
  return 1;
#endif
}

// The float64 test model and its reference set's 64-atom rattled diamond (10,112 edges, ~40 tiles).
struct Diamond64 {
  std::unique_ptr<sezm::SezmEngine<double>> engine;
  sezm::Graph g;
};
Diamond64 diamond64() {
  const std::string mp = sezm_test::data_path("c32_l3_f2_float64.pt");
  const sezm::Checkpoint ck = sezm::read_checkpoint(mp);
  const sezm::ModelConfig cfg = sezm::parse_model_config(ck.model_params, mp);
  const auto ref = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json"));
  const auto& c = ref.configs.at(0);
  EXPECT_EQ(c.name, "diamond64_rattled");
  Diamond64 d{std::make_unique<sezm::SezmEngine<double>>(sezm::load_weights<double>(ck, cfg)),
              sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.periodic ? c.cell.data() : nullptr,
                                cfg.rcut)};
  return d;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST(Repeatability, CpuEngineRepeatsItselfToTheBitOnSeveralThreads) {
  const Threads threads(at_least_four_threads());
  const Diamond64 d = diamond64();
  const sezm::EngineResult first = d.engine->compute(d.g, true);
  for (int run = 0; run < 2; ++run) {
    const sezm::EngineResult again = d.engine->compute(d.g, true);
    EXPECT_TRUE(same_bits(first.atom_energy, again.atom_energy)) << "run " << run;
    EXPECT_TRUE(same_bits(first.edge_grad, again.edge_grad)) << "run " << run;
  }
}

TEST(Repeatability, CpuEngineGivesTheSameBitsOnAnyThreadCount) {
  const Diamond64 d = diamond64();
  sezm::EngineResult one;
  {
    const Threads threads(1);
    one = d.engine->compute(d.g, true);
  }
  // 3 and 7 do not divide the ~40 tiles: a last wave with idle threads.
  for (const int n : {2, 3, 7}) {
    const Threads threads(n);
    const sezm::EngineResult r = d.engine->compute(d.g, true);
    EXPECT_TRUE(same_bits(one.atom_energy, r.atom_energy)) << n << " threads";
    EXPECT_TRUE(same_bits(one.edge_grad, r.edge_grad)) << n << " threads";
  }
}

// The forces assemble_forces_virial must give: per atom, f0 plus its destination sum in edge order,
// then its source sum in edge order; wv -= the virial's sums. (A function of its own: written in
// the test body, GCC 12 warned -Wfree-nonheap-object on its vectors, a false positive.)
namespace {
std::vector<double> edge_order_assembly(const sezm::Graph& g, const std::vector<double>& ge,
                                        const std::vector<double>& f0, double (&wv)[9]) {
  const size_t E = static_cast<size_t>(g.n_edges());
  std::vector<double> own(f0.size(), 0.0), srcs(f0.size(), 0.0), want(f0);
  for (size_t e = 0; e < E; ++e)
    for (int a = 0; a < 3; ++a) {
      own[3 * static_cast<size_t>(g.dst[e]) + a] += ge[3 * e + a];
      srcs[3 * static_cast<size_t>(g.src[e]) + a] -= ge[3 * e + a];
      for (int j = 0; j < 3; ++j) wv[3 * a + j] -= ge[3 * e + a] * g.vec[3 * e + j];
    }
  for (size_t k = 0; k < want.size(); ++k) {
    if (k < 3 * static_cast<size_t>(g.n_nodes)) want[k] += own[k];
    want[k] += srcs[k];
  }
  return want;
}
}  // namespace

// The force assembly of a graph large enough for its threaded path (>= 65536 edges) against the
// plain edge-order sums, on 1 to 8 threads.
TEST(Repeatability, ForceAssemblyIsTheEdgeOrderSumOnAnyThreadCount) {
  std::mt19937 rng(7);
  sezm::Graph g;
  g.n_nodes = 3000;
  g.n_total = 4000;  // sources among ghosts too
  const int per = 40;
  std::uniform_int_distribution<int> src(0, g.n_total - 1);
  std::normal_distribution<double> nd(0.0, 1.0);
  g.dst_offsets.push_back(0);
  for (int i = 0; i < g.n_nodes; ++i) {
    for (int k = 0; k < per; ++k) {
      g.dst.push_back(i);
      g.src.push_back(src(rng));
      for (int a = 0; a < 3; ++a) g.vec.push_back(nd(rng));
    }
    g.dst_offsets.push_back(static_cast<int>(g.dst.size()));
  }
  g.types.assign(g.n_total, 0);
  const int E = g.n_edges();
  ASSERT_GE(E, 65536);
  std::vector<double> ge(3 * static_cast<size_t>(E));
  for (double& x : ge) x = nd(rng);
  std::vector<double> f0(3 * static_cast<size_t>(g.n_total));
  for (double& x : f0) x = nd(rng);  // LAMMPS may hand in forces of other styles

  double wv[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<double> want = edge_order_assembly(g, ge, f0, wv);
  // The virial's products may be contracted into FMAs differently here and in the engine: its
  // sums are compared to the bit across thread counts, and to these to rounding.
  std::vector<double> w1;
  for (const int n : {1, 2, 3, 8}) {
    const Threads threads(n);
    std::vector<double> f(f0), w(9, 0.0);
    sezm::assemble_forces_virial(g, ge.data(), f.data(), w.data(), nullptr);
    EXPECT_TRUE(same_bits(want, f)) << n << " threads";
    if (w1.empty()) w1 = w;
    EXPECT_TRUE(same_bits(w1, w)) << n << " threads";
    for (int k = 0; k < 9; ++k) EXPECT_NEAR(w[k], wv[k], 1e-12 * E) << n << " threads, virial " << k;
  }
}
