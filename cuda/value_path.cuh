#pragma once
// The SO(2) value path around the mixing stack on the device (CPU twin:
// engine/so2_convolution.h): gather + rotate into the edge frame + radial conditioning,
// rotate-back + weighted destination sum, their backward, and the source-side sums. Per chunk
// of whole destination segments (edges e0 .. e0 + Ec); the stack itself is stack.cuh, the focus
// competition focus_compete.cuh, the chunk's radial tables radial_tables.cuh.
#include "model_dev.cuh"

namespace sezm::cuda {

// U0 (F, Ec, ROW) and the scalar rows Ssrc (F, Ec, Cf) from H[src] and the chunk's radial tables.
// U0 null: only the focus competition's source sums S_src (U0's scalar rows; F > 1), as fast mode's
// backward needs them, its stack output being kept.
struct RotateConditionArgs {
  int e0, Ec;
  const int* src;
  const float *Dc, *H, *Rh, *kern;
  float *U0, *Ssrc;
};
void launch_rotate_condition(const Dims& d, const BlockWDev& w, const RotateConditionArgs& a, cudaStream_t s);

// P[n] = sum_e alpha (alpha_fc) rho_l D^T U over the centres [n0, n1) (double accumulation).
struct AggregateArgs {
  int n0, n1, e0, Ec;
  const int* off;
  const float *Dc, *U, *alpha_fc, *alpha;
  float* P;
};
void launch_rotate_back_aggregate(const Dims& d, const AggregateArgs& a, cudaStream_t s);

// Backward of the destination sum: the stack-output gradient Gbuf, alpha_bar, Dc_bar (added).
struct AggregateBackwardArgs {
  int e0, Ec;
  const int* dst;
  const float *Dc, *U, *alpha_fc, *alpha, *P_bar;
  float *Gbuf, *alpha_bar, *Dc_bar;
};
void launch_aggregate_backward(const Dims& d, const AggregateBackwardArgs& a, cudaStream_t s);

// Backward of conditioning and rotation, and below the source-side sums: the two-kernel path with
// X̄_loc per edge in between (SEZM_CUDA_SRCBWD_LEGACY=1, or shapes outside the warp kernels); the
// default fuses them (source_backward.cuh). Rh and kern (the chunk's radial tables) are consumed:
// they come back holding the radial adjoint, which launch_radial_adjoint (called at the end)
// multiplies into R_bar. R_bar is the chunk's (Ec, L+1, C) table (row i = edge e0 + i), added
// into.
struct ConditionRotateBackwardArgs {
  int e0, Ec;
  const int* src;
  const float *Dc, *H;
  float *Rh, *kern;
  const float *Gbuf, *Ssrc_bar, *lbar;
  float *Xloc_bar, *R_bar, *Dc_bar;
};
void launch_condition_rotate_backward(const Dims& d, const BlockWDev& w, const ConditionRotateBackwardArgs& a,
                                      cudaStream_t s);

// Source-side segment sums (edges of the chunk grouped by source; deterministic, no atomics):
// H_bar[s] += sum_e D^T Xloc_bar, k_bar[s] += scale sum_e lbar q[dst].
struct SourceSumArgs {
  int nseg;
  const int *seg_node, *seg_off, *perm;  // at the chunk's first segment
  int e0;
  const int* dst;
  const float *Dc, *Xloc_bar, *lbar, *q;
  float *H_bar, *k_bar;
};
void launch_src_scatter(const Dims& d, const SourceSumArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
