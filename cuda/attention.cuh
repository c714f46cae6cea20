#pragma once
// Attention on the device (CPU twin: engine/attention.h): q/k projections and the output gate
// per node, the envelope softmax per destination segment, the output gate on the destination
// aggregate, and their backward.
#include "model_dev.cuh"

namespace sezm::cuda {

// Per node: q, k (all NT nodes), gate gamma (centres); the backward adds into H_bar's row 0.
struct AttentionNodeArgs {
  int N, NT;
  const float* H;                           // (NT, D, Cw)
  float *q, *k, *qk_rho, *gate_rho, *gamma;  // forward: written (NT Cw, NT Cw, NT F, N F, N F)
  const float *q_bar, *k_bar, *gamma_bar;    // backward
  float* H_bar;                              // backward: added into
};
void launch_attention_node_forward(const Dims& d, const BlockWDev& w, const AttentionNodeArgs& a, cudaStream_t s);
void launch_attention_node_backward(const Dims& d, const BlockWDev& w, const AttentionNodeArgs& a, cudaStream_t s);

// The envelope softmax over each centre's in-edges, all foci: alpha (E, F). With a bridging gate
// (docs/model.md §9.2) an edge's mass env^2 exp(logit) is multiplied by gate_e; an edge with a
// zero gate leaves the segment like one with a zero envelope.
struct SoftmaxArgs {
  int N;
  const int *src, *off;
  const float* env;
  EdgeRadialIn R;  // the radial logit bias reads R(e, 0, :)
  const float *q, *k;
  float* alpha;  // written
  const float* gate = nullptr;  // bridging source gate (E), a factor of each edge's mass; nullptr: none
  // The radial logit bias R(e, 0, :) . u_f per edge, (E', F) from edge lb_e0 on (the folded kernel
  // values' extra columns, radial_tables.cu), read instead of R; nullptr: formed from R.
  const float* lbias = nullptr;
  int lb_e0 = 0;
};
void launch_attention_softmax_forward(const Dims& d, const BlockWDev& w, const SoftmaxArgs& a, cudaStream_t s);

// Its backward on the centres [n0, n1) of a chunk whose first edge is e0: lbar (the chunk's
// logit adjoints, (Ec, F)), q_bar (centre rows) and env_bar.
struct SoftmaxBackwardArgs {
  int n0, n1, e0;
  const int *src, *off;
  const float *env, *alpha, *alpha_bar, *k;
  float *lbar, *q_bar, *env_bar;
  const float* gate = nullptr;  // bridging source gate (E, absolute edge index), or nullptr
  float* gate_bar = nullptr;    // with a gate: dE/dgate (E), added into
};
void launch_softmax_backward(const Dims& d, const BlockWDev& w, const SoftmaxBackwardArgs& a, cudaStream_t s);

// The output gate A = gamma P on N nodes (pointers at the first node), and its backward.
struct OutputGateArgs {
  int N;
  const float *gamma, *P;
  float* A;             // forward: written
  const float* A_bar;   // backward
  float *P_bar, *gamma_bar;
};
void launch_gate_post(const Dims& d, const OutputGateArgs& a, cudaStream_t s);
void launch_gate_backward(const Dims& d, const OutputGateArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
