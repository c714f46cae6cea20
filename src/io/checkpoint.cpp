#include "io/checkpoint.h"

#include <cstring>
#include <set>

#include "common/error.h"
#include "io/pickle.h"
#include "io/zip_archive.h"

namespace sezm {
namespace {

// Storage bytes are little-endian (checked against <prefix>/byteorder) and decoded by memcpy.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint decoding assumes a little-endian host");

using Kind = PyValue::Kind;

// model_params is plain JSON-like data; anything else in it means a format we do not know.
nlohmann::json to_json(const PyValue& v, const std::string& where, const std::string& path) {
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
        arr.push_back(to_json(*v.items[i], where + "[" + std::to_string(i) + "]", path));
      return arr;
    }
    case Kind::Dict: {
      auto obj = nlohmann::json::object();
      for (const auto& [k, val] : v.entries) {
        std::string key;
        if (k->is(Kind::String)) key = k->text;
        else if (k->is(Kind::Int)) key = std::to_string(k->integer);
        else throw Error(path + ": " + where + " has a " + k->describe() + " key");
        obj[key] = to_json(*val, where + "/" + key, path);
      }
      return obj;
    }
    default:
      throw Error(path + ": " + where + " holds a " + v.describe() +
                  " where plain configuration values were expected");
  }
}

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Reads the storages that model tensors reference, once each, and copies tensors out of them.
class TensorReader {
 public:
  TensorReader(const ZipArchive& zip, std::string prefix) : zip_(zip), prefix_(std::move(prefix)) {}

  TensorData read(const TensorRef& t, const std::string& name) {
    const std::string& path = zip_.path();
    const StorageRef& s = t.storage;
    if (s.element_size == 0)
      throw Error(path + ": tensor " + name + " has unsupported storage type " + s.dtype);

    TensorData out;
    out.dtype = s.dtype;
    out.shape = t.shape;
    int64_t numel = 1;
    int64_t last = t.offset;  // element index of the last element
    bool bad = t.offset < 0;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      bad = bad || t.shape[d] < 0 || t.stride[d] < 0;
      numel *= t.shape[d];
      if (t.shape[d] > 0) last += (t.shape[d] - 1) * t.stride[d];
    }
    if (bad || (numel > 0 && last >= s.numel))
      throw Error(path + ": tensor " + name + " (offset " + std::to_string(t.offset) +
                  ") lies outside its storage of " + std::to_string(s.numel) + " elements");

    const std::string& blob = storage(s, name);
    out.data.resize(static_cast<size_t>(numel));
    if (numel == 0) return out;

    // Odometer over the multi-index, in row-major order.
    const size_t rank = t.shape.size();
    std::vector<int64_t> index(rank, 0);
    int64_t element = t.offset;
    for (int64_t n = 0; n < numel; ++n) {
      out.data[static_cast<size_t>(n)] = decode(blob.data() + element * static_cast<int64_t>(s.element_size), s.dtype);
      for (size_t d = rank; d-- > 0;) {
        element += t.stride[d];
        if (++index[d] < t.shape[d]) break;
        element -= t.stride[d] * t.shape[d];
        index[d] = 0;
      }
    }
    return out;
  }

 private:
  const std::string& storage(const StorageRef& s, const std::string& tensor_name) {
    auto it = blobs_.find(s.key);
    if (it != blobs_.end()) return it->second;
    const std::string entry = prefix_ + "data/" + s.key;
    if (!zip_.has(entry))
      throw Error(zip_.path() + ": storage entry '" + entry + "' of tensor " + tensor_name +
                  " is missing from the archive");
    const size_t need = static_cast<size_t>(s.numel) * s.element_size;
    const size_t have = zip_.entry_size(entry);
    if (have < need)
      throw Error(zip_.path() + ": storage entry '" + entry + "' of tensor " + tensor_name +
                  " is too short: " + std::to_string(have) + " bytes, " + std::to_string(need) +
                  " needed");
    return blobs_.emplace(s.key, zip_.read(entry)).first->second;
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
  ckpt.model_params = to_json(*params, "_extra_state/model_params", path);
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

  TensorReader reader(zip, prefix);
  for (const auto& [k, v] : state.entries) {
    if (!k->is(Kind::String) || !v->is(Kind::Tensor) || k->text.rfind(branch_prefix, 0) != 0)
      continue;
    const std::string name = k->text.substr(branch_prefix.size());
    ckpt.tensors[name] = reader.read(v->tensor, name);
  }
  if (ckpt.tensors.empty())
    throw Error(path + ": the state dict holds no " + branch_prefix + "* tensors");
  return ckpt;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string o = "(";
  for (size_t i = 0; i < shape.size(); ++i) o += (i ? ", " : "") + std::to_string(shape[i]);
  return o + ")";
}

}  // namespace sezm
