#pragma once
// LoRA fine-tuning checkpoints (deepmd-kit 3.2.0 `lora: {rank, alpha}`): folds the low-rank
// adapters into the base weights, so the engines only ever see plain weights.
//
// deepmd-kit's trainer wraps every SO3Linear and SO2Linear of the model in an adapter and its
// latest checkpoints keep the adapters beside the frozen base weights; when such a file is
// loaded for evaluation the descriptor adds dW = scaling * B A to each base weight (and drops
// the adapter keys). fold_lora() does the same, in double:
//   SO(3) linear <p>: weight (L+1, in, out)  A_by_l (L+1, r, in)  B_by_l (L+1, out, r)
//       weight[l][i][o] += s * sum_r B_by_l[l][o][r] * A_by_l[l][r][i]
//   SO(2) linear <p>: weight_m0 (in, out) with A_m0 (r, in), B_m0 (out, r), and likewise
//       every weight_m.<k> with A_m.<k>, B_m.<k>:  weight[i][o] += s * sum_r A[r][i] * B[o][r]
// with s = <p>.lora_scaling, the 0-d tensor deepmd-kit stores per adapted module
// (alpha / rank; it is checked against the config's rank and alpha).
// Only adapters under atomic_model.descriptor. are folded (where deepmd-kit folds them); any
// other adapter-like tensor, an adapter whose partner or base weight is missing, adapters
// without `lora` in the config and `lora` without adapters are errors naming the tensor.
// docs/model-options.md, "LoRA".
#include <string>

namespace sezm {

struct Checkpoint;
struct ModelConfig;

// Folds and removes every adapter tensor of `ckpt` (no-op for a plain checkpoint whose
// config has no `lora`). Throws sezm::Error naming the checkpoint and the tensor.
void fold_lora(Checkpoint& ckpt, const ModelConfig& cfg);

// Throws if `ckpt` still holds an adapter tensor (A_by_l, B_by_l, A_m0, B_m0, A_m.*, B_m.*,
// lora_scaling): load_weights calls it so that an unfolded adapter is never silently ignored.
void require_no_lora_adapters(const Checkpoint& ckpt);

}  // namespace sezm
