// Run-time checks of the library (docs/errors.md, "Run time"): coincident atoms and non-finite
// coordinates in the standalone neighbour search (sezm::AtomError naming the atoms by index), a
// non-finite engine result, and exceptions thrown inside OpenMP regions reaching the caller
// instead of std::terminate. sezm-eval's use of them is in test_sezm_eval.cpp, the pair style's
// in tests/lammps (err_coincident.in, err_nan_position.in).
#include <gtest/gtest.h>

#include <cmath>
#include <new>
#include <stdexcept>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/threads.h"
#include "io/structure.h"
#include "neighbor/neighbor_list.h"
#include "test_util.h"

using namespace sezm_test;

namespace {

// The AtomError build_graph throws (a test failure if it returns or throws anything else).
sezm::AtomError graph_error(const std::vector<double>& pos, const double* cell) {
  const std::vector<int> types(pos.size() / 3, 0);
  try {
    sezm::build_graph(pos.data(), types.data(), static_cast<int>(types.size()), cell, 6.0);
  } catch (const sezm::AtomError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a sezm::AtomError";
  return sezm::AtomError("none", "", -1);
}

}  // namespace

TEST(RuntimeChecks, CoincidentAtomsAreAnErrorNamingBoth) {
  // Atoms 2 and 0 of three, 3e-6 Å apart (the pair used to be dropped silently).
  const sezm::AtomError open = graph_error({0, 0, 0, 1.5, 0, 0, 0, 3e-6, 0}, nullptr);
  EXPECT_EQ(open.atom(), 0);
  EXPECT_EQ(open.other(), 2);
  EXPECT_EQ(std::string(open.what()),
            "neighbour list: atoms 0 and 2 are coincident: distance 3e-06 Å, below 1e-05 Å (remove the duplicate atom)");
  // Through a periodic image: atom 1 sits one lattice vector from atom 0.
  const double cell[9] = {4, 0, 0, 0, 4, 0, 0, 0, 4};
  const sezm::AtomError image = graph_error({0.5, 0.5, 0.5, 0.5, 4.5, 0.5 + 2e-6}, cell);
  EXPECT_EQ(image.atom(), 0);
  EXPECT_EQ(image.other(), 1);
  EXPECT_NE(image.reason().find("are coincident through the periodic image (0, -1, 0): distance 2e-06 Å"),
            std::string::npos)
      << image.what();
  // Just above the threshold: an edge pair; a lone atom's periodic self-images are edges, no error.
  const std::vector<double> apart{0, 0, 0, 0, 0, 1.01e-5};
  const std::vector<int> types{0, 0};
  EXPECT_EQ(sezm::build_graph(apart.data(), types.data(), 2, nullptr, 6.0).n_edges(), 2);
  const double one[3] = {0.1, 0.2, 0.3};
  EXPECT_GT(sezm::build_graph(one, types.data(), 1, cell, 6.0).n_edges(), 0);
}

TEST(RuntimeChecks, NonFiniteCoordinateNamesTheAtom) {
  const sezm::AtomError e = graph_error({0, 0, 0, 1, 1, 1, 2, INFINITY, 2}, nullptr);
  EXPECT_EQ(e.atom(), 2);
  EXPECT_EQ(e.other(), -1);
  EXPECT_EQ(std::string(e.what()), "neighbour list: atom 2 has a non-finite coordinate y = inf");
}

// A NaN energy or edge gradient from an engine (non-finite weights, an overflow) is an error
// naming the atom(s), never a number on the output.
TEST(RuntimeChecks, NonFiniteResultIsAnError) {
  sezm::Graph g;
  g.n_nodes = g.n_total = 3;
  g.src = {1, 2};
  g.dst = {0, 1};
  g.dst_offsets = {0, 1, 2, 2};
  g.vec = {1, 0, 0, 0, 1, 0};
  g.types = {0, 0, 0};
  sezm::EngineResult r;
  r.atom_energy = {-1, -2, -3};
  r.edge_grad = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  EXPECT_NO_THROW(sezm::require_finite_result(g, r));
  r.edge_grad[4] = NAN;
  try {
    sezm::require_finite_result(g, r);
    ADD_FAILURE() << "no error for a NaN edge gradient";
  } catch (const sezm::AtomError& e) {
    EXPECT_EQ(e.atom(), 1);  // edge 1: 2 -> 1
    EXPECT_EQ(e.other(), 2);
  }
  r.atom_energy[1] = -INFINITY;
  try {
    sezm::require_finite_result(g, r);
    ADD_FAILURE() << "no error for an infinite energy";
  } catch (const sezm::AtomError& e) {
    EXPECT_EQ(e.atom(), 1);
    EXPECT_EQ(e.other(), -1);
    EXPECT_NE(std::string(e.what()).find("engine result: atom 1 has a non-finite energy (-inf eV)"), std::string::npos)
        << e.what();
  }
}

// An exception inside an OpenMP region used to call std::terminate (the process aborted on a
// std::bad_alloc in an edge tile); ParallelErrors hands the first one to the caller, type intact.
TEST(RuntimeChecks, ExceptionsLeaveOpenMPRegionsIntact) {
  sezm::ParallelErrors errors;
  int done = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : done)
  for (int i = 0; i < 64; ++i)
    errors.run([&] {
      if (i == 5) throw std::bad_alloc();
      ++done;
    });
  EXPECT_THROW(errors.rethrow(), std::bad_alloc);
  EXPECT_LE(done, 63);
  sezm::ParallelErrors none;
#pragma omp parallel for
  for (int i = 0; i < 8; ++i) none.run([] {});
  EXPECT_NO_THROW(none.rethrow());
}

// Structure files remember the line of each atom, which sezm-eval names in its errors.
TEST(RuntimeChecks, StructureAtomLines) {
  const std::string xyz = temp_path(".xyz");
  write_file(xyz, "2\n\nC 0 0 0\nC 1 1 1\n");
  EXPECT_EQ(sezm::read_extxyz(xyz).lines, (std::vector<size_t>{3, 4}));
  const std::string data = temp_path(".data");
  write_file(data, "title\n\n2 atoms\n1 atom types\n0 5 xlo xhi\n0 5 ylo yhi\n0 5 zlo zhi\n\nAtoms # atomic\n\n"
                   "2 1 1 1 1\n1 1 0 0 0\n");
  EXPECT_EQ(sezm::read_lammps_data(data, {"C"}).lines, (std::vector<size_t>{12, 11}));  // sorted by id
}
