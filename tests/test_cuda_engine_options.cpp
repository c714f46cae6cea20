// The CUDA engine's options and refusals: out of GPU memory (the message names the mode, the chunk
// and the cost of a chunk edge), the default chunk per mode and precision, no usable device, and
// the engine factory every front end uses (its refusals, option names, the CPU engine as the
// reference). The numerical comparisons are in test_cuda.cpp and test_cuda_reference.cpp. The
// GPU tests skip without a CUDA engine or a usable GPU, unless SEZM_GPU_TESTS_REQUIRED=1
// (cuda_test_util.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/engine_factory.h"
#include "api/potential.h"
#include "cuda_test_util.h"
#include "io/checkpoint.h"
#include "model/weights.h"
#include "neighbor/neighbor_list.h"
#include "ref_data.h"
#include "test_util.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace {

using namespace sezm_cuda_test;

// Out of GPU memory is a sezm::Error naming the mode and the chunk and saying what to change
// (docs/errors.md), never an abort: 64 atoms on a 0.1125 A grid in a 0.45 A periodic cell (24,389
// images, within the neighbour search's limit) have ~4e7 edges within rcut 6 A, whose per-edge
// storage (kB per edge, docs/ARCHITECTURE.md) is far beyond any GPU's memory in fast mode, and in
// lean mode when the whole edge list is one chunk.
TEST(Cuda, OutOfMemoryNamesModeAndChunk) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const double a = 0.45, cell[9] = {a, 0, 0, 0, a, 0, 0, 0, a};
  std::vector<double> pos;
  for (int i = 0; i < 64; ++i)
    for (int k : {i % 4, (i / 4) % 4, i / 16}) pos.push_back(k * a / 4);
  const std::vector<int> types(64, 0);
  const sezm::Graph g = sezm::build_graph(pos.data(), types.data(), 64, cell, 6.0);
  ASSERT_GT(g.n_edges(), 30000000);
  const auto w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  for (const sezm::CudaMode mode : {sezm::CudaMode::kFast, sezm::CudaMode::kLean}) {
    sezm::CudaEngine gpu(w, 0, mode);
    if (mode == sezm::CudaMode::kLean) gpu.set_chunk_edges(g.n_edges());
    try {
      gpu.compute(g, true);
      ADD_FAILURE() << "no error for " << g.n_edges() << " edges";
    } catch (const sezm::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("out of GPU memory"), std::string::npos) << m;
      EXPECT_NE(m.find(mode == sezm::CudaMode::kFast ? "mode fast" : "mode lean"), std::string::npos) << m;
      EXPECT_NE(m.find(mode == sezm::CudaMode::kFast ? "use mode lean" : "a smaller chunk"), std::string::npos) << m;
      // The cost of a chunk edge, from the engine's own sizing (~11 kB for this shape in fp32,
      // docs/lammps.md `chunk`; a little more with the edge state per chunk).
      const std::string key = "each chunk edge costs about ";
      const size_t at = m.find(key);
      ASSERT_NE(at, std::string::npos) << m;
      const double kb = std::atof(m.c_str() + at + key.size());
      std::printf("[cuda %s] %s\n", mode == sezm::CudaMode::kFast ? "fast" : "lean", m.c_str());
      EXPECT_GT(kb, 4.0) << m;
      EXPECT_LT(kb, 30.0) << m;
    }
  }
#endif
}

// The default chunk (docs/lammps.md, `chunk`): lean 81920 in either precision; fast 131072, on the
// warp-specialised stack tile (Hopper; "WS tile" in the description) rounded to whole rounds of its
// persistent grid, and under `precision tf32` there five times that (CudaEngine::Impl::
// default_chunk_chains); `chunk N` overrides it, and 0 restores it.
TEST(Cuda, DefaultChunkFollowsModeAndPrecision) {
  SEZM_REQUIRE_GPU();
#ifdef SEZM_HAVE_CUDA
  const auto w = sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt"));
  sezm::CudaEngine lean(w, 0, sezm::CudaMode::kLean), fast(w, 0, sezm::CudaMode::kFast);
  const int lean_default = sezm::default_chunk_edges(sezm::CudaMode::kLean);
  const int fast_default = sezm::default_chunk_edges(sezm::CudaMode::kFast);
  const bool ws = fast.description().find("WS tile") != std::string::npos;
  EXPECT_EQ(lean.chunk_edges(), lean_default);
  const int fp32 = fast.chunk_edges();
  if (ws)  // whole rounds of 128 SMs / F = 64 SMs edges: within half a round (< 16,384 below 512 SMs)
    EXPECT_LT(std::abs(fp32 - fast_default), 16384) << fast.description();
  else
    EXPECT_EQ(fp32, fast_default) << fast.description();
  lean.set_precision(sezm::Precision::kTf32);
  fast.set_precision(sezm::Precision::kTf32);
  EXPECT_EQ(lean.chunk_edges(), lean_default);
  EXPECT_EQ(fast.chunk_edges(), ws ? 5 * fp32 : fp32) << fast.description();
  fast.set_chunk_edges(4096);
  EXPECT_EQ(fast.chunk_edges(), 4096);
  fast.set_chunk_edges(0);
  EXPECT_EQ(fast.chunk_edges(), ws ? 5 * fp32 : fp32);
  fast.set_precision(sezm::Precision::kDeviceDefault);
  EXPECT_EQ(fast.chunk_edges(), fp32);
#endif
}

TEST(Cuda, NoDeviceIsAnErrorNotAFallback) {
#ifdef SEZM_HAVE_CUDA
  std::string why;
  if (sezm::cuda_device_available(&why)) {
    // With a GPU present, asking for a device that does not exist must fail loudly.
    const sezm::Potential pot = sezm::Potential::load(sezm_test::data_path("c32_l3_f2_float64.pt"));
    EXPECT_THROW(sezm::CudaEngine(sezm::load_model_weights(pot.path()), 999, sezm::CudaMode::kLean), sezm::Error);
  } else {
    const sezm::Potential pot = sezm::Potential::load(sezm_test::data_path("c32_l3_f2_float64.pt"));
    try {
      sezm::CudaEngine e(sezm::load_model_weights(pot.path()), 0, sezm::CudaMode::kLean);
      FAIL() << "constructed a CUDA engine without a usable GPU";
    } catch (const sezm::Error& e) {
      EXPECT_NE(std::string(e.what()).find("device cuda"), std::string::npos) << e.what();
    }
  }
#else
  GTEST_SKIP() << "built without the CUDA engine";
#endif
}

// The factory, which every front end uses: device cuda without a usable device (or without the
// CUDA engine in this build) is an Error naming the device, never a CPU fallback.
TEST(EngineFactory, CudaWithoutAUsableDeviceIsAnError) {
  std::string why;
  if (sezm::cuda_available(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  sezm::EngineOptions opt;
  opt.device = sezm::Device::kCuda;
  try {
    sezm::make_engine(sezm::load_model_weights(sezm_test::data_path("c32_l3_f2_float64.pt")), opt);
    FAIL() << "made a CUDA engine without a usable GPU";
  } catch (const sezm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device cuda"), std::string::npos) << e.what();
  }
}

// The edge-state option's names (sezm-bench --edge-state): each name parses to its value and back;
// anything else is refused.
TEST(EngineFactory, EdgeStateNamesRoundTrip) {
  for (const sezm::EdgeState e : {sezm::EdgeState::kAuto, sezm::EdgeState::kKeep, sezm::EdgeState::kChunk}) {
    sezm::EdgeState back = e == sezm::EdgeState::kAuto ? sezm::EdgeState::kKeep : sezm::EdgeState::kAuto;
    ASSERT_TRUE(sezm::parse_edge_state(sezm::edge_state_name(e), &back)) << sezm::edge_state_name(e);
    EXPECT_EQ(back, e);
  }
  sezm::EdgeState e = sezm::EdgeState::kKeep;
  EXPECT_FALSE(sezm::parse_edge_state("chunked", &e));
  EXPECT_EQ(e, sezm::EdgeState::kKeep);
  EXPECT_EQ(sezm::EngineOptions{}.edge_state, sezm::EdgeState::kAuto);
}

TEST(EngineFactory, CpuEngineIsTheReference) {
  const std::string path = sezm_test::data_path("c32_l3_f2_float64.pt");
  const auto engine = sezm::make_engine(sezm::load_model_weights(path), sezm::EngineOptions{});
  EXPECT_EQ(engine->description().rfind("cpu, float64", 0), 0u) << engine->description();
  EXPECT_EQ(engine->peak_device_bytes(), 0u);
  EXPECT_EQ(engine->chunk_edges(), 0);
  // Same numbers as the Potential (which holds a factory engine too) on a reference cell.
  const auto c = sezm::test::read_ref(sezm_test::data_path("ref_c32_l3_f2_float64.json")).configs[3];
  const sezm::Graph g = sezm::build_graph(c.coords.data(), c.types.data(), c.natoms, c.cell.data(), engine->config().rcut);
  const sezm::Evaluation a = sezm::make_evaluation(g, engine->compute(g, true), true, false);
  const sezm::Evaluation b = sezm::Potential::load(path).evaluate(c.coords.data(), c.types.data(), c.natoms,
                                                                  c.cell.data(), true);
  // Not bit for bit: with several OpenMP threads the CPU backward's per-thread sums are not in a
  // fixed order from call to call (nor were they before the factory).
  EXPECT_NEAR(a.energy, b.energy, 1e-12 * std::fabs(a.energy));
  EXPECT_LE(max_diff(a.forces, b.forces), 1e-12 * max_abs(a.forces));
  EXPECT_LE(max_diff(a.virial, b.virial), 1e-12 * max_abs(a.virial));
}

}  // namespace
