// Charge/spin conditioning (docs/model.md §10): how (Q, S) is resolved (given, the model's
// default, errors), that an engine refuses a conditioned model whose condition was not applied,
// and that the condition changes the energy. deepmd-kit 3.2.0's numbers for several (Q, S) and
// for the default are in test_reference.cpp (chgspin_plain_f64_*).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "api/engine_factory.h"
#include "common/error.h"
#include "engine/sezm_model.h"
#include "model/charge_spin.h"
#include "model_test_util.h"

namespace {

using namespace sezm_test;

const char* kCsModel = "recipes/chgspin_plain_f64.pt";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sezm::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChargeSpin, ConfigAndTables) {
  const sezm::ModelW<double> w = sezm::load_model_weights(data_path(kCsModel));
  EXPECT_TRUE(w.cfg.chg_spin);
  EXPECT_TRUE(w.cfg.has_default_chg_spin);
  EXPECT_EQ(w.cfg.default_charge, -1.0);
  EXPECT_EQ(w.cfg.default_spin, 2.0);
  EXPECT_EQ(w.cs_charge.rows(), 200);
  EXPECT_EQ(w.cs_spin.rows(), 100);
  EXPECT_EQ(w.cs_mix_w.rows(), 2 * w.cfg.channels);
  EXPECT_FALSE(w.cs_applied);
}

TEST(ChargeSpin, DefaultGivenAndErrors) {
  const std::string path = data_path(kCsModel);
  {  // the model's default when none is given
    sezm::ModelW<double> w = sezm::load_model_weights(path);
    const sezm::ChargeSpinUse u = sezm::apply_charge_spin(w, std::nullopt, path);
    EXPECT_TRUE(u.conditioned);
    EXPECT_TRUE(u.from_default);
    EXPECT_EQ(u.value.charge, -1.0);
    EXPECT_EQ(u.value.spin, 2.0);
    EXPECT_TRUE(w.cs_applied);
    EXPECT_NE(error_of([&] { sezm::apply_charge_spin(w, std::nullopt, path); }).find("already applied"), std::string::npos);
  }
  {  // given
    sezm::ModelW<double> w = sezm::load_model_weights(path);
    const sezm::ChargeSpinUse u = sezm::apply_charge_spin(w, sezm::ChargeSpin{1, 3}, path);
    EXPECT_FALSE(u.from_default);
    EXPECT_EQ(u.value.charge, 1.0);
  }
  {  // no default and none given
    sezm::ModelW<double> w = sezm::load_model_weights(path);
    w.cfg.has_default_chg_spin = false;
    const std::string e = error_of([&] { sezm::apply_charge_spin(w, std::nullopt, path); });
    EXPECT_NE(e.find("has no default_chg_spin"), std::string::npos) << e;
    EXPECT_NE(e.find("charge_spin Q S"), std::string::npos) << e;
  }
  // Values outside deepmd-kit's tables, or not integers.
  for (const sezm::ChargeSpin cs : {sezm::ChargeSpin{100, 1}, sezm::ChargeSpin{-101, 1}, sezm::ChargeSpin{0, 100},
                                    sezm::ChargeSpin{0, -1}, sezm::ChargeSpin{0.5, 1}, sezm::ChargeSpin{0, 1.5}}) {
    sezm::ModelW<double> w = sezm::load_model_weights(path);
    const std::string e = error_of([&] { sezm::apply_charge_spin(w, cs, path); });
    EXPECT_NE(e.find("is not an integer in"), std::string::npos) << cs.charge << " " << cs.spin << ": " << e;
  }
  {  // extremes of the tables are accepted
    sezm::ModelW<double> w = sezm::load_model_weights(path);
    EXPECT_NO_THROW(sezm::apply_charge_spin(w, sezm::ChargeSpin{-100, 99}, path));
  }
  {  // a model without the embedding refuses a given charge/spin, and ignores none
    const std::string plain = data_path("c32_l3_f2_float64.pt");
    sezm::ModelW<double> w = sezm::load_model_weights(plain);
    const std::string e = error_of([&] { sezm::apply_charge_spin(w, sezm::ChargeSpin{0, 1}, plain); });
    EXPECT_NE(e.find("has no charge/spin embedding"), std::string::npos) << e;
    EXPECT_FALSE(sezm::apply_charge_spin(w, std::nullopt, plain).conditioned);
    EXPECT_NE(error_of([&] { sezm::Potential::load(plain, {}, "", sezm::ChargeSpin{0, 1}); }).find("has no charge/spin embedding"),
              std::string::npos);
  }
}

TEST(ChargeSpin, EnginesRefuseUnappliedCondition) {
  const sezm::ModelW<double> w = sezm::load_model_weights(data_path(kCsModel));
  EXPECT_NE(error_of([&] { sezm::SezmEngine<double> e(w); }).find("no charge/spin condition was applied"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sezm::make_engine(w, {}); }).find("no charge/spin condition was applied"), std::string::npos);
}

TEST(ChargeSpin, ConditionChangesTheEnergy) {
  const System s = open_cluster({0, 1, 2, 3, 3}, 2.2, 1.0, 3);
  const double e_default = evaluate(*model(kCsModel), s, false).energy;
  const double e_same = evaluate(*model_with_charge_spin(kCsModel, -1, 2), s, false).energy;
  const double e_other = evaluate(*model_with_charge_spin(kCsModel, 0, 1), s, false).energy;
  EXPECT_EQ(e_default, e_same);
  EXPECT_GT(std::abs(e_other - e_default), 1e-6 * std::abs(e_default));
}

}  // namespace
