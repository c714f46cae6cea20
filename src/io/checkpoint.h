#pragma once
// Reader for deepmd-kit PyTorch training checkpoints (torch.save zip format):
//   <prefix>/data.pkl      pickled {"model": state_dict, ...} or a bare state_dict
//   <prefix>/data/<key>    raw little-endian storage bytes
//   <prefix>/byteorder     "little" (big-endian files are refused)
// Only what the model needs is decoded: the config (state_dict["_extra_state"]["model_params"])
// and the tensors of the single model branch "model.<branch>.*". Optimizer state and
// everything else in the file is parsed as opaque pickle values and never materialised.
#include <cstdint>
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
  nlohmann::json model_params;  // model/_extra_state/model_params converted to JSON
  // key = state-dict name without the "model.<branch>." prefix,
  // e.g. "atomic_model.descriptor.blocks.0.post_so2_norm.bias"
  std::map<std::string, TensorData> tensors;
  bool has(const std::string& key) const;
  const TensorData& get(const std::string& key) const;  // Error naming path and key if missing
};

Checkpoint read_checkpoint(const std::string& path);  // throws sezm::Error

}  // namespace sezm
