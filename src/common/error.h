#pragma once
#include <stdexcept>
#include <string>

namespace sezm {

// Every user-facing failure (bad file, unsupported option, bad input) is a sezm::Error whose
// message names the cause; front ends (CLI, pair style) print it verbatim.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace sezm
