#pragma once
// What the kernels read besides their step's own buffers: the model's weights on the device
// (float, uploaded once by device_weights.cpp straight into these structs), the Wigner tables,
// the block input radial features, and grouped views of the graph and the per-edge geometry.
// All pointers are device pointers. The host C++ compiler sees the data structs too
// (device_weights.cpp fills them); what only device code can compile is kept from it.
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

#ifdef __CUDACC__  // device code: absent from the C++ compiler's translation units (device_weights.cpp)
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
#endif  // __CUDACC__

// ---- SO(3) grid nets (CPU twins: SO3GridMats and GridNetW, engine/grid_net.h) ----
struct SO3GridDev {
  int K, J, G;           // frames, framed rows D K, grid points
  const float *A, *B;    // (G, J), (J, G)
  // The grid product as a sparse coupling tensor (built once per model from A and B in double,
  // device_weights.cpp): T[k, i, j] = sum_g B[k, g] A[g, i] A[g, j], so that
  // B(A u (.) A v)[k] = sum_{i, j} T[k, i, j] u[i] v[j] (docs/model.md §5.10.2; T is symmetric in
  // i, j). Entries are int2 {packed index, float bits}; t_fwd is grouped by k (CSR t_fwd_off,
  // J + 1) with index i | j << 16; t_bwd by the first operand a with index k | b << 16 and the
  // value T[k, a, b] (the adjoints of u and v both read it, by the symmetry). nnz entries each.
  int nnz;
  const int *t_fwd_off, *t_fwd, *t_bwd_off, *t_bwd;
};
struct GridNetDev {
  int op;                // 0 glu (grid product), 1 mlp, 2 branch
  int cross;             // 1: message-node (frame expansion, contraction, residual scale)
  int C, n_br;           // per-frame channels, branches
  const float* sg;       // scalar gate (2C, C)
  const float *left, *right;  // mlp (Win, 2C) with Win = 2C self / C cross; branch (C, n_br C)
  const float* out;      // mlp (2C, C), branch (C, C)
  const float* router;   // branch (2C, n_br)
  const float *expand, *contract, *rscale;  // cross: (L+1, C, K C), (L+1, K C, C), (C)
};
// Widths inside a net (docs/model.md §5.10.3): Wm of U and V, Cp of the grid product after the
// branch mix (= the input width of W_O, or C for glu).
inline int grid_mid_width(const GridNetDev& g) { return g.op == 0 ? g.C : g.op == 1 ? 2 * g.C : g.n_br * g.C; }
inline int grid_prod_width(const GridNetDev& g) { return g.op == 1 ? 2 * g.C : g.C; }
// Scratch floats per node of one pass (forward, or recomputed forward plus backward) of a net;
// the launchers carve it (grid_net.cu, struct Scratch: the same list in the same order).
inline long grid_net_scratch_per_node(const GridNetDev& g, const SO3GridDev& s, int D) {
  const long J = s.J, C = g.C, Wm = grid_mid_width(g), Cp = grid_prod_width(g), nb = g.n_br;
  const long fwd = J * 2 * C + 2 * J * Wm + J * Cp + J * C + 2 * C + C + 2 * nb + J * C + D * C;
  const long bwd = J * C + D * C + J * C + C + 2 * C + J * Cp + 2 * J * Wm + J * 2 * C + 2 * nb + nb * Cp;
  return fwd + bwd;
}

// ---- model weights on the device (float) ----
struct BlockWDev {
  const float *pre, *post;            // (L+1, C, Cw), (L+1, Cw, C)
  const float *rh, *rhT;              // (C, Cw), (Cw, C) or null
  const float *mix, *mixT, *cb;       // ((L+1)Cw, K), mixp's transpose (Kp, (L+1)C), (Cw)
  const float *mixp;                  // ((L+1)C, Kp): blockdiag(W_rh) mix, K padded to Kp = K rounded up to 4
  const float *A, *AT, *W1, *W1T;     // (nL, F, M0, M0), (nL, F, 2M1, 2M1) and transposes
  const float *G, *GT;                // (ngated, F, Cf, L*Cf) and per-(layer, focus) transposes
  // The same six as images for the warpgroup tile (wgmma_layout.h; Dims::wgmma), per (layer,
  // focus) 2 K N floats each (A: K = N = M0; W1: 2M1; G: K = Cf, N = L*Cf; GT: K = L*Cf, N = Cf),
  // or null.
  const float *A_wg, *AT_wg, *W1_wg, *W1T_wg, *G_wg, *GT_wg;
  // A and A^T as the warp-specialised tile's images (wgmma_b_image with k blocks of kWsKs = 2 steps;
  // Dims::stack_ws), per (layer, focus) 2 M0 M0 floats, or null. W1, W1^T (2M1 = 192 > 128) use
  // W1_wg, W1T_wg: their k blocks are already of 2 steps (wg_ks).
  const float *A_ws, *AT_ws;
  // G with its columns padded with zeros to a multiple of 64 (Cf = 32, L = 3: 32 x 128), as the same
  // images: the gate product on tensor cores (stack_ws_gated_fwd.cu), per
  // (gated layer, focus) 2 Cf 128 floats, or null.
  const float *G_ws;
  // G^T (L Cf x Cf) padded the same way (96 x 64), as the same images: the gated backward's eta G^T
  // (stack_ws_gated_bwd.cu), per (gated layer, focus) 2 L Cf 64 floats, or null.
  const float *GT_ws;
  // A_ws, AT_ws, W1_wg, W1T_wg, G_ws, GT_ws as FP16 images (wgmma_b_image_f16_ws: the same sizes
  // and offsets; Dims::stack_f16), or null.
  const float *A_f16, *AT_f16, *W1_f16, *W1T_f16, *G_f16, *GT_f16;
  const float *fc_w, *fc_norm;        // (Cf, F), (F, Cf) or null
  const float *qk_norm, *gate_norm;   // (F, Cf)
  const float *Wq, *Wk;               // (F, Cf, Cf)
  const float *Wq_t, *Wk_t;           // each focus's block transposed: attention_node_backward_k's coalesced rows
  const float *logit_u;               // (F, C): R0 . u_f is the radial logit bias
  // With the degree mixer: (round4(Kp + F), C), [mixp^T; logit_u] with W1^T folded in (W1's
  // degree-0 columns for the logit rows), zero rows to the multiple of 4: the radial MLP's
  // backward from the kernel and logit adjoints (radial.cu); else null.
  const float *rad_fold;
  // With the degree mixer: [W1 mixp | W1_0 logit_u^T] (C, round4(Kp + F)) and [T sum_l mixp_l |
  // T logit_u^T] (ntypes, round4(Kp + F)), T the type embedding, zero columns to the multiple of 4:
  // the kernel values and the radial logit bias from the radial MLP's activations
  // (radial_tables.cu); else null.
  const float *kern_w, *kern_type;
  const float *log_zeta, *gate_w;     // (F), (Cf, F)
  const float *post_scale, *post_bias, *pre_scale, *pre_bias;  // (L+1, C), (C)
  float post_eps, pre_eps;
  const float *ffn_w1, *ffn_sg, *ffn_w2;  // (L+1, C, 2 KF H), (2H, H), (L+1, KF H, C)
  const float* ffn_sgT;                   // (H, 2H): ffn_sg transposed, for the gate input's backward (ffn.cu)
  int has_mn;                              // message-node grid net (message_node_so3)
  GridNetDev mn;
  int ffn_so3;                             // FFN on the SO(3) grid (ffn_so3_grid): ffn_grid, no ffn_sg
  GridNetDev ffn_grid;
};
struct ModelWDev {
  const float *freqs, *type_emb, *rad_w0, *rad_norm, *rad_w1;
  const float *rad_w1_t, *rad_eye;  // W1^T (W, C) and the C x C identity: the folded GIE backward's
  const float *es_p1, *es_p2, *es_tau, *es_g1, *es_g2, *es_out, *film_s, *film_h;
  const float* es_out_t;  // es_out transposed, (2 C, emb ax): env_seed_node_backward_k's coalesced rows
  float film_as, film_ah;
  const float *ro_w1, *ro_w2;
  const float *gridT, *gridP;  // (G, D), (D, G)
  int G;
  SO3GridDev so3;              // the SO(3) grid of every grid net (A, B null without one)
  int ro_so3;                  // so3_readout "mlp": ro3_w1 (L+1, C, 2 K H), ro_grid, ro3_w2 (L+1, K H, C)
  const float *ro3_w1, *ro3_w2;
  GridNetDev ro_grid;
};

// The read-out's fitting net: gated layers (weights and biases concatenated over the layers,
// dims[k] the k-th layer's width), its output vector and the per-type energy bias (double).
struct FittingDev {
  const float *w, *b;
  const int* dims;
  int n;
  const float* out;
  const double* atom_bias;
};

// Padded size of the degree mixer's kernel values (K rounded up to 4, for 16-byte loads).
__host__ __device__ inline int padded_kernel_size(const Dims& d) { return (d.K + 3) / 4 * 4; }

// The graph on the device (sezm::Graph's contract, src/graph/graph.h): N centres, NT >= N nodes, E edges grouped by
// destination (off: N + 1 CSR offsets).
struct GraphDev {
  int N, NT, E;
  const int *src, *dst, *off, *types;
};

// Per-edge geometry written by the geometry forward and read by every later edge step:
// float vector (3), safe length, envelope and its derivative, Bessel basis (nr), compact Wigner
// rows (dc_size).
struct EdgeGeomDev {
  float *vecf, *r, *env, *denv, *rbf, *Dc;
};
// Adjoints of that geometry, summed over the call and consumed by the geometry backward.
struct EdgeGeomBarDev {
  float *env_bar, *rbf_bar, *Dc_bar, *vec_bar;
};

}  // namespace sezm::cuda
