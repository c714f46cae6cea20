#include "model/fitting_weights.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/config.h"

namespace sezm {
namespace {

// atomic_model.<name> with its shape checked (as model/weights.cpp's loader does).
const TensorData& get(const Checkpoint& ckpt, const std::string& name, const std::vector<int64_t>& shape,
                      const std::string& why = "") {
  const std::string key = "atomic_model." + name;
  if (!ckpt.has(key))
    throw Error(ckpt.path + ": tensor '" + key + "' is missing (expected shape " + shape_string(shape) + ")" +
                (why.empty() ? "" : "; " + why));
  const TensorData& t = ckpt.get_finite(key);
  if (t.shape != shape)
    throw Error(ckpt.path + ": tensor '" + key + "' has shape " + shape_string(t.shape) +
                ", the model config implies " + shape_string(shape));
  return t;
}

Mat<double> mat(const TensorData& t, int64_t rows, int64_t cols) {
  return Eigen::Map<const Mat<double>>(t.data.data(), rows, cols);
}
Vec<double> vec(const TensorData& t) {
  return Eigen::Map<const Vec<double>>(t.data.data(), static_cast<Eigen::Index>(t.data.size()));
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// FiLM of target t, x -> x * scale + shift (header comment).
struct Film {
  Vec<double> scale, shift;
};

std::vector<Film> case_films(const Checkpoint& ckpt, const ModelConfig& cfg, const Vec<double>& e,
                             const std::vector<int>& targets) {
  const std::string p = "fitting_net.filter_layers.networks.0.case_film.";
  const int K = cfg.dim_case_embd, C = cfg.channels;
  const int hidden = 32 * ((4 * K + 31) / 32);  // deepmd-kit: 32 * ceil(4K / 32)
  const int n = static_cast<int>(targets.size());
  const Mat<double> a1 = mat(get(ckpt, p + "case_layer1.matrix", {K, hidden}), K, hidden);
  const Mat<double> a2 = mat(get(ckpt, p + "case_layer2.matrix", {hidden, 4 * C}), hidden, 4 * C);
  const Vec<double> sigma = vec(get(ckpt, p + "adam_case_film_scale_strength_log", {n}));
  const Vec<double> tau = vec(get(ckpt, p + "adam_case_film_shift_strength_log", {n}));
  RowVec<double> u = e.transpose() * a1;
  for (Eigen::Index i = 0; i < u.size(); ++i) u[i] = silu(u[i]);
  const RowVec<double> code = u * a2;
  std::vector<Film> films;
  for (int t = 0; t < n; ++t) {
    const int d = targets[t];
    const Mat<double> proj = mat(get(ckpt, p + "projectors." + std::to_string(t), {4 * C, 2 * d}), 4 * C, 2 * d);
    const RowVec<double> gb = code * proj;  // [gamma, beta]
    Film f;
    f.scale.resize(d);
    f.shift.resize(d);
    for (int c = 0; c < d; ++c) {
      f.scale[c] = 1.0 + std::exp(sigma[t]) * std::tanh(gb[c]);
      f.shift[c] = std::exp(tau[t]) * std::tanh(gb[d + c]);
    }
    films.push_back(std::move(f));
  }
  return films;
}

}  // namespace

FittingWeights load_fitting_weights(const Checkpoint& ckpt, const ModelConfig& cfg) {
  const int C = cfg.channels, K = cfg.dim_case_embd;
  const int nt = static_cast<int>(cfg.type_map.size());
  const std::string ft = "fitting_net.filter_layers.networks.0.";
  FittingWeights fw;
  int din = cfg.fitting_input();
  const std::vector<int> hidden = cfg.fitting_hidden();
  for (size_t k = 0; k < hidden.size(); ++k) {
    const std::string lk = ft + "hidden_layers." + std::to_string(k) + ".linear.";
    fw.w.push_back(mat(get(ckpt, lk + "matrix", {din, 2 * hidden[k]}), din, 2 * hidden[k]));
    fw.b.push_back(vec(get(ckpt, lk + "bias", {2 * hidden[k]})));
    din = hidden[k];
  }
  fw.out = vec(get(ckpt, ft + "output_layer.matrix", {din, 1}));
  const TensorData& bae = get(ckpt, "fitting_net.bias_atom_e", {nt, 1});
  const TensorData& ob = get(ckpt, "out_bias", {1, nt, 1});
  for (int t = 0; t < nt; ++t) fw.atom_bias.push_back(bae.data[t] + ob.data[t]);
  if (K == 0) return fw;

  const Vec<double> e = vec(get(ckpt, "fitting_net.case_embd", {K},
                                "the head's case embedding (fitting_net.dim_case_embd = " + std::to_string(K) + ")"));
  if (!cfg.case_film_embd) {
    if (hidden.empty()) {  // the output layer reads [d, e]: e W_out[C:] is a constant energy
      const double shift = fw.out.tail(K).dot(e);
      for (double& b : fw.atom_bias) b += shift;
      const Vec<double> out = fw.out.head(C);
      fw.out = out;
      return fw;
    }
    fw.b[0] += fw.w[0].bottomRows(K).transpose() * e;
    const Mat<double> w0 = fw.w[0].topRows(C);
    fw.w[0] = w0;
    return fw;
  }
  std::vector<int> targets{C};
  targets.insert(targets.end(), hidden.begin(), hidden.end());
  const std::vector<Film> films = case_films(ckpt, cfg, e, targets);
  for (size_t t = 0; t < films.size(); ++t) {
    const Film& f = films[t];
    if (t < fw.w.size()) {
      fw.b[t] += fw.w[t].transpose() * f.shift;  // with the unscaled rows
      fw.w[t] = f.scale.asDiagonal() * fw.w[t];
    } else {
      const double shift = f.shift.dot(fw.out);
      for (double& b : fw.atom_bias) b += shift;
      fw.out = fw.out.cwiseProduct(f.scale);
    }
  }
  return fw;
}

}  // namespace sezm
