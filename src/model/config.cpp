#include "model/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "common/error.h"

namespace sezm {
namespace {

using nlohmann::json;

// One JSON object of model_params ("model", "descriptor" or "fitting_net"). Every accessor
// marks its key as known; finish() refuses whatever key nobody asked for, so an option we do
// not implement can never be silently ignored.
class Section {
 public:
  Section(const json& j, std::string prefix, std::string source)
      : j_(j), prefix_(std::move(prefix)), source_(std::move(source)) {
    if (!j_.is_object())
      throw Error(source_ + ": " + (prefix_.empty() ? "model_params" : prefix_.substr(0, prefix_.size() - 1)) +
                  " is not a JSON object");
  }

  [[noreturn]] void refuse(const std::string& key, const json& value, const std::string& supported,
                           const std::string& why = "") const {
    throw Error(source_ + ": unsupported option " + prefix_ + key + " = " + json_text(value) +
                " (supported: " + supported + (why.empty() ? "" : "; " + why) + ")");
  }

  const json* optional(const std::string& key) {
    known_.insert(key);
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  const json& required(const std::string& key) {
    const json* v = optional(key);
    if (!v) throw Error(source_ + ": missing option " + prefix_ + key + " (no safe default)");
    return *v;
  }
  // Training-only or irrelevant to inference: any value, or absent.
  void ignore(std::initializer_list<const char*> keys) { known_.insert(keys.begin(), keys.end()); }

  // `key` must equal `expected`; `absent_ok` when a missing key is known to mean `expected`.
  void fixed(const std::string& key, const json& expected, bool absent_ok = false,
             const std::string& why = "") {
    const json* v = absent_ok ? optional(key) : &required(key);
    if (v && *v != expected) refuse(key, *v, json_text(expected), why);
  }
  int integer(const std::string& key, int min) {
    const json& v = required(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > 1 << 30)
      refuse(key, v, "an integer >= " + std::to_string(min));
    return v.get<int>();
  }
  double positive(const std::string& key) {
    const json& v = required(key);
    if (!v.is_number() || !(v.get<double>() > 0)) refuse(key, v, "a number > 0");
    return v.get<double>();
  }
  bool boolean(const std::string& key) {
    const json& v = required(key);
    if (!v.is_boolean()) refuse(key, v, "true or false");
    return v.get<bool>();
  }
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed) {
    const json& v = required(key);
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : " or ") + json_text(json(a));
    if (!v.is_string() || std::find(allowed.begin(), allowed.end(), v.get<std::string>()) == allowed.end())
      refuse(key, v, list);
    return v.get<std::string>();
  }

  void finish() const {
    for (const auto& item : j_.items())
      if (!known_.count(item.key()))
        throw Error(source_ + ": unknown option " + prefix_ + item.key() + " = " +
                    json_text(item.value()) + " (not part of the supported DPA4 option set)");
  }

 private:
  const json& j_;
  std::string prefix_;
  std::string source_;
  std::set<std::string> known_;
};

// grid_mlp / grid_branch: one value for all three grid paths or a list [node_wise, message_node,
// ffn], as deepmd-kit broadcasts them.
std::vector<json> grid_setting(Section& d, const std::string& key, bool integer) {
  const json& v = d.required(key);
  std::vector<json> out = v.is_array() ? std::vector<json>(v.begin(), v.end()) : std::vector<json>(3, v);
  bool ok = out.size() == 3;
  for (const auto& e : out)
    ok = ok && (integer ? e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() <= 64 : e.is_boolean());
  if (!ok)
    d.refuse(key, v, integer ? "an integer >= 0 or a list of three [node_wise, message_node, ffn]"
                             : "a boolean or a list of three [node_wise, message_node, ffn]");
  return out;
}

// The SO(3) Wigner-D grid nets (DPA4-Mini; docs/model.md §5.10-§5.13, docs/model-options.md).
void parse_so3_grids(Section& d, ModelConfig& c) {
  c.message_node_so3 = d.boolean("message_node_so3");
  c.ffn_so3_grid = d.boolean("ffn_so3_grid");
  {
    const json& v = d.required("so3_readout");
    if (v == "glu")
      d.refuse("so3_readout", v, "\"none\" or \"mlp\"",
               "the parameter-free grid-product read-out is not implemented (no deepmd-kit reference checks it)");
    c.so3_readout = d.one_of("so3_readout", {"none", "mlp"});
  }
  const std::vector<json> mlp = grid_setting(d, "grid_mlp", false);
  const std::vector<json> branch = grid_setting(d, "grid_branch", true);
  // Entry 0 (node-wise path) has no effect: node_wise_s2 / node_wise_so3 are off.
  auto op_of = [&](int i) {
    return branch[i].get<int>() > 0 ? std::string("branch") : mlp[i].get<bool>() ? "mlp" : "glu";
  };
  // A path that is off must keep its grid settings at the defaults: the S2 FFN (ffn_so3_grid off)
  // would otherwise switch to an S2 grid MLP / branch net, which is not implemented.
  if (c.message_node_so3) {
    c.message_node_op = op_of(1);
    c.message_node_branches = std::max(1, branch[1].get<int>());
  }
  if (c.ffn_so3_grid) {
    c.ffn_op = op_of(2);
    c.ffn_branches = std::max(1, branch[2].get<int>());
  } else if (op_of(2) != "glu") {
    const std::string key = op_of(2) == "mlp" ? "grid_mlp" : "grid_branch";
    d.refuse(key, d.required(key), "ffn entry false / 0 when ffn_so3_grid is false",
             "an S2-grid FFN with a grid MLP or branches is not implemented");
  }
  if (c.any_so3_grid()) {
    const json& v = d.required("kmax");
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > c.lmax)
      d.refuse("kmax", v, "an integer 0..lmax = " + std::to_string(c.lmax));
    c.kmax = v.get<int>();
    if (c.message_node_so3 && c.n_focus != 1)
      d.refuse("n_focus", c.n_focus, "1 with message_node_so3",
               "the per-focus message-node grid net is not implemented");
  } else {
    d.ignore({"kmax"});  // sizes the SO(3) grids only, which are all off
  }
}

void parse_descriptor(Section& d, ModelConfig& c) {
  d.fixed("type", "dpa4");
  c.channels = d.integer("channels", 1);
  c.n_radial = d.integer("n_radial", 1);
  c.lmax = d.integer("lmax", 0);
  if (c.lmax < 1 || c.lmax > 3)
    d.refuse("lmax", c.lmax, "1, 2 or 3", "the block FFN's Lebedev rules exist for these");
  d.fixed("mmax", 1);
  c.mmax = 1;
  c.n_blocks = d.integer("n_blocks", 1);
  c.mixing_layers = d.integer("mixing_layers", 1);
  c.radial_so2_mode = d.one_of("radial_so2_mode", {"none", "degree_channel"});
  if (c.radial_so2_mode == "degree_channel") d.fixed("radial_so2_rank", 1);
  else d.ignore({"radial_so2_rank"});  // unused without the degree-channel mixer
  c.radial_so2_rank = 1;
  c.n_focus = d.integer("n_focus", 1);
  c.focus_dim = d.integer("focus_dim", 0);
  d.fixed("n_atten_head", 1);
  c.n_atten_head = 1;
  c.rcut = d.positive("rcut");
  c.eps = d.positive("eps");
  {
    const json& v = d.required("env_exp");
    const bool ok = v.is_array() && v.size() == 2 && v[0].is_number_integer() &&
                    v[1].is_number_integer() && v[0].get<int64_t>() > 0 && v[1].get<int64_t>() > 0 &&
                    v[0].get<int64_t>() < 64 && v[1].get<int64_t>() < 64;
    if (!ok) d.refuse("env_exp", v, "two positive integers [rbf exponent, edge exponent]");
    c.env_exp_rbf = v[0].get<int>();
    c.env_exp_edge = v[1].get<int>();
  }
  c.edge_norm = d.boolean("edge_norm");
  c.precision = d.one_of("precision", {"float32", "float64"});
  c.ffn_neurons = d.integer("ffn_neurons", 0);
  parse_so3_grids(d, c);

  d.fixed("use_env_seed", true);
  d.fixed("basis_type", "bessel");
  d.fixed("radial_mlp", json::array({0}));
  d.fixed("edge_cartesian", false);
  d.fixed("node_cartesian", "none");
  d.fixed("l_schedule", nullptr);
  d.fixed("m_schedule", nullptr);
  d.fixed("extra_node_l", 0);
  d.fixed("so2_norm", false);
  d.fixed("so2_attn_res", "none");
  d.fixed("atten_f_mix", false);
  d.fixed("atten_v_proj", false);
  d.fixed("atten_o_proj", false);
  d.fixed("ffn_blocks", 1);
  d.fixed("sandwich_norm", json::array({false, true, true, false}));
  d.fixed("mlp_bias", false);
  d.fixed("layer_scale", false);
  d.fixed("full_attn_res", "none");
  d.fixed("block_attn_res", "none");
  if (c.ffn_so3_grid) {
    // deepmd-kit ignores s2_activation[1] when the FFN runs on the SO(3) grid.
    const json& v = d.required("s2_activation");
    if (v != json::array({false, true}) && v != json::array({false, false}))
      d.refuse("s2_activation", v, "[false, true] or [false, false]");
  } else {
    d.fixed("s2_activation", json::array({false, true}));
  }
  d.fixed("node_wise_s2", false);
  d.fixed("node_wise_so3", false);
  d.fixed("message_node_s2", false);
  d.fixed("readout_layers", 1, false, "stacked equivariant read-out FFNs are not implemented");
  d.fixed("lebedev_quadrature", true);
  d.fixed("activation_function", "silu");
  d.fixed("glu_activation", true);  // the auto widths below assume GLU
  // Charge/spin conditioning (docs/model.md §10): a frame-level (Q, S) embedding added to the
  // type embedding; the value itself is an input (pair_style ... charge_spin, --charge-spin).
  if (const json* v = d.optional("add_chg_spin_ebd"); v && !v->is_boolean())
    d.refuse("add_chg_spin_ebd", *v, "true or false");
  else
    c.chg_spin = v && v->get<bool>();
  if (const json* v = d.optional("default_chg_spin"); v && !v->is_null()) {
    const bool ok = v->is_array() && v->size() == 2 && (*v)[0].is_number() && (*v)[1].is_number();
    if (!ok) d.refuse("default_chg_spin", *v, "null or [charge, spin]");
    c.has_default_chg_spin = true;
    c.default_charge = (*v)[0].get<double>();
    c.default_spin = (*v)[1].get<double>();
  }
  d.fixed("exclude_types", json::array(), true);
  d.ignore({"seed", "trainable", "random_gamma", "use_amp", "sel"});
  d.finish();
}

void parse_fitting(Section& f, ModelConfig& c) {
  f.fixed("type", "dpa4_ener");
  {
    const json& v = f.required("neuron");
    bool ok = v.is_array();
    for (const auto& n : v) ok = ok && n.is_number_integer() && n.get<int64_t>() >= 0 &&
                                 n.get<int64_t>() < (1 << 20);
    if (!ok) f.refuse("neuron", v, "a list of integers >= 0 (0 = automatic width)");
    c.fitting_neuron = v.get<std::vector<int>>();
  }
  f.fixed("activation_function", "silu");
  f.fixed("resnet_dt", false);
  // Standard deepmd-kit fitting options whose documented defaults are "off".
  f.fixed("numb_fparam", 0, true);
  f.fixed("numb_aparam", 0, true);
  f.fixed("default_fparam", nullptr, true);
  // Case (head) embedding of multi-task models (docs/model.md §6.2): a constant one-hot per
  // head, concatenated to the fitting input or, with case_film_embd, a FiLM of every layer.
  if (f.optional("dim_case_embd")) c.dim_case_embd = f.integer("dim_case_embd", 0);
  if (const json* v = f.optional("case_film_embd")) {
    if (!v->is_boolean()) f.refuse("case_film_embd", *v, "true or false");
    c.case_film_embd = v->get<bool>() && c.dim_case_embd > 0;  // deepmd-kit: FiLM needs K > 0
  }
  f.fixed("atom_ener", json::array(), true);
  f.fixed("use_aparam_as_mask", false, true);
  {
    const json& v = f.required("precision");
    if (v != c.precision)
      f.refuse("precision", v, json_text(json(c.precision)), "must equal descriptor.precision");
  }
  f.ignore({"seed", "trainable", "rcond"});
  f.finish();
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& model_params, const std::string& source) {
  Section m(model_params, "", source);
  ModelConfig c;

  if (model_params.contains("model_dict"))
    throw Error(source + ": multi-task model (model_dict); only single-task models are supported");
  {
    // deepmd-kit writes "type" only for special model kinds (dpa4, zbl, linear_ener, ...); its
    // ordinary models (se_e2_a, dpa1-3, ...) have none and name their kind in descriptor.type.
    const json* type = m.optional("type");
    if (!type || *type != "dpa4") {
      const json* desc = model_params.contains("descriptor") ? &model_params["descriptor"] : nullptr;
      const json* dtype = desc && desc->is_object() && desc->contains("type") ? &(*desc)["type"] : nullptr;
      std::string what = "a deepmd-kit model";
      if (type) what += " of type " + json_text(*type);
      if (dtype) what += std::string(type ? " and" : " with") + " descriptor " + json_text(*dtype);
      if (!type && !dtype) what = "not a deepmd-kit DPA4 model (model_params has no type and no descriptor.type)";
      throw Error(source + ": unsupported model: " + what +
                  "; this project evaluates only DPA4/SeZM models (model type \"dpa4\"); use deepmd-kit's own "
                  "LAMMPS pair style (pair_style deepmd) for other models");
    }
  }
  if (const json* spin = m.optional("spin"); spin && !spin->is_null())
    m.refuse("spin", *spin, "null",
             "native spin models are not supported; they belong to deepmd-kit's own LAMMPS pair "
             "style (pair_style deepspin)");
  for (const char* key : {"use_srtab", "srtab"})
    if (const json* v = m.optional(key))
      m.refuse(key, *v, "absent", "tabulated short-range pair potentials are not supported");
  {
    const json& v = m.required("type_map");
    bool ok = v.is_array() && !v.empty();
    for (const auto& t : v) ok = ok && t.is_string();
    if (!ok) m.refuse("type_map", v, "a non-empty list of element names");
    c.type_map = v.get<std::vector<std::string>>();
  }

  Section d(m.required("descriptor"), "descriptor.", source);
  parse_descriptor(d, c);
  Section f(m.required("fitting_net"), "fitting_net.", source);
  parse_fitting(f, c);

  // Model-level feature switches: a missing key means the writing deepmd-kit version did not
  // have the feature, i.e. it is off.
  m.fixed("pair_exclude_types", json::array(), true);
  m.fixed("atom_exclude_types", json::array(), true);
  // ZBL bridging (docs/model.md §9): deepmd-kit upper-cases the method; "none" is off.
  if (const json* v = m.optional("bridging_method"); v && !v->is_null()) {
    std::string method = v->is_string() ? v->get<std::string>() : "?";
    for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (method == "ZBL") {
      c.zbl = true;
    } else if (method != "NONE" && method != "") {
      m.refuse("bridging_method", *v, "\"zbl\" or \"None\"");
    }
  }
  if (c.zbl) {
    // deepmd-kit's defaults where a key is absent (model/__init__.py): 0.5 and 0.8 Å.
    const json* ri = m.optional("bridging_r_inner");
    const json* ro = m.optional("bridging_r_outer");
    if (ri && !ri->is_number()) m.refuse("bridging_r_inner", *ri, "a number > 0");
    if (ro && !ro->is_number()) m.refuse("bridging_r_outer", *ro, "a number > 0");
    c.bridging_r_inner = ri ? ri->get<double>() : 0.5;
    c.bridging_r_outer = ro ? ro->get<double>() : 0.8;
    if (!(c.bridging_r_inner > 0) || !(c.bridging_r_outer > c.bridging_r_inner))
      m.refuse("bridging_r_outer", c.bridging_r_outer,
               "0 < bridging_r_inner < bridging_r_outer, here r_inner = " + json_text(json(c.bridging_r_inner)));
  }
  // LoRA fine-tuning (deepmd-kit 3.2.0): the adapters are folded into the base weights at load
  // (model/lora.h); rank and alpha only check the stored adapters and scaling.
  if (const json* v = m.optional("lora"); v && !v->is_null()) {
    if (!v->is_object()) m.refuse("lora", *v, "null or {\"rank\": int >= 1, \"alpha\": number or null}");
    Section lora(*v, "lora.", source);
    c.lora_rank = lora.integer("rank", 1);
    const json* alpha = lora.optional("alpha");
    if (alpha && !alpha->is_null() && !(alpha->is_number() && std::isfinite(alpha->get<double>())))
      lora.refuse("alpha", *alpha, "a number, or null for alpha = rank");
    c.lora_alpha = alpha && !alpha->is_null() ? alpha->get<double>() : static_cast<double>(c.lora_rank);
    lora.finish();
  }
  m.fixed("preset_out_bias", nullptr, true);
  m.ignore({"data_stat_nbatch", "data_stat_protect", "data_bias_nsample", "srtab_add_bias",
            "use_compile", "enable_tf32", "model_branch_alias", "info", "bridging_r_inner",
            "bridging_r_outer"});  // the radii are read above when bridging is on
  m.finish();
  return c;
}

namespace {
// 32 * ceil((8/3) * d / 32): deepmd-kit's automatic GLU hidden width for input width d.
int auto_glu_width(int d) { return 32 * ((8 * d + 95) / 96); }
}  // namespace

int ModelConfig::ffn_hidden() const {
  return ffn_neurons > 0 ? ffn_neurons : auto_glu_width(channels);
}

int ModelConfig::fitting_input() const { return channels + (case_film_embd ? 0 : dim_case_embd); }

// deepmd-kit 3.2.0 (sezm_ener.py, _resolve_auto_neuron) gives every 0 entry the same width,
// that of the net's input (descriptor + a concatenated case embedding), not of the layer before.
std::vector<int> ModelConfig::fitting_hidden() const {
  std::vector<int> widths;
  for (const int n : fitting_neuron) widths.push_back(n > 0 ? n : auto_glu_width(fitting_input()));
  return widths;
}

int ModelConfig::es_embed() const { return std::min(channels, 128); }
int ModelConfig::es_type_dim() const { return std::min(32, std::max(8, channels / 4)); }
int ModelConfig::es_axis() const {
  return std::min(es_embed() < 64 ? 4 : 8, std::max(1, es_embed() - 1));
}
int ModelConfig::es_rbf_out() const { return std::max(32, es_embed() - 2 * es_type_dim()); }
int ModelConfig::es_g_in() const { return es_rbf_out() + 2 * es_type_dim(); }
int ModelConfig::es_hidden() const { return std::min(256, std::max(2 * es_embed(), es_g_in())); }

}  // namespace sezm
