// The FeatureExchange path of the CPU engine (what the LAMMPS glue drives with pair
// communication) must reproduce the standalone graph, where periodic images are edges onto owned
// atoms: same energy, per-atom energies, forces and virial.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ghost_graph.h"
#include "api/potential.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"

namespace {

TEST(FeatureExchange, GhostRowsReproduceImagesAsEdges) {
  const sezm::Potential pot = sezm::Potential::load(sezm_test::data_path("c32_l3_f2_float64.pt"));
  const auto ref = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json"));
  const auto& c = ref.configs[3];  // mixed C/Cu periodic cell
  ASSERT_TRUE(c.periodic);
  const sezm::Graph el = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), pot.config().rcut);
  const sezm::Graph& plain = el;
  const sezm::Evaluation a = sezm::make_evaluation(plain, pot.engine().compute(plain, true), true, false);

  const sezm_test::GhostGraph gg = sezm_test::make_ghost_graph(el, c.coords.data(), c.types.data());
  ASSERT_GT(gg.n_total, gg.n_nodes);  // the cell is periodic: images exist
  sezm_test::OwnerExchange<double> ex(gg);
  const sezm::Graph& gv = gg.view();
  const sezm::EngineResult rb = pot.engine().compute(gv, true, &ex);
  const sezm::Evaluation b = sezm::make_evaluation(gv, rb, true, false);
  const int nb = pot.config().n_blocks;
  EXPECT_EQ(ex.forwards, nb);
  EXPECT_EQ(ex.reverses, nb);
  EXPECT_EQ(rb.seconds_exchange, 0.0);  // the CPU engine exchanges its rows in place: no staging
  EXPECT_EQ(rb.exchange_bytes, 0.0);

  EXPECT_NEAR(a.energy, b.energy, 1e-10 * std::fabs(a.energy));
  for (int i = 0; i < c.natoms; ++i) EXPECT_NEAR(a.atom_energy[i], b.atom_energy[i], 1e-10);
  const std::vector<double> fb = sezm_test::fold_forces(gg, b.forces);
  double fmax = 0;
  for (double x : a.forces) fmax = std::max(fmax, std::fabs(x));
  for (int i = 0; i < 3 * c.natoms; ++i) EXPECT_NEAR(a.forces[i], fb[i], 1e-10 * fmax) << "component " << i;
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(a.virial[k], b.virial[k], 1e-10 * std::fabs(a.virial[0]) + 1e-12);
}

}  // namespace
