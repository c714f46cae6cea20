#include "io/checkpoint.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <set>

#include "common/error.h"
#include "io/pickle.h"
#include "io/zip_archive.h"

namespace sezm {
namespace {

// Storage bytes are little-endian (checked against <prefix>/byteorder) and decoded by memcpy.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint decoding assumes a little-endian host");

using Kind = PyValue::Kind;

// Limits of model_params (docs/checkpoint-reader.md): a real one nests ~5 levels and holds a
// few hundred values. The depth limit bounds the recursion below (a list nested 2e5 deep, or
// one that contains itself, overflowed the stack); the value limit bounds the expansion of
// shared containers (60 levels of [x, x] pickle to ~1 kB and would expand to 2^60 values).
constexpr int kMaxParamsDepth = 64;
constexpr size_t kMaxParamsValues = 100000;

// Where a value sits in model_params ("_extra_state/model_params/descriptor/sel[1]"), kept as a
// chain of frames and spelled out only for an error message.
struct JsonPath {
  const JsonPath* parent;
  const std::string* key;  // dict key, or
  size_t index;            // list index when key is null
  std::string str() const {
    std::string s = parent ? parent->str() : "";
    return key ? s + (parent ? "/" : "") + *key : s + "[" + std::to_string(index) + "]";
  }
};

struct JsonBudget {
  const std::string& path;
  size_t values = 0;
};

// model_params is plain JSON-like data; anything else in it means a format we do not know.
nlohmann::json to_json(const PyValue& v, const JsonPath& where, JsonBudget& budget, int depth) {
  const std::string& path = budget.path;
  if (depth > kMaxParamsDepth) {
    std::string at = where.str();
    if (at.size() > 120) at = at.substr(0, 100) + "...";
    throw Error(path + ": " + at + ": model_params nests deeper than " +
                std::to_string(kMaxParamsDepth) + " levels (a self-containing or corrupt list)");
  }
  if (++budget.values > kMaxParamsValues)
    throw Error(path + ": model_params holds more than " + std::to_string(kMaxParamsValues) +
                " values (counting shared containers once per use); not a deepmd-kit configuration");
  switch (v.kind) {
    case Kind::None: return nullptr;
    case Kind::Bool: return v.boolean;
    case Kind::Int: return v.integer;
    case Kind::Float: return v.real;
    case Kind::String: return v.text;
    case Kind::List:
    case Kind::Tuple: {
      auto arr = nlohmann::json::array();
      for (size_t i = 0; i < v.items.size(); ++i)
        arr.push_back(to_json(*v.items[i], JsonPath{&where, nullptr, i}, budget, depth + 1));
      return arr;
    }
    case Kind::Dict: {
      auto obj = nlohmann::json::object();
      for (const auto& [k, val] : v.entries) {
        std::string key;
        if (k->is(Kind::String)) key = k->text;
        else if (k->is(Kind::Int)) key = std::to_string(k->integer);
        else throw Error(path + ": " + where.str() + " has a " + k->describe() + " key");
        obj[key] = to_json(*val, JsonPath{&where, &key, 0}, budget, depth + 1);
      }
      return obj;
    }
    default:
      throw Error(path + ": " + where.str() + " holds a " + v.describe() +
                  " where plain configuration values were expected");
  }
}

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// a * b and a + b on sizes read from the file; false when the result does not fit.
bool mul(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
bool add(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// Reads the storages that model tensors reference, once each, and copies tensors out of them.
// Every size, offset and stride comes from the file and is checked before it is used
// (docs/checkpoint-reader.md): products and sums are overflow-checked, a tensor must lie inside
// its storage, a storage inside its zip entry, and nothing is allocated before these checks.
class TensorReader {
 public:
  // `budget`: the most elements all tensors together may decode to (see read_checkpoint).
  TensorReader(const ZipArchive& zip, std::string prefix, int64_t budget)
      : zip_(zip), prefix_(std::move(prefix)), budget_(budget) {}

  TensorData read(const TensorRef& t, const std::string& name) {
    const StorageRef& s = t.storage;
    if (s.element_size == 0) fail(name, "has unsupported storage type " + s.dtype);

    TensorData out;
    out.dtype = s.dtype;
    out.shape = t.shape;
    const std::string where = "shape " + shape_string(t.shape) + ", strides " + shape_string(t.stride) +
                              ", offset " + std::to_string(t.offset);
    int64_t numel = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0 || t.stride[d] < 0)
        fail(name, "has a negative size or stride (" + where + ")");
      if (!mul(numel, t.shape[d], numel))
        fail(name, "declares more than 2^63 elements (" + where + ")");
    }
    if (t.offset < 0) fail(name, "has a negative storage offset (" + where + ")");
    if (numel == 0) return out;

    // A view never needs more elements than its storage holds unless it repeats elements
    // (stride 0 or overlapping strides). torch.save keeps such broadcast views as they are, but
    // deepmd-kit never saves one; refusing them bounds a tensor's memory by its storage's bytes
    // (a 2.6 MB file declaring shape (2^28,) with stride 0 cost 2.1 GB; docs/checkpoint-reader.md).
    if (numel > s.numel)
      fail(name, "declares " + std::to_string(numel) + " elements (" + where + "), more than its storage '" +
                     s.key + "' holds (" + std::to_string(s.numel) +
                     "); broadcast (stride-0 or overlapping) views larger than their storage are refused");
    int64_t last = t.offset;  // element index of the last element
    for (size_t d = 0; d < t.shape.size(); ++d) {
      int64_t reach = 0;
      if (!mul(t.shape[d] - 1, t.stride[d], reach) || !add(last, reach, last))
        fail(name, "reaches past element 2^63 of its storage (" + where + ")");
    }
    if (last >= s.numel)
      fail(name, "lies outside its storage '" + s.key + "' of " + std::to_string(s.numel) + " elements (" +
                     where + ": last element " + std::to_string(last) + ")");
    if (numel > budget_)
      fail(name, "would exceed the decoding limit: all tensors together may hold at most one element per "
                 "byte of the file (" + std::to_string(budget_) + " elements left, " + std::to_string(numel) +
                 " declared); the file repeats storages");
    budget_ -= numel;

    const std::string& blob = storage(s, name);
    out.data.resize(static_cast<size_t>(numel));

    // Odometer over the multi-index, in row-major order; every element index lies in
    // [offset, last] (checked above), inside the blob (checked in storage()).
    // The stride of a size-1 dimension is never applied (it may be anything, even 2^63 - 1);
    // zeroing it keeps the odometer's steps within [0, 2 x storage size].
    const size_t rank = t.shape.size();
    std::vector<int64_t> stride = t.stride;
    for (size_t d = 0; d < rank; ++d)
      if (t.shape[d] == 1) stride[d] = 0;
    std::vector<int64_t> index(rank, 0);
    int64_t element = t.offset;
    for (int64_t n = 0; n < numel; ++n) {
      out.data[static_cast<size_t>(n)] = decode(blob.data() + element * static_cast<int64_t>(s.element_size), s.dtype);
      for (size_t d = rank; d-- > 0;) {
        element += stride[d];
        if (++index[d] < t.shape[d]) break;
        element -= stride[d] * t.shape[d];
        index[d] = 0;
      }
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& tensor, const std::string& why) const {
    throw Error(zip_.path() + ": tensor " + tensor + " " + why);
  }

  // The storage's bytes, read once per key. Its declared size (numel x element size) must fit
  // the zip entry; this is checked for every tensor, since two tensors may name the same key
  // with different types or element counts.
  const std::string& storage(const StorageRef& s, const std::string& tensor_name) {
    const std::string entry = prefix_ + "data/" + s.key;
    int64_t need = 0;
    if (!mul(s.numel, static_cast<int64_t>(s.element_size), need))
      throw Error(zip_.path() + ": storage entry '" + entry + "' of tensor " + tensor_name + " declares " +
                  std::to_string(s.numel) + " elements of " + std::to_string(s.element_size) +
                  " bytes, more than 2^63 bytes");
    auto it = blobs_.find(s.key);
    if (it == blobs_.end()) {
      if (!zip_.has(entry))
        throw Error(zip_.path() + ": storage entry '" + entry + "' of tensor " + tensor_name +
                    " is missing from the archive");
      const size_t have = zip_.entry_size(entry);
      if (have < static_cast<uint64_t>(need)) too_short(entry, tensor_name, have, need);
      it = blobs_.emplace(s.key, zip_.read(entry)).first;
    }
    if (it->second.size() < static_cast<uint64_t>(need)) too_short(entry, tensor_name, it->second.size(), need);
    return it->second;
  }
  [[noreturn]] void too_short(const std::string& entry, const std::string& tensor_name, size_t have,
                              int64_t need) const {
    throw Error(zip_.path() + ": storage entry '" + entry + "' of tensor " + tensor_name +
                " is too short: " + std::to_string(have) + " bytes, " + std::to_string(need) + " needed");
  }

  static double decode(const char* p, const std::string& dtype) {
    if (dtype == "float64") return load<double>(p);
    if (dtype == "float32") return load<float>(p);
    if (dtype == "int64") return static_cast<double>(load<int64_t>(p));
    if (dtype == "int32") return load<int32_t>(p);
    return *p != 0;  // bool (the only other dtype with an element size)
  }
  template <typename T>
  static T load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  const ZipArchive& zip_;
  std::string prefix_;
  int64_t budget_;
  std::map<std::string, std::string> blobs_;
};

// "<prefix>/data.pkl": torch names the top folder after the file it saved to.
std::string find_pickle(const ZipArchive& zip) {
  std::string best;
  for (const auto& name : zip.entry_names()) {
    const bool match = name == "data.pkl" ||
                       (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0);
    if (match && (best.empty() || name.size() < best.size())) best = name;
  }
  if (best.empty())
    throw Error(zip.path() + ": not a PyTorch checkpoint: the zip archive has no data.pkl");
  return best;
}

}  // namespace

size_t TensorData::numel() const {
  size_t n = 1;
  for (const int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

bool Checkpoint::has(const std::string& key) const { return tensors.count(key) > 0; }

const TensorData& Checkpoint::get(const std::string& key) const {
  const auto it = tensors.find(key);
  if (it == tensors.end()) throw Error(path + ": checkpoint has no tensor '" + key + "'");
  return it->second;
}

Checkpoint read_checkpoint(const std::string& path, const BranchChooser& choose) {
  ZipArchive zip(path);
  const std::string pickle_entry = find_pickle(zip);
  const std::string prefix = pickle_entry.substr(0, pickle_entry.size() - 8);  // keeps the '/'

  if (zip.has(prefix + "byteorder")) {
    const std::string order = zip.read(prefix + "byteorder");
    if (order.rfind("little", 0) != 0)
      throw Error(path + ": storages are stored with byte order '" + order +
                  "'; only little-endian checkpoints are supported");
  }  // files written before torch recorded the byte order are little-endian

  const PyValuePtr root = unpickle(zip.read(pickle_entry), path + ":" + pickle_entry);
  if (!root->is(Kind::Dict))
    throw Error(path + ": not a deepmd-kit model checkpoint (data.pkl holds a " +
                root->describe() + ", not a dict)");
  // {"model": state_dict, "optimizer": ..., ...} or a bare state dict.
  const PyValue* model = root->find("model");
  const PyValue& state = (model && model->is(Kind::Dict)) ? *model : *root;

  const PyValue* extra = state.find("_extra_state");
  const PyValue* params = extra ? extra->find("model_params") : nullptr;
  if (!params)
    throw Error(path + ": not a deepmd-kit model checkpoint (no _extra_state/model_params in "
                       "the state dict)");

  Checkpoint ckpt;
  ckpt.path = path;
  JsonBudget json_budget{path};
  const std::string params_name = "_extra_state/model_params";
  ckpt.model_params = to_json(*params, JsonPath{nullptr, &params_name, 0}, json_budget, 0);
  std::string branch_prefix;
  if (ckpt.model_params.contains("model_dict")) {
    const nlohmann::json& dict = ckpt.model_params["model_dict"];
    std::set<std::string> branches;
    if (dict.is_object())
      for (const auto& item : dict.items()) branches.insert(item.key());
    if (!choose)
      throw Error(path + ": multi-task checkpoint with branches [" + join(branches) +
                  "]; freeze or extract a single branch first");
    std::vector<std::string> order;  // deepmd-kit matches names in this order
    if (const PyValue* d = params->find("model_dict"); d && d->is(Kind::Dict))
      for (const auto& [k, v] : d->entries)
        if (k->is(Kind::String)) order.push_back(k->text);
    ckpt.branch = choose(ckpt.model_params, order);
    if (!branches.count(ckpt.branch))
      throw Error(path + ": multi-task checkpoint has no branch '" + ckpt.branch + "' (branches: " +
                  join(branches) + ")");
    // deepmd-kit keeps each branch's own tensors under model.<branch>., shared ones repeated.
    branch_prefix = "model." + ckpt.branch + ".";
    nlohmann::json branch_params = dict[ckpt.branch];
    ckpt.model_params = std::move(branch_params);
  } else {
    // Tensors are "model.<branch>.<name>"; a single-task model has exactly one branch.
    const std::string head = "model.";
    std::set<std::string> branches;
    for (const auto& [k, v] : state.entries) {
      if (!k->is(Kind::String) || !v->is(Kind::Tensor) || k->text.rfind(head, 0) != 0) continue;
      const size_t dot = k->text.find('.', head.size());
      if (dot != std::string::npos) branches.insert(k->text.substr(head.size(), dot - head.size()));
    }
    if (branches.empty()) throw Error(path + ": the state dict holds no model.<branch>.* tensors");
    if (branches.size() > 1)
      throw Error(path + ": multi-task checkpoint with branches [" + join(branches) +
                  "]; only single-branch models are supported");
    branch_prefix = head + *branches.begin() + ".";
  }
  ckpt.tensor_prefix = branch_prefix;

  // All tensors together may decode to at most one element per byte of the file: a file that
  // does not repeat storages needs at most one per byte (bool), float64 one per eight. This
  // bounds the decoded size (8 bytes an element) by 8x the file, whatever the pickle declares
  // (docs/checkpoint-reader.md).
  TensorReader reader(zip, prefix, static_cast<int64_t>(zip.file_size()));
  for (const auto& [k, v] : state.entries) {
    if (!k->is(Kind::String) || !v->is(Kind::Tensor) || k->text.rfind(branch_prefix, 0) != 0)
      continue;
    const std::string name = k->text.substr(branch_prefix.size());
    ckpt.tensors[name] = reader.read(v->tensor(), k->text);  // errors name the full state-dict key
  }
  if (ckpt.tensors.empty())
    throw Error(path + ": the state dict holds no " + branch_prefix + "* tensors");
  return ckpt;
}

const TensorData& Checkpoint::get_finite(const std::string& key) const {
  const TensorData& t = get(key);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i]) && bad++ == 0) first = i;
  if (bad) {
    // The multi-index of the first bad element, row-major.
    std::vector<int64_t> index(t.shape.size());
    size_t rest = first;
    for (size_t d = t.shape.size(); d-- > 0;) {
      index[d] = static_cast<int64_t>(rest % static_cast<size_t>(t.shape[d]));
      rest /= static_cast<size_t>(t.shape[d]);
    }
    std::ostringstream o;
    o << path << ": tensor '" << tensor_prefix << key << "' " << shape_string(t.shape) << " holds " << bad
      << " non-finite value" << (bad > 1 ? "s" : "") << ", the first " << t.data[first] << " at index "
      << shape_string(index) << "; every weight must be finite (a diverged training or a damaged file)";
    throw Error(o.str());
  }
  return t;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string o = "(";
  for (size_t i = 0; i < shape.size(); ++i) o += (i ? ", " : "") + std::to_string(shape[i]);
  return o + ")";
}

}  // namespace sezm
