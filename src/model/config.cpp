#include "model/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "common/error.h"

namespace sezm {
namespace {

using nlohmann::json;

const char* const kMiniNote = "the DPA4-Mini family is not supported yet";

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
    throw Error(source_ + ": unsupported option " + prefix_ + key + " = " + value.dump() +
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
    if (v && *v != expected) refuse(key, *v, expected.dump(), why);
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
    for (const auto& a : allowed) list += (list.empty() ? "" : " or ") + json(a).dump();
    if (!v.is_string() || std::find(allowed.begin(), allowed.end(), v.get<std::string>()) == allowed.end())
      refuse(key, v, list);
    return v.get<std::string>();
  }

  void finish() const {
    for (const auto& item : j_.items())
      if (!known_.count(item.key()))
        throw Error(source_ + ": unknown option " + prefix_ + item.key() + " = " +
                    item.value().dump() + " (not part of the supported DPA4 option set)");
  }

 private:
  const json& j_;
  std::string prefix_;
  std::string source_;
  std::set<std::string> known_;
};

void parse_descriptor(Section& d, ModelConfig& c) {
  d.fixed("type", "dpa4");
  // The DPA4-Mini options first, so that a Mini model is refused with that explanation.
  {
    const json& v = d.required("so3_readout");
    if (v != "none") d.refuse("so3_readout", v, "\"none\"", v == "mlp" ? kMiniNote : "");
  }
  d.fixed("ffn_so3_grid", false, false, kMiniNote);
  d.fixed("message_node_so3", false, false, kMiniNote);
  d.fixed("grid_branch", 0, false, kMiniNote);

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
  d.fixed("grid_mlp", false);
  d.fixed("ffn_blocks", 1);
  d.fixed("sandwich_norm", json::array({false, true, true, false}));
  d.fixed("mlp_bias", false);
  d.fixed("layer_scale", false);
  d.fixed("full_attn_res", "none");
  d.fixed("block_attn_res", "none");
  d.fixed("s2_activation", json::array({false, true}));
  d.fixed("node_wise_s2", false);
  d.fixed("node_wise_so3", false);
  d.fixed("message_node_s2", false);
  d.fixed("readout_layers", 1);
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
  // kmax only sizes the SO(3) grids, which are off (ffn_so3_grid, message_node_so3).
  d.ignore({"seed", "trainable", "random_gamma", "use_amp", "sel", "kmax"});
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
  f.fixed("case_film_embd", false);
  // Standard deepmd-kit fitting options whose documented defaults are "off".
  f.fixed("numb_fparam", 0, true);
  f.fixed("numb_aparam", 0, true);
  f.fixed("default_fparam", nullptr, true);
  f.fixed("dim_case_embd", 0, true);
  f.fixed("atom_ener", json::array(), true);
  f.fixed("use_aparam_as_mask", false, true);
  {
    const json& v = f.required("precision");
    if (v != c.precision)
      f.refuse("precision", v, json(c.precision).dump(), "must equal descriptor.precision");
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
    const json& type = m.required("type");
    if (type != "dpa4")
      throw Error(source + ": unsupported model type " + type.dump() + " (supported: \"dpa4\")");
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
               "0 < bridging_r_inner < bridging_r_outer, here r_inner = " + json(c.bridging_r_inner).dump());
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

std::vector<int> ModelConfig::fitting_hidden() const {
  std::vector<int> widths;
  int d_in = channels;
  for (const int n : fitting_neuron) {
    d_in = n > 0 ? n : auto_glu_width(d_in);
    widths.push_back(d_in);
  }
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
