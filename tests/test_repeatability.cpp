// The CPU engine is repeatable to the bit on several threads: two calls on one graph give the same
// energies and edge gradients (so a LAMMPS run repeats itself at a given thread count). Its block
// backward sums each thread's share of the edge tiles' source-side terms per thread and then adds
// the threads in order (engine/interaction_block.h), which is repeatable only when the tiles go to
// the threads in a fixed way (static schedule).
#include <gtest/gtest.h>

#include <cstring>
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

// At least four OpenMP threads for the scope (more than CI's two cores: the threads then finish
// their tiles in a different order from run to run).
class FourThreads {
 public:
#ifdef _OPENMP
  FourThreads() : n_(omp_get_max_threads()) { omp_set_num_threads(n_ < 4 ? 4 : n_); }
  ~FourThreads() { omp_set_num_threads(n_); }

 private:
  int n_;
#endif
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST(Repeatability, CpuEngineRepeatsItselfToTheBitOnSeveralThreads) {
  const FourThreads threads;
  const std::string mp = sezm_test::data_path("c32_l3_f2_float64.pt");
  const sezm::Checkpoint ck = sezm::read_checkpoint(mp);
  const sezm::ModelConfig cfg = sezm::parse_model_config(ck.model_params, mp);
  const sezm::SezmEngine<double> engine(sezm::load_weights<double>(ck, cfg));
  const auto ref = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json"));
  const auto& c = ref.configs.at(0);  // diamond64_rattled: 64 atoms, 10,112 edges, ~40 tiles
  ASSERT_EQ(c.name, "diamond64_rattled");
  const sezm::Graph g =
      sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.periodic ? c.cell.data() : nullptr, cfg.rcut);
  const sezm::EngineResult first = engine.compute(g, true);
  for (int run = 0; run < 2; ++run) {
    const sezm::EngineResult again = engine.compute(g, true);
    EXPECT_TRUE(same_bits(first.atom_energy, again.atom_energy)) << "run " << run;
    EXPECT_TRUE(same_bits(first.edge_grad, again.edge_grad)) << "run " << run;
  }
}
