#pragma once
// The host side of the warp-specialised tile (wgmma_ws.cuh): A's tensor map and the one-time
// launch preparation of a WS kernel (its shared memory, its register pool, its persistent grid).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cuda_common.cuh"
#include "wgmma_ws_gemm.cuh"

namespace sezm::cuda {
namespace {

// The tensor map of a 3-D float tensor (dims[0] contiguous; strides in bytes of dims 1 and 2) in
// boxes of 16 x box_rows x 1, no swizzle, out-of-bounds elements filled with zeros. Host only.
inline CUtensorMap ws_tensor_map(const float* base, const uint64_t (&dims)[3], const uint64_t (&strides)[2],
                                 uint32_t box_rows = kWsRows, bool half = false) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    SEZM_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
#else  // CUDA 12.0 - 12.4 (CMakeLists.txt accepts >= 12.0): the call without a version
    SEZM_CUDA(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q));
#endif
    if (fn == nullptr || q != cudaDriverEntryPointSuccess) throw Error("cuTensorMapEncodeTiled is not available");
    return reinterpret_cast<Encode>(fn);
  }();
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || strides[0] % 16 != 0 || strides[1] % 16 != 0)
    throw Error("ws_tensor_map: the tensor's base and strides must be multiples of 16 bytes");
  CUtensorMap tm{};
  const cuuint64_t dim[3] = {dims[0], dims[1], dims[2]}, stride[2] = {strides[0], strides[1]};
  const cuuint32_t box[3] = {kWsK, box_rows, 1}, estride[3] = {1, 1, 1};
  const CUresult r = encode(&tm, half ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(base), dim, stride, box, estride,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw Error("cuTensorMapEncodeTiled failed: " + std::to_string(static_cast<int>(r)));
  return tm;
}

// Once per kernel: its dynamic shared memory allowed, and its register pool checked (setmaxnreg.inc
// waits until the CTA's pool has the registers: a pool smaller than the producers' and the
// consumers' setmaxnreg counts would hang the kernel). Returns the CTAs resident at once (one per
// SM: the persistent grid's size).
inline int ws_prepare(const void* fn, int smem_bytes, const char* name) {
  // resident_grid sets the shared-memory attribute and counts the resident CTAs once per kernel
  // and size (these launches come once per layer and chunk).
  const int cap = resident_grid(fn, kWsThreads, static_cast<size_t>(smem_bytes), std::numeric_limits<int>::max());
  if (cap == 0)
    throw Error(std::string(name) + ": " + std::to_string(smem_bytes) + " bytes of shared memory per CTA exceed this GPU's limit");
  thread_local std::vector<const void*> checked;  // the register pool, once per kernel
  if (std::find(checked.begin(), checked.end(), fn) == checked.end()) {
    cudaFuncAttributes fa{};
    SEZM_CUDA(cudaFuncGetAttributes(&fa, fn));
    if (fa.numRegs * kWsThreads < 128 * kWsProducerRegs + 256 * kWsConsumerRegs)
      throw Error(std::string(name) + ": " + std::to_string(fa.numRegs) +
                  " registers per thread at entry are too few for setmaxnreg");
    checked.push_back(fn);
  }
  return cap;
}

}  // namespace
}  // namespace sezm::cuda
