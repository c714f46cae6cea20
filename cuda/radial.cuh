#pragma once
// The radial MLP per edge on the device (CPU twin: engine/radial_mlp.h): rho = env * MLP(rbf),
// (E, L+1, C) l-major, and its backward into env_bar and rbf_bar (linear in rho_bar, so the
// engine runs it per (block, chunk) share of rho_bar).
#include <algorithm>

#include "model_dev.cuh"

namespace sezm::cuda {

struct RadialMlpArgs {
  int E;
  const float *rbf, *env;  // (E, nr), (E)
  float* rho;              // forward: (E, L+1, C) written
  const float* rho_bar;    // backward: (E, L+1, C)
  float *env_bar, *rbf_bar;  // backward: added into
};
void launch_radial_forward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s);
void launch_radial_backward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s);

#ifdef __CUDACC__
// Launches a tile kernel (`threads` per CTA, `bytes` of dynamic shared memory) on as many CTAs as
// are resident on the device at once, at most `tiles`: the kernel loops over its tiles, so what it
// stages once per CTA (the weights) crosses L2 once per CTA, not once per tile. Returns false,
// launching nothing, where `bytes` exceeds the device's opt-in limit (the caller's fallback runs).
// Used by radial.cu and radial_tables.cu.
template <class... P, class... A>
bool launch_tiles(void (*fn)(P...), int threads, size_t bytes, int tiles, cudaStream_t s, A... args) {
  int dev = 0, optin = 0, sms = 0, per = 0;
  SEZM_CUDA(cudaGetDevice(&dev));
  SEZM_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (bytes > static_cast<size_t>(optin)) return false;
  SEZM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (bytes > 48 * 1024) SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn, threads, bytes));
  fn<<<std::min(tiles, std::max(per, 1) * sms), threads, bytes, s>>>(args...);
  return true;
}
#endif

}  // namespace sezm::cuda
