#pragma once
// Element symbol -> atomic number Z (H..Og), for the ZBL pair term (docs/model.md §9).
#include <string>

namespace sezm {

// 0 when `symbol` is not an element symbol (case-sensitive, as deepmd-kit's table).
int atomic_number(const std::string& symbol);

}  // namespace sezm
