#pragma once
// Zone bridging of the learned energy (model.bridging_method "zbl"; docs/model.md §9), the two
// pieces that act on the descriptor's edge geometry; the ZBL pair energy itself is engine/zbl.h.
//
//  - Inner clamp: with r = sqrt(|v|^2 + eps^2), rc = c(r) (c = r_inner below r_inner, the septic
//    Hermite blend c = r_i + (r_o - r_i) h(t), h = 20t^4 - 45t^5 + 36t^6 - 10t^7 between, the
//    identity from r_outer on) and the descriptor sees the edge vector vc = v rc / r: same
//    direction, clamped length. Everything downstream (envelope, radial basis, Wigner-D, env
//    seed, degree) is computed from vc as from any edge vector.
//  - Source freeze propagation gate: w_e = s(rc_e) (s = 35t^4 - 84t^5 + 70t^6 - 20t^7 on the
//    clamped length, 0 at or below r_inner, 1 from r_outer), eta_j = prod of w over the edges
//    of node j, gate_e = eta[src_e]. The GIE and env-seed messages of edge e and its attention
//    mass are multiplied by gate_e, so a node with a neighbour inside r_inner sends nothing.
//    The graph holds both directions of every pair with equal lengths, so the product over the
//    edges leaving j (deepmd-kit's) equals the product over j's own destination segment, which
//    a rank holds complete for its owned atoms; ghosts get eta from their owners through the
//    feature exchange (width 1), and the adjoint of a ghost's eta goes back the same way.
//
// Outside r_outer both are exact identities (vc = v bit for bit, w = 1), so a configuration
// without close pairs computes exactly what an unbridged model does.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/engine.h"
#include "graph/graph.h"
#include "model/config.h"

namespace sezm {

// c(r) and c'(r) of the inner clamp.
inline void inner_clamp(double r, double ri, double ro, double* c, double* dc) {
  if (r >= ro) {
    *c = r;
    *dc = 1.0;
    return;
  }
  const double t = std::min(std::max((r - ri) / (ro - ri), 0.0), 1.0);
  const double t2 = t * t, t3 = t2 * t, t4 = t2 * t2;
  *c = ri + (ro - ri) * (t4 * (20.0 + t * (-45.0 + t * (36.0 - 10.0 * t))));
  *dc = (t > 0.0 && t < 1.0) ? t3 * (80.0 + t * (-225.0 + t * (216.0 - 70.0 * t))) : 0.0;
}

// s(x) and s'(x) of the bridging switch.
inline void bridging_switch(double x, double ri, double ro, double* s, double* ds) {
  const double t = std::min(std::max((x - ri) / (ro - ri), 0.0), 1.0);
  const double t2 = t * t, t3 = t2 * t, t4 = t2 * t2;
  *s = t4 * (35.0 + t * (-84.0 + t * (70.0 - 20.0 * t)));
  *ds = (t > 0.0 && t < 1.0) ? t3 * (140.0 + t * (-420.0 + t * (420.0 - 140.0 * t))) / (ro - ri) : 0.0;
}

struct BridgingState {
  double r_outer = 0.0;
  std::vector<double> vc;   // (E, 3) clamped edge vectors (the descriptor's geometry)
  std::vector<double> r;    // (E) raw safe length
  std::vector<double> rc;   // (E) clamped length c(r)
  std::vector<double> dc;   // (E) c'(r)
  std::vector<double> w;    // (E) switch s(rc)
  std::vector<double> dw;   // (E) s'(rc)
  std::vector<double> eta;  // (n_total) per-node product of w
};

// Inner clamp of every edge vector of g (fills vc, r, rc, dc, w, dw).
inline void bridging_clamp_forward(const ModelConfig& cfg, const Graph& g, BridgingState& b) {
  const int E = g.n_edges();
  const double ri = cfg.bridging_r_inner, ro = cfg.bridging_r_outer, eps = cfg.eps;
  b.r_outer = ro;
  b.vc = g.vec;
  b.r.resize(E);
  b.rc.resize(E);
  b.dc.resize(E);
  b.w.resize(E);
  b.dw.resize(E);
  for (int e = 0; e < E; ++e) {
    const double* v = &g.vec[3 * static_cast<size_t>(e)];
    const double r = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + eps * eps);
    b.r[e] = r;
    inner_clamp(r, ri, ro, &b.rc[e], &b.dc[e]);
    bridging_switch(b.rc[e], ri, ro, &b.w[e], &b.dw[e]);
    if (r < ro) {
      const double scale = b.rc[e] / r;
      for (int a = 0; a < 3; ++a) b.vc[3 * static_cast<size_t>(e) + a] = v[a] * scale;
    }
  }
}

// eta per node and gate_e = eta[src_e] (E values of T).
template <class T>
void bridging_gate_forward(const Graph& g, BridgingState& b, FeatureExchange<T>* ex, std::vector<T>& gate) {
  std::vector<T> eta(g.n_total, T(1));
  for (int n = 0; n < g.n_nodes; ++n) {
    double p = 1.0;
    for (int e = g.dst_offsets[n]; e < g.dst_offsets[n + 1]; ++e) p *= b.w[e];
    eta[n] = static_cast<T>(p);
  }
  if (ex && g.n_total > g.n_nodes) ex->forward(eta.data(), 1);
  b.eta.assign(eta.begin(), eta.end());
  gate.resize(g.n_edges());
  for (int e = 0; e < g.n_edges(); ++e) gate[e] = eta[g.src[e]];
}

// From dE/dvc (edge_grad, in place) and dE/dgate: dE/dv. The gate's adjoint goes to eta[src]
// (ghost rows back to their owners), then to each w of the owner's segment by the leave-one-out
// product, then through s'(rc) c'(r) to the raw length.
template <class T>
void bridging_backward(const Graph& g, const BridgingState& b, const std::vector<T>& gate_bar,
                       FeatureExchange<T>* ex, double* edge_grad) {
  const int E = g.n_edges();
  std::vector<T> eta_bar(g.n_total, T(0));
  for (int e = 0; e < E; ++e) eta_bar[g.src[e]] += gate_bar[e];
  if (ex && g.n_total > g.n_nodes) ex->reverse(eta_bar.data(), 1);
  std::vector<double> r_bar(E, 0.0), prefix;
  for (int n = 0; n < g.n_nodes; ++n) {
    const int e0 = g.dst_offsets[n], e1 = g.dst_offsets[n + 1];
    prefix.assign(e1 - e0 + 1, 1.0);
    for (int e = e0; e < e1; ++e) prefix[e - e0 + 1] = prefix[e - e0] * b.w[e];
    double suffix = 1.0;
    for (int e = e1 - 1; e >= e0; --e) {
      const double w_bar = static_cast<double>(eta_bar[n]) * prefix[e - e0] * suffix;
      r_bar[e] = w_bar * b.dw[e] * b.dc[e];
      suffix *= b.w[e];
    }
  }
  for (int e = 0; e < E; ++e) {
    const double r = b.r[e];
    double* gv = edge_grad + 3 * static_cast<size_t>(e);
    const double* v = &g.vec[3 * static_cast<size_t>(e)];
    if (r >= b.r_outer) continue;  // identity zone: vc = v, w = 1
    // vc = v s(r), s = c(r)/r: dvc/dv = s I + v (ds/dr) v^T / r.
    const double s = b.rc[e] / r, ds = (b.dc[e] * r - b.rc[e]) / (r * r);
    double vg = 0.0;
    for (int a = 0; a < 3; ++a) vg += v[a] * gv[a];
    const double radial = (vg * ds + r_bar[e]) / r;
    for (int a = 0; a < 3; ++a) gv[a] = s * gv[a] + radial * v[a];
  }
}

}  // namespace sezm
