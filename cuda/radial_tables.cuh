#pragma once
// The per-chunk radial conditioning tables of the SO(2) value path and their adjoint (CPU twin:
// the radial conditioning in engine/so2_convolution.h), as tile products on the stack's inner
// product (stack_tile.cuh). Per chunk, before rotate_condition: with the degree mixer the kernel
// values kern = R mixp (Ec, Kp; W_rh folded into mixp), otherwise the wide radial features
// Rh = R W_rh (Ec, L+1, Cw).
#include "model_dev.cuh"

namespace sezm::cuda {

struct RadialTablesArgs {
  int e0, Ec;      // the chunk's first edge and edge count
  EdgeRadialIn R;  // prep: the block input radial features (unused by the adjoint)
  float *Rh, *kern;  // prep: written; adjoint: Rh_bar and kb (the kernel adjoint), read
  float* R_bar;      // adjoint: the chunk's (Ec, L+1, C) table, added into
};
void launch_radial_prep(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s);
// R_bar[i] += kb mixp^T (degree mixer) or Rh_bar W_rh^T, as tile products.
void launch_radial_adjoint(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
