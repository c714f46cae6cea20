#include "common/parallel_copy.h"

#include <algorithm>
#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sezm {

void parallel_copy(void* dst, const void* src, size_t bytes) {
  if (bytes < kParallelCopyBytes) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  // Pieces of 256 KiB (whole cache-line runs for each thread), the last one shorter.
  constexpr size_t kPiece = size_t(256) << 10;
  const long pieces = static_cast<long>((bytes + kPiece - 1) / kPiece);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
#ifdef _OPENMP
  const int threads = std::min(kParallelCopyThreads, omp_get_max_threads());
#endif
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long i = 0; i < pieces; ++i) {
    const size_t at = static_cast<size_t>(i) * kPiece, n = bytes - at < kPiece ? bytes - at : kPiece;
    std::memcpy(d + at, s + at, n);
  }
}

}  // namespace sezm
