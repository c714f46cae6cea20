// model/lora.h: folding deepmd-kit 3.2.0's LoRA adapters into the base weights. A small
// hand-made Checkpoint whose merged weights are computed here from A, B and the scaling
// (as matrix products B_l A_l and A^T B^T, transposed into the base layout), the error cases,
// and the committed 3.2.0 LoRA checkpoint (tests/data/recipes/make_lora.py).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "api/potential.h"
#include "model/lora.h"
#include "test_util.h"

namespace {

using sezm::Checkpoint;
using sezm::ModelConfig;
using sezm::TensorData;
using namespace sezm_test;

const std::string kD = "atomic_model.descriptor.";
const std::string kSo3 = kD + "blocks.0.ffns.0.so3_linear_1.";
const std::string kSo2 = kD + "blocks.0.so2_conv.so2_linears.0.";

TensorData random_tensor(std::vector<int64_t> shape, std::mt19937& rng) {
  TensorData t;
  t.dtype = "float64";
  t.shape = std::move(shape);
  size_t n = 1;
  for (const auto s : t.shape) n *= static_cast<size_t>(s);
  std::normal_distribution<double> g(0.0, 1.0);
  for (size_t i = 0; i < n; ++i) t.data.push_back(g(rng));
  return t;
}

TensorData scalar(double v) { return TensorData{"float64", {}, {v}}; }

// rank 2, alpha 3: scaling 1.5. SO(3): L+1 = 2, in 3, out 5. SO(2): m0 (3, 4), m.0 (2, 6).
Checkpoint small_lora_checkpoint() {
  std::mt19937 rng(7);
  Checkpoint c;
  c.path = "mem.pt";
  c.tensors[kSo3 + "weight"] = random_tensor({2, 3, 5}, rng);
  c.tensors[kSo3 + "A_by_l"] = random_tensor({2, 2, 3}, rng);
  c.tensors[kSo3 + "B_by_l"] = random_tensor({2, 5, 2}, rng);
  c.tensors[kSo3 + "lora_scaling"] = scalar(1.5);
  c.tensors[kSo2 + "weight_m0"] = random_tensor({3, 4}, rng);
  c.tensors[kSo2 + "A_m0"] = random_tensor({2, 3}, rng);
  c.tensors[kSo2 + "B_m0"] = random_tensor({4, 2}, rng);
  c.tensors[kSo2 + "weight_m.0"] = random_tensor({2, 6}, rng);
  c.tensors[kSo2 + "A_m.0"] = random_tensor({2, 2}, rng);
  c.tensors[kSo2 + "B_m.0"] = random_tensor({6, 2}, rng);
  c.tensors[kSo2 + "lora_scaling"] = scalar(1.5);
  c.tensors[kD + "blocks.0.so2_conv.bias0"] = random_tensor({4}, rng);
  return c;
}

ModelConfig lora_config(int rank = 2, double alpha = 3.0) {
  ModelConfig cfg;
  cfg.lora_rank = rank;
  cfg.lora_alpha = alpha;
  return cfg;
}

using Matrix = std::vector<std::vector<double>>;

Matrix product(const Matrix& x, const Matrix& y) {  // x (n, k) times y (k, m)
  Matrix z(x.size(), std::vector<double>(y[0].size(), 0.0));
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < y[0].size(); ++j)
      for (size_t k = 0; k < y.size(); ++k) z[i][j] += x[i][k] * y[k][j];
  return z;
}

Matrix slice(const TensorData& t, int64_t block, int64_t rows, int64_t cols) {
  Matrix m(rows, std::vector<double>(cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[i][j] = t.data[(block * rows + i) * cols + j];
  return m;
}

Matrix transpose(const Matrix& m) {
  Matrix t(m[0].size(), std::vector<double>(m.size()));
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[0].size(); ++j) t[j][i] = m[i][j];
  return t;
}

void expect_merged(const TensorData& merged, const TensorData& base, int64_t block, const Matrix& delta_io,
                   double s) {
  const int64_t rows = static_cast<int64_t>(delta_io.size()), cols = static_cast<int64_t>(delta_io[0].size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t o = 0; o < cols; ++o) {
      const size_t at = static_cast<size_t>((block * rows + i) * cols + o);
      EXPECT_NEAR(merged.data[at], base.data[at] + s * delta_io[i][o], 1e-14) << i << " " << o;
    }
}

TEST(Lora, FoldsSo3AndSo2AdaptersIntoBaseWeights) {
  const Checkpoint orig = small_lora_checkpoint();
  Checkpoint c = orig;
  sezm::fold_lora(c, lora_config());
  for (const char* gone : {"A_by_l", "B_by_l", "lora_scaling"}) EXPECT_FALSE(c.has(kSo3 + gone)) << gone;
  for (const char* gone : {"A_m0", "B_m0", "A_m.0", "B_m.0", "lora_scaling"})
    EXPECT_FALSE(c.has(kSo2 + gone)) << gone;
  EXPECT_EQ(c.tensors.size(), 4u);
  EXPECT_EQ(c.get(kD + "blocks.0.so2_conv.bias0").data, orig.get(kD + "blocks.0.so2_conv.bias0").data);
  // SO(3), per degree l: delta (in, out) = (B_l A_l)^T, B_l (out, r), A_l (r, in).
  for (int64_t l = 0; l < 2; ++l) {
    const Matrix ba = product(slice(orig.get(kSo3 + "B_by_l"), l, 5, 2), slice(orig.get(kSo3 + "A_by_l"), l, 2, 3));
    expect_merged(c.get(kSo3 + "weight"), orig.get(kSo3 + "weight"), l, transpose(ba), 1.5);
  }
  // SO(2): delta (in, out) = A^T B^T, A (r, in), B (out, r).
  const Matrix d0 = product(transpose(slice(orig.get(kSo2 + "A_m0"), 0, 2, 3)),
                            transpose(slice(orig.get(kSo2 + "B_m0"), 0, 4, 2)));
  expect_merged(c.get(kSo2 + "weight_m0"), orig.get(kSo2 + "weight_m0"), 0, d0, 1.5);
  const Matrix d1 = product(transpose(slice(orig.get(kSo2 + "A_m.0"), 0, 2, 2)),
                            transpose(slice(orig.get(kSo2 + "B_m.0"), 0, 6, 2)));
  expect_merged(c.get(kSo2 + "weight_m.0"), orig.get(kSo2 + "weight_m.0"), 0, d1, 1.5);
  EXPECT_NO_THROW(sezm::require_no_lora_adapters(c));
}

TEST(Lora, PlainCheckpointWithoutLoraIsUntouched) {
  Checkpoint c;
  c.path = "mem.pt";
  c.tensors[kSo3 + "weight"] = scalar(1.0);
  sezm::fold_lora(c, ModelConfig{});
  EXPECT_EQ(c.tensors.size(), 1u);
}

TEST(Lora, RefusesInconsistentAdapters) {
  auto refusal = [](Checkpoint c, const ModelConfig& cfg) { return error_of([&] { sezm::fold_lora(c, cfg); }); };
  {  // adapter without its base weight
    Checkpoint c = small_lora_checkpoint();
    c.tensors.erase(kSo3 + "weight");
    expect_contains(refusal(c, lora_config()), {"mem.pt", "LoRA adapter '" + kSo3 + "A_by_l'", "'" + kSo3 + "weight'"});
  }
  {  // |m| > 0 adapter without its base weight
    Checkpoint c = small_lora_checkpoint();
    c.tensors.erase(kSo2 + "weight_m.0");
    expect_contains(refusal(c, lora_config()), {"'" + kSo2 + "A_m.0'", "'" + kSo2 + "weight_m.0'"});
  }
  {  // B without A
    Checkpoint c = small_lora_checkpoint();
    c.tensors.erase(kSo3 + "A_by_l");
    expect_contains(refusal(c, lora_config()), {"'" + kSo3 + "B_by_l' was not folded", "A_by_l"});
  }
  {  // A without B
    Checkpoint c = small_lora_checkpoint();
    c.tensors.erase(kSo2 + "B_m0");
    expect_contains(refusal(c, lora_config()), {"'" + kSo2 + "A_m0'", "'" + kSo2 + "B_m0'"});
  }
  {  // no stored scaling
    Checkpoint c = small_lora_checkpoint();
    c.tensors.erase(kSo3 + "lora_scaling");
    expect_contains(refusal(c, lora_config()), {"'" + kSo3 + "lora_scaling'"});
  }
  {  // adapters, but no `lora` in the config
    expect_contains(refusal(small_lora_checkpoint(), ModelConfig{}),
                    {"mem.pt", "is a LoRA adapter, but model_params has no `lora`", kD});
  }
  {  // `lora` in the config, no adapters
    Checkpoint c;
    c.path = "mem.pt";
    c.tensors[kSo3 + "weight"] = scalar(1.0);
    expect_contains(refusal(c, lora_config()), {"mem.pt", "lora = {rank: 2, alpha: 3}", "no LoRA adapter tensors"});
  }
  {  // stored scaling disagrees with alpha / rank
    expect_contains(refusal(small_lora_checkpoint(), lora_config(2, 4.0)),
                    {"'" + kSo3 + "lora_scaling' = 1.5", "4 / 2 = 2"});
  }
  {  // rank disagrees with the adapter shapes
    expect_contains(refusal(small_lora_checkpoint(), lora_config(3, 4.5)), {"has shape (2, 2, 3)", "lora.rank = 3"});
  }
  {  // adapter outside the descriptor
    Checkpoint c = small_lora_checkpoint();
    c.tensors["atomic_model.fitting_net.x.A_by_l"] = scalar(1.0);
    expect_contains(refusal(c, lora_config()), {"'atomic_model.fitting_net.x.A_by_l' is outside atomic_model.descriptor."});
  }
  {  // stray scaling
    Checkpoint c = small_lora_checkpoint();
    c.tensors[kD + "other.lora_scaling"] = scalar(1.5);
    expect_contains(refusal(c, lora_config()), {"'" + kD + "other.lora_scaling' was not folded"});
  }
  {  // an unfolded adapter reaching load_weights
    const Checkpoint c = small_lora_checkpoint();
    expect_contains(error_of([&] { sezm::require_no_lora_adapters(c); }),
                    {"mem.pt", "is a LoRA adapter that was not folded"});
  }
}

// The committed deepmd-kit 3.2.0 LoRA checkpoint: adapters kept separate, `lora` in the
// config; it loads through load_model_weights and is refused by load_weights unfolded.
TEST(Lora, DeepmdKitCheckpoint) {
  const std::string path = data_path("recipes/c32_lora.pt");
  const Checkpoint c = sezm::read_checkpoint(path);
  const ModelConfig cfg = sezm::parse_model_config(c.model_params, path);
  EXPECT_EQ(cfg.lora_rank, 4);
  EXPECT_EQ(cfg.lora_alpha, 8.0);
  int adapters = 0;
  for (const auto& kv : c.tensors)
    if (kv.first.find(".A_by_l") != std::string::npos || kv.first.find(".A_m0") != std::string::npos) ++adapters;
  EXPECT_GT(adapters, 0);
  expect_contains(error_of([&] { sezm::load_weights<double>(c, cfg); }), {path, "LoRA adapter that was not folded"});
  EXPECT_NO_THROW(sezm::load_model_weights(path));
}

}  // namespace
