#pragma once
// SO(2) convolution value path of one block, per tile of edges (docs/model.md §5.3–§5.6;
// backward §7.9–§7.11): gather H[src] and rotate into the edge frame keeping |m| <= 1, radial
// conditioning, the residual gated mixing stack (per focus), focus competition, rotate back.
//
// Layouts inside a tile of Ec edges (all row-major):
//  - reduced m-major rows j (mmax = 1): j = 0..L -> (l = j, m = 0), L+1..2L -> (j-L, -1),
//    2L+1..3L -> (j-2L, +1); Dm = 3L+1;
//  - Xloc, U0: edge-major (Ec, Dm, Cw), wide channel c = f*Cf + cf;
//  - stack activations: focus-major (F, Ec, ROW), ROW = Dm*Cf, element [f][e][j*Cf + cf]; the
//    m = 0 group is the first M0 = (L+1)Cf columns, the |m| = 1 group the last 2*L*Cf;
//  - M: (Ec, D, Cw) rotated-back message, packed rows p(l, m').
// Saved for the backward (tile-local, recomputed from H and geometry — nothing per edge is
// kept across tiles): Xloc, Rhat, the compact kernel, every gated layer's pre-activation Z,
// the pre-scale stack output and the focus-competition statistics.
#include <vector>

#include "engine/edge_geometry.h"
#include "engine/embeddings.h"
#include "engine/linalg.h"
#include "engine/norms.h"
#include "model/weights.h"

namespace sezm {

struct ReducedRows {
  int L = 0, Dm = 0;
  std::vector<int> l, m;
  static int degree(int L, int j) { return j <= L ? j : (j <= 2 * L ? j - L : j - 2 * L); }
  static int order(int L, int j) { return j <= L ? 0 : (j <= 2 * L ? -1 : 1); }
  explicit ReducedRows(int L_) : L(L_), Dm(3 * L_ + 1) {
    for (int j = 0; j < Dm; ++j) {
      l.push_back(degree(L, j));
      m.push_back(order(L, j));
    }
  }
  // Column of the compact degree kernel (degree_channel) that couples row in to row o (same m).
  int kernel_col(int in, int o) const {
    return m[o] == 0 ? l[in] * (L + 1) + l[o] : (L + 1) * (L + 1) + (l[in] - 1) * L + (l[o] - 1);
  }
};

// Inverse-rotation rescale of the rotate-back (docs/model.md §5.6): sqrt((2l+1)/3) for l > mmax = 1.
template <class T>
inline T rotate_back_scale(int l) {
  return l <= 1 ? T(1) : std::sqrt(T(2 * l + 1) / T(3));
}

// A block's radial features R = rho + tf (the edge-type term on every degree, docs/model.md),
// read per tile of edges and formed there: no (E, L+1, C) array of R is kept beside rho. Without
// tf, R is rho itself (the component tests pass R so).
template <class T>
struct BlockRadial {
  const T* rho;        // (E, L+1, C)
  const Mat<T>* tf;    // (E, C), or null
  explicit BlockRadial(const T* r, const Mat<T>* type_term = nullptr) : rho(r), tf(type_term) {}
  // Rows [e0, e0 + Ec) of R as (Ec (L+1), C): each value rho + tf, the one sum the whole-array
  // R had (the same bits).
  void rows(int e0, int Ec, int L, int C, Mat<T>& out) const {
    out.resize(static_cast<Eigen::Index>(Ec) * (L + 1), C);
    for (int i = 0; i < Ec; ++i)
      for (int l = 0; l <= L; ++l) row(e0 + i, l, L, C, out.data() + (static_cast<size_t>(i) * (L + 1) + l) * C);
  }
  // Edge e's degree-l row of R (C values) into out.
  void row(int e, int l, int L, int C, T* out) const {
    const T* r = rho + (static_cast<size_t>(e) * (L + 1) + l) * C;
    for (int c = 0; c < C; ++c) out[c] = tf ? r[c] + (*tf)(e, c) : r[c];
  }
};

template <class T>
struct SO2Tile {
  int e0 = 0, Ec = 0;
  Mat<T> R;                    // (Ec (L+1), C) the tile's block radial features (BlockRadial)
  Mat<T> Rhat;                 // (Ec, (L+1)Cw)
  Mat<T> kern;                 // (Ec, K) compact degree kernel (degree_channel)
  Mat<T> Xloc;                 // (Ec, Dm*Cw)
  std::vector<Mat<T>> U;       // per focus (Ec, ROW): stack state; after forward = pre-scale output
  std::vector<std::vector<Mat<T>>> Z;  // [gated layer][focus] (Ec, ROW) pre-activations
  std::vector<Mat<T>> Ssrc;    // per focus (Ec, Cf) pre-stack scalar row
  Mat<T> fc_rho;               // (Ec, F) focus-compete norm factors
  Mat<T> fc_p;                 // (Ec, F) softmax
  Mat<T> alpha_fc;             // (Ec, F)
  Mat<T> M;                    // (Ec, D*Cw)
};

// ---- forward ------------------------------------------------------------------------------
template <class T>
void so2_tile_forward(const ModelW<T>& w, const BlockW<T>& bw, const Graph& t, const EdgeGeometry<T>& geo,
                      const T* H, const BlockRadial<T>& R, int e0, int Ec, SO2Tile<T>& s) {
  const ModelConfig& cfg = w.cfg;
  const int L = cfg.lmax, C = cfg.channels, Cw = cfg.wide(), Cf = cfg.focus_width(), F = cfg.n_focus;
  const int D = cfg.n_coeff(), Dm = cfg.n_reduced(), ROW = Dm * Cf, M0 = (L + 1) * Cf;
  const ReducedRows rr(L);
  s.e0 = e0;
  s.Ec = Ec;
  // Radial features projected to the wide width.
  R.rows(e0, Ec, L, C, s.R);
  auto Rt = view(static_cast<const T*>(s.R.data()), static_cast<Eigen::Index>(Ec) * (L + 1), C);
  s.Rhat.resize(Ec, (L + 1) * Cw);
  if (bw.has_radial_hidden_proj)
    view(s.Rhat.data(), static_cast<Eigen::Index>(Ec) * (L + 1), Cw).noalias() = Rt * bw.radial_hidden_proj;
  else
    view(s.Rhat.data(), static_cast<Eigen::Index>(Ec) * (L + 1), Cw) = Rt;
  if (bw.degree_mixer) s.kern.noalias() = s.Rhat * bw.mixer_weight;

  // Gather + rotate into the edge frame.
  s.Xloc.resize(Ec, Dm * Cw);
  for (int i = 0; i < Ec; ++i) {
    const int e = e0 + i;
    const T* Hs = H + static_cast<size_t>(t.src[e]) * D * Cw;
    const T* De = &geo.D[static_cast<size_t>(e) * geo.wsize];
    T* x = s.Xloc.data() + static_cast<size_t>(i) * Dm * Cw;
    for (int j = 0; j < Dm; ++j) {
      const int l = rr.l[j], row = rr.m[j] + l;
      const T* Dl = De + wigner_offset(l) + row * (2 * l + 1);
      T* xj = x + j * Cw;
      for (int c = 0; c < Cw; ++c) xj[c] = 0;
      for (int mp = -l; mp <= l; ++mp) {
        const T dv = Dl[mp + l];
        const T* h = Hs + static_cast<size_t>(packed_index(l, mp)) * Cw;
        for (int c = 0; c < Cw; ++c) xj[c] += dv * h[c];
      }
    }
  }

  // Radial conditioning, written focus-major. Channels innermost (a row of Cw values at a time,
  // vectorised); each value's sum over the input rows runs in row order.
  s.U.assign(F, Mat<T>(Ec, ROW));
  std::vector<T> val(Cw);
  for (int i = 0; i < Ec; ++i) {
    const T* x = s.Xloc.data() + static_cast<size_t>(i) * Dm * Cw;
    const T* rh = s.Rhat.data() + static_cast<size_t>(i) * (L + 1) * Cw;
    const T* kk = bw.degree_mixer ? s.kern.data() + static_cast<size_t>(i) * s.kern.cols() : nullptr;
    for (int o = 0; o < Dm; ++o) {
      if (!bw.degree_mixer) {
        for (int c = 0; c < Cw; ++c) val[c] = x[o * Cw + c] * rh[rr.l[o] * Cw + c];
      } else {
        for (int c = 0; c < Cw; ++c) val[c] = 0;
        for (int in = 0; in < Dm; ++in) {
          if (rr.m[in] != rr.m[o]) continue;
          const T kv = kk[rr.kernel_col(in, o)];
          const T* xi = x + in * Cw;
          for (int c = 0; c < Cw; ++c) val[c] += kv * xi[c];
        }
        for (int c = 0; c < Cw; ++c) val[c] *= bw.channel_basis[c];
      }
      for (int f = 0; f < F; ++f) {
        T* u = s.U[f].data() + static_cast<size_t>(i) * ROW + o * Cf;
        for (int cf = 0; cf < Cf; ++cf) u[cf] = val[f * Cf + cf];
      }
    }
  }
  if (F > 1) {
    s.Ssrc.resize(F);
    for (int f = 0; f < F; ++f) s.Ssrc[f] = s.U[f].leftCols(Cf);
  }

  // Mixing stack: gated residual layers, then one identity residual layer.
  const int nL = static_cast<int>(bw.layers.size());
  s.Z.assign(nL - 1, std::vector<Mat<T>>(F));
  Mat<T> Zt(Ec, ROW), S;
  for (int k = 0; k < nL; ++k) {
    const SO2LayerW<T>& lw = bw.layers[k];
    for (int f = 0; f < F; ++f) {
      Mat<T>& U = s.U[f];
      Mat<T>& Z = k + 1 < nL ? s.Z[k][f] : Zt;
      Z.resize(Ec, ROW);
      Z.leftCols(M0).noalias() = U.leftCols(M0) * lw.A[f];
      Z.rightCols(ROW - M0).noalias() = U.rightCols(ROW - M0) * lw.W1[f];
      if (k + 1 == nL) {
        U += Z;
        continue;
      }
      S.noalias() = Z.leftCols(Cf) * lw.G[f];
      S = S.unaryExpr([](T x) { return sigmoid(x); });
      U.leftCols(Cf) += Z.leftCols(Cf).unaryExpr([](T x) { return silu(x); });
      for (int j = 1; j < Dm; ++j) {
        const int g = rr.l[j] - 1;
        U.middleCols(j * Cf, Cf) += Z.middleCols(j * Cf, Cf).cwiseProduct(S.middleCols(g * Cf, Cf));
      }
    }
  }

  // Cross-focus competition from the pre-stack scalars (docs/model.md §5.5).
  if (F > 1) {
    s.fc_rho.resize(Ec, F);
    s.fc_p.resize(Ec, F);
    s.alpha_fc.resize(Ec, F);
    std::vector<T> nu(Cf), lam(F);
    for (int i = 0; i < Ec; ++i) {
      T mx = -std::numeric_limits<T>::infinity();
      for (int f = 0; f < F; ++f) {
        const T* x = s.Ssrc[f].data() + static_cast<size_t>(i) * Cf;
        if (bw.focus_norm)
          s.fc_rho(i, f) = scalar_rms_norm(x, Cf, bw.focus_compete_norm.data() + f * Cf, static_cast<T>(cfg.eps), nu.data());
        else
          for (int a = 0; a < Cf; ++a) nu[a] = x[a];
        lam[f] = 0;
        for (int a = 0; a < Cf; ++a) lam[f] += nu[a] * bw.focus_compete_w(a, f);
        mx = std::max(mx, lam[f]);
      }
      T den = 0;
      for (int f = 0; f < F; ++f) den += std::exp(lam[f] - mx);
      for (int f = 0; f < F; ++f) {
        s.fc_p(i, f) = std::exp(lam[f] - mx) / den;
        s.alpha_fc(i, f) = T(0.98) * s.fc_p(i, f) + T(0.02) / T(F);
      }
    }
  }

  // Rotate back to the global frame (docs/model.md §5.6), with the focus-competition scale.
  s.M.setZero(Ec, D * Cw);
  for (int i = 0; i < Ec; ++i) {
    const int e = e0 + i;
    const T* De = &geo.D[static_cast<size_t>(e) * geo.wsize];
    T* Mi = s.M.data() + static_cast<size_t>(i) * D * Cw;
    for (int j = 0; j < Dm; ++j) {
      const int l = rr.l[j], row = rr.m[j] + l;
      const T* Dl = De + wigner_offset(l) + row * (2 * l + 1);
      const T sc = rotate_back_scale<T>(l);
      for (int f = 0; f < F; ++f) {
        const T a = F > 1 ? s.alpha_fc(i, f) : T(1);
        const T* u = s.U[f].data() + static_cast<size_t>(i) * ROW + j * Cf;
        for (int mp = -l; mp <= l; ++mp) {
          const T coef = sc * a * Dl[mp + l];
          T* m = Mi + static_cast<size_t>(packed_index(l, mp)) * Cw + f * Cf;
          for (int cf = 0; cf < Cf; ++cf) m[cf] += coef * u[cf];
        }
      }
    }
  }
}

// ---- backward -----------------------------------------------------------------------------
// The source side of the rotation's backward for edge e: H_bar[src] += D^T Xloc_bar, xb the
// edge's (Dm, Cw) row of Xloc_bar. Kept apart from so2_tile_backward so that a caller can add the
// edges of one source in a fixed order, whatever thread computed them (interaction_block.h).
template <class T>
void so2_rotation_source_backward(const ModelConfig& cfg, const Graph& t, const EdgeGeometry<T>& geo, int e,
                                  const T* xb, T* H_bar) {
  const int L = cfg.lmax, Cw = cfg.wide(), D = cfg.n_coeff(), Dm = cfg.n_reduced();
  T* Hb = H_bar + static_cast<size_t>(t.src[e]) * D * Cw;
  const T* De = &geo.D[static_cast<size_t>(e) * geo.wsize];
  for (int j = 0; j < Dm; ++j) {
    const int l = ReducedRows::degree(L, j), row = ReducedRows::order(L, j) + l;
    const T* Dl = De + wigner_offset(l) + row * (2 * l + 1);
    const T* xj = xb + j * Cw;
    for (int mp = -l; mp <= l; ++mp) {
      T* h = Hb + static_cast<size_t>(packed_index(l, mp)) * Cw;
      for (int c = 0; c < Cw; ++c) h[c] += Dl[mp + l] * xj[c];
    }
  }
}

// Given M_bar (Ec, D*Cw) for a tile whose forward state is in `s`: accumulates R_bar (block
// radial features, (E, L+1, C)) and D_bar (per edge, packed), and returns the rotated features'
// adjoint Xloc_bar (Ec, Dm*Cw), whose source-side sum H_bar[src] += D^T Xloc_bar is
// so2_rotation_source_backward's (edge by edge: the caller picks the order).
template <class T>
void so2_tile_backward(const ModelW<T>& w, const BlockW<T>& bw, const Graph& t, const EdgeGeometry<T>& geo,
                       const T* H, const SO2Tile<T>& s, const Mat<T>& M_bar, Mat<T>& Xloc_bar, T* R_bar,
                       Mat<T>* Rhat_bar_extra /* (Ec, (L+1)Cw) attention-logit part, may be null */,
                       EdgeGeometryGrad<T>& gb) {
  const ModelConfig& cfg = w.cfg;
  const int L = cfg.lmax, C = cfg.channels, Cw = cfg.wide(), Cf = cfg.focus_width(), F = cfg.n_focus;
  const int D = cfg.n_coeff(), Dm = cfg.n_reduced(), ROW = Dm * Cf, M0 = (L + 1) * Cf;
  const int Ec = s.Ec, e0 = s.e0;
  const ReducedRows rr(L);

  // Rotate-back backward -> G = dE/dU_pre (the focus scale included) and D_bar (rows |m| <= 1).
  std::vector<Mat<T>> G(F, Mat<T>::Zero(Ec, ROW));
  for (int i = 0; i < Ec; ++i) {
    const int e = e0 + i;
    const T* De = &geo.D[static_cast<size_t>(e) * geo.wsize];
    T* Db = &gb.D[static_cast<size_t>(e) * geo.wsize];
    const T* Mb = M_bar.data() + static_cast<size_t>(i) * D * Cw;
    for (int j = 0; j < Dm; ++j) {
      const int l = rr.l[j], row = rr.m[j] + l;
      const T* Dl = De + wigner_offset(l) + row * (2 * l + 1);
      T* Dbl = Db + wigner_offset(l) + row * (2 * l + 1);
      const T sc = rotate_back_scale<T>(l);
      for (int f = 0; f < F; ++f) {
        const T a = F > 1 ? s.alpha_fc(i, f) : T(1);
        const T* u = s.U[f].data() + static_cast<size_t>(i) * ROW + j * Cf;
        T* g = G[f].data() + static_cast<size_t>(i) * ROW + j * Cf;
        for (int mp = -l; mp <= l; ++mp) {
          const T* mb = Mb + static_cast<size_t>(packed_index(l, mp)) * Cw + f * Cf;
          T dot = 0;
          for (int cf = 0; cf < Cf; ++cf) {
            g[cf] += sc * a * Dl[mp + l] * mb[cf];
            dot += u[cf] * mb[cf];
          }
          Dbl[mp + l] += sc * a * dot;
        }
      }
    }
  }

  // Focus competition backward: the scale, then softmax and the optional norm into S_src_bar.
  std::vector<Mat<T>> Ssrc_bar;
  if (F > 1) {
    Ssrc_bar.assign(F, Mat<T>::Zero(Ec, Cf));
    std::vector<T> pbar(F), nu(Cf), nubar(Cf);
    for (int i = 0; i < Ec; ++i) {
      T sum_pp = 0;
      for (int f = 0; f < F; ++f) {
        const T* u = s.U[f].data() + static_cast<size_t>(i) * ROW;
        T* g = G[f].data() + static_cast<size_t>(i) * ROW;
        // G already carries the scale (it is d/dU_pre); d/d alpha = <d/dU_out, U_pre> = <G, U_pre>/alpha.
        T abar = 0;
        for (int c = 0; c < ROW; ++c) abar += g[c] * u[c];
        pbar[f] = T(0.98) * abar / s.alpha_fc(i, f);
        sum_pp += s.fc_p(i, f) * pbar[f];
      }
      for (int f = 0; f < F; ++f) {
        const T lbar = s.fc_p(i, f) * (pbar[f] - sum_pp);
        for (int a = 0; a < Cf; ++a) nubar[a] = lbar * bw.focus_compete_w(a, f);
        const T* x = s.Ssrc[f].data() + static_cast<size_t>(i) * Cf;
        T* xb = Ssrc_bar[f].data() + static_cast<size_t>(i) * Cf;
        if (bw.focus_norm)
          scalar_rms_norm_backward(x, Cf, bw.focus_compete_norm.data() + f * Cf, s.fc_rho(i, f), nubar.data(), xb);
        else
          for (int a = 0; a < Cf; ++a) xb[a] += nubar[a];
      }
    }
  }

  // Mixing stack backward, top layer down. Gate sigmoids are recomputed from the saved
  // pre-activation; the layer inputs are never needed.
  const int nL = static_cast<int>(bw.layers.size());
  Mat<T> Zb(Ec, ROW), S, Sb;
  for (int k = nL - 1; k >= 0; --k) {
    const SO2LayerW<T>& lw = bw.layers[k];
    for (int f = 0; f < F; ++f) {
      Mat<T>& g = G[f];
      if (k + 1 == nL) {
        Zb = g;
      } else {
        const Mat<T>& Z = s.Z[k][f];
        S.noalias() = Z.leftCols(Cf) * lw.G[f];
        S = S.unaryExpr([](T x) { return sigmoid(x); });
        Sb.setZero(Ec, L * Cf);
        for (int j = 1; j < Dm; ++j) {
          const int gg = rr.l[j] - 1;
          Zb.middleCols(j * Cf, Cf) = g.middleCols(j * Cf, Cf).cwiseProduct(S.middleCols(gg * Cf, Cf));
          Sb.middleCols(gg * Cf, Cf) += g.middleCols(j * Cf, Cf).cwiseProduct(Z.middleCols(j * Cf, Cf));
        }
        Sb = Sb.cwiseProduct(S.cwiseProduct(S.unaryExpr([](T x) { return T(1) - x; })));
        Zb.leftCols(Cf) = g.leftCols(Cf).cwiseProduct(Z.leftCols(Cf).unaryExpr([](T x) { return silu_grad(x); }));
        Zb.leftCols(Cf).noalias() += Sb * lw.G[f].transpose();
      }
      g.leftCols(M0).noalias() += Zb.leftCols(M0) * lw.A[f].transpose();
      g.rightCols(ROW - M0).noalias() += Zb.rightCols(ROW - M0) * lw.W1[f].transpose();
    }
  }
  if (F > 1)
    for (int f = 0; f < F; ++f) G[f].leftCols(Cf) += Ssrc_bar[f];

  // Radial conditioning backward -> Xloc_bar, Rhat_bar.
  Xloc_bar.setZero(Ec, Dm * Cw);
  Mat<T> Rhat_bar = Rhat_bar_extra ? *Rhat_bar_extra : Mat<T>::Zero(Ec, (L + 1) * Cw);
  Mat<T> kern_bar;
  if (bw.degree_mixer) kern_bar.setZero(Ec, s.kern.cols());
  // Row o's adjoint read once as Cw contiguous values, the coupled input rows listed once; each
  // value's sum runs in the order of the element-wise loops this replaced (Xloc_bar and Rhat_bar
  // over o, the kernel adjoint over c): the same bits, 11 % less time per call (performance.md).
  std::vector<T> ub(Cw), acc(L + 1);
  std::vector<int> ins(L + 1), qs(L + 1);
  for (int i = 0; i < Ec; ++i) {
    const T* x = s.Xloc.data() + static_cast<size_t>(i) * Dm * Cw;
    T* xb = Xloc_bar.data() + static_cast<size_t>(i) * Dm * Cw;
    const T* rh = s.Rhat.data() + static_cast<size_t>(i) * (L + 1) * Cw;
    T* rhb = Rhat_bar.data() + static_cast<size_t>(i) * (L + 1) * Cw;
    for (int o = 0; o < Dm; ++o) {
      for (int f = 0; f < F; ++f) {
        const T* g = G[f].data() + static_cast<size_t>(i) * ROW + o * Cf;
        for (int cf = 0; cf < Cf; ++cf) ub[f * Cf + cf] = g[cf];
      }
      if (!bw.degree_mixer) {
        for (int c = 0; c < Cw; ++c) {
          xb[o * Cw + c] += ub[c] * rh[rr.l[o] * Cw + c];
          rhb[rr.l[o] * Cw + c] += ub[c] * x[o * Cw + c];
        }
        continue;
      }
      const T* kk = s.kern.data() + static_cast<size_t>(i) * s.kern.cols();
      T* kb = kern_bar.data() + static_cast<size_t>(i) * s.kern.cols();
      for (int c = 0; c < Cw; ++c) ub[c] = bw.channel_basis[c] * ub[c];  // bub
      // The input rows of o's group (at most L + 1): their kernel-adjoint sums over c are
      // independent chains, run side by side.
      int n_in = 0;
      for (int in = 0; in < Dm; ++in) {
        if (rr.m[in] != rr.m[o]) continue;
        ins[n_in] = in;
        qs[n_in] = rr.kernel_col(in, o);
        acc[n_in] = kb[qs[n_in]];
        ++n_in;
      }
      for (int c = 0; c < Cw; ++c)
        for (int k = 0; k < n_in; ++k) {
          xb[ins[k] * Cw + c] += kk[qs[k]] * ub[c];
          acc[k] += ub[c] * x[ins[k] * Cw + c];
        }
      for (int k = 0; k < n_in; ++k) kb[qs[k]] = acc[k];
    }
  }
  if (bw.degree_mixer) Rhat_bar.noalias() += kern_bar * bw.mixer_weight.transpose();
  auto Rb = view(R_bar + static_cast<size_t>(e0) * (L + 1) * C, static_cast<Eigen::Index>(Ec) * (L + 1), C);
  auto Rhb = view(Rhat_bar.data(), static_cast<Eigen::Index>(Ec) * (L + 1), Cw);
  if (bw.has_radial_hidden_proj)
    Rb.noalias() += Rhb * bw.radial_hidden_proj.transpose();
  else
    Rb += Rhb;

  // Rotation backward, the edge's own share: D_bar (H_bar[src] is so2_rotation_source_backward's).
  for (int i = 0; i < Ec; ++i) {
    const int e = e0 + i;
    const T* Hs = H + static_cast<size_t>(t.src[e]) * D * Cw;
    T* Db = &gb.D[static_cast<size_t>(e) * geo.wsize];
    const T* xb = Xloc_bar.data() + static_cast<size_t>(i) * Dm * Cw;
    for (int j = 0; j < Dm; ++j) {
      const int l = rr.l[j], row = rr.m[j] + l;
      T* Dbl = Db + wigner_offset(l) + row * (2 * l + 1);
      const T* xj = xb + j * Cw;
      for (int mp = -l; mp <= l; ++mp) {
        const size_t off = static_cast<size_t>(packed_index(l, mp)) * Cw;
        T dot = 0;
        for (int c = 0; c < Cw; ++c) dot += xj[c] * Hs[off + c];
        Dbl[mp + l] += dot;
      }
    }
  }
}

}  // namespace sezm
