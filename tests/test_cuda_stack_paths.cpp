// The SO(2) mixing stack's launch arrangements on the warp-specialised tile (Hopper, Cf = 32,
// L = 3; cuda/stack_ws*.cu) give the same bits: every layer of a chunk pass chained in one launch,
// forward and backward (the default: stack_ws_chain.cu, stack_ws_chain_bwd.cu, which also drop
// the hand-over rows they have read from L2), the backward a launch per layer
// (SEZM_CUDA_STACK_WS=4) and every layer a launch of its own (=3). Each work item's arithmetic is
// the same in all three; only the launches and the order in which items are taken differ. The
// case is big enough for several items per CTA (a 2 x 2 x 2 supercell of the mixed C/Cu cell,
// one or two chunks of tens of thousands of edges), and again in chunks of 20,000 edges (partial
// last tiles); both modes and precisions; each engine twice (a call after the drops gives the same
// bits). Where the GPU has no warp-specialised tile all three are one path and agree trivially.
// Below them: the 3xFP16 chains against the stack weights' range. The chains run here in 3xTF32 (SEZM_CUDA_STACK_F16=0), the one-layer launches' arithmetic; their
// default 3xFP16 (Dims::stack_f16) is checked against float64 by test_cuda_reference.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/potential.h"
#include "cuda_test_util.h"
#include "engine/sezm_model.h"
#include "ghost_graph.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

using namespace sezm_cuda_test;

// Mode and precision: bit 0 fast, bit 1 `precision tf32`.
class CudaStackPaths : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(ModesPrecisions, CudaStackPaths, ::testing::Values(0, 1, 2, 3), [](const auto& info) {
  return std::string(mode_name(info.param & 1)) + precision_suffix(info.param >> 1);
});

TEST_P(CudaStackPaths, ChainedLaunchesAreBitIdenticalToALaunchPerLayer) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3];
  const sezm_test::Supercell sc = sezm_test::replicate(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), 2);
  const sezm::Graph g = sezm::build_graph(sc.pos.data(), sc.types.data(), sc.n, sc.cell.data(), 6.0);
  ASSERT_GT(g.n_edges(), 20000 * 2);
  const auto w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  const int p = GetParam();
  for (const int chunk : {0, 20000}) {  // 0: the mode's default chunk
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    // The engine under SEZM_CUDA_STACK_WS=stack_ws (null: unset), read by its constructor; the
    // chains in 3xTF32 (SEZM_CUDA_STACK_F16=0), the one-layer launches' arithmetic.
    auto run = [&](const char* stack_ws, int calls) {
      if (stack_ws) setenv("SEZM_CUDA_STACK_WS", stack_ws, 1);
      setenv("SEZM_CUDA_STACK_F16", "0", 1);
      setenv("SEZM_CUDA_F16_ROWS", "0", 1);  // the output's storage follows the arrangement: fp32 in all
      sezm::CudaEngine gpu(w, 0, cuda_mode(p & 1));
      unsetenv("SEZM_CUDA_F16_ROWS");
      unsetenv("SEZM_CUDA_STACK_F16");
      if (stack_ws) unsetenv("SEZM_CUDA_STACK_WS");
      if (p & 2) gpu.set_precision(sezm::Precision::kTf32);
      if (chunk) gpu.set_chunk_edges(chunk);
      std::vector<sezm::EngineResult> r;
      for (int k = 0; k < calls; ++k) r.push_back(gpu.compute(g, true));
      return r;
    };
    const std::vector<sezm::EngineResult> chained = run(nullptr, 2), bwd_layers = run("4", 1), layers = run("3", 1);
    for (const sezm::EngineResult* r : {&chained[1], &bwd_layers[0], &layers[0]}) {
      EXPECT_EQ(chained[0].energy, r->energy);
      EXPECT_EQ(chained[0].atom_energy, r->atom_energy);
      EXPECT_EQ(chained[0].edge_grad, r->edge_grad);
    }
  }
#endif
}

// `precision tf32`'s stack output in binary16 rows (stack_out_f16, cuda/f16_rows.cuh; with the
// register-resident backward its input, output adjoint and the gated layers' z too) keeps the
// TF32 pass's accuracy whatever the rows' scale: each row's power-of-two scales bring it into
// binary16's range. Tiny rows: the stack's input scaled by 2^-20 (the channel basis multiplies it:
// every row, z included, far below binary16's normal range); huge rows: the last (identity) layer's weights
// scaled by 2^16 (the mixing stack's last layer is its identity layer: its output ~2^16 times the usual, past binary16's largest value, while the norm
// after the destination sum keeps the model's output sane). Against the float64 engine on the
// same weights, within the tf32 bounds. (The stack's input scaled by 2^20 is no such case: there
// the TF32 pass itself, fp32 rows or not, misses the forces by their size.) The engine's
// description says whether the rows are binary16 (the register-resident chain: Hopper, the
// shipped shapes); elsewhere the case still compares its fp32 rows. The two modes.
class CudaStackF16Rows : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Modes, CudaStackF16Rows, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

TEST_P(CudaStackF16Rows, Tf32OutputRowsHoldAnyScale) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[0];
  for (const bool huge : {false, true}) {
    SCOPED_TRACE(huge ? "last layer's weights x 2^16" : "stack input x 2^-20");
    sezm::ModelW<double> w = fp32_rounded_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
    for (auto& b : w.blocks) {
      if (huge) {
        for (auto* ms : {&b.layers.back().A, &b.layers.back().W1})
          for (auto& m : *ms) m *= 0x1p16;  // powers of two: still fp32 values
      } else {
        b.channel_basis *= 0x1p-20;
      }
    }
    const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms,
                                            c.periodic ? c.cell.data() : nullptr, w.cfg.rcut);
    const sezm::SezmEngine<double> cpu(w);
    const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
    sezm::CudaEngine gpu(w, 0, cuda_mode(GetParam()));
    gpu.set_precision(sezm::Precision::kTf32);
    const std::string what = gpu.description();
    if (what.find("WS tile") != std::string::npos) EXPECT_NE(what.find("binary16 rows"), std::string::npos) << what;
    const sezm::Evaluation b = sezm::make_evaluation(g, gpu.compute(g, true), true, false);
    std::printf("[cuda %s tf32] %s: E %.2e F %.2e W %.2e | %s\n", mode_name(GetParam()),
                huge ? "last layer x 2^16" : "stack input x 2^-20", std::fabs(b.energy - a.energy) / std::fabs(a.energy),
                max_diff(b.forces, a.forces) / max_abs(a.forces), max_diff(b.virial, a.virial) / max_abs(a.virial),
                what.c_str());
    EXPECT_NEAR(b.energy, a.energy, kTf32EnergyTol * std::fabs(a.energy));
    EXPECT_LE(max_diff(b.forces, a.forces), kTf32ForceTol * max_abs(a.forces));
    EXPECT_LE(max_diff(b.virial, a.virial), kTf32ForceTol * max_abs(a.virial));
  }
#endif
}

// The 3xFP16 chains follow the stack weights' range (use_stack_f16): a model whose largest stack
// weight reaches 128 or more (beyond the FP16 images' binary16 range under their scale of 2^8) runs
// its chains in 3xTF32, and one whose stack weights are all small (scaled by 2^-6: most of the
// images' low parts then subnormal) in 3xFP16; both within the fp32 bounds of the float64 engine
// on the same weights. What runs is read from the engine's description. Where the GPU has no
// warp-specialised tile neither description names 3xFP16 and both cases still compare.
// The fp32-accurate precision only (the FP16 chains serve no other): the two modes.
class CudaStackF16Range : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Modes, CudaStackF16Range, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

TEST_P(CudaStackF16Range, Fp16ChainsFollowTheWeightsRange) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[0];
  for (const double scale : {0.015625, 1.0}) {
    SCOPED_TRACE("stack weights x " + std::to_string(scale));
    sezm::ModelW<double> w = fp32_rounded_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
    for (auto& b : w.blocks)
      for (auto& layer : b.layers)
        for (auto* ms : {&layer.A, &layer.W1, &layer.G})
          for (auto& m : *ms) m *= scale;  // powers of two: still fp32 values
    const bool large = scale == 1.0;
    if (large) w.blocks[0].layers[0].A[0](3, 5) = 200.0;  // one weight past the FP16 images' range
    const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms,
                                            c.periodic ? c.cell.data() : nullptr, w.cfg.rcut);
    const sezm::SezmEngine<double> cpu(w);
    const sezm::Evaluation a = sezm::make_evaluation(g, cpu.compute(g, true), true, false);
    sezm::CudaEngine gpu(w, 0, cuda_mode(GetParam()));
    const std::string what = gpu.description();
    if (large) EXPECT_EQ(what.find("3xFP16"), std::string::npos) << what;
    if (!large && what.find("WS tile") != std::string::npos) EXPECT_NE(what.find("3xFP16"), std::string::npos) << what;
    const sezm::Evaluation b = sezm::make_evaluation(g, gpu.compute(g, true), true, false);
    std::printf("[cuda %s] stack weights x %g%s: E %.2e F %.2e W %.2e | %s\n", mode_name(GetParam()), scale,
                large ? " and one of 200" : "", std::fabs(b.energy - a.energy) / std::fabs(a.energy),
                max_diff(b.forces, a.forces) / max_abs(a.forces), max_diff(b.virial, a.virial) / max_abs(a.virial),
                what.c_str());
    EXPECT_NEAR(b.energy, a.energy, 1e-6 * std::fabs(a.energy));
    EXPECT_LE(max_diff(b.forces, a.forces), 1e-5 * max_abs(a.forces));
    EXPECT_LE(max_diff(b.virial, a.virial), 1e-5 * max_abs(a.virial));
  }
#endif
}

}  // namespace
