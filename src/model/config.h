#pragma once
// Typed SeZM/DPA4 model configuration: exactly the option set the engines compute exactly.
// parse_model_config() refuses every other value with an Error naming option, value and
// what is supported (docs/model-options.md lists the accepted keys and values).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sezm {

// A JSON value as text for an error message. Strings from a damaged checkpoint may hold invalid
// UTF-8, which nlohmann::json::dump() throws on (type_error 316, a message naming neither the
// file nor the key); here such bytes become U+FFFD and the message is still made.
inline std::string json_text(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct ModelConfig {
  // ---- model ----
  std::vector<std::string> type_map;
  // ---- descriptor ----
  int channels = 0;        // C
  int n_radial = 0;
  int lmax = 0;            // L
  int mmax = 1;            // only 1 is supported
  int n_blocks = 0;
  int mixing_layers = 0;   // gated layers + 1 identity layer
  std::string radial_so2_mode;  // "none" | "degree_channel"
  int radial_so2_rank = 1;      // 1 (degree_channel)
  int n_focus = 1;              // F
  int focus_dim = 0;            // 0 -> C
  int n_atten_head = 1;         // only 1
  double rcut = 0.0;
  double eps = 1e-7;
  int env_exp_rbf = 7;          // env_exp[0]
  int env_exp_edge = 5;         // env_exp[1]
  bool edge_norm = true;
  std::string precision;        // "float32" | "float64" (descriptor; fitting must match)
  double descriptor_version = 0;  // the checkpoint's version_tensor, set by load_weights (1.1, 1.2)
  int ffn_neurons = 0;          // 0 -> auto
  // ---- SO(3) Wigner-D grid nets (the DPA4-Mini family, docs/model.md §5.10-§5.13) ----
  int kmax = 1;                      // frame set (0, -1, +1, ..., -kmax, +kmax); 0 <= kmax <= lmax
  bool message_node_so3 = false;     // cross grid net after the aggregation (§5.11)
  std::string message_node_op = "glu";  // "glu" | "mlp" | "branch" (grid_branch[1] > 0 wins)
  int message_node_branches = 1;
  bool ffn_so3_grid = false;         // block FFN on the SO(3) grid (§5.12)
  std::string ffn_op = "glu";        // "glu" | "mlp" | "branch"
  int ffn_branches = 1;
  std::string so3_readout = "none";  // "none" | "mlp" (§5.13)
  bool any_so3_grid() const { return message_node_so3 || ffn_so3_grid || so3_readout != "none"; }
  int n_frames() const { return 2 * kmax + 1; }  // K
  // ---- fitting ----
  std::vector<int> fitting_neuron;  // as written in the config (0 = auto width)
  // ---- ZBL bridging (model.bridging_method "zbl"; docs/model.md §9) ----
  bool zbl = false;
  double bridging_r_inner = 0.0;  // the descriptor's clamp / freeze radius (Å)
  double bridging_r_outer = 0.0;  // end of the transition zone (Å)
  // ---- charge/spin conditioning (descriptor.add_chg_spin_ebd; docs/model.md §10) ----
  bool chg_spin = false;
  bool has_default_chg_spin = false;
  double default_charge = 0.0, default_spin = 0.0;  // descriptor.default_chg_spin
  int dim_case_embd = 0;            // K: width of the case (head) one-hot; 0 = none
  bool case_film_embd = false;      // with K > 0: FiLM of the fitting layers, else concatenated
  // ---- multi-task (model_dict): the chosen head, set by load_model_weights ----
  std::string head;         // the model_dict branch; empty for a single-task model
  std::string head_reason;  // one log line: which head and why (model/multitask.h)
  // ---- LoRA fine-tuning (model.lora; folded into the weights at load, model/lora.h) ----
  int lora_rank = 0;        // 0: no `lora` in the config
  double lora_alpha = 0.0;  // alpha, or rank where alpha is null/absent (scaling alpha / rank)

  // ---- derived sizes (filled by parse_model_config) ----
  int focus_width() const { return focus_dim > 0 ? focus_dim : channels; }  // C_f
  int wide() const { return n_focus * focus_width(); }                     // C_w
  int n_coeff() const { return (lmax + 1) * (lmax + 1); }                   // D
  int n_reduced() const { return 3 * lmax + 1; }                            // D_m (mmax = 1)
  int ffn_hidden() const;           // H of the block FFNs and the read-out FFN
  std::vector<int> fitting_hidden() const;  // resolved hidden widths of the fitting net
  int fitting_input() const;                // width of the fitting net's first layer input
  // env-seed sizes
  int es_embed() const;
  int es_type_dim() const;
  int es_axis() const;
  int es_rbf_out() const;
  int es_g_in() const;
  int es_hidden() const;
};

// Validates and converts deepmd-kit's `model_params` (model/_extra_state/model_params).
// `source` (e.g. the checkpoint path) is only used in error messages.
ModelConfig parse_model_config(const nlohmann::json& model_params, const std::string& source);

}  // namespace sezm
