#include "model/lora.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/config.h"

namespace sezm {
namespace {

const char* const kDescriptor = "atomic_model.descriptor.";

enum class Kind { None, A3, B3, A0, B0, Am, Bm, Scaling };

// An adapter-like tensor name, split into the adapted module's prefix (ending in '.') and,
// for the SO(2) |m| > 0 groups, the group index.
struct Name {
  Kind kind = Kind::None;
  std::string prefix;
  std::string index;
};

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Name classify(const std::string& key) {
  const size_t dot = key.rfind('.');
  const std::string head = dot == std::string::npos ? "" : key.substr(0, dot + 1);
  const std::string leaf = dot == std::string::npos ? key : key.substr(dot + 1);
  if (leaf == "A_by_l") return {Kind::A3, head, ""};
  if (leaf == "B_by_l") return {Kind::B3, head, ""};
  if (leaf == "A_m0") return {Kind::A0, head, ""};
  if (leaf == "B_m0") return {Kind::B0, head, ""};
  if (leaf == "lora_scaling") return {Kind::Scaling, head, ""};
  if (all_digits(leaf)) {
    if (ends_with(head, ".A_m.")) return {Kind::Am, head.substr(0, head.size() - 4), leaf};
    if (ends_with(head, ".B_m.")) return {Kind::Bm, head.substr(0, head.size() - 4), leaf};
  }
  return {};
}

class Folder {
 public:
  Folder(Checkpoint& c, const ModelConfig& cfg) : ckpt_(c), cfg_(cfg) {}

  // SO(3): weight[l][i][o] += s * sum_r B[l][o][r] * A[l][r][i].
  void so3(const std::string& p) {
    const TensorData& a = need(p + "A_by_l", p + "A_by_l");
    const TensorData& b = need(p + "B_by_l", p + "A_by_l");
    TensorData& w = need(p + "weight", p + "A_by_l");
    const double s = scaling(p, p + "A_by_l");
    const int64_t r = cfg_.lora_rank;
    if (w.shape.size() != 3) bad_shape(p + "weight", w, "(L+1, in, out)");
    const int64_t n = w.shape[0], in = w.shape[1], out = w.shape[2];
    if (a.shape != std::vector<int64_t>{n, r, in}) bad_shape(p + "A_by_l", a, shape_string({n, r, in}));
    if (b.shape != std::vector<int64_t>{n, out, r}) bad_shape(p + "B_by_l", b, shape_string({n, out, r}));
    for (int64_t l = 0; l < n; ++l)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) {
          double d = 0;
          for (int64_t k = 0; k < r; ++k) d += b.data[(l * out + o) * r + k] * a.data[(l * r + k) * in + i];
          w.data[(l * in + i) * out + o] += d * s;
        }
    done(p + "A_by_l");
    done(p + "B_by_l");
  }

  // SO(2) group (weight_m0 or weight_m.<k>): weight[i][o] += s * sum_r A[r][i] * B[o][r].
  void so2(const std::string& p, const std::string& a_key, const std::string& b_key, const std::string& w_key) {
    const TensorData& a = need(a_key, a_key);
    const TensorData& b = need(b_key, a_key);
    TensorData& w = need(w_key, a_key);
    const double s = scaling(p, a_key);
    const int64_t r = cfg_.lora_rank;
    if (w.shape.size() != 2) bad_shape(w_key, w, "(in, out)");
    const int64_t in = w.shape[0], out = w.shape[1];
    if (a.shape != std::vector<int64_t>{r, in}) bad_shape(a_key, a, shape_string({r, in}));
    if (b.shape != std::vector<int64_t>{out, r}) bad_shape(b_key, b, shape_string({out, r}));
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double d = 0;
        for (int64_t k = 0; k < r; ++k) d += a.data[k * in + i] * b.data[o * r + k];
        w.data[i * out + o] += d * s;
      }
    done(a_key);
    done(b_key);
  }

  const std::set<std::string>& used() const { return used_; }

 private:
  TensorData& need(const std::string& key, const std::string& adapter) {
    const auto it = ckpt_.tensors.find(key);
    if (it == ckpt_.tensors.end())
      throw Error(ckpt_.path + ": LoRA adapter '" + adapter + "' has no '" + key +
                  "' to fold into (a LoRA adapter needs its A, its B, the base weight and the "
                  "module's lora_scaling)");
    ckpt_.get_finite(key);  // a NaN adapter would otherwise surface as a NaN base weight
    return it->second;
  }
  [[noreturn]] void bad_shape(const std::string& key, const TensorData& t, const std::string& expected) const {
    throw Error(ckpt_.path + ": LoRA tensor '" + key + "' has shape " + shape_string(t.shape) + ", expected " +
                expected + " (lora.rank = " + std::to_string(cfg_.lora_rank) + ")");
  }
  // The module's stored scaling, which deepmd-kit multiplies into the delta; it must be the
  // config's alpha / rank (within float32 rounding for a float32 checkpoint).
  double scaling(const std::string& p, const std::string& adapter) {
    const std::string key = p + "lora_scaling";
    const TensorData& t = need(key, adapter);
    if (t.numel() != 1 || !t.shape.empty())
      throw Error(ckpt_.path + ": LoRA tensor '" + key + "' has shape " + shape_string(t.shape) +
                  ", expected a 0-d scalar");
    const double s = t.data[0];
    const double expected = cfg_.lora_alpha / cfg_.lora_rank;
    if (!(std::fabs(s - expected) <= 1e-6 * std::fabs(expected))) {
      std::ostringstream o;
      o.precision(17);
      o << ckpt_.path << ": LoRA tensor '" << key << "' = " << s << " disagrees with the config's "
        << "lora.alpha / lora.rank = " << cfg_.lora_alpha << " / " << cfg_.lora_rank << " = " << expected;
      throw Error(o.str());
    }
    used_.insert(key);
    return s;
  }
  void done(const std::string& key) { used_.insert(key); }

  Checkpoint& ckpt_;
  const ModelConfig& cfg_;
  std::set<std::string> used_;
};

std::string lora_json(const ModelConfig& cfg) {
  std::ostringstream o;
  o << "{rank: " << cfg.lora_rank << ", alpha: " << cfg.lora_alpha << "}";
  return o.str();
}

}  // namespace

void fold_lora(Checkpoint& ckpt, const ModelConfig& cfg) {
  std::vector<std::pair<std::string, Name>> adapters;
  for (const auto& kv : ckpt.tensors) {
    const Name n = classify(kv.first);
    if (n.kind != Kind::None) adapters.emplace_back(kv.first, n);
  }
  if (cfg.lora_rank == 0) {
    if (!adapters.empty())
      throw Error(ckpt.path + ": tensor '" + adapters.front().first +
                  "' is a LoRA adapter, but model_params has no `lora` (an inconsistent checkpoint; "
                  "deepmd-kit writes both or neither)");
    return;
  }
  if (adapters.empty())
    throw Error(ckpt.path + ": model_params sets lora = " + lora_json(cfg) +
                " but the checkpoint holds no LoRA adapter tensors (A_by_l/B_by_l, A_m0/B_m0, "
                "A_m.*/B_m.*, lora_scaling); a merged checkpoint has `lora` removed");
  for (const auto& [key, n] : adapters)
    if (key.compare(0, std::string(kDescriptor).size(), kDescriptor) != 0)
      throw Error(ckpt.path + ": LoRA tensor '" + key + "' is outside atomic_model.descriptor. "
                  "(deepmd-kit 3.2.0 folds adapters of the descriptor only)");

  Folder f(ckpt, cfg);
  std::set<std::string> so2_groups;
  for (const auto& [key, n] : adapters) {
    if (n.kind == Kind::A3) f.so3(n.prefix);
    if (n.kind == Kind::A0) {
      f.so2(n.prefix, n.prefix + "A_m0", n.prefix + "B_m0", n.prefix + "weight_m0");
      so2_groups.insert(n.prefix);
    }
  }
  for (const auto& [key, n] : adapters)
    if (n.kind == Kind::Am) {
      if (!so2_groups.count(n.prefix))
        throw Error(ckpt.path + ": LoRA adapter '" + key + "' has no '" + n.prefix +
                    "A_m0' beside it (deepmd-kit folds the |m| > 0 adapters of an SO(2) linear "
                    "together with its m = 0 adapter)");
      f.so2(n.prefix, key, n.prefix + "B_m." + n.index, n.prefix + "weight_m." + n.index);
    }
  for (const auto& [key, n] : adapters)
    if (!f.used().count(key)) {
      const char* partner = n.kind == Kind::B3   ? "A_by_l"
                            : n.kind == Kind::B0 ? "A_m0"
                            : n.kind == Kind::Bm ? "A_m.<k>"
                                                 : "A_by_l or A_m0 (no adapter uses this scaling)";
      throw Error(ckpt.path + ": LoRA tensor '" + key + "' was not folded: its module has no " + partner);
    }
  for (const auto& key : f.used()) ckpt.tensors.erase(key);
}

void require_no_lora_adapters(const Checkpoint& ckpt) {
  for (const auto& kv : ckpt.tensors)
    if (classify(kv.first).kind != Kind::None)
      throw Error(ckpt.path + ": tensor '" + kv.first +
                  "' is a LoRA adapter that was not folded into its base weight (load the model "
                  "through sezm::load_model_weights, which folds LoRA adapters)");
}

}  // namespace sezm
