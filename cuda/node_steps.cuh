#pragma once
// Node-level steps on the device (O(N) work; CPU twins: engine/norms.h, ffn.h, readout.h,
// fitting.h): per-degree linears (node_linear.cu), equivariant RMS norms, read-out and fitting
// (node_steps.cu), the FFN (ffn.cu), forward and backward, on any range of nodes (pointers at its
// first node; the fused last block calls them per chunk of destinations).
#include "model_dev.cuh"

namespace sezm::cuda {

// The block's two norms at once (bit-identical to two launch_eq_norm_* calls): X1 = norm_post(O) + X,
// Xt = norm_pre(X1); backward X1_bar += norm_pre^T(t), then t = norm_post^T(X1_bar) (t: Xt_bar in,
// O_bar out). Arrays at the first node, (N, D, C) rows; rho (N).
struct EqNormPairArgs {
  int N, L, C;
  const float *O, *X;
  const float *post_scale, *post_bias, *pre_scale, *pre_bias;
  float post_eps, pre_eps;
  float *X1, *post_rho, *Xt, *pre_rho;
};
struct EqNormPairBackwardArgs {
  int N, L, C;
  const float *O, *X1, *post_scale, *pre_scale, *post_rho, *pre_rho;
  float *X1_bar, *t;
};

// Per-degree linear (node_linear.cu): Y[n, p, :] (+)= X[n, p, :] W[l(p)] (W: (L+1, Cin, Cout), or its
// transpose); with residual, Y = that + residual (rounded to fp32 first, as a separate add would);
// with norms (transpose only; Y = norms->t), launch_eq_norm_pair_backward(*norms) follows, in the
// same launch where the shapes allow.
void launch_per_degree_linear(int N, int L, int Cin, int Cout, const float* X, const float* W, float* Y,
                              bool transpose, bool accumulate, cudaStream_t s, const float* residual = nullptr,
                              const EqNormPairBackwardArgs* norms = nullptr);
// The output gate, the post-focus mix and the block's two norms (node_linear.cu): O (N, D, C) =
// (gamma * A) W_post with gamma (N, F) per focus (null: A as is, e.g. after the message-node
// net), then launch_eq_norm_pair_forward(nf) with nf.O = O; one launch where the shapes allow
// (C <= 32), the bits of the separate launches either way.
void launch_post_mix_norms(const Dims& d, int N, const float* gamma, const float* A, const float* W, float* O,
                           const EqNormPairArgs& nf, cudaStream_t s);
// Its backward without a message-node net: A_bar (N, D, Cw) = O_bar W_post^T, then
// launch_gate_backward(ga) on it (ga.A_bar ignored: A_bar); one launch where a column tile holds
// whole foci (Cf <= 32), the bits of the separate launches either way.
struct OutputGateArgs;
void launch_post_mix_backward(const Dims& d, int N, const float* O_bar, const float* W, float* A_bar,
                              const OutputGateArgs& ga, cudaStream_t s);
// Y = EqRMSNorm(X) (+ residual), rho (N) kept for the backward; X_bar += its transpose of Y_bar.
void launch_eq_norm_forward(int N, int L, int C, const float* X, const float* scale, const float* bias, float eps,
                            float* Y, float* rho, const float* residual, cudaStream_t s);
void launch_eq_norm_backward(int N, int L, int C, const float* X, const float* scale, const float* rho,
                             const float* Y_bar, float* X_bar, cudaStream_t s);
// The two norms alone (bit-identical to two launch_eq_norm_* calls and, backward, t's memset).
void launch_eq_norm_pair_forward(const EqNormPairArgs& a, cudaStream_t s);
void launch_eq_norm_pair_backward(const EqNormPairBackwardArgs& a, cudaStream_t s);
// Block FFN: out = W2 grid-act(W1 Xt), on the S2 grid or (ffn_so3_grid) the SO(3) grid
// (grid_net.cu, through grid_scratch); hbuf (N, D, 2 KF H) kept for the backward, ybuf scratch.
// With residual, out = that + residual (the block's X1: no separate add).
void launch_ffn_forward(const Dims& d, const ModelWDev& mw, const BlockWDev& w, int N, const float* Xt, float* hbuf,
                        float* ybuf, float* out, float* grid_scratch, cudaStream_t s, const float* residual = nullptr);
// With norms (norms->t == Xt_bar), launch_eq_norm_pair_backward(*norms) follows (fused with the last linear).
void launch_ffn_backward(const Dims& d, const ModelWDev& mw, const BlockWDev& w, int N, const float* hbuf,
                         const float* out_bar, float* ybar_buf, float* hbar_buf, float* Xt_bar, float* grid_scratch,
                         cudaStream_t s, const EqNormPairBackwardArgs* norms = nullptr);
// Read-out MLP and fitting net per node: atom_energy (double, N) from X's row 0; the backward
// writes dE/dX's row 0 into X_bar (other rows untouched). With desc_in (so3_readout mlp: the
// descriptor from grid_net.cu's read-out, (N, C)) only the fitting net runs, and its backward
// writes dE/ddesc into desc_bar (N, C) instead of touching X_bar.
void launch_readout_fitting_forward(const Dims& d, const ModelWDev& w, const FittingDev& fit, int N, const float* X,
                                    const int* types, double* atom_energy, const float* desc_in, cudaStream_t s);
void launch_readout_fitting_backward(const Dims& d, const ModelWDev& w, const FittingDev& fit, int N, const float* X,
                                     float* X_bar, const float* desc_in, float* desc_bar, cudaStream_t s);

}  // namespace sezm::cuda
