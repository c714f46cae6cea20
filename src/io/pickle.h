#pragma once
// Unpickler for the subset of the pickle protocol that torch.save writes (protocol 2, plus
// the few protocol-4 opcodes that cost nothing). No Python objects are constructed: the
// result is a small tagged tree (PyValue). Torch-specific globals are interpreted:
//   collections.OrderedDict()                       -> Dict (BUILD state, e.g. _metadata, dropped)
//   persistent id ('storage', torch.XStorage, key, location, numel) -> Storage
//   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...) -> Tensor (a reference
//       into a storage; the bytes live in the zip entry <prefix>/data/<key>)
//   torch._utils._rebuild_parameter(tensor, ...)   -> that Tensor
// Any other global (optimizer classes, ...) becomes an opaque Object, so it only fails if a
// caller actually needs it. Malformed input (unknown opcode, truncation, stack misuse) throws
// sezm::Error naming the source, the byte offset and the cause.
//
// Ownership: every value of one unpickle() lives in one arena that the returned root pointer
// shares; containers hold plain pointers into it. Destroying a value therefore never recurses,
// however deeply lists nest, and a list that contains itself (legal pickle: memo + APPEND) is
// freed with the rest instead of leaking or recursing forever (docs/checkpoint-reader.md).
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sezm {

struct PyValue;
// The root of an unpickled tree; it keeps the whole arena alive.
using PyValuePtr = std::shared_ptr<const PyValue>;

struct StorageRef {
  std::string key;       // zip entry name below <prefix>/data/
  std::string dtype;     // "float32", "float64", "int64", "int32", "bool", ... (see pickle.cpp)
  size_t element_size = 0;
  int64_t numel = 0;     // elements in the whole storage
  std::string location;  // e.g. "cpu", "cuda:0" (informational)
};

struct TensorRef {
  StorageRef storage;
  int64_t offset = 0;  // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // in elements
};

struct PyValue {
  enum class Kind { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict, Global, Object,
                    Storage, Tensor };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;  // String / Bytes payload; "module.name" for Global and Object
  std::vector<PyValue*> items;                          // List, Tuple
  std::vector<std::pair<PyValue*, PyValue*>> entries;  // Dict, in insertion order
  // Storage (ref->storage) and Tensor; kept out of line so that the many plain values of an
  // optimizer state stay small (an arena value costs ~120 bytes, about one per pickle byte).
  std::unique_ptr<TensorRef> ref;

  bool is(Kind k) const { return kind == k; }
  const StorageRef& storage() const { return ref->storage; }  // Storage and Tensor only
  const TensorRef& tensor() const { return *ref; }            // Tensor only
  // Dict only: the value stored under string key `key`, or nullptr.
  const PyValue* find(const std::string& key) const;
  // "dict", "tensor", "object torch.optim.Adam", ... for error messages.
  std::string describe() const;
};

// Parses a complete pickle. `source` only appears in error messages.
PyValuePtr unpickle(const std::string& bytes, const std::string& source);

}  // namespace sezm
