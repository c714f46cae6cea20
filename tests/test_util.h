#pragma once
// Helpers shared by the test files: temp files, zip writing, error-message checks.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zip.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace sezm_test {

// tests/data; the environment variable SEZM_TEST_DATA_DIR overrides the configure-time location
// (binaries built on one machine and run on another, e.g. the GPU machine).
inline std::string data_path(const std::string& name) {
  const char* dir = std::getenv("SEZM_TEST_DATA_DIR");
  return std::string(dir && *dir ? dir : SEZM_TEST_DATA_DIR) + "/" + name;
}

// A checkpoint of tests/data, decoded once for the whole test program.
inline const sezm::Checkpoint& cached_checkpoint(const std::string& name) {
  static std::map<std::string, sezm::Checkpoint> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, sezm::read_checkpoint(data_path(name))).first;
  return it->second;
}

// The c32 test model with its degree-channel mixer switched off: radial_so2_mode "none" with the
// radial hidden projection, a pair no shipped or reference model has. With fp32_weights every
// weight is rounded to float first (what the CUDA engine computes with).
inline sezm::ModelW<double> c32_without_mixer(bool fp32_weights) {
  const std::string name = "c32_l3_f2_float64.pt";
  sezm::Checkpoint ck = cached_checkpoint(name);
  if (fp32_weights)
    for (auto& kv : ck.tensors)
      for (double& x : kv.second.data) x = static_cast<double>(static_cast<float>(x));
  sezm::ModelW<double> w = sezm::load_weights<double>(ck, sezm::parse_model_config(ck.model_params, data_path(name)));
  w.cfg.radial_so2_mode = "none";
  for (auto& b : w.blocks) b.degree_mixer = false;
  return w;
}

// A file in ../shared (optional material that is never committed). The environment variable
// SEZM_SHARED_DIR overrides the configure-time location, for checkouts laid out differently.
inline std::string shared_path(const std::string& name) {
  const char* dir = std::getenv("SEZM_SHARED_DIR");
  return std::string(dir && *dir ? dir : SEZM_SHARED_DIR) + "/" + name;
}

// A unique path under the GoogleTest temp dir, named after the running test.
inline std::string temp_path(const std::string& suffix) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  return testing::TempDir() + "sezm_h1_" + info->test_suite_name() + "_" + info->name() + "_" +
         std::to_string(getpid()) + suffix;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_zip(const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& entries) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr);
  for (const auto& [name, bytes] : entries) {
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    ASSERT_GE(zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE), 0);
  }
  ASSERT_EQ(zip_close(z), 0);  // the buffers are read here, while `entries` is alive
}

// Runs f, which must throw sezm::Error; returns the message ("" plus a test failure otherwise).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const sezm::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a sezm::Error";
  return "";
}

inline void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& p : parts)
    EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' not in: " << message;
}

}  // namespace sezm_test
