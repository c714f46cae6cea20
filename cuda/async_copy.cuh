#pragma once
// Global -> shared copies for the latency-bound segment sums (value_path.cu, source_sums.cu,
// source_backward.cu): staging loops issue all their loads at once and wait before the CTA's
// barrier (or, pipelined, for all but the newest groups).
#include <cstdint>
#include <type_traits>

namespace sezm::cuda {
namespace {

// Global -> shared copies of B = 4, 8 or 16 bytes that hold no registers while in flight (cp.async,
// sm_80 and later; a plain copy on older targets), waited for by copy_async_wait before the CTA's
// barrier: the staging loops below issue all their loads at once (issue 16, memory-level
// parallelism). 16 bytes bypass L1 (.cg, the only width it takes), narrower ones go through it.
template <int B>
__device__ __forceinline__ void copy_async(float* sm, const float* gm) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async copies 4, 8 or 16 bytes");
#if __CUDA_ARCH__ >= 800
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(sm));
  if constexpr (B == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gm) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(sa), "l"(gm), "n"(B) : "memory");
#else
  using V = std::conditional_t<B == 16, float4, std::conditional_t<B == 8, float2, float>>;
  *reinterpret_cast<V*>(sm) = *reinterpret_cast<const V*>(gm);
#endif
}
__device__ __forceinline__ void copy_async16(float* sm, const float* gm) { copy_async<16>(sm, gm); }
__device__ __forceinline__ void copy_async4(float* sm, const float* gm) { copy_async<4>(sm, gm); }
// n floats gm[0, n) -> sm[0, n) by threads t = 0 .. nt - 1, every copy issued before any wait:
// 16-byte pieces where both ends are 16-byte aligned, else 4-byte ones. The caller waits
// (copy_async_wait) before its barrier. Why not a load-and-store loop: that holds one load per
// thread in flight, and its trips wait on memory one after another.
__device__ __forceinline__ void copy_async_span(float* sm, const float* gm, int n, int t, int nt) {
  int head = 0;
  if (((reinterpret_cast<uintptr_t>(gm) | reinterpret_cast<uintptr_t>(sm)) & 15) == 0) {
    head = n & ~3;
    for (int i = 4 * t; i < head; i += 4 * nt) copy_async16(sm + i, gm + i);
  }
  for (int i = head + t; i < n; i += nt) copy_async4(sm + i, gm + i);
}
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
// Pipelined staging (source_backward.cu: the next edge's rows in flight while one is worked on):
// the thread's copies issued since the last commit form one group; copy_async_wait_group<N> waits
// until at most N of the thread's groups are still in flight.
__device__ __forceinline__ void copy_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void copy_async_wait_group() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace
}  // namespace sezm::cuda
