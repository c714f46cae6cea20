// Multi-task checkpoints (docs/model.md §6.2, "Multi-task checkpoints"): which head is loaded
// for a requested name, checked against the resolutions deepmd-kit 3.2.0's DeepPot(model,
// head=...) itself produced on the same files (tests/data/recipes/ref_multitask_*.json,
// "head_resolution"), and the errors for a missing or unknown head. The numbers of every head
// are in test_reference.cpp (multitask_*), their gradients in test_finite_difference.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/potential.h"
#include "model/multitask.h"
#include "ref_data.h"
#include "test_util.h"

using namespace sezm_test;
using nlohmann::json;

namespace {

const char* kPlain = "recipes/multitask_plain_f64.pt";
const char* kPlainRef = "recipes/ref_multitask_plain_f64.json";

// The whole model_params of a multi-task file and its branches in file order (the reader hands
// them to the chooser).
struct Params {
  json params;
  std::vector<std::string> order;
};
Params multitask_params(const std::string& path) {
  Params r;
  sezm::read_checkpoint(path, [&](const json& p, const std::vector<std::string>& order) {
    r = {p, order};
    return order.front();
  });
  return r;
}

// Keys in file order (deepmd-kit's "heads" object lists the branches in model_dict's order).
nlohmann::ordered_json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::ordered_json::parse(in);
}

// deepmd-kit's recorded resolution of every requested head name (null: no head). Integer
// requests (DeepPot also takes an int, and then always uses the first branch) have no
// counterpart in our front ends, which take names only.
void check_resolutions(const std::string& model, const std::string& ref) {
  if (!sezm::test::file_exists(data_path(ref))) GTEST_SKIP() << "reference absent: " << ref;
  const Params mp = multitask_params(data_path(model));
  std::vector<std::string> listed;  // deepmd-kit's branch order (its "heads" object keeps it)
  const nlohmann::ordered_json r0 = read_json(data_path(ref));
  for (const auto& item : r0.at("heads").items()) listed.push_back(item.key());
  EXPECT_EQ(mp.order, listed);
  const nlohmann::ordered_json& r = r0;
  int checked = 0;
  for (const auto& item : r.at("head_resolution")) {
    const auto& req = item.at("request");
    if (req.is_number_integer()) continue;
    const std::string head = req.is_null() ? "" : req.get<std::string>();
    if (!item.at("branch").is_null()) {
      const sezm::HeadChoice c = sezm::choose_head(mp.params, mp.order, head, model);
      EXPECT_EQ(c.branch, item.at("branch").get<std::string>()) << "request '" << head << "'";
      EXPECT_NE(c.reason.find(c.branch), std::string::npos) << c.reason;
    } else {
      const std::string msg = error_of([&] { sezm::choose_head(mp.params, mp.order, head, model); });
      expect_contains(msg, {model, "multi-task"});
      for (const auto& [branch, aliases] : r.at("heads").items()) {
        expect_contains(msg, {branch});
        for (const auto& a : aliases) expect_contains(msg, {a.get<std::string>()});
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 5) << ref;
}

}  // namespace

TEST(Multitask, HeadResolutionMatchesDeepmdKitPlain) { check_resolutions(kPlain, kPlainRef); }

TEST(Multitask, HeadResolutionMatchesDeepmdKitMini) {
  // Branches aliased "Default": the head used when none is given.
  check_resolutions("recipes/multitask_mini_f64.pt", "recipes/ref_multitask_mini_f64.json");
}

TEST(Multitask, ReaderKeepsOnlyTheChosenBranch) {
  std::vector<std::string> seen;
  const sezm::Checkpoint c = sezm::read_checkpoint(data_path(kPlain), [&](const json&, const std::vector<std::string>& o) {
    seen = o;
    return std::string("carbon");
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"cu_bulk", "carbon"}));  // file order, not sorted
  EXPECT_EQ(c.branch, "carbon");
  EXPECT_FALSE(c.model_params.contains("model_dict"));
  EXPECT_EQ(c.model_params.at("fitting_net").at("dim_case_embd"), 2);
  EXPECT_TRUE(c.has("atomic_model.fitting_net.case_embd"));
  for (const auto& [name, t] : c.tensors)
    EXPECT_TRUE(name.rfind("carbon.", 0) != 0 && name.rfind("cu_bulk.", 0) != 0) << name;
  // Without a chooser a multi-task file is refused with its branches named.
  expect_contains(error_of([] { sezm::read_checkpoint(data_path(kPlain)); }),
                  {"multitask_plain_f64.pt", "multi-task", "carbon, cu_bulk"});
}

TEST(Multitask, LoadsTheRequestedHead) {
  const sezm::ModelW<double> w = sezm::load_model_weights(data_path(kPlain), "CUBULK");
  EXPECT_EQ(w.cfg.head, "cu_bulk");
  expect_contains(w.cfg.head_reason, {"head cu_bulk", "'CUBULK'", "ignoring case"});
  EXPECT_EQ(w.cfg.dim_case_embd, 2);
  EXPECT_TRUE(w.cfg.case_film_embd);
  const sezm::ModelW<double> a = sezm::load_model_weights(data_path(kPlain), "bulk");
  EXPECT_EQ(a.cfg.head, "cu_bulk");
  expect_contains(a.cfg.head_reason, {"alias 'bulk'"});
}

TEST(Multitask, NoHeadAndNoDefaultListsTheHeads) {
  expect_contains(error_of([] { sezm::load_model_weights(data_path(kPlain)); }),
                  {"multitask_plain_f64.pt", "no branch aliased \"Default\"", "choose a head",
                   "cu_bulk (aliases CuBulk, bulk), carbon"});
}

TEST(Multitask, UnknownHeadListsTheHeads) {
  expect_contains(error_of([] { sezm::load_model_weights(data_path(kPlain), "water"); }),
                  {"multitask_plain_f64.pt", "no head or alias named 'water'",
                   "cu_bulk (aliases CuBulk, bulk), carbon"});
}

TEST(Multitask, DefaultAliasIsTheDefaultHead) {
  Params mp = multitask_params(data_path(kPlain));
  mp.params["model_dict"]["carbon"]["model_branch_alias"] = json::array({"Default"});
  const sezm::HeadChoice c = sezm::choose_head(mp.params, mp.order, "", "m.pt");
  EXPECT_EQ(c.branch, "carbon");
  expect_contains(c.reason, {"head carbon", "no head given", "aliased \"Default\""});
  // An explicit head still wins.
  EXPECT_EQ(sezm::choose_head(mp.params, mp.order, "cu_bulk", "m.pt").branch, "cu_bulk");
  // "default" (another case) matches the alias ignoring case, like any explicit request.
  EXPECT_EQ(sezm::choose_head(mp.params, mp.order, "default", "m.pt").branch, "carbon");
  // Ignoring case, the first name in file order wins: branch cu_bulk, then its aliases, then carbon.
  mp.params["model_dict"]["carbon"]["model_branch_alias"] = json::array({"BULK2", "cubulk"});
  EXPECT_EQ(sezm::choose_head(mp.params, mp.order, "CUBULK", "m.pt").branch, "cu_bulk");
  std::vector<std::string> reversed(mp.order.rbegin(), mp.order.rend());
  EXPECT_EQ(sezm::choose_head(mp.params, reversed, "CUBULK", "m.pt").branch, "carbon");
}

TEST(Multitask, NameUsedByTwoBranchesIsRefused) {
  Params mp = multitask_params(data_path(kPlain));
  mp.params["model_dict"]["carbon"]["model_branch_alias"] = json::array({"bulk"});
  expect_contains(error_of([&] { sezm::choose_head(mp.params, mp.order, "carbon", "m.pt"); }),
                  {"m.pt", "'bulk'", "cu_bulk", "carbon"});
}

TEST(Multitask, HeadForSingleTaskModelIsRefused) {
  expect_contains(error_of([] { sezm::load_model_weights(data_path("c32_l3_f2_float64.pt"), "carbon"); }),
                  {"c32_l3_f2_float64.pt", "head 'carbon'", "single-task"});
  EXPECT_TRUE(sezm::load_model_weights(data_path("c32_l3_f2_float64.pt")).cfg.head.empty());
}
