// parallel_copy (src/common/parallel_copy.h): every byte of copies below, at and above the
// threshold where it splits the copy over threads, from and to unaligned addresses.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/parallel_copy.h"

TEST(ParallelCopy, CopiesEveryByteAtEverySize) {
  const size_t T = sezm::kParallelCopyBytes;
  for (size_t n : {size_t(0), size_t(1), size_t(4095), T - 1, T, T + 1, 3 * T + 12345, 9 * T + 7}) {
    for (size_t off : {size_t(0), size_t(3)}) {
      std::vector<uint8_t> src(n + 8), dst(n + 8, 0xAB);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
      sezm::parallel_copy(dst.data() + off, src.data() + off, n);
      for (size_t i = 0; i < off; ++i) ASSERT_EQ(dst[i], 0xAB) << "byte before the range written, n " << n;
      for (size_t i = off; i < off + n; ++i) ASSERT_EQ(dst[i], src[i]) << "n " << n << " offset " << off << " byte " << i;
      for (size_t i = off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "byte after the range written, n " << n;
    }
  }
}
