#pragma once
// The SO(2) value path's backward from the stack-input gradient to the source nodes, fused per
// source segment (CPU twin: so2_tile_backward in engine/so2_convolution.h, "Radial conditioning
// backward" and "Rotation backward"; docs/model.md §7.9): the conditioning and rotation backward
// of condition_rotate_backward_w (value_path_warp.cuh) per edge, and the source sums of
// src_scatter_k (source_sums.cu), without the per-edge X̄_loc rows in between. The kernel:
// source_backward.cu.
#include "model_dev.cuh"

namespace sezm::cuda {

// One chunk: edges e0 .. e0 + Ec, grouped by source in the chunk's nseg segments (ChunkPlan:
// seg_node, seg_off at the chunk's first segment, perm the whole call's). Per edge the outputs of
// launch_condition_rotate_backward: the radial adjoint written over the chunk tables Rh (no
// degree mixer, with a hidden projection) or kern (mixer), or added to R_bar (neither); the logit
// bias's share of R_bar row 0 (added); the Wigner-row adjoint Dc_bar (added; Dc and Dc_bar by
// absolute edge index, the chunk-relative tables by e - e0); then launch_radial_adjoint. Per
// source s: H_bar[s] += sum_e D^T X̄_loc, k_bar[s] += rsqrt(Cf) sum_e lbar q[dst].
struct SourceBackwardArgs {
  int e0, Ec, nseg;
  const int *seg_node, *seg_off, *perm, *dst;
  const float *Dc, *H;
  float *Rh, *kern;
  const float *Gbuf, *Ssrc_bar, *lbar, *q;
  // R_bar null (degree mixer only): the radial adjoint stays as the kernel adjoint written over kern
  // and the logit adjoint lbar, for launch_radial_backward's fold; else R̄ (zeroed by the caller)
  // receives it, the mixer's share through launch_radial_adjoint.
  float *R_bar, *Dc_bar, *H_bar, *k_bar;
};

// Whether the engine takes the fused path for this model: the one-warp-per-edge shapes of
// value_path_warp.cuh (Cw = 32, 64 or 128, focus width a power of two, L = 1..3) with Cf and C
// multiples of 4 and F <= 16 (its staging copies) whose shared memory fits the current device,
// unless SEZM_CUDA_SRCBWD_LEGACY=1 or SEZM_CUDA_VALUE_CTA=1 (read once): the two-kernel path
// (launch_condition_rotate_backward, X̄_loc per edge, then launch_src_scatter) otherwise. The
// engine sizes X̄_loc (buffers.cu) only for the two-kernel path, on the device of the call.
bool source_backward_fused(const Dims& d);
void launch_source_backward(const Dims& d, const BlockWDev& w, const SourceBackwardArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
