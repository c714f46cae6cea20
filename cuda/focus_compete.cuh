#pragma once
// Cross-focus competition on the device (CPU twin: the focus competition in
// engine/so2_convolution.h; docs/model.md §5.5), forward and backward, per edge of a chunk.
#include "model_dev.cuh"

namespace sezm::cuda {

struct FocusCompeteArgs {
  int e0, Ec;             // the chunk's first edge and edge count
  const float* Ssrc;      // (F, Ec, Cf) scalar rows of the conditioned source features
  float *fc_p, *alpha_fc;  // (Ec, F): forward writes, backward reads
  const float *alpha, *alpha_bar;  // backward: attention weights (E, F) and the chunk's (Ec, F) adjoint
  float* Ssrc_bar;                 // backward: written
};
void launch_focus_compete(const Dims& d, const BlockWDev& w, const FocusCompeteArgs& a, cudaStream_t s);
// <G_f, U_f> of an edge is alpha[e0 + i, f] alpha_bar[i, f] (aggregate_backward): no stack rows.
void launch_focus_compete_backward(const Dims& d, const BlockWDev& w, const FocusCompeteArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
