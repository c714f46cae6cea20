#pragma once
// The initial node embedding on the device (CPU twin: engine/embeddings.h): degree
// normalisation, environment-seed FiLM of the type features (row 0 of X0) and the GIE (rows
// l >= 1 of X0), forward and backward. A bridged model's source gate (docs/model.md §9.2)
// multiplies each edge's env-seed outer product and GIE message; without one (gate nullptr)
// the kernels run exactly the unbridged arithmetic.
#include "model_dev.cuh"

namespace sezm::cuda {

// isd[n] = 1 / sqrt(1 + sum_e env^2) over the centre's in-edges, and its backward.
struct DegreeArgs {
  int N;
  const int* off;
  const float* env;
  float* isd;            // forward: written
  const float* isd_bar;  // backward
  float* env_bar;        // backward: added into
};
void launch_degree_forward(const DegreeArgs& a, cudaStream_t s);
void launch_degree_backward(const DegreeArgs& a, cudaStream_t s);

// Forward writes the per-edge seed (gemb, seed), the per-node A and f and X0's row 0; the
// backward reads them with X0_bar and adds into isd_bar, rbf_bar and vec_bar (A_bar: scratch).
struct EnvSeedArgs {
  GraphDev g;
  EdgeGeomDev geo;  // read: vecf, r, env, denv, rbf
  const float* isd;
  float *gemb, *seed, *A, *f;  // (E, emb), (E, 4), (N, 4 emb), (N, 2C)
  float* X0;                   // forward: (N, D, C), row 0 written
  const float* X0_bar;         // backward
  float *A_bar, *isd_bar, *rbf_bar, *vec_bar;
  const float* gate;  // bridging source gate (E) on each edge's outer product (docs/model.md §9.2), or nullptr
  float* gate_bar;    // backward, with a gate: dE/dgate (E), added into
};
void launch_env_seed_forward(const Dims& d, const ModelWDev& w, const EnvSeedArgs& a, cudaStream_t s);
void launch_env_seed_backward(const Dims& d, const ModelWDev& w, const EnvSeedArgs& a, cudaStream_t s);

// GIE (kernels in gie.cu): X0 rows l >= 1 = isd sum_e rho_l D^T. The backward's isd share runs
// over the centres (launch_gie_backward with E = 0); its edge shares go per chunk of E edges
// (launch_gie_edge_backward). launch_gie_backward's edge part (Wigner rows, E > 0) and
// launch_gie_rho_backward (rho_bar added into a cleared table) are the split kernels that
// launch_gie_edge_backward runs with SEZM_CUDA_GIE_LEGACY=1.
struct GieArgs {
  int N, E;
  const int *dst, *off;
  const float *Dc, *isd, *rho;
  float* X0;             // forward: rows l >= 1 written
  const float* X0_bar;   // backward
  float *isd_bar, *Dc_bar, *rho_bar;
  const float* gate;  // bridging source gate (E, at the same first edge as dst) on each message, or nullptr
  float* gate_bar;    // launch_gie_backward, with a gate: dE/dgate (E), added into
  const float *rbf, *env;  // launch_gie_forward_folded: the edges' radial basis (E, nr) and envelope, as Dc
};
void launch_gie_forward(const Dims& d, const GieArgs& a, cudaStream_t s);
// The forward from the radial MLP's hidden layer (rbf, env and the model's radial weights), rho
// not read: where gie_forward_folds (C = 32, lmax 1..3).
bool gie_forward_folds(const Dims& d);
void launch_gie_forward_folded(const Dims& d, const ModelWDev& w, const GieArgs& a, cudaStream_t s);
void launch_gie_backward(const Dims& d, const GieArgs& a, cudaStream_t s);
void launch_gie_rho_backward(const Dims& d, const GieArgs& a, cudaStream_t s);
// Both edge shares for a run of E edges (a chunk; dst, Dc, rho, Dc_bar, gate, gate_bar at its first
// edge): Dc_bar (and gate_bar) added into as launch_gie_backward's edge part, and the chunk's
// rho_bar table (E, L + 1, C) written whole, row l = 0 zero (no clearing needed). The isd share
// stays with launch_gie_backward (E = 0).
void launch_gie_edge_backward(const Dims& d, const GieArgs& a, cudaStream_t s);
// The same edge shares from the radial MLP's hidden layer (gie_fold_backward.cu): no rho read, no
// rho_bar formed; instead G (E, C) = W1 rho_bar, which the radial backward takes as it is
// (RadialMlpArgs::plain). A chunk's N centres from n0 (off absolute, its edges from e0: Dc, rbf,
// env, gate, Dc_bar, gate_bar and G at the chunk's first edge). Where gie_backward_folds (C = 32,
// lmax 1..3, the radial tile takes G; not with SEZM_CUDA_GIE_LEGACY=1).
struct GieFoldArgs {
  int n0, N, e0;
  const int* off;
  const float *Dc, *rbf, *env, *gate, *isd, *X0_bar;
  float *Dc_bar, *gate_bar, *G;
};
bool gie_backward_folds(const Dims& d);
void launch_gie_edge_backward_folded(const Dims& d, const ModelWDev& w, const GieFoldArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
