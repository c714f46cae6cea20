// Each engine component's backward against central finite differences of its own forward, on
// random inputs, a small random graph (3 centres + 1 ghost, 22 edges, CSR by destination,
// real Wigner-D blocks from the edge vectors) and the real weights of the c32 (n_focus 2,
// degree_channel radial mixer), defaults (n_focus 1, 3 blocks) and Mini (SO(3) grid nets:
// message-node product, branch FFN, MLP read-out; docs/model.md §5.10-§5.13) checkpoints.
//
// Objective: J = sum(W ⊙ output) with a fixed random W, so the backward is fed output_bar = W.
// Checked: a directional derivative along a random direction over ALL inputs, plus 24 random
// individual entries. FD: fourth-order central stencil, h = 1e-4 on O(1) inputs: truncation
// ~h^4 f^(5)/30 ~ 1e-16, rounding ~ 1.5 * 1e-15 |J| / h ~ 1e-10 for |J| ~ 10. Tolerance
// 1e-8 * max(1, largest |gradient|): ~100x above that, far below any formula error.
// The Wigner-D entries are treated as free inputs (the tilt-formula backward to edge vectors is
// exact only for roll-invariant objectives; that path is covered by the full-model FD tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/attention.h"
#include "engine/edge_geometry.h"
#include "engine/embeddings.h"
#include "engine/ffn.h"
#include "engine/fitting.h"
#include "engine/interaction_block.h"
#include "engine/norms.h"
#include "engine/radial_mlp.h"
#include "engine/readout.h"
#include "engine/so2_convolution.h"
#include "graph/graph.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"
#include "fd_check.h"
#include "test_util.h"

namespace {

using namespace sezm;
using sezm_test::check_grad;
using sezm_test::dot;
using sezm_test::randn;
using V = std::vector<double>;

const ModelW<double>& weights(const std::string& file) {
  static std::map<std::string, ModelW<double>> cache;
  auto it = cache.find(file);
  if (it == cache.end()) {
    const std::string path = sezm_test::data_path(file);
    const Checkpoint ck = read_checkpoint(path);
    it = cache.emplace(file, load_weights<double>(ck, parse_model_config(ck.model_params, path))).first;
  }
  return it->second;
}

// A small random graph: 3 centres, 1 ghost (a possible source only), edges CSR by destination.
struct RandomGraph {
  int N = 3, NT = 4, E = 22;
  std::vector<int> src, dst, off, types;
  V vec;
  sezm::Graph t;
  EdgeGeometry<double> geo;
  void build(const ModelW<double>& w, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_int_distribution<int> dn(0, N - 1), sn(0, NT - 1), tn(0, w.ntypes - 1);
    std::uniform_real_distribution<double> len(0.9, 0.92 * w.cfg.rcut);
    dst.resize(E);
    for (int& d : dst) d = dn(g);
    for (int n = 0; n < N; ++n) dst[n] = n;  // every centre has an in-edge
    std::sort(dst.begin(), dst.end());
    off.assign(N + 1, 0);
    for (int d : dst) ++off[d + 1];
    for (int n = 0; n < N; ++n) off[n + 1] += off[n];
    src.resize(E);
    for (int& s : src) s = sn(g);
    types.resize(NT);
    for (int& x : types) x = tn(g);
    types[0] = 0;
    types[1] = w.ntypes - 1;
    vec.clear();
    for (int e = 0; e < E; ++e) {
      V u = randn(3, g);
      const double n = std::sqrt(dot(u.data(), u.data(), 3)), r = len(g);
      for (double c : u) vec.push_back(c / n * r);
    }
    t.n_nodes = N;
    t.n_total = NT;
    t.src = src;
    t.dst = dst;
    t.dst_offsets = off;
    t.vec = vec;
    t.types = types;
    edge_geometry_forward(w, vec.data(), E, geo);
  }
};

class ComponentBackward : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    w_ = &weights(GetParam());
    gr_.build(*w_, 3);
  }
  const ModelW<double>& w() const { return *w_; }
  const ModelConfig& cfg() const { return w_->cfg; }
  // The engine's grids (S2, and the SO(3) grid when a grid net is on: Mini).
  FFNGrid<double> model_grid() const { return FFNGrid<double>(cfg().lmax, cfg().any_so3_grid() ? cfg().kmax : -1); }
  std::string tag(const std::string& s) const { return GetParam().substr(0, 8) + " " + s; }
  const ModelW<double>* w_ = nullptr;
  RandomGraph gr_;
  std::mt19937 rng_{42};
};

TEST_P(ComponentBackward, EquivariantRMSNorm) {
  const int L = cfg().lmax, C = cfg().channels, D = cfg().n_coeff();
  for (const auto* nw : {&w().blocks[0].post_so2_norm, &w().blocks.back().pre_ffn_norm}) {
    V x = randn(D * C, rng_), W = randn(D * C, rng_), y(D * C), xb(D * C, 0.0);
    for (int c = 0; c < C; ++c) x[c] += 0.7;  // a non-zero channel mean on l = 0 (centring)
    const double rho = equivariant_rms_norm(x.data(), L, C, *nw, y.data());
    equivariant_rms_norm_backward(x.data(), L, C, *nw, rho, W.data(), xb.data());
    check_grad(tag("EquivariantRMSNorm"), x.data(), x.size(), [&] {
      equivariant_rms_norm(x.data(), L, C, *nw, y.data());
      return dot(W.data(), y.data(), y.size());
    }, xb.data());
  }
}

TEST_P(ComponentBackward, ScalarRMSNorm) {
  const int C = cfg().channels;
  const V scale = w().radial_norm ? V(w().radial_norm_scale.data(), w().radial_norm_scale.data() + C) : randn(C, rng_);
  V x = randn(C, rng_), W = randn(C, rng_), y(C), xb(C, 0.0);
  const double rho = scalar_rms_norm(x.data(), C, scale.data(), 1e-7, y.data());
  scalar_rms_norm_backward(x.data(), C, scale.data(), rho, W.data(), xb.data());
  check_grad(tag("ScalarRMSNorm"), x.data(), C, [&] {
    scalar_rms_norm(x.data(), C, scale.data(), 1e-7, y.data());
    return dot(W.data(), y.data(), C);
  }, xb.data());
}

TEST_P(ComponentBackward, RadialMLP) {
  const int E = gr_.E, nr = cfg().n_radial, C = cfg().channels, L = cfg().lmax;
  V rbf = randn(static_cast<size_t>(E) * nr, rng_, 0.5), M(static_cast<size_t>(E) * (L + 1) * C), h(E * C);
  const V W = randn(M.size(), rng_);
  V rb(rbf.size(), 0.0);
  radial_mlp_forward(w(), rbf.data(), E, M.data(), h.data());
  radial_mlp_backward(w(), h.data(), E, W.data(), rb.data());
  check_grad(tag("RadialMLP d/d rbf"), rbf.data(), rbf.size(), [&] {
    radial_mlp_forward(w(), rbf.data(), E, M.data(), h.data());
    return dot(W.data(), M.data(), M.size());
  }, rb.data());
}

TEST_P(ComponentBackward, Degree) {
  std::vector<double> isd, isd_bar = randn(gr_.N, rng_);
  std::vector<double> env_bar(gr_.E, 0.0);
  degree_forward(gr_.t, gr_.geo, isd);
  degree_backward(gr_.t, gr_.geo, isd, isd_bar, env_bar);
  check_grad(tag("degree d/d env"), gr_.geo.env.data(), gr_.E, [&] {
    degree_forward(gr_.t, gr_.geo, isd);
    return dot(isd_bar.data(), isd.data(), isd.size());
  }, env_bar.data());
}

TEST_P(ComponentBackward, EnvSeedFiLM) {
  const int N = gr_.N, C = cfg().channels, E = gr_.E;
  std::vector<double> isd;
  degree_forward(gr_.t, gr_.geo, isd);
  const V W = randn(static_cast<size_t>(N) * C, rng_);
  V x0(static_cast<size_t>(N) * C);
  EnvSeedCache<double> c;
  auto J = [&] {
    env_seed_forward(w(), gr_.t, gr_.geo, isd, x0.data(), c);
    return dot(W.data(), x0.data(), x0.size());
  };
  J();
  std::vector<double> isd_bar(N, 0.0);
  EdgeGeometryGrad<double> gb;
  gb.reset(gr_.geo);
  env_seed_backward(w(), gr_.t, gr_.geo, isd, c, W.data(), isd_bar, gb);
  check_grad(tag("env-seed FiLM d/d rbf"), gr_.geo.rbf.data(), gr_.geo.rbf.size(), J, gb.rbf.data());
  check_grad(tag("env-seed FiLM d/d isd"), isd.data(), N, J, isd_bar.data());
  // Through the geometry: v -> (r, env, rbf, direction) -> x0, with isd held fixed.
  V v_bar(3 * static_cast<size_t>(E));
  edge_geometry_backward(w(), gr_.geo, gb, v_bar.data());
  V vec = gr_.vec;
  check_grad(tag("env-seed FiLM d/d edge vectors"), vec.data(), vec.size(), [&] {
    edge_geometry_forward(w(), vec.data(), E, gr_.geo);
    return J();
  }, v_bar.data());
}

TEST_P(ComponentBackward, GIE) {
  const int N = gr_.N, C = cfg().channels, L = cfg().lmax, D = cfg().n_coeff(), E = gr_.E;
  std::vector<double> isd;
  degree_forward(gr_.t, gr_.geo, isd);
  V rho = randn(static_cast<size_t>(E) * (L + 1) * C, rng_), X0(static_cast<size_t>(N) * D * C, 0.0);
  V W = randn(X0.size(), rng_);
  auto J = [&] {
    gie_forward(gr_.t, gr_.geo, isd, rho.data(), C, X0.data());
    return dot(W.data() + 0, X0.data(), X0.size());  // gie_forward leaves the l = 0 rows at 0
  };
  J();
  std::vector<double> isd_bar(N, 0.0);
  V rho_bar(rho.size(), 0.0);
  EdgeGeometryGrad<double> gb;
  gb.reset(gr_.geo);
  gie_backward(gr_.t, gr_.geo, isd, rho.data(), C, X0.data(), W.data(), isd_bar, rho_bar.data(), gb);
  check_grad(tag("GIE d/d rho"), rho.data(), rho.size(), J, rho_bar.data());
  check_grad(tag("GIE d/d isd"), isd.data(), N, J, isd_bar.data());
  check_grad(tag("GIE d/d D"), gr_.geo.D.data(), gr_.geo.D.size(), J, gb.D.data());
}

TEST_P(ComponentBackward, EdgeGeometryNonWignerPart) {
  // dJ/dv for J = <a, r> + <b, env> + <c, rbf> + <d, v>, with dJ/dD = 0.
  EdgeGeometryGrad<double> gb;
  gb.reset(gr_.geo);
  gb.r = randn(gr_.E, rng_);
  gb.env = randn(gr_.E, rng_);
  gb.rbf = randn(gb.rbf.size(), rng_);
  gb.vec = randn(gb.vec.size(), rng_);
  V v_bar(gb.vec.size());
  edge_geometry_backward(w(), gr_.geo, gb, v_bar.data());
  V vec = gr_.vec;
  EdgeGeometry<double> g;
  check_grad(tag("edge geometry (r, env, rbf) d/d v"), vec.data(), vec.size(), [&] {
    edge_geometry_forward(w(), vec.data(), gr_.E, g);
    return dot(gb.r.data(), g.r.data(), g.E) + dot(gb.env.data(), g.env.data(), g.E) +
           dot(gb.rbf.data(), g.rbf.data(), g.rbf.size()) + dot(gb.vec.data(), vec.data(), vec.size());
  }, v_bar.data());
}

TEST_P(ComponentBackward, SO2Tile) {
  const int L = cfg().lmax, C = cfg().channels, Cw = cfg().wide(), D = cfg().n_coeff(), E = gr_.E;
  for (size_t b = 0; b < w().blocks.size(); b += w().blocks.size() - 1) {
    const BlockW<double>& bw = w().blocks[b];
    V H = randn(static_cast<size_t>(gr_.NT) * D * Cw, rng_), R = randn(static_cast<size_t>(E) * (L + 1) * C, rng_);
    const int e0 = 2, Ec = E - 5;  // a tile that is not the whole edge set
    const V W = randn(static_cast<size_t>(Ec) * D * Cw, rng_);
    SO2Tile<double> s;
    auto J = [&] {
      so2_tile_forward(w(), bw, gr_.t, gr_.geo, H.data(), BlockRadial<double>(R.data()), e0, Ec, s);
      return dot(W.data(), s.M.data(), W.size());
    };
    J();
    const Mat<double> Mb = Eigen::Map<const Mat<double>>(W.data(), Ec, D * Cw);
    V Hb(H.size(), 0.0), Rb(R.size(), 0.0);
    EdgeGeometryGrad<double> gb;
    gb.reset(gr_.geo);
    Mat<double> Xloc_bar;
    so2_tile_backward(w(), bw, gr_.t, gr_.geo, H.data(), s, Mb, Xloc_bar, Rb.data(), static_cast<Mat<double>*>(nullptr), gb);
    for (int i = 0; i < Ec; ++i)
      so2_rotation_source_backward(cfg(), gr_.t, gr_.geo, e0 + i, Xloc_bar.data() + static_cast<size_t>(i) * Xloc_bar.cols(),
                                   Hb.data());
    const std::string blk = " (block " + std::to_string(b) + ")";
    check_grad(tag("SO2 tile d/d H" + blk), H.data(), H.size(), J, Hb.data());
    check_grad(tag("SO2 tile d/d R" + blk), R.data(), R.size(), J, Rb.data());
    check_grad(tag("SO2 tile d/d D" + blk), gr_.geo.D.data(), gr_.geo.D.size(), J, gb.D.data());
    if (w().blocks.size() == 1) break;
  }
}

TEST_P(ComponentBackward, Attention) {
  const int Cw = cfg().wide(), D = cfg().n_coeff(), F = cfg().n_focus, E = gr_.E, N = gr_.N, NT = gr_.NT;
  const BlockW<double>& bw = w().blocks[0];
  V H = randn(static_cast<size_t>(NT) * D * Cw, rng_);
  Mat<double> Rhat0 = Eigen::Map<const Mat<double>>(randn(static_cast<size_t>(E) * Cw, rng_).data(), E, Cw);
  V env = gr_.geo.env;
  const V Wa = randn(static_cast<size_t>(E) * F, rng_), Wg = randn(static_cast<size_t>(N) * F, rng_);
  AttentionState<double> a;
  auto J = [&] {
    attention_node_forward(w(), bw, gr_.t, H.data(), a);
    attention_softmax_forward(w(), bw, gr_.t, env.data(), static_cast<const double*>(nullptr), Rhat0, a);
    return dot(Wa.data(), a.alpha.data(), Wa.size()) + dot(Wg.data(), a.gamma.data(), Wg.size());
  };
  J();
  const Mat<double> alpha_bar = Eigen::Map<const Mat<double>>(Wa.data(), E, F);
  const Mat<double> gamma_bar = Eigen::Map<const Mat<double>>(Wg.data(), N, F);
  Mat<double> q_bar = Mat<double>::Zero(NT, a.q.cols()), k_bar = Mat<double>::Zero(NT, a.k.cols());
  Mat<double> R0b = Mat<double>::Zero(E, Cw);
  V env_bar(E, 0.0), Hb(H.size(), 0.0);
  Mat<double> lbar;
  attention_softmax_backward(w(), bw, gr_.t, env.data(), static_cast<const double*>(nullptr), a, 0, E, alpha_bar, q_bar, lbar, R0b,
                             env_bar.data(), static_cast<double*>(nullptr));
  for (int e = 0; e < E; ++e)
    attention_key_backward(w(), gr_.t, env.data(), static_cast<const double*>(nullptr), a, e, lbar.data() + static_cast<size_t>(e) * F,
                           k_bar);
  attention_node_backward(w(), bw, gr_.t, H.data(), a, q_bar, k_bar, gamma_bar, Hb.data());
  check_grad(tag("attention d/d H"), H.data(), H.size(), J, Hb.data());
  check_grad(tag("attention d/d env"), env.data(), env.size(), J, env_bar.data());
  check_grad(tag("attention d/d Rhat0"), Rhat0.data(), Rhat0.size(), J, R0b.data());
}

// The bridging source gate as a factor of each edge's attention mass (docs/model.md §9.2).
TEST_P(ComponentBackward, AttentionWithSourceGate) {
  const int Cw = cfg().wide(), D = cfg().n_coeff(), F = cfg().n_focus, E = gr_.E, NT = gr_.NT;
  const BlockW<double>& bw = w().blocks[0];
  V H = randn(static_cast<size_t>(NT) * D * Cw, rng_);
  const Mat<double> Rhat0 = Eigen::Map<const Mat<double>>(randn(static_cast<size_t>(E) * Cw, rng_).data(), E, Cw);
  const V env = gr_.geo.env;
  V gate(E);
  std::uniform_real_distribution<double> u(0.05, 1.0);
  for (double& g : gate) g = u(rng_);
  const V Wa = randn(static_cast<size_t>(E) * F, rng_);
  AttentionState<double> a;
  auto J = [&] {
    attention_node_forward(w(), bw, gr_.t, H.data(), a);
    attention_softmax_forward(w(), bw, gr_.t, env.data(), gate.data(), Rhat0, a);
    return dot(Wa.data(), a.alpha.data(), Wa.size());
  };
  J();
  const Mat<double> alpha_bar = Eigen::Map<const Mat<double>>(Wa.data(), E, F);
  Mat<double> q_bar = Mat<double>::Zero(NT, a.q.cols());
  Mat<double> R0b = Mat<double>::Zero(E, Cw);
  V env_bar(E, 0.0), gate_bar(E, 0.0);
  Mat<double> lbar;
  attention_softmax_backward(w(), bw, gr_.t, env.data(), gate.data(), a, 0, E, alpha_bar, q_bar, lbar, R0b,
                             env_bar.data(), gate_bar.data());
  check_grad(tag("attention d/d gate"), gate.data(), gate.size(), J, gate_bar.data());
}

TEST_P(ComponentBackward, FFN) {
  const int C = cfg().channels, D = cfg().n_coeff(), N = gr_.N;
  const FFNGrid<double> grid = model_grid();
  const BlockW<double>& bw = w().blocks.back();
  V Xt = randn(static_cast<size_t>(N) * D * C, rng_), out(Xt.size()), Xb(Xt.size());
  const V W = randn(Xt.size(), rng_);
  std::vector<double> h;
  auto J = [&] {
    ffn_forward(w(), bw, grid, Xt.data(), N, out.data(), h);
    return dot(W.data(), out.data(), out.size());
  };
  J();
  ffn_backward(w(), bw, grid, h, N, W.data(), Xb.data());
  check_grad(tag("FFN d/d Xt"), Xt.data(), Xt.size(), J, Xb.data());
}

TEST_P(ComponentBackward, InteractionBlock) {
  const int L = cfg().lmax, C = cfg().channels, D = cfg().n_coeff(), N = gr_.N, NT = gr_.NT, E = gr_.E;
  const FFNGrid<double> grid = model_grid();
  const std::vector<int> tiles = make_edge_tiles(gr_.t, 6);  // several tiles
  ASSERT_GE(tiles.size(), 3u);
  const BlockW<double>& bw = w().blocks[0];
  V X = randn(static_cast<size_t>(NT) * D * C, rng_), R = randn(static_cast<size_t>(E) * (L + 1) * C, rng_);
  V Y(static_cast<size_t>(N) * D * C);
  const V W = randn(Y.size(), rng_);
  BlockCache<double> bc;
  auto J = [&] {
    block_forward(w(), bw, grid, gr_.t, gr_.geo, tiles, X.data(), BlockRadial<double>(R.data()), Y.data(), bc);
    return dot(W.data(), Y.data(), Y.size());
  };
  J();
  V Xb(X.size()), Rb(R.size(), 0.0);
  EdgeGeometryGrad<double> gb;
  gb.reset(gr_.geo);
  block_backward(w(), bw, grid, gr_.t, gr_.geo, tiles, BlockRadial<double>(R.data()), bc, W.data(), Xb.data(),
                 Rb.data(), gb);
  check_grad(tag("block d/d X (centres + ghost)"), X.data(), X.size(), J, Xb.data());
  check_grad(tag("block d/d R"), R.data(), R.size(), J, Rb.data());
  check_grad(tag("block d/d env"), gr_.geo.env.data(), gr_.geo.env.size(), J, gb.env.data());
  check_grad(tag("block d/d D"), gr_.geo.D.data(), gr_.geo.D.size(), J, gb.D.data());
}

TEST_P(ComponentBackward, Readout) {
  const int C = cfg().channels, D = cfg().n_coeff(), N = gr_.N;
  const FFNGrid<double> grid = model_grid();
  V X = randn(static_cast<size_t>(N) * D * C, rng_), Xb(X.size());
  const Mat<double> W = Eigen::Map<const Mat<double>>(randn(static_cast<size_t>(N) * C, rng_).data(), N, C);
  Mat<double> desc;
  auto J = [&] {
    readout_forward(w(), grid, X.data(), N, desc);
    return (W.array() * desc.array()).sum();
  };
  J();
  readout_backward(w(), grid, X.data(), N, W, Xb.data());
  check_grad(tag("read-out d/d X"), X.data(), X.size(), J, Xb.data());
}

TEST_P(ComponentBackward, Fitting) {
  const int C = cfg().channels, N = gr_.N;
  Mat<double> desc = Eigen::Map<const Mat<double>>(randn(static_cast<size_t>(N) * C, rng_).data(), N, C);
  FittingCache<double> fc;
  V ae(N);
  auto J = [&] {
    fitting_forward(w(), desc, gr_.types.data(), ae.data(), fc);
    double s = 0;
    for (double x : ae) s += x;
    return s;
  };
  J();
  Mat<double> db;
  fitting_backward(w(), fc, db);
  check_grad(tag("fitting d/d desc"), desc.data(), desc.size(), J, db.data());
}

INSTANTIATE_TEST_SUITE_P(Weights, ComponentBackward,
                         testing::Values("c32_l3_f2_float64.pt", "defaults_float64.pt", "mini_float64.pt"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           return i.param.substr(0, i.param.find('.'));
                         });

}  // namespace
