// Device queries of the CUDA engine (host side): a usable device, its properties, and the
// shared-memory check of the fused stack's tile.
#include "device.cuh"

#include <cstdlib>
#include <string>

#include "sezm_cuda.h"
#include "stack.cuh"
#include "wgmma_f16_layout.h"

namespace sezm {

bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

namespace cuda {

cudaDeviceProp open_device(int dev) {
  std::string why;
  if (!cuda_device_available(&why)) throw Error("device cuda: " + why);
  int n = 0;
  SEZM_CUDA(cudaGetDeviceCount(&n));
  if (dev < 0 || dev >= n)
    throw Error("device cuda: gpu " + std::to_string(dev) + " does not exist (" + std::to_string(n) + " visible)");
  SEZM_CUDA(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  SEZM_CUDA(cudaGetDeviceProperties(&prop, dev));
  return prop;
}

void check_stack_fits(const Dims& d, const cudaDeviceProp& prop) {
  // The fused stack keeps a tile of edges and its gate sigmoids on chip; refuse models whose
  // tile does not fit this device rather than fail at the first launch.
  const size_t need_smem = stack_smem_bytes(d);
  if (need_smem > prop.sharedMemPerBlockOptin)
    throw Error("device cuda: the model's SO(2) stack tile needs " + std::to_string(need_smem / 1024) +
                " KiB of shared memory per block, " + std::string(prop.name) + " offers " +
                std::to_string(prop.sharedMemPerBlockOptin / 1024) + " KiB (focus width too large for this GPU)");
}

int use_wgmma(const Dims& d, const cudaDeviceProp& prop) {
#ifdef SEZM_HAVE_SM90A
  // SEZM_CUDA_WGMMA=0: the SIMT / mma.sync tile on Hopper too (tests and benchmarks of that path).
  const char* env = std::getenv("SEZM_CUDA_WGMMA");
  if (env && std::string(env) == "0") return 0;
  return prop.major == 9 && prop.minor == 0 && wgmma_shape(d) && stack_smem_bytes_wg(d) <= prop.sharedMemPerBlockOptin
             ? 1
             : 0;
#else
  (void)d;
  (void)prop;
  return 0;
#endif
}

int use_stack_ws(const Dims& d) {
  // Default 1: every layer on the WS tile (H200, 4,096 atoms: lean 69.5 / fast
  // 59.3 ms, against 81.6 / 70.5 with the gated backward on wg_tile before its WS forms,
  // docs/performance.md).
  // SEZM_CUDA_STACK_WS=2 keeps the gated backward on wg_tile, =3 runs every layer in a launch of
  // its own, forward and backward (not chained: stack_ws_chain.cu, stack_ws_chain_bwd.cu), =4 the
  // backward alone, =0 wg_tile for every layer. Other shapes keep wg_tile silently.
  if (!d.wgmma || !ws_shape(d)) return 0;
  const char* env = std::getenv("SEZM_CUDA_STACK_WS");
  const std::string v(env ? env : "");
  return v == "0" ? 0 : v == "2" ? 2 : v == "3" ? 3 : v == "4" ? 4 : 1;
}

int use_stack_f16(const Dims& d, float weight_max) {
  const char* env = std::getenv("SEZM_CUDA_STACK_F16");
  if (env && std::string(env) == "0") return 0;
  return stack_ws_chain(d) && stack_ws_chain_bwd(d) && weight_max < kWsF16BMax ? 1 : 0;
}

}  // namespace cuda
}  // namespace sezm
