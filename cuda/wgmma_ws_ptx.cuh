#pragma once
// The sm_90a instructions of the warp-specialised tile (wgmma_ws.cuh): mbarriers (init, expect-tx
// arrive, arrive, parity wait), bulk and tensor-map copies completing on an mbarrier, the
// generic-to-async proxy fence for global memory, the L2 discard, wgmma's wait_group 1 and
// setmaxnreg. Each compiles to nothing for other targets (the tile runs only on sm_90a:
// Dims::stack_ws).
#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>

namespace sezm::cuda {
namespace {

__device__ __forceinline__ uint32_t ws_smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ws_bar_init(uint64_t* b, int count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ws_smem(b)), "r"(count) : "memory");
#endif
}
// The barriers' initialisation made visible to the async proxy (the copies' complete_tx).
__device__ __forceinline__ void ws_bar_init_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// One arrival that also expects `bytes` of transactions in the current phase.
__device__ __forceinline__ void ws_bar_expect(uint64_t* b, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ws_smem(b)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void ws_bar_arrive(uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ws_smem(b)) : "memory");
#endif
}
// Until the phase of parity `parity` has completed (a fresh barrier: parity 1 passes at once).
__device__ __forceinline__ void ws_bar_wait(uint64_t* b, uint32_t parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(ws_smem(b)), "r"(parity)
        : "memory");
#endif
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global src to shared dst,
// completing on barrier b.
__device__ __forceinline__ void ws_bulk(float* dst, const float* src, uint32_t bytes, uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   ws_smem(dst)),
               "l"(src), "r"(bytes), "r"(ws_smem(b))
               : "memory");
#endif
}
// The box at (x, y, z) of the 3-D tensor map tm into shared dst, completing on barrier b.
__device__ __forceinline__ void ws_tma_3d(float* dst, const CUtensorMap* tm, int x, int y, int z, uint64_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(ws_smem(dst)),
      "l"(reinterpret_cast<uint64_t>(tm)), "r"(x), "r"(y), "r"(z), "r"(ws_smem(b))
      : "memory");
#endif
}
// This thread's generic-proxy writes to global memory ordered before async-proxy accesses (tensor
// copies) that a barrier orders after this point: the hand-over of an item's output to the next
// layer's copies in the chained forward (stack_ws_chain.cu), on the writers' and the reader's side.
__device__ __forceinline__ void ws_fence_proxy_global() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}
// This thread's generic-proxy reads of shared memory ordered before async-proxy writes (tensor
// and bulk copies) that a barrier orders after this point. The PTX memory model orders accesses
// of different proxies only through a proxy fence; an mbarrier arrival alone does not. Needed
// where consumers read a stage with ordinary loads and release it at once (ws_land_quads and
// ws_land_quads_h, wgmma_ws_regs.cuh: their arrival was issued before the loads had returned).
// Without it, 20 of 900 `precision tf32` force calls at 4,096 atoms gave other bits than the
// rest; with it, none of 2,100 (docs/performance.md, 2026-12-06 twenty-fourth session). A stage
// whose loads feed a wgmma is released after that wgmma completed, so its loads had returned.
__device__ __forceinline__ void ws_fence_proxy_shared() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// The 128-byte line at p (128-byte aligned, global) dropped from L2 without its write-back: a
// weak write of an indeterminate value (PTX ISA, `discard`). For rows that nothing reads again,
// whose write-back to HBM would be wasted: the chained launches' hand-over rows
// (ws_drop_group, stack_ws_gated.cuh).
__device__ __forceinline__ void ws_discard_l2(const void* p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
#endif
}
// gridDim.x, read again where it is used (the producer's 24 registers hold no copy of it).
__device__ __forceinline__ int ws_grid() {
  int n;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
  return n;
}
__device__ __forceinline__ void ws_wait1() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}
template <int kRegs>
__device__ __forceinline__ void ws_regs_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void ws_regs_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

}  // namespace
}  // namespace sezm::cuda
