#pragma once
// The model on the device: dimensions (with the CUDA engine's limits checked) and every weight
// uploaded once, in one pass, straight into the structs the kernels read (model_dev.cuh). Host
// side only (engine.cu includes it; kernels see model_dev.cuh); compiled by the C++ compiler
// (device_weights.cpp), like every host file of the CUDA engine that uses Eigen.
#include <vector>

#include "model/weights.h"
#include "model_dev.cuh"

namespace sezm::cuda {

// The model's dimensions; throws sezm::Error when the model is outside the kernels' limits.
Dims model_dims(const ModelW<double>& w);
// The largest |w| of the mixing stacks' weights (A, W1, G of every layer and focus), as floats:
// whether the FP16 images can hold them (use_stack_f16).
float stack_weight_max(const ModelW<double>& w);

struct DeviceWeights {
  ModelWDev mw{};               // embedding, radial MLP, read-out, S2 grid
  std::vector<BlockWDev> bw;    // per interaction block
  FittingDev fit{};             // fitting net and per-type energy bias
  WignerTablesDev wt{};         // Wigner-D construction tables (engine/wigner_d.cpp's, in float)

  // Converts to float and uploads on `s` (storage counted in `mem`).
  void upload(const ModelW<double>& w, const Dims& d, MemCounter* mem, cudaStream_t s);

 private:
  DBuf<float> wbuf_;  // every float tensor, 128-byte aligned each
  DBuf<int> fit_dims_, wt_ckb_;
  DBuf<double> atom_bias_;
  DBuf<CkTermF> wt_ck_;
  DBuf<RealTermF> wt_rt_;
  DBuf<GenNzF> wt_jnz_;
  void upload_wigner(MemCounter* mem, cudaStream_t s);
};

}  // namespace sezm::cuda
