#pragma once
// The radial MLP per edge on the device (CPU twin: engine/radial_mlp.h): rho = env * MLP(rbf),
// (E, L+1, C) l-major, and its backward into env_bar and rbf_bar (linear in rho_bar, so the
// engine runs it per (block, chunk) share of rho_bar).
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

}  // namespace sezm::cuda
