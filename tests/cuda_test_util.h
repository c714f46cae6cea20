#pragma once
// What the CUDA engine's tests share (test_cuda*.cpp): the GPU
// requirement, the comparisons, modes and precisions as plain ints (so parameters print and name
// without the CUDA header) and the contract of `precision tf32`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"
#ifdef SEZM_HAVE_CUDA
#include "sezm_cuda.h"
#endif

namespace sezm_cuda_test {

// Without a usable GPU the CUDA tests skip, except where SEZM_GPU_TESTS_REQUIRED=1 (the GPU
// check, tools/gpu-machine/gpu-check.sh): there a skipped GPU test would hide a broken machine or
// build, so it fails.
inline bool gpu_tests_required() {
  const char* v = std::getenv("SEZM_GPU_TESTS_REQUIRED");
  return v && std::string(v) == "1";
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}
inline double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// The contract of `precision tf32` against the float64 engine on the same fp32 weights, relative
// to the largest reference value (docs/performance.md, "precision tf32", has the measured errors).
constexpr double kTf32EnergyTol = 5e-3, kTf32ForceTol = 1e-2;

// A single-head checkpoint's weights rounded to fp32, as the CUDA engine holds them: the float64
// CPU engine on these is the arithmetic reference of the GPU (the configuration is w.cfg).
inline sezm::ModelW<double> fp32_rounded_weights(const std::string& path) {
  sezm::Checkpoint ck = sezm::read_checkpoint(path);
  const sezm::ModelConfig cfg = sezm::parse_model_config(ck.model_params, path);
  for (auto& kv : ck.tensors)
    for (double& x : kv.second.data) x = static_cast<double>(static_cast<float>(x));
  return sezm::load_weights<double>(ck, cfg);
}

// Modes: 0 lean, 1 fast. Precisions: 0 the default (IEEE fp32), 1 `precision tf32`.
inline const char* mode_name(int m) { return m ? "fast" : "lean"; }
inline const char* precision_suffix(int p) { return p ? "_tf32" : ""; }
#ifdef SEZM_HAVE_CUDA
inline sezm::CudaMode cuda_mode(int m) { return m ? sezm::CudaMode::kFast : sezm::CudaMode::kLean; }
#endif

}  // namespace sezm_cuda_test

#ifdef SEZM_HAVE_CUDA
#define SEZM_REQUIRE_GPU()                                                                  \
  do {                                                                                      \
    std::string why;                                                                        \
    if (!sezm::cuda_device_available(&why)) {                                               \
      if (sezm_cuda_test::gpu_tests_required()) FAIL() << "SEZM_GPU_TESTS_REQUIRED=1 but " << why; \
      GTEST_SKIP() << why;                                                                  \
    }                                                                                       \
  } while (0)
#else
#define SEZM_REQUIRE_GPU()                                                                  \
  do {                                                                                      \
    if (sezm_cuda_test::gpu_tests_required())                                               \
      FAIL() << "SEZM_GPU_TESTS_REQUIRED=1 but built without the CUDA engine";              \
    GTEST_SKIP() << "built without the CUDA engine";                                        \
  } while (0)
#endif
