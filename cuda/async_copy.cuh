#pragma once
// Global -> shared copies for the latency-bound segment sums (value_path.cu, source_sums.cu):
// staging loops issue all their loads at once and wait before the CTA's barrier.
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
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace
}  // namespace sezm::cuda
