// The GIE's folded edge backward (cuda/gie_fold_backward.cu: C = 32, no rho, G handed to the radial
// backward as it is) on the one path the reference suites do not reach: a C = 32 model with ZBL
// bridging, whose source gate scales each edge's GIE term and whose gate adjoint the folded kernel
// forms. The recipes' ZBL checkpoint has C = 8 (the unfolded route), so the test turns bridging on
// for the C = 32 test model (c32_l3_f2: lmax 3, two foci, edge norm) and takes the learned part
// alone (Z = 0, as test_cuda.cpp's ZBL test: the pair term cannot hide an error of the gate). The
// independent route is the float64 CPU engine on the same fp32-rounded weights and bridging, on
// the ZBL reference cells (pairs inside r_outer, one inside r_inner), in chunks of 100 edges; both
// modes, both precisions, and the per-chunk edge state (the embedding's backward per chunk).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "api/potential.h"
#include "cuda_test_util.h"
#include "engine/sezm_model.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

using namespace sezm_cuda_test;

// Mode and precision: bit 0 fast, bit 1 `precision tf32`.
class CudaGieFold : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(ModesPrecisions, CudaGieFold, ::testing::Values(0, 1, 2, 3), [](const auto& info) {
  return std::string(mode_name(info.param & 1)) + precision_suffix(info.param >> 1);
});

TEST_P(CudaGieFold, BridgedC32ModelMatchesCpu) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const int p = GetParam();
  const double tol_e = p & 2 ? kTf32EnergyTol : 1e-6, tol_f = p & 2 ? kTf32ForceTol : 1e-5;
  sezm::ModelW<double> w = fp32_rounded_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  ASSERT_EQ(w.cfg.channels, 32);  // the folded route's width (gie_backward_folds)
  ASSERT_FALSE(w.cfg.zbl);
  const int ntypes = static_cast<int>(w.cfg.type_map.size());
  w.cfg.zbl = true;
  w.cfg.bridging_r_inner = 0.5;  // the recipes' values (ref_zbl_plain_f64.json, "bridging")
  w.cfg.bridging_r_outer = 0.8;
  w.zbl_z.assign(ntypes, 0.0);
  const sezm::SezmEngine<double> cpu(w);
  const auto ref = sezm::test::read_ref(sezm_test::data_path("recipes/ref_zbl_plain_f64.json"));
  for (const sezm::EdgeState state : {sezm::EdgeState::kKeep, sezm::EdgeState::kChunk}) {
    sezm::CudaEngine gpu(w, 0, cuda_mode(p & 1));
    gpu.set_precision(p & 2 ? sezm::Precision::kTf32 : sezm::Precision::kDeviceDefault);
    gpu.set_chunk_edges(100);
    gpu.set_edge_state(state);
    int checked = 0;
    for (const auto& c : ref.configs) {
      if (c.name.rfind("zbl_", 0) != 0) continue;  // zbl_open10, zbl_tric9, zbl_tric28
      SCOPED_TRACE(c.name + (state == sezm::EdgeState::kChunk ? " (edge state chunk)" : ""));
      std::vector<int> types(c.types);
      for (int& t : types) t %= ntypes;  // the cells' four types onto the model's
      const sezm::Graph g =
          sezm::build_graph(c.coords.data(), types.data(), c.natoms, c.periodic ? c.cell.data() : nullptr, w.cfg.rcut);
      double rmin = 1e30;
      for (int e = 0; e < g.n_edges(); ++e)
        rmin = std::min(rmin, std::sqrt(g.vec[3 * e] * g.vec[3 * e] + g.vec[3 * e + 1] * g.vec[3 * e + 1] +
                                         g.vec[3 * e + 2] * g.vec[3 * e + 2]));
      ASSERT_LT(rmin, w.cfg.bridging_r_outer);  // the gate is below 1 on some edges
      const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
      const sezm::Evaluation b = sezm::make_evaluation(g, gpu.compute(g, true), true, false);
      std::printf("[cuda %s%s] folded GIE, bridged C = 32, %-10s vs CPU f64: E %.2e F %.2e W %.2e\n",
                  mode_name(p & 1), precision_suffix(p >> 1), c.name.c_str(),
                  std::fabs(b.energy - a.energy) / std::fabs(a.energy),
                  max_diff(b.forces, a.forces) / max_abs(a.forces), max_diff(b.virial, a.virial) / max_abs(a.virial));
      EXPECT_NEAR(b.energy, a.energy, tol_e * std::fabs(a.energy));
      EXPECT_LE(max_diff(b.forces, a.forces), tol_f * max_abs(a.forces));
      EXPECT_LE(max_diff(b.virial, a.virial), tol_f * max_abs(a.virial));
      ++checked;
    }
    EXPECT_EQ(checked, 3);
  }
#endif
}

}  // namespace
