#include "model/multitask.h"

#include <cctype>
#include <utility>

#include "common/error.h"
#include "model/config.h"  // json_text

namespace sezm {
namespace {

using nlohmann::json;

bool equal_ignoring_case(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// "water_1 (aliases Default, Water), water_2 (alias Water2), cat": for the error messages.
std::string describe(const std::vector<ModelHead>& heads) {
  std::string s;
  for (const auto& h : heads) {
    s += (s.empty() ? "" : ", ") + h.branch;
    if (h.aliases.empty()) continue;
    s += h.aliases.size() == 1 ? " (alias " : " (aliases ";
    for (size_t i = 0; i < h.aliases.size(); ++i) s += (i ? ", " : "") + h.aliases[i];
    s += ")";
  }
  return s;
}

}  // namespace

std::vector<ModelHead> model_heads(const json& model_params, const std::vector<std::string>& order,
                                   const std::string& source) {
  const auto it = model_params.find("model_dict");
  if (it == model_params.end() || !it->is_object() || it->empty())
    throw Error(source + ": model_dict is not a non-empty JSON object of model branches");
  std::vector<std::string> names = order;
  if (names.empty())
    for (const auto& item : it->items()) names.push_back(item.key());
  if (names.size() != it->size()) throw Error(source + ": model_dict: inconsistent list of branches");
  std::vector<ModelHead> heads;
  for (const std::string& name : names) {
    const auto b = it->find(name);
    if (b == it->end()) throw Error(source + ": model_dict has no branch '" + name + "'");
    const json& branch = *b;
    if (!branch.is_object()) throw Error(source + ": model_dict." + name + " is not a JSON object");
    ModelHead h{name, {}};
    if (const auto a = branch.find("model_branch_alias"); a != branch.end() && !a->is_null()) {
      bool ok = a->is_array();
      for (const auto& s : *a) ok = ok && s.is_string();
      if (!ok)
        throw Error(source + ": model_dict." + name + ".model_branch_alias = " + json_text(*a) +
                    " is not a list of names");
      h.aliases = a->get<std::vector<std::string>>();
    }
    heads.push_back(std::move(h));
  }
  return heads;
}

HeadChoice choose_head(const json& model_params, const std::vector<std::string>& order, const std::string& head,
                       const std::string& source) {
  const std::vector<ModelHead> heads = model_heads(model_params, order, source);
  // Every name with its branch, in deepmd-kit's lookup order (each branch, then its aliases);
  // a name used twice is ambiguous (deepmd-kit refuses such a file when it reads the aliases).
  std::vector<std::pair<std::string, std::string>> names;
  for (const auto& h : heads) {
    names.emplace_back(h.branch, h.branch);
    for (const auto& a : h.aliases) names.emplace_back(a, h.branch);
  }
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (names[i].first == names[j].first && names[i].second != names[j].second)
        throw Error(source + ": multi-task model: the name '" + names[i].first + "' is used by branch " +
                    names[j].second + " and by branch " + names[i].second + " (heads: " + describe(heads) + ")");

  const auto exact = [&](const std::string& n) -> const std::string* {
    for (const auto& [name, branch] : names)
      if (name == n) return &branch;
    return nullptr;
  };
  const std::string listing = "; heads (branch and aliases): " + describe(heads);

  if (head.empty()) {
    if (const std::string* b = exact("Default"))
      return {*b, "multi-task model: head " + *b + " (no head given; the branch " +
                      (*b == "Default" ? std::string("named") : std::string("aliased")) + " \"Default\")"};
    throw Error(source + ": multi-task model with no branch aliased \"Default\": choose a head (pair_style sezm "
                "MODEL head NAME, sezm-eval --head NAME)" + listing);
  }
  if (const std::string* b = exact(head))
    return {*b, "multi-task model: head " + *b + (*b == head ? " (as requested)" : " (alias '" + head + "')")};
  for (const auto& [name, branch] : names)
    if (equal_ignoring_case(name, head))
      return {branch, "multi-task model: head " + branch + " ('" + head + "' matches " +
                          (name == branch ? "it" : "its alias '" + name + "'") + " ignoring case)"};
  throw Error(source + ": multi-task model has no head or alias named '" + head + "'" + listing);
}

}  // namespace sezm
