#pragma once
// Initial node state (docs/model.md §2.5, §4; backward §7.3, §7.4):
//  - degree: deg_n = sum_{e->n} env_e^2, isd_n = (deg_n + 0.25)^(-1/2);
//  - type embedding T[t] and per-edge type features tf_e = T[t_src] + T[t_dst];
//  - environment-seed FiLM: x0_n = T_n (1 + a_s tanh s_n) + a_h tanh h_n, where (s, h) come
//    from the per-node Gram features of env-weighted direction seeds;
//  - GIE: X0[n, p(l,m)] = isd_n sum_{e->n} C_lm(v_hat_e) rho_e[l] for l >= 1.
// Edges arrive grouped by destination (CSR); node arrays cover the n_nodes centres.
#include <vector>

#include "engine/edge_geometry.h"
#include "engine/linalg.h"
#include "engine/norms.h"
#include "graph/graph.h"
#include "model/weights.h"

namespace sezm {

constexpr double kDegreeFloor = 0.25;  // version_tensor 1.1

template <class T>
void degree_forward(const Graph& t, const EdgeGeometry<T>& g, std::vector<T>& isd) {
  isd.assign(t.n_nodes, T(0));
  for (int n = 0; n < t.n_nodes; ++n) {
    T deg = 0;
    for (int e = t.dst_offsets[n]; e < t.dst_offsets[n + 1]; ++e) deg += g.env[e] * g.env[e];
    isd[n] = T(1) / std::sqrt(deg + T(kDegreeFloor));
  }
}

// env_bar_e += 2 env_e d(deg)/... from isd_bar.
template <class T>
void degree_backward(const Graph& t, const EdgeGeometry<T>& g, const std::vector<T>& isd,
                     const std::vector<T>& isd_bar, std::vector<T>& env_bar) {
  for (int n = 0; n < t.n_nodes; ++n) {
    const T deg_bar = T(-0.5) * isd[n] * isd[n] * isd[n] * isd_bar[n];
    for (int e = t.dst_offsets[n]; e < t.dst_offsets[n + 1]; ++e) env_bar[e] += T(2) * g.env[e] * deg_bar;
  }
}

// tf (E, C) = T[t_src] + T[t_dst]; no geometry, so no backward.
template <class T>
void edge_type_features(const ModelW<T>& w, const Graph& t, Mat<T>& tf) {
  const int C = w.cfg.channels;
  tf.resize(t.n_edges(), C);
  for (int e = 0; e < t.n_edges(); ++e)
    tf.row(e) = w.type_embedding.row(t.types[t.src[e]]) + w.type_embedding.row(t.types[t.dst[e]]);
}

// ---------------------------------------------------------------------------------------------
// Environment-seed FiLM.
template <class T>
struct EnvSeedCache {
  Mat<T> p1;     // (E, rbf_out)  rbf W_p1 (pre-silu)
  Mat<T> g1;     // (E, hidden)   [a, tau_src, tau_dst] W_g1 (pre-silu)
  Mat<T> g;      // (E, embed)
  Mat<T> seed;   // (E, 4)        [s, s v/r]
  Mat<T> A;      // (N, 4*embed)  isd_n sum seed g^T
  Mat<T> f;      // (N, 2C)       FiLM logits
  std::vector<T> rho_s, rho_h;  // FiLM norm factors
};

template <class T>
void env_seed_forward(const ModelW<T>& w, const Graph& t, const EdgeGeometry<T>& geo,
                      const std::vector<T>& isd, T* x0, EnvSeedCache<T>& c) {
  const ModelConfig& cfg = w.cfg;
  const int E = t.n_edges(), N = t.n_nodes, C = cfg.channels;
  const int ro = cfg.es_rbf_out(), td = cfg.es_type_dim(), emb = cfg.es_embed(), ax = cfg.es_axis();
  c.p1.noalias() = view(geo.rbf.data(), E, geo.nr) * w.es_proj1;
  Mat<T> gin(E, cfg.es_g_in());
  gin.leftCols(ro).noalias() = c.p1.unaryExpr([](T x) { return silu(x); }) * w.es_proj2;
  for (int e = 0; e < E; ++e) {
    gin.row(e).segment(ro, td) = w.es_type_embedding.row(t.types[t.src[e]]);
    gin.row(e).segment(ro + td, td) = w.es_type_embedding.row(t.types[t.dst[e]]);
  }
  c.g1.noalias() = gin * w.es_g1;
  c.g.noalias() = c.g1.unaryExpr([](T x) { return silu(x); }) * w.es_g2;
  c.seed.resize(E, 4);
  for (int e = 0; e < E; ++e) {
    const T s = geo.env[e] / geo.r[e];
    c.seed(e, 0) = s;
    for (int a = 0; a < 3; ++a) c.seed(e, 1 + a) = s * geo.vec[3 * static_cast<size_t>(e) + a] / geo.r[e];
  }
  c.A.setZero(N, 4 * emb);
  c.f.resize(N, 2 * C);
  c.rho_s.assign(N, T(1));
  c.rho_h.assign(N, T(1));
  Mat<T> G(emb, ax);
  std::vector<T> sn(C), hn(C);
  for (int n = 0; n < N; ++n) {
    auto A = view(c.A.data() + static_cast<size_t>(n) * 4 * emb, 4, emb);
    const int e0 = t.dst_offsets[n], ne = t.dst_offsets[n + 1] - e0;
    if (geo.gate.empty()) {
      A.noalias() = isd[n] * (c.seed.middleRows(e0, ne).transpose() * c.g.middleRows(e0, ne));
    } else {  // bridging: each edge's outer product times its source gate
      const auto gate = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(geo.gate.data() + e0, ne);
      A.noalias() = isd[n] * (c.seed.middleRows(e0, ne).transpose() * (gate.asDiagonal() * c.g.middleRows(e0, ne)));
    }
    G.noalias() = A.transpose() * A.leftCols(ax);
    c.f.row(n).noalias() = view(G.data(), 1, emb * ax) * w.es_out;
    const T* fs = c.f.data() + static_cast<size_t>(n) * 2 * C;
    if (w.film_norm) {
      c.rho_s[n] = scalar_rms_norm(fs, C, w.film_scale_norm.data(), static_cast<T>(cfg.eps), sn.data());
      c.rho_h[n] = scalar_rms_norm(fs + C, C, w.film_shift_norm.data(), static_cast<T>(cfg.eps), hn.data());
    } else {
      for (int k = 0; k < C; ++k) { sn[k] = fs[k]; hn[k] = fs[C + k]; }
    }
    const T* te = w.type_embedding.data() + static_cast<size_t>(t.types[n]) * C;
    for (int k = 0; k < C; ++k)
      x0[static_cast<size_t>(n) * C + k] =
          te[k] * (T(1) + w.film_scale_alpha * std::tanh(sn[k])) + w.film_shift_alpha * std::tanh(hn[k]);
  }
}

// From x0_bar (N, C): accumulates isd_bar, rbf_bar and the direct edge-vector adjoint.
template <class T>
void env_seed_backward(const ModelW<T>& w, const Graph& t, const EdgeGeometry<T>& geo,
                       const std::vector<T>& isd, const EnvSeedCache<T>& c, const T* x0_bar,
                       std::vector<T>& isd_bar, EdgeGeometryGrad<T>& gb) {
  const ModelConfig& cfg = w.cfg;
  const int E = t.n_edges(), N = t.n_nodes, C = cfg.channels;
  const int ro = cfg.es_rbf_out(), emb = cfg.es_embed(), ax = cfg.es_axis();
  Mat<T> g_bar = Mat<T>::Zero(E, emb), seed_bar(E, 4);
  std::vector<T> sn(C), hn(C), sn_bar(C), hn_bar(C);
  RowVec<T> f_bar(2 * C);
  Mat<T> G_bar(emb, ax), A_bar(4, emb);
  for (int n = 0; n < N; ++n) {
    const T* fs = c.f.data() + static_cast<size_t>(n) * 2 * C;
    if (w.film_norm) {
      scalar_rms_norm(fs, C, w.film_scale_norm.data(), static_cast<T>(cfg.eps), sn.data());
      scalar_rms_norm(fs + C, C, w.film_shift_norm.data(), static_cast<T>(cfg.eps), hn.data());
    } else {
      for (int k = 0; k < C; ++k) { sn[k] = fs[k]; hn[k] = fs[C + k]; }
    }
    const T* te = w.type_embedding.data() + static_cast<size_t>(t.types[n]) * C;
    const T* xb = x0_bar + static_cast<size_t>(n) * C;
    for (int k = 0; k < C; ++k) {
      const T ts = std::tanh(sn[k]), th = std::tanh(hn[k]);
      sn_bar[k] = xb[k] * te[k] * w.film_scale_alpha * (T(1) - ts * ts);
      hn_bar[k] = xb[k] * w.film_shift_alpha * (T(1) - th * th);
    }
    f_bar.setZero();
    if (w.film_norm) {
      scalar_rms_norm_backward(fs, C, w.film_scale_norm.data(), c.rho_s[n], sn_bar.data(), f_bar.data());
      scalar_rms_norm_backward(fs + C, C, w.film_shift_norm.data(), c.rho_h[n], hn_bar.data(), f_bar.data() + C);
    } else {
      for (int k = 0; k < C; ++k) { f_bar[k] = sn_bar[k]; f_bar[C + k] = hn_bar[k]; }
    }
    view(G_bar.data(), 1, emb * ax).noalias() = f_bar * w.es_out.transpose();
    auto A = view(c.A.data() + static_cast<size_t>(n) * 4 * emb, 4, emb);
    // G = A^T A[:, :ax]  =>  A_bar = A[:, :ax] G_bar^T + [A G_bar  in the first ax columns]
    A_bar.noalias() = A.leftCols(ax) * G_bar.transpose();
    A_bar.leftCols(ax).noalias() += A * G_bar;
    isd_bar[n] += (A_bar.array() * A.array()).sum() / isd[n];
    const int e0 = t.dst_offsets[n], ne = t.dst_offsets[n + 1] - e0;
    seed_bar.middleRows(e0, ne).noalias() = isd[n] * (c.g.middleRows(e0, ne) * A_bar.transpose());
    g_bar.middleRows(e0, ne).noalias() = isd[n] * (c.seed.middleRows(e0, ne) * A_bar);
    if (!geo.gate.empty())  // bridging: seed_bar, g_bar above are w.r.t. the gated product
      for (int e = e0; e < e0 + ne; ++e) {
        gb.gate[e] += seed_bar.row(e).dot(c.seed.row(e));
        seed_bar.row(e) *= geo.gate[e];
        g_bar.row(e) *= geo.gate[e];
      }
  }
  // g = silu(g1) W_g2, g1 = gin W_g1, gin[:ro] = silu(p1) W_p2, p1 = rbf W_p1.
  Mat<T> g1_bar = (g_bar * w.es_g2.transpose()).cwiseProduct(c.g1.unaryExpr([](T x) { return silu_grad(x); }));
  Mat<T> a_bar = g1_bar * w.es_g1.topRows(ro).transpose();
  Mat<T> p1_bar = (a_bar * w.es_proj2.transpose()).cwiseProduct(c.p1.unaryExpr([](T x) { return silu_grad(x); }));
  view(gb.rbf.data(), E, geo.nr).noalias() += p1_bar * w.es_proj1.transpose();
  // Seed Jacobian (docs/model.md §7.3): s = E5/r, d s/dv = s' u, d(s u)/dv = u (s' u)^T + (s/r)(I - u u^T).
  for (int e = 0; e < E; ++e) {
    const T r = geo.r[e];
    const T s = geo.env[e] / r, sp = geo.denv[e] / r - geo.env[e] / (r * r);
    const T* v = &geo.vec[3 * static_cast<size_t>(e)];
    const T u[3] = {v[0] / r, v[1] / r, v[2] / r};
    T ub = 0;  // u . seed_bar[1:4]
    for (int a = 0; a < 3; ++a) ub += u[a] * seed_bar(e, 1 + a);
    for (int b = 0; b < 3; ++b)
      gb.vec[3 * static_cast<size_t>(e) + b] +=
          seed_bar(e, 0) * sp * u[b] + ub * sp * u[b] + (s / r) * (seed_bar(e, 1 + b) - ub * u[b]);
  }
}

// ---------------------------------------------------------------------------------------------
// GIE: rows l >= 1 of X0 (N, D, C) from the enveloped radial features rho (E, L+1, C).
template <class T>
void gie_forward(const Graph& t, const EdgeGeometry<T>& geo, const std::vector<T>& isd, const T* rho,
                 int C, T* X0) {
  const int L = geo.L, D = (L + 1) * (L + 1);
  for (int n = 0; n < t.n_nodes; ++n) {
    T* xn = X0 + static_cast<size_t>(n) * D * C;
    for (int p = C; p < D * C; ++p) xn[p] = 0;
    for (int e = t.dst_offsets[n]; e < t.dst_offsets[n + 1]; ++e) {
      const T* re = rho + static_cast<size_t>(e) * (L + 1) * C;
      const T ge = geo.gate.empty() ? T(1) : geo.gate[e];  // bridging source gate
      for (int l = 1; l <= L; ++l)
        for (int m = -l; m <= l; ++m) {
          const T z = ge * isd[n] * geo.zonal(e, l, m);
          T* xp = xn + static_cast<size_t>(packed_index(l, m)) * C;
          for (int c = 0; c < C; ++c) xp[c] += z * re[l * C + c];
        }
    }
  }
}

template <class T>
void gie_backward(const Graph& t, const EdgeGeometry<T>& geo, const std::vector<T>& isd, const T* rho,
                  int C, const T* X0, const T* X0_bar, std::vector<T>& isd_bar, T* rho_bar, EdgeGeometryGrad<T>& gb) {
  const int L = geo.L, D = (L + 1) * (L + 1);
  for (int n = 0; n < t.n_nodes; ++n) {
    const T* xn = X0 + static_cast<size_t>(n) * D * C;
    const T* xb = X0_bar + static_cast<size_t>(n) * D * C;
    T acc = 0;
    for (int p = C; p < D * C; ++p) acc += xb[p] * xn[p];
    isd_bar[n] += acc / isd[n];
    for (int e = t.dst_offsets[n]; e < t.dst_offsets[n + 1]; ++e) {
      const T* re = rho + static_cast<size_t>(e) * (L + 1) * C;
      T* rb = rho_bar + static_cast<size_t>(e) * (L + 1) * C;
      T* Db = &gb.D[static_cast<size_t>(e) * geo.wsize];
      const T ge = geo.gate.empty() ? T(1) : geo.gate[e];  // bridging source gate
      T gate_bar = 0;
      for (int l = 1; l <= L; ++l)
        for (int m = -l; m <= l; ++m) {
          const T* xp = xb + static_cast<size_t>(packed_index(l, m)) * C;
          const T z = geo.zonal(e, l, m);
          T zb = 0;
          for (int c = 0; c < C; ++c) {
            zb += xp[c] * re[l * C + c];
            rb[l * C + c] += ge * isd[n] * xp[c] * z;
          }
          Db[wigner_offset(l) + l * (2 * l + 1) + (m + l)] += ge * isd[n] * zb;
          gate_bar += isd[n] * zb * z;
        }
      if (!geo.gate.empty()) gb.gate[e] += gate_bar;
    }
  }
}

}  // namespace sezm
