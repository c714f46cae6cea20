#pragma once
// The gated SO(2) mixing stack on the device (CPU twin: the mixing stack in
// engine/so2_convolution.h): one fused kernel per layer, forward and backward, on a chunk of Ec
// edges, activations focus-major (F, Ec, ROW).
#include "model_dev.cuh"

namespace sezm::cuda {

// Shared memory one stack CTA needs (the engine checks it against the device at construction).
size_t stack_smem_bytes(const Dims& d);
// Whether the stack's shape has a warpgroup tile (Cf = 32, L = 2 or 3), and its shared memory.
bool wgmma_shape(const Dims& d);
size_t stack_smem_bytes_wg(const Dims& d);
// Whether the identity layers have a warp-specialised kernel for this shape (stack_ws.cu: Cf = 32,
// L = 3, i.e. the 128 / 192-wide groups), and that kernel for one identity layer (Dims::stack_ws,
// layer >= ngated; bwd: G' = G + G W^T, else U' = U + U W), in one TF32 pass with tf32_one_pass.
bool ws_shape(const Dims& d);
void launch_stack_ws_linear(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, bool bwd,
                            cudaStream_t s);
// A gated layer on it: forward (z: Zsave as launch_stack_layer_forward's, or null) or backward
// (bwd; z: the saved pre-activations, read); one TF32 pass with tf32_one_pass.
void launch_stack_ws_gated(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                           bool bwd, cudaStream_t s);
// The chained forward (stack_ws_chain.cu): every layer of a chunk's stack in one launch on the
// warp-specialised tile, where stack_ws_chain(d) (Dims::stack_ws 1, 2 or 4, ws_shape, at most four
// layers). Layer k reads buf[k % 2] and writes buf[(k + 1) % 2], as the one-layer launches
// ping-pong, but the last layer writes `out` where that is not null (fast mode's kept stack
// output); zsave (null, or one pointer per layer) keeps gated layer k's pre-activations at
// zsave[k] where that is not null. Returns the buffer holding the stack's output.
constexpr int kStackChainMax = 4;  // layers of one chained launch (C.pt: 3)
bool stack_ws_chain(const Dims& d);
// Whether the chained forward writes the stack's output as binary16 rows (f16_rows.cuh), which the
// destination sum and its backward then read: `precision tf32` on the register-resident chain
// (stack_ws_chain_regs.cu; its last layer, the stack's identity layer, stores them), two or four
// foci (the backward's warp kernel: Cw = 64 or 128), unless Dims::f16_rows is 0.
bool stack_out_f16(const Dims& d);
// Whether the output's adjoint comes as binary16 rows too (aggregate_backward_w writes them, the
// register-resident chained backward, stack_ws_chain_bwd_regs.cu, reads them): stack_out_f16 and
// that backward.
bool stack_adj_f16(const Dims& d);
// Whether the gated layers' saved pre-activations z are binary16 rows too (the register-resident
// chained forward writes them, its backward reads them): stack_adj_f16, unless Dims::f16_z is 0.
bool stack_z_f16(const Dims& d);
// Whether the stack's input comes as binary16 rows (rotate_condition_w writes them, the
// register-resident chained forward reads them): stack_out_f16.
bool stack_in_f16(const Dims& d);
float* launch_stack_chain_forward(const Dims& d, const BlockWDev& w, int Ec, float* buf0, float* buf1,
                                  float* const* zsave, float* out, cudaStream_t s);
// The chained backward (stack_ws_chain_bwd.cu): every layer's backward of a chunk's stack in one
// launch, where stack_ws_chain_bwd(d) (Dims::stack_ws 1, ws_shape, two to four layers;
// SEZM_CUDA_STACK_WS=3 or 4: never). Step t (layer nL - 1 - t) reads buf[t % 2] and writes
// buf[(t + 1) % 2], as the one-layer launches ping-pong from buf0 = the stack output's adjoint;
// z: the gated layers' saved pre-activations (one pointer per gated layer), dead afterwards: in one
// TF32 pass (stack_ws_chain_bwd_regs.cu) their |m| = 1 columns end up holding scratch. Returns the
// buffer holding the adjoint of the stack's input (buf[nL % 2]).
bool stack_ws_chain_bwd(const Dims& d);
float* launch_stack_chain_backward(const Dims& d, const BlockWDev& w, int Ec, float* buf0, float* buf1,
                                   float* const* z, cudaStream_t s);
// Zsave: the gated layer's pre-activations are written there (fast mode, lean recompute, the
// fused block); null: not kept.
void launch_stack_layer_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                                float* Zsave, cudaStream_t s);
// The layer's backward: Gout = the adjoint of its input from Gin, that of its output; a gated
// layer's Z (its kept pre-activations) is read.
void launch_stack_layer_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Gin, float* Gout,
                                 float* Z, cudaStream_t s);

}  // namespace sezm::cuda
