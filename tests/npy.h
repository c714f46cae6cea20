#pragma once
// Minimal .npy reader for the test data: format versions 1-3, little-endian float64 ('<f8')
// or float32 ('<f4'), C order. Returns the values as double and the shape; ADD_FAILURE and an
// empty result for anything else.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace sezm_test {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

inline NpyArray read_npy(const std::string& path) {
  NpyArray out;
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    ADD_FAILURE() << path << ": not a .npy file";
    return out;
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    hstart = 10;
  } else {
    hlen = 0;
    for (int k = 0; k < 4; ++k) hlen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
    hstart = 12;
  }
  const std::string header = bytes.substr(hstart, hlen);
  const bool f8 = header.find("'<f8'") != std::string::npos, f4 = header.find("'<f4'") != std::string::npos;
  if ((!f8 && !f4) || header.find("'fortran_order': False") == std::string::npos) {
    ADD_FAILURE() << path << ": unsupported header " << header;
    return out;
  }
  const size_t p0 = header.find("'shape': (") + 10, p1 = header.find(')', p0);
  std::string dims = header.substr(p0, p1 - p0);
  size_t count = 1;
  for (size_t pos = 0; pos < dims.size();) {
    const size_t comma = dims.find(',', pos);
    const std::string tok = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_of("0123456789") != std::string::npos) {
      out.shape.push_back(std::stoll(tok));
      count *= static_cast<size_t>(out.shape.back());
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const size_t width = f8 ? 8 : 4, body = hstart + hlen;
  if (bytes.size() != body + count * width) {
    ADD_FAILURE() << path << ": " << bytes.size() - body << " data bytes for " << count << " values";
    out.shape.clear();
    return out;
  }
  out.data.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (f8) {
      std::memcpy(&out.data[i], bytes.data() + body + 8 * i, 8);
    } else {
      float f;
      std::memcpy(&f, bytes.data() + body + 4 * i, 4);
      out.data[i] = f;
    }
  }
  return out;
}

}  // namespace sezm_test
