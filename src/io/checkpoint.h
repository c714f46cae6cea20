#pragma once
// Reader for deepmd-kit PyTorch training checkpoints (torch.save zip format):
//   <prefix>/data.pkl      pickled {"model": state_dict, ...} or a bare state_dict
//   <prefix>/data/<key>    raw little-endian storage bytes
//   <prefix>/byteorder     "little" (big-endian files are refused)
// Only what the model needs is decoded: the config (state_dict["_extra_state"]["model_params"])
// and the tensors of one model branch "model.<branch>.*". Optimizer state and everything else
// in the file is parsed as opaque pickle values and never materialised.
// Multi-task files (model_params holds `model_dict`) are read only with a BranchChooser, which
// picks the branch from model_params (model/multitask.h); only that branch's tensors are read.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sezm {

struct TensorData {
  std::string dtype;           // "float32" | "float64" | "int64" | "int32" | "bool"
  std::vector<int64_t> shape;  // empty for a 0-d tensor
  std::vector<double> data;    // contiguous row-major copy, converted to double
  size_t numel() const;
};

// "(2, 3, 4)": a shape as error messages print it.
std::string shape_string(const std::vector<int64_t>& shape);

struct Checkpoint {
  std::string path;
  // model/_extra_state/model_params converted to JSON; of a multi-task file, the chosen
  // branch's entry model_dict.<branch>
  nlohmann::json model_params;
  std::string branch;  // the chosen model_dict key of a multi-task file; empty otherwise
  std::string tensor_prefix;  // "model.<branch>.", stripped from the state-dict names below
  // key = state-dict name without the "model.<branch>." prefix,
  // e.g. "atomic_model.descriptor.blocks.0.post_so2_norm.bias"
  std::map<std::string, TensorData> tensors;
  bool has(const std::string& key) const;
  const TensorData& get(const std::string& key) const;  // Error naming path and key if missing
  // get(), and an Error naming the full state-dict name, the first bad element and the count
  // if the tensor holds a NaN or an infinity (the model loaders read weights through this).
  const TensorData& get_finite(const std::string& key) const;
};

// Given the whole model_params of a multi-task file and its model_dict keys in file order (the
// JSON object keeps them sorted), the model_dict key to read.
using BranchChooser =
    std::function<std::string(const nlohmann::json& model_params, const std::vector<std::string>& branches)>;

// Throws sezm::Error; a multi-task file without `choose` is refused with its branches named.
Checkpoint read_checkpoint(const std::string& path, const BranchChooser& choose = nullptr);

}  // namespace sezm
