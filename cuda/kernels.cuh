#pragma once
// Kernel launchers of the CUDA engine (one .cu file per group, see docs/ARCHITECTURE.md).
// All pointers are device pointers; all launches go to `s`.
#include "cuda_common.cuh"

namespace sezm::cuda {

// ---- device-side Wigner tables (built from the CPU engine's tables, engine/wigner_d.cpp) ----
struct CkTermF { float coef; int a, b; };
struct RealTermF { int idx; float cre, cim; };
struct GenNzF { int i, k; float val; };
struct WignerTablesDev {
  int ck_begin_off[4], ck_off[4], rt_off[4], jnz_off[4][2], jnz_n[4][2];
  const int* ck_begin;
  const CkTermF* ck;
  const RealTermF* rt;
  const GenNzF* jnz;
};

// Block input radial features R(e, l, a) = rho(e, l, a) + T[type(src)](a) + T[type(dst)](a),
// formed where they are read instead of stored: saves (L+1)*C floats per edge for the call.
// Its adjoint is rho_bar itself (the type table is not differentiated).
struct EdgeRadialIn {
  const float* rho;
  const float* T;  // type embedding (ntypes, C)
  const int *src, *dst, *types;
  __device__ __forceinline__ float operator()(const Dims& d, int e, int l, int a) const {
    return __ldg(rho + ((size_t)e * (d.L + 1) + l) * d.C + a) + __ldg(T + (size_t)types[src[e]] * d.C + a) +
           __ldg(T + (size_t)types[dst[e]] * d.C + a);
  }
};

// ---- model weights on the device (float) ----
struct BlockWDev {
  const float *pre, *post;            // (L+1, C, Cw), (L+1, Cw, C)
  const float *rh, *rhT;              // (C, Cw), (Cw, C) or null
  const float *mix, *mixT, *cb;       // ((L+1)Cw, K), mixp's transpose (Kp, (L+1)C), (Cw)
  const float *mixp;                  // ((L+1)C, Kp): blockdiag(W_rh) mix, K padded to Kp = K rounded up to 4
  const float *A, *AT, *W1, *W1T;     // (nL, F, M0, M0), (nL, F, 2M1, 2M1) and transposes
  const float *G, *GT;                // (ngated, F, Cf, L*Cf) and per-(layer, focus) transposes
  const float *fc_w, *fc_norm;        // (Cf, F), (F, Cf) or null
  const float *qk_norm, *gate_norm;   // (F, Cf)
  const float *Wq, *Wk;               // (F, Cf, Cf)
  const float *logit_u;               // (F, C): R0 . u_f is the radial logit bias
  const float *log_zeta, *gate_w;     // (F), (Cf, F)
  const float *post_scale, *post_bias, *pre_scale, *pre_bias;  // (L+1, C), (C)
  float post_eps, pre_eps;
  const float *ffn_w1, *ffn_sg, *ffn_w2;  // (L+1, C, 2H), (2H, H), (L+1, H, C)
};
struct ModelWDev {
  const float *freqs, *type_emb, *rad_w0, *rad_norm, *rad_w1;
  const float *es_p1, *es_p2, *es_tau, *es_g1, *es_g2, *es_out, *film_s, *film_h;
  float film_as, film_ah;
  const float *ro_w1, *ro_w2;
  const float *gridT, *gridP;  // (G, D), (D, G)
  int G;
};

// geometry.cu
void launch_geometry_forward(const Dims& d, int E, const double* vec, const float* freqs, const WignerTablesDev& wt,
                             float* vecf, float* r, float* env, float* denv, float* rbf, float* Dc, cudaStream_t s);
void launch_geometry_backward(const Dims& d, int E, const float* vecf, const float* r, const float* denv,
                              const float* freqs, const WignerTablesDev& wt, const float* env_bar,
                              const float* rbf_bar, const float* Dc_bar, const float* vec_bar, double* edge_grad,
                              cudaStream_t s);
void launch_radial_forward(const Dims& d, const ModelWDev& w, int E, const float* rbf, const float* env, float* rho,
                           cudaStream_t s);
void launch_radial_backward(const Dims& d, const ModelWDev& w, int E, const float* rbf, const float* env,
                            const float* rho_bar, float* env_bar, float* rbf_bar, cudaStream_t s);
void launch_degree_forward(int N, const int* dst_off, const float* env, float* isd, cudaStream_t s);
void launch_degree_backward(int N, const int* dst_off, const float* env, const float* isd, const float* isd_bar,
                            float* env_bar, cudaStream_t s);
void launch_env_seed_forward(const Dims& d, const ModelWDev& w, int N, int E, const int* src, const int* dst,
                             const int* dst_off, const int* types, const float* vecf, const float* r,
                             const float* env, const float* rbf, const float* isd, float* g, float* seed, float* A,
                             float* f, float* X0, cudaStream_t s);
void launch_env_seed_backward(const Dims& d, const ModelWDev& w, int N, int E, const int* src, const int* dst,
                              const int* dst_off, const int* types, const float* vecf, const float* r,
                              const float* env, const float* denv, const float* rbf, const float* isd,
                              const float* g, const float* seed, const float* A, const float* f, const float* X0_bar,
                              float* A_bar, float* isd_bar, float* rbf_bar, float* vec_bar, cudaStream_t s);
void launch_gie_forward(const Dims& d, int N, const int* dst_off, const float* Dc, const float* isd, const float* rho,
                        float* X0, cudaStream_t s);
// The GIE backward's isd and Wigner-row shares (all edges); its share of rho_bar goes per chunk of
// E edges (pointers at the chunk's first edge) into the chunk's rho_bar table.
void launch_gie_backward(const Dims& d, int N, int E, const int* dst, const float* Dc, const float* isd,
                         const float* rho, const float* X0, const float* X0_bar, float* isd_bar, float* Dc_bar,
                         cudaStream_t s);
void launch_gie_rho_backward(const Dims& d, int E, const int* dst, const float* Dc, const float* isd,
                             const float* X0_bar, float* rho_bar, cudaStream_t s);

// node_ops.cu
// Per-degree linear: Y[n, p, :] (+)= X[n, p, :] W[l(p)] (W: (L+1, Cin, Cout), or its transpose).
void launch_per_degree_linear(int N, int L, int Cin, int Cout, const float* X, const float* W, float* Y,
                              bool transpose, bool accumulate, cudaStream_t s);
void launch_eq_norm_forward(int N, int L, int C, const float* X, const float* scale, const float* bias, float eps,
                            float* Y, float* rho, const float* residual, cudaStream_t s);
void launch_eq_norm_backward(int N, int L, int C, const float* X, const float* scale, const float* rho,
                             const float* Y_bar, float* X_bar, cudaStream_t s);
void launch_ffn_forward(const Dims& d, const ModelWDev& mw, const BlockWDev& w, int N, const float* Xt, float* hbuf,
                        float* ybuf, float* out, cudaStream_t s);
void launch_ffn_backward(const Dims& d, const ModelWDev& mw, const BlockWDev& w, int N, const float* hbuf,
                         const float* out_bar, float* ybar_buf, float* hbar_buf, float* Xt_bar, cudaStream_t s);
void launch_readout_fitting_forward(const Dims& d, const ModelWDev& w, int N, const float* X, const int* types,
                                    const float* fit_w, const float* fit_b, const int* fit_dims, int n_fit,
                                    const float* fit_out, const double* atom_bias, double* atom_energy,
                                    cudaStream_t s);
void launch_readout_fitting_backward(const Dims& d, const ModelWDev& w, int N, const float* X, const float* fit_w,
                                     const float* fit_b, const int* fit_dims, int n_fit, const float* fit_out,
                                     float* X_bar, cudaStream_t s);

// block.cu
void launch_attention_node_forward(const Dims& d, const BlockWDev& w, int N, int NT, const float* H, float* q,
                                   float* k, float* qk_rho, float* gate_rho, float* gamma, cudaStream_t s);
void launch_attention_softmax_forward(const Dims& d, const BlockWDev& w, int N, const int* src, const int* dst_off,
                                      const float* env, const EdgeRadialIn& R, const float* q, const float* k, float* alpha,
                                      cudaStream_t s);
// Per chunk, before rotate_condition, as tile products (stack.cu): with the degree mixer its kernel
// values kern = R mixp (Ec, Kp; W_rh folded into mixp), otherwise the wide radial features
// Rh = R W_rh (Ec, L+1, Cw).
__host__ __device__ inline int padded_kernel_size(const Dims& d) { return (d.K + 3) / 4 * 4; }
void launch_radial_prep(const Dims& d, const BlockWDev& w, int e0, int Ec, const EdgeRadialIn& R, float* Rh,
                        float* kern, cudaStream_t s);
void launch_rotate_condition(const Dims& d, const BlockWDev& w, int e0, int Ec, const int* src, const float* Dc,
                             const float* H, const float* Rh, const float* kern, float* U0, float* Ssrc,
                             cudaStream_t s);
void launch_focus_compete(const Dims& d, const BlockWDev& w, int Ec, const float* Ssrc, float* fc_p,
                          float* alpha_fc, cudaStream_t s);
void launch_rotate_back_aggregate(const Dims& d, int n0, int n1, int e0, int Ec, const int* dst_off, const float* Dc,
                                  const float* U, const float* alpha_fc, const float* alpha, float* P,
                                  cudaStream_t s);
void launch_gate_post(const Dims& d, int N, const float* gamma, const float* P, float* A, cudaStream_t s);
void launch_aggregate_backward(const Dims& d, int e0, int Ec, const int* dst, const float* Dc, const float* U,
                               const float* alpha_fc, const float* alpha, const float* P_bar, float* Gbuf,
                               float* alpha_bar, float* Dc_bar, cudaStream_t s);
void launch_softmax_backward(const Dims& d, const BlockWDev& w, int n0, int n1, int e0, const int* src,
                             const int* dst_off, const float* env, const float* alpha, const float* alpha_bar,
                             const float* q, const float* k, float* lbar, float* q_bar, float* env_bar,
                             cudaStream_t s);
// <G_f, U_f> of an edge is alpha[e0 + i, f] alpha_bar[i, f] (aggregate_backward): no stack rows.
void launch_focus_compete_backward(const Dims& d, const BlockWDev& w, int e0, int Ec, const float* Ssrc,
                                   const float* alpha, const float* alpha_bar, const float* fc_p,
                                   const float* alpha_fc, float* Ssrc_bar, cudaStream_t s);
// Rh and kern (the chunk's radial tables) are consumed: they come back holding the radial
// adjoint, which launch_radial_adjoint (called at the end) multiplies into R_bar. R_bar is the
// chunk's (Ec, L+1, C) table (row i = edge e0 + i), added into.
void launch_condition_rotate_backward(const Dims& d, const BlockWDev& w, int e0, int Ec, const int* src,
                                      const float* Dc, const float* H, float* Rh, float* kern,
                                      const float* Gbuf,
                                      const float* Ssrc_bar, const float* lbar, float* Xloc_bar, float* R_bar,
                                      float* Dc_bar, cudaStream_t s);
// R_bar[i] += kb mixp^T (degree mixer) or Rh_bar W_rh^T, as tile products (stack.cu); kb and
// Rh_bar sit in the kern and Rh chunk tables, R_bar is the chunk's table.
void launch_radial_adjoint(const Dims& d, const BlockWDev& w, int e0, int Ec, float* Rh, const float* kb,
                           float* R_bar, cudaStream_t s);
// Source-side segment sums (edges of the chunk grouped by source; deterministic, no atomics).
void launch_src_scatter(const Dims& d, int nseg, const int* seg_node, const int* seg_off, const int* perm, int e0,
                        const int* dst, const float* Dc, const float* Xloc_bar, const float* lbar, const float* q,
                        float* H_bar, float* k_bar, cudaStream_t s);
void launch_attention_node_backward(const Dims& d, const BlockWDev& w, int N, int NT, const float* H,
                                    const float* qk_rho, const float* gate_rho, const float* gamma,
                                    const float* q_bar, const float* k_bar, const float* gamma_bar, float* H_bar,
                                    cudaStream_t s);
void launch_gate_backward(const Dims& d, int N, const float* gamma, const float* P, const float* A_bar, float* P_bar,
                          float* gamma_bar, cudaStream_t s);

// stack.cu: one fused kernel per mixing layer (forward) and per layer (backward).
// Shared memory one stack CTA needs (the engine checks it against the device at construction).
size_t stack_smem_bytes(const Dims& d);
void launch_stack_layer_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                                float* Zsave, cudaStream_t s);
// Fast mode's backward: a gated layer re-applied from its kept pre-activations Z (no GEMM).
void launch_stack_layer_replay(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                               const float* Z, cudaStream_t s);
void launch_stack_layer_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Gin, float* Gout,
                                 const float* Z, cudaStream_t s);
// The stack's tile product alone, C (rows x N) = A (rows x K, row stride lda) B (K x N), N <= 192,
// for bench/stack_probe.cu. variant 0: the layers' 64-row tile; 1: 128 rows (8 per thread, one
// CTA per SM); 2: variant 0 with the k loop fully unrolled; 3: 128 rows at two CTAs per SM
// (N <= 128). A read from HBM, or (hbm_a false) made in registers: only B and C touch memory.
void launch_tile_probe(int variant, bool hbm_a, int rows, int K, int N, const float* A, int lda, const float* B,
                       float* C, cudaStream_t s);

}  // namespace sezm::cuda
