#pragma once
// Global -> shared copies for the latency-bound segment sums (value_path.cu, source_sums.cu,
// source_backward.cu): staging loops issue all their loads at once and wait before the CTA's
// barrier (or, pipelined, for all but the newest groups).
namespace sezm::cuda {
namespace {

// Global -> shared copies that hold no registers while in flight (cp.async, sm_80 and later; a
// plain copy on older targets), waited for by copy_async_wait before the CTA's barrier: the
// staging loops below issue all their loads at once (issue 16, memory-level parallelism).
__device__ __forceinline__ void copy_async16(float* sm, const float* gm) {
#if __CUDA_ARCH__ >= 800
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(sm));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gm) : "memory");
#else
  *reinterpret_cast<float4*>(sm) = *reinterpret_cast<const float4*>(gm);
#endif
}
__device__ __forceinline__ void copy_async4(float* sm, const float* gm) {
#if __CUDA_ARCH__ >= 800
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(sm));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sa), "l"(gm) : "memory");
#else
  *sm = *gm;
#endif
}
__device__ __forceinline__ void copy_async8(float* sm, const float* gm) {
#if __CUDA_ARCH__ >= 800
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(sm));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(sa), "l"(gm) : "memory");
#else
  *reinterpret_cast<float2*>(sm) = *reinterpret_cast<const float2*>(gm);
#endif
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
