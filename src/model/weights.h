#pragma once
// Typed SeZM weights, re-laid out once at load time for the engines: per-degree linears split
// into one (in, out) matrix per degree, per-focus blocks cut out of the stacked focus weights,
// the |m|=1 SO(2) block assembled as [[Wu, Wv], [-Wv, Wu]]. Names follow docs/model.md.
#include <string>
#include <vector>

#include "common/matrix.h"
#include "model/config.h"

namespace sezm {

struct Checkpoint;

template <class T>
struct EquivariantRMSNormW {
  Mat<T> scale;  // (L+1) x C: s_{l,c}
  Vec<T> bias;   // C, added to the l = 0 row
  T eps = T(0);
};

template <class T>
struct SO2LayerW {
  std::vector<Mat<T>> A;   // per focus, M0 x M0 (m = 0 block)
  std::vector<Mat<T>> W1;  // per focus, 2M1 x 2M1 (rows: in -,+; cols: out -,+)
  std::vector<Mat<T>> G;   // per focus, Cf x L*Cf gate logits (empty for the identity layer)
};

// One SO(3) grid net (docs/model.md §5.10-§5.13). C = per-frame channel width of its operands;
// self mode (FFN, read-out): the operands are the two halves of the caller's first linear;
// cross mode (message-node): frame expansion E of query and context, contraction Q, residual scale.
enum class GridOp { Product, MLP, Branch };  // "glu" | "mlp" | "branch"

template <class T>
struct GridNetW {
  GridOp op = GridOp::Product;
  bool cross = false;
  int C = 0;
  int n_br = 1;                  // branches (Branch)
  Mat<T> scalar_gate;            // 2C x C
  Mat<T> left, right;            // MLP: Cin x 2C (Cin = 2C self, C cross); Branch: C x n_br C
  Mat<T> out;                    // MLP: 2C x C; Branch: C x C
  Mat<T> router;                 // Branch: 2C x n_br
  std::vector<Mat<T>> expand;    // cross: per degree, C x K C (frame-major columns p C + c)
  std::vector<Mat<T>> contract;  // cross: per degree, K C x C
  RowVec<T> residual_scale;      // cross: C
};

template <class T>
struct BlockW {
  EquivariantRMSNormW<T> post_so2_norm, pre_ffn_norm;
  // SO(2) convolution
  std::vector<Mat<T>> pre_focus_mix;   // per degree, C x Cw
  std::vector<Mat<T>> post_focus_mix;  // per degree, Cw x C
  bool has_radial_hidden_proj = false;
  Mat<T> radial_hidden_proj;           // C x Cw
  bool degree_mixer = false;           // radial_so2_mode == "degree_channel"
  Mat<T> mixer_weight;                 // (L+1)Cw x K
  Vec<T> channel_basis;                // Cw
  std::vector<SO2LayerW<T>> layers;    // mixing_layers; the last is the identity layer
  // focus competition (F > 1)
  Mat<T> focus_compete_w;              // Cf x F
  bool focus_norm = false;
  Mat<T> focus_compete_norm;           // F x Cf
  // attention (one head)
  Mat<T> qk_norm, gate_norm;           // F x Cf
  std::vector<Mat<T>> q_proj, k_proj;  // per focus, Cf x Cf
  Mat<T> logit_w;                      // Cf x F
  Vec<T> log_zeta;                     // F: log(softplus(z_raw) + eps)
  Mat<T> gate_w;                       // Cf x F
  // message-node grid net (message_node_so3)
  bool has_message_node = false;
  GridNetW<T> message_node;
  // FFN: S2 grid (ffn_w1 C x 2H, scalar gate, ffn_w2 H x C), or SO(3) grid (ffn_so3_grid:
  // ffn_w1 C x 2KH, ffn_grid, ffn_w2 KH x C)
  std::vector<Mat<T>> ffn_w1;          // per degree
  Mat<T> ffn_scalar_gate;              // 2H x H (S2 grid)
  bool ffn_so3 = false;
  GridNetW<T> ffn_grid;
  std::vector<Mat<T>> ffn_w2;          // per degree
};

template <class T>
struct ModelW {
  ModelConfig cfg;
  int ntypes = 0;
  // geometry / embeddings
  Vec<T> freqs;                        // n_radial
  Mat<T> type_embedding;               // (ntypes+1) x C
  Mat<T> radial_w0;                    // n_radial x C
  bool radial_norm = false;            // edge_norm
  Vec<T> radial_norm_scale;            // C
  Mat<T> radial_w1;                    // C x (L+1)C
  // env seed
  Mat<T> es_proj1, es_proj2;           // n_radial x rbf_out, rbf_out x rbf_out
  Mat<T> es_type_embedding;            // (ntypes+1) x type_dim
  Mat<T> es_g1, es_g2;                 // g_in x hidden, hidden x embed
  Mat<T> es_out;                       // embed*axis x 2C
  bool film_norm = false;
  Vec<T> film_scale_norm, film_shift_norm;  // C
  T film_scale_alpha = T(0), film_shift_alpha = T(0);
  // blocks
  std::vector<BlockW<T>> blocks;
  // read-out FFN (so3_readout "none")
  Mat<T> readout_w1;                   // C x 2H
  Mat<T> readout_w2;                   // H x C
  // read-out FFN (so3_readout "mlp"): per degree C x 2KH, grid MLP (self), per degree KH x C
  bool readout_so3 = false;
  std::vector<Mat<T>> readout_so3_w1, readout_so3_w2;
  GridNetW<T> readout_grid;
  // fitting
  std::vector<Mat<T>> fit_w;           // d_k x 2H_k
  std::vector<Vec<T>> fit_b;           // 2H_k
  Vec<T> fit_out;                      // H_last
  std::vector<double> atom_bias;       // per type: bias_atom_e + out_bias (kept in double)
  // ZBL bridging (cfg.zbl; docs/model.md §9): nuclear charge per type, from type_map.
  std::vector<double> zbl_z;
  // Charge/spin conditioning (cfg.chg_spin; docs/model.md §10). The frame's condition
  // silu([Ec[Q+100], Es[S]] W + b) is added to every row of type_embedding by
  // apply_charge_spin (model/charge_spin.h) before an engine is made; engines refuse a
  // conditioned model whose condition was not applied.
  Mat<T> cs_charge;                    // 200 x C, row Q + 100
  Mat<T> cs_spin;                      // 100 x C, row S
  Mat<T> cs_mix_w;                     // 2C x C
  Vec<T> cs_mix_b;                     // C
  bool cs_applied = false;
};

template <class T>
ModelW<T> load_weights(const Checkpoint& ckpt, const ModelConfig& cfg);

}  // namespace sezm
