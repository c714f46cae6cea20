#pragma once
// Multi-task checkpoints (deepmd-kit `model.model_dict`): several branches ("heads") that share
// a descriptor, each with its own fitting net and biases. Only one head is evaluated; it is
// chosen the way deepmd-kit 3.2.0's DeepPot(model, head=...) chooses it (docs/model.md,
// "Multi-task checkpoints"):
//   - the names are the model_dict keys and every entry's `model_branch_alias` list;
//   - a head matches a name exactly, else the first name (branches in file order, each followed
//     by its aliases) that equals it ignoring ASCII case;
//   - without a head, the branch named or aliased "Default" if there is one;
//   - otherwise (no head and no "Default", or a head matching nothing) an Error listing every
//     branch with its aliases.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sezm {

struct ModelHead {
  std::string branch;                // model_dict key
  std::vector<std::string> aliases;  // its model_branch_alias
};

struct HeadChoice {
  std::string branch;  // the model_dict key whose tensors and parameters are used
  std::string reason;  // one line for the log: which head and why
};

// The branches of a multi-task `model_params` (which must hold `model_dict`) in the order
// `order` gives (the file's, from read_checkpoint; empty: the JSON object's, i.e. sorted).
// `source` (the checkpoint path) is only used in error messages.
std::vector<ModelHead> model_heads(const nlohmann::json& model_params, const std::vector<std::string>& order,
                                   const std::string& source);

// Picks the branch for `head` (empty: none requested) as above; throws sezm::Error.
HeadChoice choose_head(const nlohmann::json& model_params, const std::vector<std::string>& order,
                       const std::string& head, const std::string& source);

}  // namespace sezm
