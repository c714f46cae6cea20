#pragma once
// Attention aggregation of one block, one head per focus (docs/model.md §5.7; backward §7.8):
// q/k from the RMS-normed pre-focus-mixed scalars of the destination/source node, a radial
// logit bias, an envelope-gated softmax over the in-edges of each destination with a learned
// null mass zeta, the weighted sum of rotated-back messages, and a sigmoid output gate.
// Node arrays: q, k (n, F, Cf); alpha per edge (E, F).
#include <limits>
#include <vector>

#include "engine/embeddings.h"
#include "engine/linalg.h"
#include "engine/norms.h"
#include "model/weights.h"

namespace sezm {

template <class T>
struct AttentionState {
  Mat<T> q, k;         // (n_total, F*Cf); q is only used for centres
  Mat<T> qk_rho;       // (n_total, F)
  Mat<T> gate_rho;     // (n_nodes, F)
  Mat<T> gamma;        // (n_nodes, F)
  Mat<T> alpha;        // (E, F)
};

// q, k for every node (sources may be ghosts) and the output gate for the centres.
template <class T>
void attention_node_forward(const ModelW<T>& w, const BlockW<T>& bw, const Graph& t, const T* H,
                            AttentionState<T>& a) {
  const int F = w.cfg.n_focus, Cf = w.cfg.focus_width(), Cw = w.cfg.wide(), D = w.cfg.n_coeff();
  a.q.resize(t.n_total, F * Cf);
  a.k.resize(t.n_total, F * Cf);
  a.qk_rho.resize(t.n_total, F);
  a.gate_rho.resize(t.n_nodes, F);
  a.gamma.resize(t.n_nodes, F);
  RowVec<T> hn(Cf);
  for (int n = 0; n < t.n_total; ++n) {
    const T* h0 = H + static_cast<size_t>(n) * D * Cw;
    for (int f = 0; f < F; ++f) {
      a.qk_rho(n, f) = scalar_rms_norm(h0 + f * Cf, Cf, bw.qk_norm.data() + f * Cf, static_cast<T>(w.cfg.eps), hn.data());
      a.q.row(n).segment(f * Cf, Cf).noalias() = hn * bw.q_proj[f];
      a.k.row(n).segment(f * Cf, Cf).noalias() = hn * bw.k_proj[f];
      if (n < t.n_nodes) {
        a.gate_rho(n, f) = scalar_rms_norm(h0 + f * Cf, Cf, bw.gate_norm.data() + f * Cf, static_cast<T>(w.cfg.eps), hn.data());
        T z = 0;
        for (int c = 0; c < Cf; ++c) z += hn[c] * bw.gate_w(c, f);
        a.gamma(n, f) = sigmoid(z);
      }
    }
  }
}

// Logits and the envelope-gated softmax (docs/model.md §5.7.1–§5.7.2), in the reference's shifted form.
// Rhat0 (E, Cw): the hidden-projected l = 0 radial features. gate (E, or nullptr): the bridging
// source gate (docs/model.md §9.2), a factor of the edge's mass env^2 exp(logit); an edge with a
// zero gate leaves the segment like one with a zero envelope.
template <class T>
void attention_softmax_forward(const ModelW<T>& w, const BlockW<T>& bw, const Graph& t, const T* env,
                               const T* gate, const Mat<T>& Rhat0, AttentionState<T>& a) {
  const int F = w.cfg.n_focus, Cf = w.cfg.focus_width();
  const T scale = T(1) / std::sqrt(T(Cf));
  a.alpha.resize(t.n_edges(), F);
  std::vector<T> eff;
  for (int n = 0; n < t.n_nodes; ++n) {
    const int e0 = t.dst_offsets[n], e1 = t.dst_offsets[n + 1];
    eff.resize(e1 - e0);
    for (int f = 0; f < F; ++f) {
      const T log_null = bw.log_zeta[f];
      T mx = log_null;
      for (int e = e0; e < e1; ++e) {
        if (env[e] > T(0) && (!gate || gate[e] > T(0))) {
          T l = scale * a.q.row(n).segment(f * Cf, Cf).dot(a.k.row(t.src[e]).segment(f * Cf, Cf));
          l += Rhat0.row(e).segment(f * Cf, Cf).dot(bw.logit_w.col(f).transpose());
          eff[e - e0] = l + T(2) * std::log(env[e]) + (gate ? std::log(gate[e]) : T(0));
          mx = std::max(mx, eff[e - e0]);
        } else {
          eff[e - e0] = -std::numeric_limits<T>::infinity();
        }
      }
      T den = std::exp(log_null - mx);
      for (int e = e0; e < e1; ++e) {
        eff[e - e0] = eff[e - e0] > -std::numeric_limits<T>::infinity() ? std::exp(eff[e - e0] - mx) : T(0);
        den += eff[e - e0];
      }
      for (int e = e0; e < e1; ++e) a.alpha(e, f) = eff[e - e0] / den;
    }
  }
}

// Whether edge e takes part in the logits' backward (an edge at the cutoff, env = 0, or with a
// closed bridging gate, has a logit of -inf and no gradient through it).
template <class T>
bool attention_logit_live(const T* env, const T* gate, int e) {
  return !(env[e] <= T(0) || (gate && gate[e] <= T(0)));
}

// Softmax + logit backward for the edges [e0, e1) of whole destination segments, given
// alpha_bar (rows relative to e0). Accumulates q_bar (centres), the l = 0 radial-feature adjoint
// Rhat0_bar (rows relative to e0), env_bar and (with a gate) gate_bar, and writes the logits'
// adjoint lbar (e1 - e0, F), whose source-side sum k_bar[src] += ... is attention_key_backward's
// (edge by edge: the caller picks the order).
template <class T>
void attention_softmax_backward(const ModelW<T>& w, const BlockW<T>& bw, const Graph& t, const T* env,
                                const T* gate, const AttentionState<T>& a, int e0, int e1, const Mat<T>& alpha_bar,
                                Mat<T>& q_bar, Mat<T>& lbar_out, Mat<T>& Rhat0_bar, T* env_bar, T* gate_bar) {
  const int F = w.cfg.n_focus, Cf = w.cfg.focus_width();
  const T scale = T(1) / std::sqrt(T(Cf));
  lbar_out.setZero(e1 - e0, F);
  int e = e0;
  while (e < e1) {
    const int n = t.dst[e];
    const int s0 = t.dst_offsets[n], s1 = t.dst_offsets[n + 1];
    for (int f = 0; f < F; ++f) {
      T dot = 0;
      for (int x = s0; x < s1; ++x) dot += a.alpha(x, f) * alpha_bar(x - e0, f);
      for (int x = s0; x < s1; ++x) {
        const T lbar = a.alpha(x, f) * (alpha_bar(x - e0, f) - dot);
        if (!attention_logit_live(env, gate, x)) continue;
        lbar_out(x - e0, f) = lbar;
        env_bar[x] += T(2) * lbar / env[x];
        if (gate) gate_bar[x] += lbar / gate[x];
        q_bar.row(n).segment(f * Cf, Cf) += scale * lbar * a.k.row(t.src[x]).segment(f * Cf, Cf);
        Rhat0_bar.row(x - e0).segment(f * Cf, Cf) += lbar * bw.logit_w.col(f).transpose();
      }
    }
    e = s1;
  }
}

// The key side of the logits' backward for edge e: k_bar[src] += lbar q[dst] / sqrt(Cf), lbar the
// edge's row of attention_softmax_backward's lbar_out.
template <class T>
void attention_key_backward(const ModelW<T>& w, const Graph& t, const T* env, const T* gate,
                            const AttentionState<T>& a, int e, const T* lbar, Mat<T>& k_bar) {
  const int F = w.cfg.n_focus, Cf = w.cfg.focus_width();
  const T scale = T(1) / std::sqrt(T(Cf));
  if (!attention_logit_live(env, gate, e)) return;
  for (int f = 0; f < F; ++f)
    k_bar.row(t.src[e]).segment(f * Cf, Cf) += scale * lbar[f] * a.q.row(t.dst[e]).segment(f * Cf, Cf);
}

// q_bar, k_bar (n_total) and gamma_bar (n_nodes) -> H_bar[n, (0,0), :].
template <class T>
void attention_node_backward(const ModelW<T>& w, const BlockW<T>& bw, const Graph& t, const T* H,
                             const AttentionState<T>& a, const Mat<T>& q_bar, const Mat<T>& k_bar,
                             const Mat<T>& gamma_bar, T* H_bar) {
  const int F = w.cfg.n_focus, Cf = w.cfg.focus_width(), Cw = w.cfg.wide(), D = w.cfg.n_coeff();
  RowVec<T> hb(Cf);
  for (int n = 0; n < t.n_total; ++n) {
    const T* h0 = H + static_cast<size_t>(n) * D * Cw;
    T* hb0 = H_bar + static_cast<size_t>(n) * D * Cw;
    for (int f = 0; f < F; ++f) {
      hb.noalias() = q_bar.row(n).segment(f * Cf, Cf) * bw.q_proj[f].transpose();
      hb.noalias() += k_bar.row(n).segment(f * Cf, Cf) * bw.k_proj[f].transpose();
      scalar_rms_norm_backward(h0 + f * Cf, Cf, bw.qk_norm.data() + f * Cf, a.qk_rho(n, f), hb.data(), hb0 + f * Cf);
      if (n < t.n_nodes) {
        const T g = a.gamma(n, f);
        const T tb = gamma_bar(n, f) * g * (T(1) - g);
        for (int c = 0; c < Cf; ++c) hb[c] = tb * bw.gate_w(c, f);
        scalar_rms_norm_backward(h0 + f * Cf, Cf, bw.gate_norm.data() + f * Cf, a.gate_rho(n, f), hb.data(), hb0 + f * Cf);
      }
    }
  }
}

}  // namespace sezm
