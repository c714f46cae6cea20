#pragma once
// The dpa4_ener fitting net's weights, read in double with the case (head) embedding of a
// multi-task model folded in (docs/model.md §6.2, "Case embedding").
//
// The case embedding e (fitting_net.case_embd, the head's one-hot of width K) is a constant of
// the loaded model, so every way deepmd-kit 3.2.0 feeds it in is an affine map with constant
// coefficients that folds exactly into the neighbouring linear layer:
//   - concatenated (case_film_embd false): [d, e] W0 + b0 = d W0[:C] + (b0 + e W0[C:]);
//   - FiLM (case_film_embd true): a code c = silu(e A1) A2 (width 4C, no biases) gives, per
//     target t (the descriptor, then each hidden layer's output; widths C, H_0, ...),
//     [gamma_t, beta_t] = c P_t, and the target x becomes x * s_t + h_t with
//     s_t = 1 + exp(sigma_t) tanh(gamma_t), h_t = exp(tau_t) tanh(beta_t). The map that reads
//     x (hidden layer t, or the output layer after the last one) absorbs it:
//     W' = diag(s_t) W, b' = b + h_t W; the output layer has no bias, so h_t W_out is a constant
//     per-atom energy, added to the per-type bias.
// The engines therefore see a plain GLU fitting net (their forward and backward unchanged);
// the fold runs in double, before any float32 copy.
#include <vector>

#include "common/matrix.h"

namespace sezm {

struct Checkpoint;
struct ModelConfig;

struct FittingWeights {
  std::vector<Mat<double>> w;     // per hidden layer, d_k x 2H_k (d_0 = C)
  std::vector<Vec<double>> b;     // per hidden layer, 2H_k
  Vec<double> out;                // H_last (or C without hidden layers)
  std::vector<double> atom_bias;  // per type: bias_atom_e + out_bias (+ a folded FiLM shift)
};

// Throws sezm::Error naming the checkpoint and the tensor.
FittingWeights load_fitting_weights(const Checkpoint& ckpt, const ModelConfig& cfg);

}  // namespace sezm
