#pragma once
// Per-edge geometry on the device (CPU twins: engine/edge_geometry.h, envelope.h,
// radial_basis.h, wigner_d.{h,cpp}): safe length, envelopes, Bessel basis, edge quaternion and
// compact Wigner rows, and their backward into dE/dv_e (double).
#include "model_dev.cuh"

namespace sezm::cuda {

struct GeometryForwardArgs {
  int E;
  const double* vec;  // (E, 3) edge vectors
  const float* freqs;
  WignerTablesDev wt;
  EdgeGeomDev geo;  // written
};
void launch_geometry_forward(const Dims& d, const GeometryForwardArgs& a, cudaStream_t s);
// The radial basis alone (E, nr) from the safe lengths r (E): the part of launch_geometry_forward
// a committee follower of other basis frequencies computes on its leader's geometry
// (CudaEngine::compute_like).
void launch_radial_basis_forward(const Dims& d, int E, const float* r, const float* freqs, float* rbf,
                                 cudaStream_t s);

struct GeometryBackwardArgs {
  int E;
  EdgeGeomDev geo;  // read: vecf, r, denv
  const float* freqs;
  WignerTablesDev wt;
  EdgeGeomBarDev bar;  // read
  double* edge_grad;   // (E, 3) written
};
void launch_geometry_backward(const Dims& d, const GeometryBackwardArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
