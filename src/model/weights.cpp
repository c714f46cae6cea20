#include "model/weights.h"

#include <cmath>
#include <sstream>

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/elements.h"
#include "model/fitting_weights.h"
#include "model/lora.h"

namespace sezm {
namespace {

// Fetches a tensor and checks its shape, so a checkpoint that disagrees with its own config
// fails at load with the tensor named instead of reading out of bounds later.
class Loader {
 public:
  Loader(const Checkpoint& c) : ckpt_(c) {}

  const TensorData& get(const std::string& name, const std::vector<int64_t>& shape) const {
    const std::string key = "atomic_model." + name;
    if (!ckpt_.has(key))
      throw Error(ckpt_.path + ": tensor '" + key + "' is missing (expected shape " +
                  shape_string(shape) + ")");
    const TensorData& t = ckpt_.get_finite(key);
    if (t.shape != shape)
      throw Error(ckpt_.path + ": tensor '" + key + "' has shape " + shape_string(t.shape) +
                  ", the model config implies " + shape_string(shape));
    return t;
  }
  bool has(const std::string& name) const { return ckpt_.has("atomic_model." + name); }

  template <class T>
  Mat<T> mat(const std::string& name, int64_t rows, int64_t cols) const {
    return to_mat<T>(get(name, {rows, cols}).data.data(), rows, cols);
  }
  template <class T>
  Vec<T> vec(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorData& t = get(name, shape);
    Vec<T> v(static_cast<Eigen::Index>(t.data.size()));
    for (size_t i = 0; i < t.data.size(); ++i) v[i] = static_cast<T>(t.data[i]);
    return v;
  }
  // A stacked (n, rows, cols) tensor split into n matrices.
  template <class T>
  std::vector<Mat<T>> stack(const std::string& name, int64_t n, int64_t rows, int64_t cols) const {
    const TensorData& t = get(name, {n, rows, cols});
    std::vector<Mat<T>> out;
    for (int64_t k = 0; k < n; ++k) out.push_back(to_mat<T>(t.data.data() + k * rows * cols, rows, cols));
    return out;
  }
  // Column block [c0, c0 + cols) of a rows x total matrix.
  template <class T>
  static Mat<T> columns(const Mat<T>& m, int64_t c0, int64_t cols) {
    return m.block(0, c0, m.rows(), cols);
  }
  template <class T>
  static Mat<T> to_mat(const double* p, int64_t rows, int64_t cols) {
    Mat<T> m(rows, cols);
    for (int64_t i = 0; i < rows * cols; ++i) m.data()[i] = static_cast<T>(p[i]);
    return m;
  }

 private:
  const Checkpoint& ckpt_;
};

template <class T>
EquivariantRMSNormW<T> load_eq_norm(const Loader& ld, const std::string& pfx, int L, int C, double eps) {
  EquivariantRMSNormW<T> n;
  n.scale = Loader::to_mat<T>(ld.get(pfx + ".adam_scale", {L + 1, 1, C}).data.data(), L + 1, C);
  n.bias = ld.vec<T>(pfx + ".bias", {1, C});
  n.eps = static_cast<T>(eps);
  return n;
}

// The descriptor's version_tensor (docs/model-options.md, "Descriptor versions"). 1.1 and 1.2
// compute the same function for every model we accept: deepmd-kit 3.2.0's migration 1.1 -> 1.2
// rewrites only native-spin parameters (spin models are refused by the config), and its forward
// branches only on version >= 1.1. Legacy files (< 1.1: another degree floor, no envelope on the
// radial features) and unknown newer ones are refused rather than approximated.
// The tolerance admits a version stored or rounded in float32 (1.1f = 1.10000002).
void check_descriptor_version(const std::string& path, double version) {
  for (const double v : {1.1, 1.2})
    if (std::fabs(version - v) < 1e-6) return;
  std::ostringstream o;
  o << path << ": unsupported descriptor version_tensor = " << version
    << " (supported: 1.1 and 1.2, the version deepmd-kit 3.2.0 writes; "
    << (version < 1.1 ? "older SeZM checkpoints are not supported"
                      : "a newer deepmd-kit wrote this file; its changes are not implemented")
    << ")";
  throw Error(o.str());
}

// A grid net's parameters under prefix `pfx` (docs/model.md §5.10; shapes of deepmd-kit's
// SO3GridNet: FocusLinear scalar gate (2C, C), ChannelLinear projections (in, out)).
template <class T>
GridNetW<T> load_grid_net(const Loader& ld, const std::string& pfx, const std::string& op, int n_br, bool cross,
                          int C, int L, int K) {
  GridNetW<T> g;
  g.op = op == "branch" ? GridOp::Branch : op == "mlp" ? GridOp::MLP : GridOp::Product;
  g.cross = cross;
  g.C = C;
  g.n_br = g.op == GridOp::Branch ? n_br : 1;
  g.scalar_gate = ld.mat<T>(pfx + "scalar_gate.weight", 2 * C, C);
  const std::string go = pfx + "grid_op.";
  if (g.op == GridOp::MLP) {
    const int cin = cross ? C : 2 * C;
    g.left = ld.mat<T>(go + "left_proj.weight", cin, 2 * C);
    g.right = ld.mat<T>(go + "right_proj.weight", cin, 2 * C);
    g.out = ld.mat<T>(go + "out_proj.weight", 2 * C, C);
  } else if (g.op == GridOp::Branch) {
    g.left = ld.mat<T>(go + "left_proj.weight", C, g.n_br * C);
    g.right = ld.mat<T>(go + "right_proj.weight", C, g.n_br * C);
    g.router = ld.mat<T>(go + "router.weight", 2 * C, g.n_br);
    g.out = ld.mat<T>(go + "out_proj.weight", C, C);
  }
  if (cross) {
    g.expand = ld.stack<T>(pfx + "frame_expand.weight", L + 1, C, K * C);
    g.contract = ld.stack<T>(pfx + "frame_contract.weight", L + 1, K * C, C);
    g.residual_scale = ld.vec<T>(pfx + "residual_scale", {1, C}).transpose();
  }
  return g;
}

}  // namespace

template <class T>
ModelW<T> load_weights(const Checkpoint& ckpt, const ModelConfig& cfg) {
  require_no_lora_adapters(ckpt);  // fold_lora() runs first (load_model_weights)
  Loader ld(ckpt);
  ModelW<T> w;
  w.cfg = cfg;
  const int C = cfg.channels, L = cfg.lmax, nr = cfg.n_radial, F = cfg.n_focus;
  const int Cf = cfg.focus_width(), Cw = cfg.wide(), H = cfg.ffn_hidden();
  const int nt = static_cast<int>(cfg.type_map.size());
  w.ntypes = nt;
  const std::string d = "descriptor.";

  w.cfg.descriptor_version = ld.get(d + "version_tensor", {}).data.at(0);
  check_descriptor_version(ckpt.path, w.cfg.descriptor_version);

  w.freqs = ld.vec<T>(d + "radial_basis.adam_freqs", {1, nr});
  w.type_embedding = ld.mat<T>(d + "type_embedding.adam_type_embedding", nt + 1, C);
  w.radial_w0 = ld.mat<T>(d + "radial_embedding.net.0.matrix", nr, C);
  w.radial_norm = cfg.edge_norm;
  if (cfg.edge_norm) {
    w.radial_norm_scale = ld.vec<T>(d + "radial_embedding.net.1.adam_scale", {C});
    w.radial_w1 = ld.mat<T>(d + "radial_embedding.net.3.matrix", C, (L + 1) * C);
  } else {
    w.radial_w1 = ld.mat<T>(d + "radial_embedding.net.2.matrix", C, (L + 1) * C);
  }

  const std::string es = d + "env_seed_embedding.";
  w.es_proj1 = ld.mat<T>(es + "rbf_proj_layer1.matrix", nr, cfg.es_rbf_out());
  w.es_proj2 = ld.mat<T>(es + "rbf_proj_layer2.matrix", cfg.es_rbf_out(), cfg.es_rbf_out());
  w.es_type_embedding = ld.mat<T>(es + "env_type_embed.adam_type_embedding", nt + 1, cfg.es_type_dim());
  w.es_g1 = ld.mat<T>(es + "g_layer1.matrix", cfg.es_g_in(), cfg.es_hidden());
  w.es_g2 = ld.mat<T>(es + "g_layer2.matrix", cfg.es_hidden(), cfg.es_embed());
  w.es_out = ld.mat<T>(es + "output_proj.matrix", cfg.es_embed() * cfg.es_axis(), 2 * C);
  w.film_norm = cfg.edge_norm;
  if (cfg.edge_norm) {
    w.film_scale_norm = ld.vec<T>(d + "film_scale_norm.adam_scale", {1, C});
    w.film_shift_norm = ld.vec<T>(d + "film_shift_norm.adam_scale", {1, C});
  }
  w.film_scale_alpha = static_cast<T>(std::exp(ld.get(d + "film_scale_strength_log", {1}).data[0]));
  w.film_shift_alpha = static_cast<T>(std::exp(ld.get(d + "film_shift_strength_log", {1}).data[0]));

  const int M0 = (L + 1) * Cf, M1 = L * Cf, K = (L + 1) * (L + 1) + L * L;
  const int K3 = cfg.n_frames();  // SO(3) grid frames
  for (int b = 0; b < cfg.n_blocks; ++b) {
    const std::string p = d + "blocks." + std::to_string(b) + ".";
    const std::string s = p + "so2_conv.";
    BlockW<T> bw;
    bw.post_so2_norm = load_eq_norm<T>(ld, p + "post_so2_norm", L, C, cfg.edge_norm ? 1e-5 : 1.0);
    bw.pre_ffn_norm = load_eq_norm<T>(ld, p + "pre_ffn_norms.0", L, C, 1e-5);
    bw.pre_focus_mix = ld.stack<T>(s + "pre_focus_mix.weight", L + 1, C, Cw);
    bw.post_focus_mix = ld.stack<T>(s + "post_focus_mix.weight", L + 1, Cw, C);
    bw.has_radial_hidden_proj = Cw != C;
    if (bw.has_radial_hidden_proj) bw.radial_hidden_proj = ld.mat<T>(s + "radial_hidden_proj.weight", C, Cw);
    bw.degree_mixer = cfg.radial_so2_mode == "degree_channel";
    if (bw.degree_mixer) {
      bw.mixer_weight = ld.mat<T>(s + "radial_degree_mixer.weight", (L + 1) * Cw, K);
      bw.channel_basis = ld.vec<T>(s + "radial_degree_mixer.channel_basis", {1, Cw});
    }
    for (int k = 0; k < cfg.mixing_layers; ++k) {
      const std::string lk = s + "so2_linears." + std::to_string(k) + ".";
      const Mat<T> w0 = ld.mat<T>(lk + "weight_m0", M0, F * M0);
      const Mat<T> wm = ld.mat<T>(lk + "weight_m.0", M1, F * 2 * M1);
      SO2LayerW<T> layer;
      for (int f = 0; f < F; ++f) {
        layer.A.push_back(Loader::columns(w0, f * M0, M0));
        const Mat<T> wu = Loader::columns(wm, f * 2 * M1, M1);
        const Mat<T> wv = Loader::columns(wm, f * 2 * M1 + M1, M1);
        Mat<T> w1(2 * M1, 2 * M1);
        w1 << wu, wv, -wv, wu;
        layer.W1.push_back(std::move(w1));
      }
      if (k + 1 < cfg.mixing_layers) {
        const Mat<T> g = ld.mat<T>(s + "non_linearities." + std::to_string(k) + ".gate_linear.weight", Cf, F * L * Cf);
        for (int f = 0; f < F; ++f) layer.G.push_back(Loader::columns(g, f * L * Cf, L * Cf));
      }
      bw.layers.push_back(std::move(layer));
    }
    if (F > 1) {
      bw.focus_compete_w = ld.mat<T>(s + "adamw_focus_compete_w", Cf, F);
      bw.focus_norm = cfg.edge_norm;
      if (bw.focus_norm) bw.focus_compete_norm = ld.mat<T>(s + "focus_compete_norm.adam_scale", F, Cf);
    }
    bw.qk_norm = ld.mat<T>(s + "attn_qk_norm.adam_scale", F, Cf);
    bw.gate_norm = ld.mat<T>(s + "attn_output_gate_norm.adam_scale", F, Cf);
    const Mat<T> wq = ld.mat<T>(s + "attn_q_proj.weight", Cf, F * Cf);
    const Mat<T> wk = ld.mat<T>(s + "attn_k_proj.weight", Cf, F * Cf);
    for (int f = 0; f < F; ++f) {
      bw.q_proj.push_back(Loader::columns(wq, f * Cf, Cf));
      bw.k_proj.push_back(Loader::columns(wk, f * Cf, Cf));
    }
    bw.logit_w = Loader::to_mat<T>(ld.get(s + "adamw_attn_logit_w", {Cf, F, 1}).data.data(), Cf, F);
    bw.gate_w = Loader::to_mat<T>(ld.get(s + "adamw_attn_gate_w", {Cf, F, 1}).data.data(), Cf, F);
    const TensorData& zr = ld.get(s + "adamw_attn_z_bias_raw", {F, 1});
    bw.log_zeta.resize(F);
    for (int f = 0; f < F; ++f) {
      // torch softplus (beta 1, threshold 20) plus the descriptor eps: the null mass of the softmax.
      const double x = zr.data[f];
      const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
      bw.log_zeta[f] = static_cast<T>(std::log(sp + cfg.eps));
    }
    bw.has_message_node = cfg.message_node_so3;
    if (bw.has_message_node)
      bw.message_node = load_grid_net<T>(ld, s + "message_node_grid_product.", cfg.message_node_op,
                                         cfg.message_node_branches, true, Cf, L, K3);
    const std::string fp = p + "ffns.0.";
    bw.ffn_so3 = cfg.ffn_so3_grid;
    if (bw.ffn_so3) {
      bw.ffn_w1 = ld.stack<T>(fp + "so3_linear_1.weight", L + 1, C, 2 * K3 * H);
      bw.ffn_grid = load_grid_net<T>(ld, fp + "act.", cfg.ffn_op, cfg.ffn_branches, false, H, L, K3);
      bw.ffn_w2 = ld.stack<T>(fp + "so3_linear_2.weight", L + 1, K3 * H, C);
    } else {
      bw.ffn_w1 = ld.stack<T>(fp + "so3_linear_1.weight", L + 1, C, 2 * H);
      bw.ffn_scalar_gate = ld.mat<T>(fp + "act.scalar_gate.weight", 2 * H, H);
      bw.ffn_w2 = ld.stack<T>(fp + "so3_linear_2.weight", L + 1, H, C);
    }
    w.blocks.push_back(std::move(bw));
  }

  w.readout_so3 = cfg.so3_readout != "none";
  if (w.readout_so3) {
    // The read-out degree is the last block's node degree (= lmax: no l_schedule, extra_node_l 0).
    w.readout_so3_w1 = ld.stack<T>(d + "output_ffn.so3_linear_1.weight", L + 1, C, 2 * K3 * H);
    w.readout_grid = load_grid_net<T>(ld, d + "output_ffn.act.", cfg.so3_readout, 1, false, H, L, K3);
    w.readout_so3_w2 = ld.stack<T>(d + "output_ffn.so3_linear_2.weight", L + 1, K3 * H, C);
  } else {
    w.readout_w1 = Loader::to_mat<T>(ld.get(d + "output_ffn.so3_linear_1.weight", {1, C, 2 * H}).data.data(), C, 2 * H);
    w.readout_w2 = Loader::to_mat<T>(ld.get(d + "output_ffn.so3_linear_2.weight", {1, H, C}).data.data(), H, C);
  }

  // The fitting net in double, with a multi-task head's case embedding folded in.
  const FittingWeights fw = load_fitting_weights(ckpt, cfg);
  for (size_t k = 0; k < fw.w.size(); ++k) {
    w.fit_w.push_back(fw.w[k].cast<T>());
    w.fit_b.push_back(fw.b[k].cast<T>());
  }
  w.fit_out = fw.out.cast<T>();
  w.atom_bias = fw.atom_bias;

  if (cfg.zbl) {
    // Z from the element symbols (deepmd-kit's table); the checkpoint's own copy must agree.
    const std::string key = "inter_potential.atomic_numbers";
    const TensorData* stored = ckpt.has(key) ? &ckpt.get(key) : nullptr;
    if (stored && stored->shape != std::vector<int64_t>{nt})
      throw Error(ckpt.path + ": tensor '" + key + "' has shape " + shape_string(stored->shape) +
                  ", the type_map implies " + shape_string({nt}));
    for (int t = 0; t < nt; ++t) {
      const int z = atomic_number(cfg.type_map[t]);
      if (z == 0)
        throw Error(ckpt.path + ": ZBL bridging needs element symbols in type_map; '" + cfg.type_map[t] +
                    "' is not one");
      if (stored && stored->data[t] != z)
        throw Error(ckpt.path + ": tensor '" + key + "' gives Z = " + std::to_string(stored->data[t]) + " for '" +
                    cfg.type_map[t] + "', the element table " + std::to_string(z));
      w.zbl_z.push_back(z);
    }
  }
  if (cfg.chg_spin) {
    const std::string cs = d + "charge_spin_embedding.";
    w.cs_charge = ld.mat<T>(cs + "charge_embedding.adam_type_embedding", 200, C);
    w.cs_spin = ld.mat<T>(cs + "spin_embedding.adam_type_embedding", 100, C);
    w.cs_mix_w = ld.mat<T>(cs + "mix_layer.matrix", 2 * C, C);
    w.cs_mix_b = ld.vec<T>(cs + "mix_layer.bias", {C});
  }
  return w;
}

template ModelW<double> load_weights<double>(const Checkpoint&, const ModelConfig&);
template ModelW<float> load_weights<float>(const Checkpoint&, const ModelConfig&);

}  // namespace sezm
