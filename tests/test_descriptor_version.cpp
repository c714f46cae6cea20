// Descriptor versions (docs/model-options.md, "Descriptor versions"): a checkpoint saved by
// deepmd-kit 3.2.0 (version_tensor 1.2, tests/data/dp320/make_dp320.py) reads and loads; 1.1
// and 1.2 give the same weights for the same model; every other version is refused by name.
// Energies, forces and virials of the 3.2.0 file against 3.2.0's own numbers are in
// test_reference.cpp (dp320_c32_f64_*), the LAMMPS path in tests/lammps, the CLIs in test_cli.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"
#include "test_util.h"

using namespace sezm_test;

namespace {

const char* kV11 = "c32_l3_f2_float64.pt";
const char* kV12 = "dp320/c32_l3_f2_float64_dp320.pt";
const std::string kVersion = "atomic_model.descriptor.version_tensor";

sezm::ModelW<double> load(const sezm::Checkpoint& ck) {
  return sezm::load_weights<double>(ck, sezm::parse_model_config(ck.model_params, ck.path));
}

}  // namespace

// Expected values read independently with torch.load under deepmd-kit 3.2.0's environment
// (torch 2.11): 136 state-dict tensors, version 1.2, the re-fitted out_bias.
TEST(DescriptorVersion, ReadsDeepmdKit320Checkpoint) {
  const sezm::Checkpoint& c = cached_checkpoint(kV12);
  EXPECT_EQ(c.tensors.size(), 136u);
  ASSERT_TRUE(c.has(kVersion));
  EXPECT_TRUE(c.get(kVersion).shape.empty());
  EXPECT_EQ(c.get(kVersion).data.at(0), 1.2);
  EXPECT_EQ(c.get("atomic_model.out_bias").data,
            (std::vector<double>{0.9918628991296867, -1.8421594396087442}));
  EXPECT_EQ(c.model_params, cached_checkpoint(kV11).model_params);  // 3.2.0 kept every option
}

// 3.2.0's migration 1.1 -> 1.2 changes no tensor of a model without spin (make_dp320.py checks
// it on deepmd-kit's side); change-bias then re-fitted only the energy bias. So both files must
// load into the same weights except the per-type bias.
TEST(DescriptorVersion, SameWeightsFor11And12) {
  const sezm::ModelW<double> a = load(cached_checkpoint(kV11));
  const sezm::ModelW<double> b = load(cached_checkpoint(kV12));
  EXPECT_EQ(a.cfg.descriptor_version, 1.1);  // what the logs of pair sezm and sezm-eval show
  EXPECT_EQ(b.cfg.descriptor_version, 1.2);
  EXPECT_EQ(a.freqs, b.freqs);
  EXPECT_EQ(a.type_embedding, b.type_embedding);
  EXPECT_EQ(a.es_out, b.es_out);
  ASSERT_EQ(a.fit_w.size(), b.fit_w.size());
  for (size_t k = 0; k < a.fit_w.size(); ++k) EXPECT_EQ(a.fit_w[k], b.fit_w[k]);
  EXPECT_EQ(a.readout_w1, b.readout_w1);
  ASSERT_EQ(a.atom_bias.size(), 2u);
  ASSERT_EQ(b.atom_bias.size(), 2u);
  EXPECT_NEAR(b.atom_bias[0] - a.atom_bias[0], 0.25, 1e-12);  // BIAS_SHIFT of make_dp320.py
  EXPECT_NEAR(b.atom_bias[1] - a.atom_bias[1], -0.5, 1e-12);
}

TEST(DescriptorVersion, RefusesOtherVersionsByName) {
  struct Case {
    double version;
    const char* shown;
    const char* why;
  };
  for (const Case& k : {Case{1.0, "1", "older SeZM checkpoints"}, Case{1.3, "1.3", "newer deepmd-kit"},
                        Case{2.0, "2", "newer deepmd-kit"}, Case{1.15, "1.15", "newer deepmd-kit"}}) {
    sezm::Checkpoint ck = cached_checkpoint(kV12);
    ck.tensors.at(kVersion).data.at(0) = k.version;
    try {
      load(ck);
      ADD_FAILURE() << "version " << k.version << " was accepted";
    } catch (const sezm::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(ck.path), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("unsupported descriptor version_tensor = ") + k.shown + " "),
                std::string::npos) << msg;
      EXPECT_NE(msg.find("supported: 1.1 and 1.2"), std::string::npos) << msg;
      EXPECT_NE(msg.find(k.why), std::string::npos) << msg;
    }
  }
}

// A version rounded to float32 (as the GPU tests round every tensor) is still that version.
TEST(DescriptorVersion, AcceptsFloat32RoundedVersions) {
  for (const double v : {1.1, 1.2}) {
    sezm::Checkpoint ck = cached_checkpoint(kV12);
    ck.tensors.at(kVersion).data.at(0) = static_cast<double>(static_cast<float>(v));
    EXPECT_NO_THROW(load(ck)) << v;
  }
}

TEST(DescriptorVersion, MissingVersionIsNamed) {
  sezm::Checkpoint ck = cached_checkpoint(kV12);
  ck.tensors.erase(kVersion);
  try {
    load(ck);
    ADD_FAILURE() << "a checkpoint without version_tensor was accepted";
  } catch (const sezm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("version_tensor' is missing"), std::string::npos) << e.what();
  }
}
