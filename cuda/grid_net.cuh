#pragma once
// The SO(3) grid nets on the device, forward and backward (CPU twin: engine/grid_net.h;
// docs/model.md §5.10-§5.13, backward §7.12): the message-node net (cross mode), the FFN on the
// SO(3) grid and the MLP read-out (self mode). Per-node work, run over batches of at most
// kGridBatch nodes through a scratch of kGridBatch * Dims::grid_scratch floats; the backward
// recomputes each batch's forward (nothing is kept between the passes but the net's inputs).
// Node pointers are at the range's first node; any range of nodes works (the fused last block
// calls these per chunk of destinations).
#include "model_dev.cuh"

namespace sezm::cuda {

constexpr int kGridBatch = 256;

// Self mode: h (n, D, 2 K C) (the caller's first linear: left half, right half, frame-major)
// -> Y (n, D, K C).
void launch_grid_self_forward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, const float* h,
                              float* Y, float* scratch, cudaStream_t s);
// Y_bar (n, D, K C) -> h_bar (n, D, 2 K C), overwritten.
void launch_grid_self_backward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, const float* h,
                               const float* Y_bar, float* h_bar, float* scratch, cudaStream_t s);
// Message-node (cross mode, §5.11): A += MN(A, x), A the gated aggregate and x = pre_focus_mix
// rows of the same nodes, both (n, D, C).
void launch_grid_cross_forward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, float* A,
                               const float* x, float* scratch, cudaStream_t s);
// Its backward: A is the aggregate before the net; A_bar (the adjoint of A after it) gains the
// query adjoint in place; x_bar (n, D, C) receives the context adjoint (overwritten).
void launch_grid_cross_backward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, const float* A,
                                const float* x, float* A_bar, float* x_bar, float* scratch, cudaStream_t s);
// MLP read-out (§5.13): desc (n, C) from the last block's X (n, D, C); desc_bar -> X_bar (n, D, C),
// overwritten (every row).
void launch_grid_readout_forward(const Dims& d, const ModelWDev& mw, int n, const float* X, float* desc,
                                 float* scratch, cudaStream_t s);
void launch_grid_readout_backward(const Dims& d, const ModelWDev& mw, int n, const float* X, const float* desc_bar,
                                  float* X_bar, float* scratch, cudaStream_t s);

}  // namespace sezm::cuda
