// parse_model_config: the accepted configurations, derived sizes checked against the tensor
// shapes in real checkpoints, and refusals that name the option.
#include <gtest/gtest.h>

#include "io/checkpoint.h"
#include "model/config.h"
#include "test_util.h"

using nlohmann::json;
using sezm::Checkpoint;
using sezm::ModelConfig;
using sezm::parse_model_config;
using namespace sezm_test;

namespace {

std::vector<int64_t> shape(const Checkpoint& c, const std::string& key) {
  return c.get("atomic_model." + key).shape;
}

// The shapes the engine will rely on, derived from the config alone.
void check_shapes(const Checkpoint& c, const ModelConfig& m) {
  using V = std::vector<int64_t>;
  const int64_t C = m.channels, H = m.ffn_hidden(), L1 = m.lmax + 1;
  const std::string es = "descriptor.env_seed_embedding.";
  EXPECT_EQ(shape(c, es + "rbf_proj_layer1.matrix"), (V{m.n_radial, m.es_rbf_out()}));
  EXPECT_EQ(shape(c, es + "env_type_embed.adam_type_embedding"),
            (V{int64_t(m.type_map.size()) + 1, m.es_type_dim()}));
  EXPECT_EQ(shape(c, es + "g_layer1.matrix"), (V{m.es_g_in(), m.es_hidden()}));
  EXPECT_EQ(shape(c, es + "output_proj.matrix"), (V{m.es_embed() * m.es_axis(), 2 * C}));
  // Radial MLP output layer; net.1 is the norm layer that only edge_norm models have.
  const std::string radial_out = m.edge_norm ? "net.3" : "net.2";
  EXPECT_EQ(shape(c, "descriptor.radial_embedding." + radial_out + ".matrix").back(), L1 * C);
  EXPECT_EQ(shape(c, "descriptor.output_ffn.so3_linear_1.weight"), (V{1, C, 2 * H}));
  for (int b = 0; b < m.n_blocks; ++b)
    EXPECT_EQ(shape(c, "descriptor.blocks." + std::to_string(b) + ".ffns.0.so3_linear_1.weight"),
              (V{L1, C, 2 * H}));
  EXPECT_FALSE(c.has("atomic_model.descriptor.blocks." + std::to_string(m.n_blocks) +
                     ".ffns.0.so3_linear_1.weight"));

  const std::string fit = "fitting_net.filter_layers.networks.0.";
  int64_t d_in = C;
  const auto hidden = m.fitting_hidden();
  for (size_t k = 0; k < hidden.size(); ++k) {
    EXPECT_EQ(shape(c, fit + "hidden_layers." + std::to_string(k) + ".linear.matrix"),
              (V{d_in, 2 * hidden[k]}));
    d_in = hidden[k];
  }
  EXPECT_EQ(shape(c, fit + "output_layer.matrix"), (V{d_in, 1}));
}

// The c32 config with one value replaced (a JSON pointer such as "/descriptor/lmax").
json edited(const std::string& pointer, const json& value) {
  json j = cached_checkpoint("c32_l3_f2_float64.pt").model_params;
  j[json::json_pointer(pointer)] = value;
  return j;
}

std::string refusal(const json& params) {
  return error_of([&] { parse_model_config(params, "model.pt"); });
}

}  // namespace

TEST(Config, C32Float64) {
  const Checkpoint& c = cached_checkpoint("c32_l3_f2_float64.pt");
  const ModelConfig m = parse_model_config(c.model_params, c.path);
  EXPECT_EQ(m.type_map, (std::vector<std::string>{"C", "Cu"}));
  EXPECT_EQ(m.channels, 32);
  EXPECT_EQ(m.n_radial, 16);
  EXPECT_EQ(m.lmax, 3);
  EXPECT_EQ(m.mmax, 1);
  EXPECT_EQ(m.n_blocks, 2);
  EXPECT_EQ(m.mixing_layers, 3);
  EXPECT_EQ(m.radial_so2_mode, "degree_channel");
  EXPECT_EQ(m.radial_so2_rank, 1);
  EXPECT_EQ(m.n_focus, 2);
  EXPECT_EQ(m.focus_dim, 32);
  EXPECT_EQ(m.n_atten_head, 1);
  EXPECT_EQ(m.rcut, 6.0);
  EXPECT_EQ(m.eps, 1e-7);
  EXPECT_EQ(m.env_exp_rbf, 7);
  EXPECT_EQ(m.env_exp_edge, 5);
  EXPECT_TRUE(m.edge_norm);
  EXPECT_EQ(m.precision, "float64");
  EXPECT_EQ(m.fitting_neuron, (std::vector<int>{0}));
  // Derived sizes: docs/model.md §1.2.
  EXPECT_EQ(m.wide(), 64);
  EXPECT_EQ(m.n_coeff(), 16);
  EXPECT_EQ(m.n_reduced(), 10);
  EXPECT_EQ(m.ffn_hidden(), 96);
  EXPECT_EQ(m.fitting_hidden(), (std::vector<int>{96}));
  EXPECT_EQ(m.es_embed(), 32);
  EXPECT_EQ(m.es_axis(), 4);
  EXPECT_EQ(m.es_type_dim(), 8);
  EXPECT_EQ(m.es_rbf_out(), 32);
  EXPECT_EQ(m.es_g_in(), 48);
  EXPECT_EQ(m.es_hidden(), 64);
  check_shapes(c, m);
}

TEST(Config, C32Float32) {
  const Checkpoint& c = cached_checkpoint("c32_l3_f2_float32.pt");
  const ModelConfig m = parse_model_config(c.model_params, c.path);
  EXPECT_EQ(m.precision, "float32");
  check_shapes(c, m);
}

TEST(Config, DefaultsFloat64) {
  const Checkpoint& c = cached_checkpoint("defaults_float64.pt");
  const ModelConfig m = parse_model_config(c.model_params, c.path);
  EXPECT_EQ(m.channels, 64);
  EXPECT_EQ(m.n_blocks, 3);
  EXPECT_EQ(m.mixing_layers, 4);
  EXPECT_EQ(m.n_focus, 1);
  EXPECT_EQ(m.focus_dim, 0);
  EXPECT_EQ(m.wide(), 64);
  EXPECT_EQ(m.ffn_hidden(), 192);
  EXPECT_EQ(m.fitting_hidden(), (std::vector<int>{64, 64}));
  EXPECT_EQ(m.es_embed(), 64);
  EXPECT_EQ(m.es_axis(), 8);
  EXPECT_EQ(m.es_type_dim(), 16);
  EXPECT_EQ(m.es_rbf_out(), 32);
  EXPECT_EQ(m.es_hidden(), 128);
  check_shapes(c, m);
}

TEST(Config, WaterPretrainedFromShared) {
  const std::string path = shared_path("reference/models/water_pretrained.pt");
  if (!std::ifstream(path)) GTEST_SKIP() << path << " not available";
  const Checkpoint c = sezm::read_checkpoint(path);
  const ModelConfig m = parse_model_config(c.model_params, c.path);
  EXPECT_EQ(m.channels, 16);
  EXPECT_EQ(m.lmax, 1);
  EXPECT_FALSE(m.edge_norm);
  EXPECT_EQ(m.radial_so2_mode, "none");
  EXPECT_EQ(m.ffn_hidden(), 64);
  EXPECT_EQ(m.fitting_hidden(), (std::vector<int>{64}));
  EXPECT_EQ(m.es_hidden(), 48);
  check_shapes(c, m);
}

TEST(Config, AutoWidths) {
  ModelConfig m;
  m.channels = 16;
  EXPECT_EQ(m.ffn_hidden(), 64);
  m.channels = 64;
  EXPECT_EQ(m.ffn_hidden(), 192);
  m.ffn_neurons = 40;
  EXPECT_EQ(m.ffn_hidden(), 40);
  m.channels = 32;
  // Every 0 takes (8/3) x the net's input width (deepmd-kit 3.2.0's SeZMEnergyFittingNet(2, 32,
  // neuron=[0, 0, 50, 0]).neuron is [96, 96, 50, 96]; with dim_case_embd=5 and neuron=[0]: [128]).
  m.fitting_neuron = {0, 0, 50, 0};
  EXPECT_EQ(m.fitting_hidden(), (std::vector<int>{96, 96, 50, 96}));
  m.fitting_neuron = {0};
  m.dim_case_embd = 5;  // concatenated: the input is C + K = 37 wide
  EXPECT_EQ(m.fitting_hidden(), (std::vector<int>{128}));
  m.case_film_embd = true;  // FiLM: the input stays C wide
  EXPECT_EQ(m.fitting_hidden(), (std::vector<int>{96}));
  m.dim_case_embd = 0;
  m.case_film_embd = false;
  m.fitting_neuron = {};
  EXPECT_TRUE(m.fitting_hidden().empty());
}

TEST(Config, MiniFloat64) {
  const Checkpoint& c = cached_checkpoint("mini_float64.pt");
  const ModelConfig m = parse_model_config(c.model_params, c.path);
  EXPECT_EQ(m.lmax, 2);
  EXPECT_EQ(m.kmax, 1);
  EXPECT_EQ(m.n_frames(), 3);
  EXPECT_TRUE(m.message_node_so3);
  EXPECT_EQ(m.message_node_op, "glu");
  EXPECT_TRUE(m.ffn_so3_grid);
  EXPECT_EQ(m.ffn_op, "branch");
  EXPECT_EQ(m.ffn_branches, 1);
  EXPECT_EQ(m.so3_readout, "mlp");
  EXPECT_EQ(m.ffn_hidden(), 96);
  using V = std::vector<int64_t>;
  const int64_t C = m.channels, H = m.ffn_hidden(), K = m.n_frames(), L1 = m.lmax + 1;
  EXPECT_EQ(shape(c, "descriptor.output_ffn.so3_linear_1.weight"), (V{L1, C, 2 * K * H}));
  EXPECT_EQ(shape(c, "descriptor.blocks.0.ffns.0.so3_linear_2.weight"), (V{L1, K * H, C}));
  EXPECT_EQ(shape(c, "descriptor.blocks.1.so2_conv.message_node_grid_product.frame_expand.weight"),
            (V{L1, C, K * C}));
}

// The Mini family's grid settings: what the engines compute, and refusals that name the option.
TEST(Config, MiniGridSettings) {
  auto mini = [](const std::string& pointer, const json& value) {
    json j = cached_checkpoint("mini_float64.pt").model_params;
    j[json::json_pointer(pointer)] = value;
    return j;
  };
  {
    const ModelConfig m = parse_model_config(mini("/descriptor/grid_branch", 2), "model.pt");
    EXPECT_EQ(m.message_node_op, "branch");
    EXPECT_EQ(m.message_node_branches, 2);
    EXPECT_EQ(m.ffn_op, "branch");
  }
  {
    json j = mini("/descriptor/grid_branch", 0);
    j["descriptor"]["grid_mlp"] = json::array({false, true, true});
    j["descriptor"]["kmax"] = 2;
    const ModelConfig m = parse_model_config(j, "model.pt");
    EXPECT_EQ(m.message_node_op, "mlp");
    EXPECT_EQ(m.ffn_op, "mlp");
    EXPECT_EQ(m.kmax, 2);
  }
  expect_contains(refusal(mini("/descriptor/so3_readout", "glu")),
                  {"unsupported option descriptor.so3_readout = \"glu\"", "\"none\" or \"mlp\"",
                   "grid-product read-out is not implemented"});
  expect_contains(refusal(mini("/descriptor/readout_layers", 2)),
                  {"unsupported option descriptor.readout_layers = 2 (supported: 1;",
                   "stacked equivariant read-out FFNs are not implemented"});
  expect_contains(refusal(mini("/descriptor/kmax", 3)),
                  {"unsupported option descriptor.kmax = 3 (supported: an integer 0..lmax = 2)"});
  expect_contains(refusal(mini("/descriptor/grid_branch", json::array({0, 1}))),
                  {"unsupported option descriptor.grid_branch = [0,1]"});
  {
    json j = mini("/descriptor/n_focus", 2);
    expect_contains(refusal(j), {"unsupported option descriptor.n_focus = 2 (supported: 1 with message_node_so3",
                                 "per-focus message-node grid net is not implemented"});
  }
  {
    json j = mini("/descriptor/ffn_so3_grid", false);  // grid_branch [0, 0, 1] would make the S2 FFN a branch net
    expect_contains(refusal(j), {"unsupported option descriptor.grid_branch = [0,0,1]",
                                 "S2-grid FFN with a grid MLP or branches is not implemented"});
  }
}

TEST(Config, RefusesModelType) {
  expect_contains(refusal(edited("/type", "standard")),
                  {"model.pt", "unsupported model", "of type \"standard\"", "\"dpa4\""});
}

TEST(Config, RefusesUnsupportedOptions) {
  struct Case {
    std::string pointer;
    json value;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"/descriptor/so3_readout", "glu",
       {"unsupported option descriptor.so3_readout = \"glu\" (supported: \"none\" or \"mlp\""}},
      {"/descriptor/edge_cartesian", true,
       {"unsupported option descriptor.edge_cartesian = true (supported: false)"}},
      {"/descriptor/n_atten_head", 2, {"descriptor.n_atten_head = 2", "supported: 1"}},
      {"/descriptor/lmax", 4, {"descriptor.lmax = 4", "1, 2 or 3"}},
      {"/descriptor/mmax", 2, {"descriptor.mmax = 2"}},
      {"/descriptor/radial_so2_rank", 2, {"descriptor.radial_so2_rank = 2"}},
      // c32 has n_focus 2: the per-focus message-node grid net is not implemented.
      {"/descriptor/message_node_so3", true, {"descriptor.n_focus = 2", "with message_node_so3"}},
      {"/descriptor/readout_layers", 2, {"descriptor.readout_layers = 2 (supported: 1;"}},
      {"/descriptor/grid_branch", json({0, 0, 1}), {"descriptor.grid_branch = [0,0,1]"}},
      {"/descriptor/sandwich_norm", json({true, true, true, true}), {"descriptor.sandwich_norm"}},
      {"/descriptor/env_exp", json({7}), {"descriptor.env_exp = [7]"}},
      {"/descriptor/rcut", -1.0, {"descriptor.rcut = -1.0", "> 0"}},
      {"/descriptor/precision", "float16", {"descriptor.precision = \"float16\""}},
      {"/descriptor/exclude_types", json({json({0, 1})}), {"descriptor.exclude_types"}},
      {"/fitting_net/numb_fparam", 1,
       {"unsupported option fitting_net.numb_fparam = 1 (supported: 0)"}},
      {"/fitting_net/precision", "float32",
       {"fitting_net.precision = \"float32\"", "must equal descriptor.precision"}},
      {"/fitting_net/neuron", json({64, -1}), {"fitting_net.neuron = [64,-1]"}},
      {"/fitting_net/type", "ener", {"fitting_net.type = \"ener\""}},
      {"/bridging_method", "lj", {"unsupported option bridging_method = \"lj\"", "\"zbl\" or \"None\""}},
      {"/descriptor/add_chg_spin_ebd", 1, {"unsupported option descriptor.add_chg_spin_ebd = 1"}},
      {"/descriptor/default_chg_spin", json({1}), {"unsupported option descriptor.default_chg_spin = [1]"}},
      {"/lora", json({{"rank", 0}}), {"unsupported option lora.rank = 0", "integer >= 1"}},
      {"/lora", json({{"alpha", 8.0}}), {"missing option lora.rank"}},
      {"/lora", json({{"rank", 4}, {"alpha", "8"}}), {"unsupported option lora.alpha = \"8\""}},
      {"/lora", json({{"rank", 4}, {"target_modules", json({"q"})}}),
       {"unknown option lora.target_modules = [\"q\"]"}},
      {"/lora", 4, {"unsupported option lora = 4"}},
      {"/spin", json({{"use_spin", json({true, false})}}), {"option spin", "spin models", "pair_style deepspin"}},
      {"/pair_exclude_types", json({json({0, 1})}), {"pair_exclude_types = [[0,1]]"}},
      {"/use_srtab", "table.txt", {"use_srtab", "tabulated"}},
      {"/descriptor/frobnicate", 1,
       {"unknown option descriptor.frobnicate = 1", "not part of the supported"}},
      {"/fitting_net/frobnicate", true, {"unknown option fitting_net.frobnicate"}},
      {"/frobnicate", "x", {"unknown option frobnicate"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.pointer);
    std::vector<std::string> parts = c.expected;
    parts.push_back("model.pt: ");
    expect_contains(refusal(edited(c.pointer, c.value)), parts);
  }
}

TEST(Config, AcceptsIgnoredAndAbsentOptionalKeys) {
  json j = edited("/descriptor/seed", 99);
  j["descriptor"]["random_gamma"] = false;
  j["descriptor"]["kmax"] = 5;
  j["fitting_net"]["rcond"] = 1e-3;
  j["info"] = {{"anything", 1}};
  for (const char* key : {"numb_fparam", "numb_aparam", "default_fparam", "dim_case_embd",
                          "atom_ener", "use_aparam_as_mask"})
    j["fitting_net"].erase(key);
  for (const char* key : {"pair_exclude_types", "lora", "bridging_method", "preset_out_bias"})
    j.erase(key);
  j["descriptor"]["radial_so2_mode"] = "none";
  j["descriptor"].erase("radial_so2_rank");  // only used by degree_channel
  const ModelConfig m = parse_model_config(j, "model.pt");
  EXPECT_EQ(m.radial_so2_mode, "none");
}

TEST(Config, AcceptsBridgingAndChargeSpin) {
  // ZBL bridging (docs/model.md §9): deepmd-kit upper-cases the method; the radii default to 0.5 / 0.8.
  json j = edited("/bridging_method", "zbl");
  j["bridging_r_inner"] = 0.6;
  j["bridging_r_outer"] = 1.1;
  const ModelConfig z = parse_model_config(j, "model.pt");
  EXPECT_TRUE(z.zbl);
  EXPECT_EQ(z.bridging_r_inner, 0.6);
  EXPECT_EQ(z.bridging_r_outer, 1.1);
  j.erase("bridging_r_inner");
  j.erase("bridging_r_outer");
  j["bridging_method"] = "ZBL";
  const ModelConfig zd = parse_model_config(j, "model.pt");
  EXPECT_TRUE(zd.zbl);
  EXPECT_EQ(zd.bridging_r_inner, 0.5);
  EXPECT_EQ(zd.bridging_r_outer, 0.8);
  for (const char* off : {"None", "none"}) EXPECT_FALSE(parse_model_config(edited("/bridging_method", off), "model.pt").zbl);
  j["bridging_r_inner"] = 0.5;
  j["bridging_r_outer"] = 0.4;
  expect_contains(refusal(j), {"model.pt: unsupported option bridging_r_outer = 0.4", "0 < bridging_r_inner < bridging_r_outer"});
  j["bridging_r_outer"] = "0.8";
  expect_contains(refusal(j), {"model.pt: unsupported option bridging_r_outer = \"0.8\"", "a number > 0"});
  // Charge/spin (docs/model.md §10).
  json c = edited("/descriptor/add_chg_spin_ebd", true);
  EXPECT_TRUE(parse_model_config(c, "model.pt").chg_spin);
  EXPECT_FALSE(parse_model_config(c, "model.pt").has_default_chg_spin);
  c["descriptor"]["default_chg_spin"] = json({-1, 2});
  const ModelConfig cs = parse_model_config(c, "model.pt");
  EXPECT_TRUE(cs.has_default_chg_spin);
  EXPECT_EQ(cs.default_charge, -1.0);
  EXPECT_EQ(cs.default_spin, 2.0);
}

TEST(Config, AcceptsLora) {
  // deepmd-kit 3.2.0's lora: {rank, alpha}; alpha null or absent means alpha = rank.
  const ModelConfig plain = parse_model_config(edited("/lora", nullptr), "model.pt");
  EXPECT_EQ(plain.lora_rank, 0);
  const ModelConfig a = parse_model_config(edited("/lora", json({{"rank", 4}, {"alpha", 8.0}})), "model.pt");
  EXPECT_EQ(a.lora_rank, 4);
  EXPECT_EQ(a.lora_alpha, 8.0);
  const ModelConfig b = parse_model_config(edited("/lora", json({{"rank", 4}, {"alpha", nullptr}})), "model.pt");
  EXPECT_EQ(b.lora_alpha, 4.0);
  const ModelConfig c = parse_model_config(edited("/lora", json({{"rank", 2}})), "model.pt");
  EXPECT_EQ(c.lora_alpha, 2.0);
}

TEST(Config, RefusesMissingRequiredKeys) {
  json j = cached_checkpoint("c32_l3_f2_float64.pt").model_params;
  j["descriptor"].erase("sandwich_norm");
  expect_contains(refusal(j), {"model.pt", "missing option descriptor.sandwich_norm"});
  j = cached_checkpoint("c32_l3_f2_float64.pt").model_params;
  j.erase("fitting_net");
  expect_contains(refusal(j), {"missing option fitting_net"});
}
