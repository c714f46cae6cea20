// The model on the device: dimensions and limits, and the one-pass weight upload into the
// structs the kernels read (model_dev.cuh). Weights are converted to float once; the block's
// derived tables (the degree mixer with W_rh folded in, transposes, the radial logit bias) are
// formed here in double and converted once. A C++ file, not .cu: its Eigen code must be the same
// as sezm_core's (cuda/CMakeLists.txt).
#include "device_weights.cuh"
#include "wgmma_f16_layout.h"
#include "wgmma_layout.h"
#include "wgmma_ws_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/lebedev.h"
#include "engine/so3_grid.h"
#include "engine/wigner_d.h"
#include "model/charge_spin.h"

namespace sezm::cuda {
namespace {

// Host-side float arena: each tensor is appended and the pointer member that will hold its
// device address is recorded; bind() fills every recorded member once the arena is uploaded.
// Members never put stay null (absent optional weights).
class Arena {
 public:
  void put(const float*& slot, const float* p, size_t n) {
    slots_.emplace_back(&slot, h_.size());
    h_.insert(h_.end(), p, p + n);
    align();
  }
  void put(const float*& slot, const Mat<double>& m) { put(slot, to_float(m.data(), m.size()).data(), m.size()); }
  void put_t(const float*& slot, const Mat<double>& m) {
    Mat<double> t = m.transpose();
    put(slot, t);
  }
  void put(const float*& slot, const Vec<double>& v) { put(slot, to_float(v.data(), v.size()).data(), v.size()); }
  // Several matrices back to back as one tensor.
  void put(const float*& slot, const std::vector<Mat<double>>& ms) {
    slots_.emplace_back(&slot, h_.size());
    for (const auto& m : ms) {
      const std::vector<float> f = to_float(m.data(), m.size());
      h_.insert(h_.end(), f.begin(), f.end());
    }
    align();
  }
  // Several K x N matrices as tile B images, back to back: image(f, K, N) of each one's floats, 2 K N
  // floats (`what` names the kind in the error should an image not be that size).
  template <class Image>
  void put_images(const float*& slot, const std::vector<Mat<double>>& ms, const char* what, Image image) {
    slots_.emplace_back(&slot, h_.size());
    for (const auto& m : ms) {
      const std::vector<float> f = to_float(m.data(), m.size());
      const int K = static_cast<int>(m.rows()), N = static_cast<int>(m.cols());
      const std::vector<float> img = image(f, K, N);
      if (img.size() != 2 * f.size())  // K % 32 == 0 for every shape stack.cu sends there
        throw Error(std::string("device cuda: the ") + what + " image of a " + std::to_string(K) + " x " +
                    std::to_string(N) + " weight is not 2 K N floats");
      h_.insert(h_.end(), img.begin(), img.end());
    }
    align();
  }
  // The warpgroup tile's images (wgmma_layout.h); ks > 0: k blocks of ks steps (the
  // warp-specialised tile's kWsKs) instead of wg_ks(N).
  void put_wg(const float*& slot, const std::vector<Mat<double>>& ms, int ks = 0) {
    put_images(slot, ms, "wgmma", [&](const std::vector<float>& f, int K, int N) {
      return wgmma_b_image(f.data(), K, N, N, ks > 0 ? ks : wg_ks(N));
    });
  }
  // The warp-specialised tile's FP16 images (wgmma_b_image_f16_ws; Dims::stack_f16, whose
  // use_stack_f16 checked the weights' range).
  void put_f16(const float*& slot, const std::vector<Mat<double>>& ms) {
    put_images(slot, ms, "FP16", [](const std::vector<float>& f, int K, int N) {
      return wgmma_b_image_f16_ws(f.data(), K, N, N);
    });
  }
  // Integer tables in the same arena: their bits are copied as they are (never converted).
  void put_int(const int*& slot, const std::vector<int>& v) {
    static_assert(sizeof(int) == sizeof(float), "int tables share the float arena");
    islots_.emplace_back(&slot, h_.size());
    const size_t o = h_.size();
    h_.resize(o + v.size());
    if (!v.empty()) std::memcpy(h_.data() + o, v.data(), v.size() * sizeof(int));
    align();
  }
  const std::vector<float>& host() const { return h_; }
  void bind(const float* base) const {
    for (const auto& s : slots_) *s.first = base + s.second;
    for (const auto& s : islots_) *s.first = reinterpret_cast<const int*>(base + s.second);
  }

 private:
  static std::vector<float> to_float(const double* p, Eigen::Index n) {
    std::vector<float> f(n);
    for (Eigen::Index i = 0; i < n; ++i) f[i] = static_cast<float>(p[i]);
    return f;
  }
  void align() {
    while (h_.size() % 32) h_.push_back(0.0f);  // 128-byte alignment of every tensor
  }
  std::vector<float> h_;
  std::vector<std::pair<const float**, size_t>> slots_;
  std::vector<std::pair<const int**, size_t>> islots_;
};

// The grid product's sparse coupling tensor T[k, i, j] = sum_g B[k, g] A[g, i] A[g, j]
// (model_dev.cuh, SO3GridDev), in double from the grid's double A and B. Both quadratures are
// exact (docs/model.md §5.10.2), so T holds the coupling coefficients and most entries are zero
// up to round-off (L = 2, kmax = 1: 803 of 27^3); entries below 1e-11 of the largest are dropped,
// far below float resolution. T is formed for i <= j and mirrored, so it is exactly symmetric.
void put_grid_coupling(Arena& a, const SO3Grid& g, SO3GridDev& x) {
  const int J = g.J, G = g.G;
  if (J >= (1 << 15)) throw Error("device cuda: SO(3) grid with " + std::to_string(J) + " framed rows (at most 32767)");
  std::vector<double> T(static_cast<size_t>(J) * J * J, 0.0);
  auto at = [&](int k, int i, int j) -> double& { return T[(static_cast<size_t>(k) * J + i) * J + j]; };
  for (int gi = 0; gi < G; ++gi)
    for (int i = 0; i < J; ++i) {
      const double ai = g.A[static_cast<size_t>(gi) * J + i];
      if (ai == 0.0) continue;
      for (int j = i; j < J; ++j) {
        const double aij = ai * g.A[static_cast<size_t>(gi) * J + j];
        if (aij == 0.0) continue;
        for (int k = 0; k < J; ++k) at(k, i, j) += g.B[static_cast<size_t>(k) * G + gi] * aij;
      }
    }
  double tmax = 0.0;
  for (int k = 0; k < J; ++k)
    for (int i = 0; i < J; ++i)
      for (int j = i; j < J; ++j) {
        at(k, j, i) = at(k, i, j);
        tmax = std::max(tmax, std::abs(at(k, i, j)));
      }
  const double cut = 1e-11 * tmax;
  auto bits = [](double v) {
    const float f = static_cast<float>(v);
    int b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  };
  std::vector<int> foff{0}, fwd, boff{0}, bwd;
  for (int k = 0; k < J; ++k) {  // grouped by the output row k: entries (i | j << 16, T[k, i, j])
    for (int i = 0; i < J; ++i)
      for (int j = 0; j < J; ++j)
        if (std::abs(at(k, i, j)) > cut) {
          fwd.push_back(i | (j << 16));
          fwd.push_back(bits(at(k, i, j)));
        }
    foff.push_back(static_cast<int>(fwd.size() / 2));
  }
  for (int ia = 0; ia < J; ++ia) {  // grouped by the first operand a: entries (k | b << 16, T[k, a, b])
    for (int k = 0; k < J; ++k)
      for (int b = 0; b < J; ++b)
        if (std::abs(at(k, ia, b)) > cut) {
          bwd.push_back(k | (b << 16));
          bwd.push_back(bits(at(k, ia, b)));
        }
    boff.push_back(static_cast<int>(bwd.size() / 2));
  }
  x.nnz = foff.back();
  a.put_int(x.t_fwd_off, foff);
  a.put_int(x.t_fwd, fwd);
  a.put_int(x.t_bwd_off, boff);
  a.put_int(x.t_bwd, bwd);
}

// A grid net's sizes (the pointers are filled by upload_grid_net).
GridNetDev grid_net_shape(const GridNetW<double>& g) {
  GridNetDev x{};
  x.op = g.op == GridOp::Product ? 0 : g.op == GridOp::MLP ? 1 : 2;
  x.cross = g.cross ? 1 : 0;
  x.C = g.C;
  x.n_br = g.n_br;
  return x;
}

void upload_grid_net(Arena& a, const GridNetW<double>& g, GridNetDev& x) {
  x = grid_net_shape(g);
  a.put(x.sg, g.scalar_gate);
  if (g.op != GridOp::Product) {
    a.put(x.left, g.left);
    a.put(x.right, g.right);
    a.put(x.out, g.out);
  }
  if (g.op == GridOp::Branch) a.put(x.router, g.router);
  if (g.cross) {
    a.put(x.expand, g.expand);
    a.put(x.contract, g.contract);
    const Vec<double> rs = g.residual_scale.transpose();
    a.put(x.rscale, rs);
  }
}

}  // namespace

float stack_weight_max(const ModelW<double>& w) {
  float m = 0.0f;
  const auto scan = [&](const std::vector<Mat<double>>& ms) {
    for (const auto& x : ms)
      for (Eigen::Index i = 0; i < x.size(); ++i) {
        const float v = std::fabs(static_cast<float>(x.data()[i]));
        m = v == v ? std::fmax(m, v) : INFINITY;  // a NaN weight: no FP16 image
      }
  };
  for (const auto& b : w.blocks)
    for (const auto& layer : b.layers) {
      scan(layer.A);
      scan(layer.W1);
      scan(layer.G);
    }
  return m;
}

Dims model_dims(const ModelW<double>& w) {
  Dims d{};
  const ModelConfig& c = w.cfg;
  // Charge/spin conditioning needs nothing here: the frame's condition is folded into
  // type_embedding on the host (model/charge_spin.h) and uploaded with it.
  require_charge_spin_applied(w);
  // ZBL bridging (docs/model.md §9) needs nothing here either: its clamp, gate and pair term run on
  // the host (bridging.cuh) and reach the kernels as per-edge arrays.
  d.C = c.channels; d.L = c.lmax; d.D = c.n_coeff(); d.Dm = c.n_reduced(); d.F = c.n_focus;
  d.Cf = c.focus_width(); d.Cw = c.wide(); d.ROW = d.Dm * d.Cf; d.M0 = (d.L + 1) * d.Cf; d.M1 = d.L * d.Cf;
  d.K = (d.L + 1) * (d.L + 1) + d.L * d.L; d.H = c.ffn_hidden(); d.nr = c.n_radial; d.ntypes = w.ntypes;
  d.nL = c.mixing_layers; d.ngated = c.mixing_layers - 1;
  d.dc_size = 1 + 3 * ((d.L + 1) * (d.L + 1) - 1); d.wsize = wigner_size(d.L);
  d.es_ro = c.es_rbf_out(); d.es_td = c.es_type_dim(); d.es_emb = c.es_embed(); d.es_ax = c.es_axis();
  d.es_gin = c.es_g_in(); d.es_hid = c.es_hidden();
  d.degree_mixer = c.radial_so2_mode == "degree_channel"; d.has_rh = d.Cw != d.C; d.edge_norm = c.edge_norm;
  d.rcut = static_cast<float>(c.rcut); d.eps = static_cast<float>(c.eps); d.p_rbf = c.env_exp_rbf; d.p_edge = c.env_exp_edge;
  // Limits of the kernels' fixed-size per-thread arrays.
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) throw Error("device cuda: model outside the CUDA engine's limits: " + what);
  };
  need(d.L <= 3, "lmax <= 3");
  need(d.C <= 64 && d.C % 4 == 0, "channels <= 64 and a multiple of 4");
  need(d.Cf <= 64 && d.Cf % 4 == 0, "focus width <= 64 and a multiple of 4");
  need(d.Cw <= 256 && d.F <= 8, "n_focus * focus width <= 256, n_focus <= 8");
  need((d.Cw < 32 && (d.Cw & (d.Cw - 1)) == 0) || d.Cw % 32 == 0, "n_focus * focus width a power of two below 32 or a multiple of 32");
  need((d.Cf & (d.Cf - 1)) == 0 || d.Cf % 32 == 0, "focus width a power of two or a multiple of 32");
  need(d.M0 <= 384 && 2 * d.M1 <= 384, "(lmax+1) * focus width <= 384 and 2 lmax focus width <= 384");
  need(d.H <= 256 && d.D * d.C >= d.H, "FFN width <= 256");
  need(d.es_hid <= 256 && d.es_gin <= 256 && d.es_emb <= 128 && d.es_ax <= 8, "env-seed widths");
  need(w.fit_w.size() <= 4, "at most 4 fitting layers");
  // SO(3) grid nets (grid_net.cu): scratch per node for the largest one (the read-out adds its
  // own h, Y and their adjoints, 6 D K H floats).
  d.KF = c.ffn_so3_grid ? c.n_frames() : 1;
  d.grid_scratch = 0;
  if (c.any_so3_grid()) {
    SO3GridDev g{};
    g.K = c.n_frames();
    g.J = d.D * g.K;
    g.G = make_so3_grid(c.lmax, c.kmax).G;
    long most = 0;
    for (const auto& b : w.blocks) {
      if (b.has_message_node) most = std::max(most, grid_net_scratch_per_node(grid_net_shape(b.message_node), g, d.D));
      if (b.ffn_so3) most = std::max(most, grid_net_scratch_per_node(grid_net_shape(b.ffn_grid), g, d.D));
    }
    if (w.readout_so3)
      most = std::max(most, grid_net_scratch_per_node(grid_net_shape(w.readout_grid), g, d.D) +
                                6L * d.D * g.K * w.readout_grid.C);
    need(most < (1L << 30), "SO(3) grid-net scratch per node below 2^30 floats");
    d.grid_scratch = static_cast<int>(most);
  }
  return d;
}

void DeviceWeights::upload(const ModelW<double>& w, const Dims& d, MemCounter* mem, cudaStream_t s) {
  Arena a;
  const int L = d.L;
  a.put(mw.freqs, w.freqs);
  a.put(mw.type_emb, w.type_embedding);
  a.put(mw.rad_w0, w.radial_w0);
  if (w.radial_norm) a.put(mw.rad_norm, w.radial_norm_scale);
  a.put(mw.rad_w1, w.radial_w1);
  a.put_t(mw.rad_w1_t, w.radial_w1);
  a.put(mw.rad_eye, Mat<double>(Mat<double>::Identity(d.C, d.C)));
  a.put(mw.es_p1, w.es_proj1);
  a.put(mw.es_p2, w.es_proj2);
  a.put(mw.es_tau, w.es_type_embedding);
  a.put(mw.es_g1, w.es_g1);
  a.put(mw.es_g2, w.es_g2);
  a.put(mw.es_out, w.es_out);
  a.put_t(mw.es_out_t, w.es_out);
  if (w.film_norm) {
    a.put(mw.film_s, w.film_scale_norm);
    a.put(mw.film_h, w.film_shift_norm);
  }
  mw.film_as = static_cast<float>(w.film_scale_alpha);
  mw.film_ah = static_cast<float>(w.film_shift_alpha);
  if (!w.readout_so3) {
    a.put(mw.ro_w1, w.readout_w1);
    a.put(mw.ro_w2, w.readout_w2);
  }
  const S2Grid grid = make_s2_grid(L);
  std::vector<float> gT(grid.T.begin(), grid.T.end()), gP(grid.P.begin(), grid.P.end());
  a.put(mw.gridT, gT.data(), gT.size());
  a.put(mw.gridP, gP.data(), gP.size());
  mw.G = grid.G;
  // The SO(3) grid shared by every grid net (docs/model.md §5.10), and the MLP read-out.
  std::vector<float> so3A, so3B;
  if (w.cfg.any_so3_grid()) {
    const SO3Grid g3 = make_so3_grid(L, w.cfg.kmax);
    so3A.assign(g3.A.begin(), g3.A.end());
    so3B.assign(g3.B.begin(), g3.B.end());
    mw.so3.K = g3.K;
    mw.so3.J = g3.J;
    mw.so3.G = g3.G;
    a.put(mw.so3.A, so3A.data(), so3A.size());
    a.put(mw.so3.B, so3B.data(), so3B.size());
    put_grid_coupling(a, g3, mw.so3);
  }
  mw.ro_so3 = w.readout_so3 ? 1 : 0;
  if (w.readout_so3) {
    a.put(mw.ro3_w1, w.readout_so3_w1);
    a.put(mw.ro3_w2, w.readout_so3_w2);
    upload_grid_net(a, w.readout_grid, mw.ro_grid);
  }
  // fitting
  std::vector<float> fw, fb;
  std::vector<int> dims;
  for (size_t k = 0; k < w.fit_w.size(); ++k) {
    for (Eigen::Index i = 0; i < w.fit_w[k].size(); ++i) fw.push_back(static_cast<float>(w.fit_w[k].data()[i]));
    for (Eigen::Index i = 0; i < w.fit_b[k].size(); ++i) fb.push_back(static_cast<float>(w.fit_b[k][i]));
    dims.push_back(static_cast<int>(w.fit_b[k].size() / 2));
  }
  fit.n = static_cast<int>(dims.size());
  // The read-out kernels hold each layer's vector in shared memory (node_steps.cu: 4 fitting
  // layers, 512 gated outputs).
  int widest = std::max(2 * d.H, d.C);
  for (int h : dims) widest = std::max(widest, 2 * h);
  if (fit.n > 4 || widest > 512)
    throw Error("device cuda: the fitting net (" + std::to_string(fit.n) + " layers, " + std::to_string(widest) +
                " gated outputs at most) exceeds what the CUDA read-out supports (4 layers, 512)");
  a.put(fit.w, fw.data(), fw.size());
  a.put(fit.b, fb.data(), fb.size());
  a.put(fit.out, w.fit_out);
  // blocks (bw sized first: the arena holds pointers to its members)
  bw.assign(w.blocks.size(), BlockWDev{});
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    const BlockW<double>& b = w.blocks[i];
    BlockWDev& x = bw[i];
    a.put(x.pre, b.pre_focus_mix);
    a.put(x.post, b.post_focus_mix);
    if (b.has_radial_hidden_proj) {
      a.put(x.rh, b.radial_hidden_proj);
      a.put_t(x.rhT, b.radial_hidden_proj);
    }
    Mat<double> mixp;  // the folded mixer, kept for rad_fold below
    if (b.degree_mixer) {
      a.put(x.mix, b.mixer_weight);
      // The kernel values only ever see R through W_rh: fold it into the mixer per degree, in
      // double (mixp = blockdiag(W_rh) W_mix), so one product R mixp gives them. K padded with
      // zeros to a multiple of 4 for the tile products' 16-byte loads.
      const int kp = padded_kernel_size(d), K = static_cast<int>(b.mixer_weight.cols());
      Mat<double> m = Mat<double>::Zero(static_cast<Eigen::Index>(d.L + 1) * d.C, kp);
      for (int l = 0; l <= d.L; ++l) {
        const Mat<double> ml = b.mixer_weight.block(static_cast<Eigen::Index>(l) * d.Cw, 0, d.Cw, K);
        m.block(static_cast<Eigen::Index>(l) * d.C, 0, d.C, K) =
            b.has_radial_hidden_proj ? Mat<double>(b.radial_hidden_proj * ml) : ml;
      }
      a.put(x.mixp, m);
      a.put_t(x.mixT, m);
      mixp = m;
      a.put(x.cb, b.channel_basis);
    }
    std::vector<Mat<double>> As, ATs, W1s, W1Ts, Gs, GTs;
    for (const auto& layer : b.layers)
      for (int f = 0; f < d.F; ++f) {
        As.push_back(layer.A[f]);
        ATs.push_back(layer.A[f].transpose());
        W1s.push_back(layer.W1[f]);
        W1Ts.push_back(layer.W1[f].transpose());
        if (!layer.G.empty()) {
          Gs.push_back(layer.G[f]);
          GTs.push_back(layer.G[f].transpose());
        }
      }
    a.put(x.A, As);
    a.put(x.AT, ATs);
    a.put(x.W1, W1s);
    a.put(x.W1T, W1Ts);
    if (!Gs.empty()) a.put(x.G, Gs);
    if (!GTs.empty()) a.put(x.GT, GTs);
    if (d.wgmma) {  // the warpgroup tile's B images (wgmma_layout.h) of the same float weights
      a.put_wg(x.A_wg, As);
      a.put_wg(x.AT_wg, ATs);
      a.put_wg(x.W1_wg, W1s);
      a.put_wg(x.W1T_wg, W1Ts);
      if (!Gs.empty()) a.put_wg(x.G_wg, Gs);
      if (!GTs.empty()) a.put_wg(x.GT_wg, GTs);
      if (d.stack_ws) {
        a.put_wg(x.A_ws, As, kWsKs);
        a.put_wg(x.AT_ws, ATs, kWsKs);
        // The gate weights with zero columns to whole 64-column chunks of the tile's products.
        const auto padded = [](const std::vector<Mat<double>>& ms) {
          std::vector<Mat<double>> out;
          for (const auto& m : ms) {
            out.push_back(Mat<double>::Zero(m.rows(), (m.cols() + 63) / 64 * 64));
            out.back().leftCols(m.cols()) = m;
          }
          return out;
        };
        if (!Gs.empty()) a.put_wg(x.G_ws, padded(Gs), kWsKs);
        if (!GTs.empty()) a.put_wg(x.GT_ws, padded(GTs), kWsKs);
        if (d.stack_f16) {  // the chained launches' 3xFP16 images (Dims::stack_f16)
          a.put_f16(x.A_f16, As);
          a.put_f16(x.AT_f16, ATs);
          a.put_f16(x.W1_f16, W1s);
          a.put_f16(x.W1T_f16, W1Ts);
          if (!Gs.empty()) a.put_f16(x.G_f16, padded(Gs));
          if (!GTs.empty()) a.put_f16(x.GT_f16, padded(GTs));
        }
      }
    }
    if (d.F > 1) a.put(x.fc_w, b.focus_compete_w);
    if (d.F > 1 && b.focus_norm) a.put(x.fc_norm, b.focus_compete_norm);
    a.put(x.qk_norm, b.qk_norm);
    a.put(x.gate_norm, b.gate_norm);
    a.put(x.Wq, b.q_proj);
    a.put(x.Wk, b.k_proj);
    {
      std::vector<Mat<double>> qt, kt;
      for (const auto& m : b.q_proj) qt.push_back(m.transpose());
      for (const auto& m : b.k_proj) kt.push_back(m.transpose());
      a.put(x.Wq_t, qt);
      a.put(x.Wk_t, kt);
    }
    // Radial logit bias R0 . u_f with u_f = W_rh[:, f-block] W_logit[:, f] (or W_logit placed).
    Mat<double> U = Mat<double>::Zero(d.F, d.C);
    for (int f = 0; f < d.F; ++f) {
      if (b.has_radial_hidden_proj)
        U.row(f) = (b.radial_hidden_proj.middleCols(f * d.Cf, d.Cf) * b.logit_w.col(f)).transpose();
      else
        for (int c = 0; c < d.Cf; ++c) U(f, f * d.Cf + c) = b.logit_w(c, f);
    }
    a.put(x.logit_u, U);
    if (b.degree_mixer) {
      // With the mixer, a (block, chunk)'s radial adjoint is kb mixp^T plus, on each edge's
      // degree-0 row, the logit bias's sum_f lbar_f u_f, and the radial MLP's backward reads it
      // only through g = W1 rho_bar: g = [kb | lbar] rad_fold with rad_fold = [mixp^T; U] W1_0^T
      // (W1_0: W1's degree-0 columns for the U rows), folded here in double (radial.cu).
      const int kp = padded_kernel_size(d);
      Mat<double> fold = Mat<double>::Zero((kp + d.F + 3) / 4 * 4, d.C);
      fold.topRows(kp) = mixp.transpose() * w.radial_w1.transpose();
      fold.middleRows(kp, d.F) = U * w.radial_w1.leftCols(d.C).transpose();
      a.put(x.rad_fold, fold);
      // kern = R mixp with R = env a W1 + T[ts] + T[td] (T at every degree): kern_w = W1 mixp,
      // kern_type = T (sum over degrees of mixp's row blocks); then F columns more, the logit bias
      // R(e, 0, :) . u_f: W1_0 u_f and T u_f; zero columns to the multiple of 4.
      Mat<double> kw = Mat<double>::Zero(d.C, fold.rows()), kt = Mat<double>::Zero(w.type_embedding.rows(), fold.rows());
      Mat<double> msum = Mat<double>::Zero(d.C, kp);
      for (int l = 0; l <= d.L; ++l) msum += mixp.middleRows(static_cast<Eigen::Index>(l) * d.C, d.C);
      kw.leftCols(kp) = w.radial_w1 * mixp;
      kw.middleCols(kp, d.F) = w.radial_w1.leftCols(d.C) * U.transpose();
      kt.leftCols(kp) = w.type_embedding * msum;
      kt.middleCols(kp, d.F) = w.type_embedding * U.transpose();
      a.put(x.kern_w, kw);
      a.put(x.kern_type, kt);
    }
    a.put(x.log_zeta, b.log_zeta);
    a.put(x.gate_w, b.gate_w);
    a.put(x.post_scale, b.post_so2_norm.scale);
    a.put(x.post_bias, b.post_so2_norm.bias);
    a.put(x.pre_scale, b.pre_ffn_norm.scale);
    a.put(x.pre_bias, b.pre_ffn_norm.bias);
    x.post_eps = static_cast<float>(b.post_so2_norm.eps);
    x.pre_eps = static_cast<float>(b.pre_ffn_norm.eps);
    a.put(x.ffn_w1, b.ffn_w1);
    if (!b.ffn_so3) {
      a.put(x.ffn_sg, b.ffn_scalar_gate);
      a.put_t(x.ffn_sgT, b.ffn_scalar_gate);
    }
    a.put(x.ffn_w2, b.ffn_w2);
    x.ffn_so3 = b.ffn_so3 ? 1 : 0;
    if (b.ffn_so3) upload_grid_net(a, b.ffn_grid, x.ffn_grid);
    x.has_mn = b.has_message_node ? 1 : 0;
    if (b.has_message_node) upload_grid_net(a, b.message_node, x.mn);
  }
  wbuf_.set_counter(mem);
  wbuf_.upload(a.host().data(), a.host().size(), s);
  a.bind(wbuf_.data());
  fit_dims_.set_counter(mem);
  fit_dims_.upload(dims.data(), dims.size(), s);
  fit.dims = fit_dims_.data();
  atom_bias_.set_counter(mem);
  atom_bias_.upload(w.atom_bias.data(), w.atom_bias.size(), s);
  fit.atom_bias = atom_bias_.data();
  upload_wigner(mem, s);
}

}  // namespace sezm::cuda
