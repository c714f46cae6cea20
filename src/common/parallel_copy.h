#pragma once
// A large memcpy split over a few threads of the calling thread's OpenMP team: the host side of
// the CUDA engine's graph upload (cuda/graph_upload.cu), where one thread's copy into page-locked
// staging would set the pace of the transfer. Compiled with the core's OpenMP (the CUDA files'
// pragmas would be ignored by nvcc). Small copies (under kParallelCopyBytes) are one memcpy.
#include <cstddef>

namespace sezm {

constexpr size_t kParallelCopyBytes = size_t(1) << 20;
// The copy's threads: at most this many of the OpenMP team. Why: a team of every CPU stalls at its
// barrier whenever one member is descheduled, and the CUDA driver's own threads share those CPUs:
// on the H200 machine (16 CPUs) the 4,096-atom graph's upload ("call: buffers + graph upload",
// SEZM_CUDA_TIMING) took 1-29 ms per call with 16 threads, in 9 of 10 processes, against 1.0-1.8
// ms with 4 (all 8 processes), and 1.1-1.6 ms with this cap and the default team (all 10;
// docs/performance.md, 2026-12-04, "the slow processes"): four threads copy as fast as sixteen at
// their best.
constexpr int kParallelCopyThreads = 4;

// dst[0, bytes) = src[0, bytes); the ranges must not overlap.
void parallel_copy(void* dst, const void* src, size_t bytes);

}  // namespace sezm
