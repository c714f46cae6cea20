#pragma once
// A large memcpy split over the calling thread's OpenMP team: the host side of the CUDA engine's
// graph upload (cuda/graph_upload.cu), where one thread's copy into page-locked staging would set
// the pace of the transfer. Compiled with the core's OpenMP (the CUDA files' pragmas would be
// ignored by nvcc). Small copies (under kParallelCopyBytes) are one memcpy.
#include <cstddef>

namespace sezm {

constexpr size_t kParallelCopyBytes = size_t(1) << 20;

// dst[0, bytes) = src[0, bytes); the ranges must not overlap.
void parallel_copy(void* dst, const void* src, size_t bytes);

}  // namespace sezm
