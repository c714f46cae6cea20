#pragma once
// The per-chunk radial conditioning tables of the SO(2) value path and their adjoint (CPU twin:
// the radial conditioning in engine/so2_convolution.h), as tile products on the stack's inner
// product (stack_tile.cuh). Per chunk, before rotate_condition: with the degree mixer the kernel
// values kern = R mixp (Ec, Kp; W_rh folded into mixp), otherwise the wide radial features
// Rh = R W_rh (Ec, L+1, Cw).
#include "model_dev.cuh"

namespace sezm::cuda {

// The degree mixer's kernel values from the radial MLP's hidden layer (radial_tables.cu): the
// model's weights (null: from R), the chunk's edges and their rbf rows and envelopes (the chunk's
// rows: index 0 is edge e0), the graph's arrays (absolute edge index).
struct RadialFoldIn {
  const ModelWDev* mw;
  int e0, Ec;
  const float *rbf, *env;
  const int *src, *dst, *types;
  int F;          // foci
  float* lbias;   // (Ec, F): the attention's radial logit bias, written where non-null
};
// Whether launch_radial_prep takes the kernel values (and the logit bias) from the MLP's hidden
// layer on this model and device: the degree mixer, C = 16, 32 or 64, the tile's shared memory.
bool radial_prep_folds(const Dims& d);
struct RadialTablesArgs {
  int e0, Ec;      // the chunk's first edge and edge count
  EdgeRadialIn R;  // prep: the block input radial features (unused by the adjoint)
  float *Rh, *kern;  // prep: written; adjoint: Rh_bar and kb (the kernel adjoint), read
  float* R_bar;      // adjoint: the chunk's (Ec, L+1, C) table, added into
  RadialFoldIn fold;  // prep with the degree mixer: fold.mw set, the kernel values from the MLP's hidden layer
};
void launch_radial_prep(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s);
// R_bar[i] += kb mixp^T (degree mixer) or Rh_bar W_rh^T, as tile products.
void launch_radial_adjoint(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
