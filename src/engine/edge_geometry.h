#pragma once
// Per-edge geometry, computed once per force call (docs/model.md §2.1–§2.3, §3;
// backward §7.1, §7.5): safe length r_e = sqrt(|v|^2 + eps^2), edge envelope E_5(r_e), its r-derivative,
// radial basis (E_7 inside), edge quaternion and packed Wigner-D blocks. Everything downstream
// reads only these arrays, so the backward collects dE/dr, dE/d(rbf), dE/d(env) and dE/dD per
// edge and turns them into dE/dv here.
#include <vector>

#include "engine/engine.h"
#include "engine/envelope.h"
#include "engine/radial_basis.h"
#include "engine/wigner_d.h"
#include "model/weights.h"

namespace sezm {

template <class T>
struct EdgeGeometry {
  int E = 0, L = 0, nr = 0, wsize = 0;
  std::vector<T> vec;   // (E, 3)
  std::vector<T> r;     // (E)
  std::vector<T> env;   // (E)      E_5(r/rcut)
  std::vector<T> denv;  // (E)      dE_5/dr
  std::vector<T> rbf;   // (E, nr)
  std::vector<T> D;     // (E, wsize) packed Wigner blocks, rows = local m, cols = global m'
  // Bridging source gate eta[src_e] (engine/bridging.h), multiplying the GIE and env-seed
  // messages and the attention mass of edge e; empty for a model without bridging.
  std::vector<T> gate;  // (E)

  // GIE's C_lm(v_hat) is the zonal row (local m = 0) of block l.
  T zonal(int e, int l, int m) const {
    return D[static_cast<size_t>(e) * wsize + wigner_offset(l) + l * (2 * l + 1) + (m + l)];
  }
};

// The radial basis of g's lengths: the part of the geometry that depends on the trained
// frequencies (a committee follower of other frequencies computes only this, edge_geometry_from).
template <class T>
void edge_radial_basis_forward(const ModelW<T>& w, EdgeGeometry<T>& g) {
  const ModelConfig& cfg = w.cfg;
  g.nr = cfg.n_radial;
  g.rbf.resize(static_cast<size_t>(g.E) * g.nr);
  const T rcut = static_cast<T>(cfg.rcut);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < g.E; ++e)
    radial_basis(g.r[e], rcut, cfg.env_exp_rbf, w.freqs.data(), g.nr, &g.rbf[static_cast<size_t>(e) * g.nr]);
}

template <class T>
void edge_geometry_forward(const ModelW<T>& w, const double* vec, int E, EdgeGeometry<T>& g) {
  const ModelConfig& cfg = w.cfg;
  g.E = E;
  g.L = cfg.lmax;
  g.wsize = wigner_size(g.L);
  g.vec.assign(vec, vec + 3 * static_cast<size_t>(E));
  g.r.resize(E);
  g.env.resize(E);
  g.denv.resize(E);
  g.D.resize(static_cast<size_t>(E) * g.wsize);
  const T rcut = static_cast<T>(cfg.rcut), eps = static_cast<T>(cfg.eps);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < E; ++e) {
    const T* v = &g.vec[3 * static_cast<size_t>(e)];
    const T r = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + eps * eps);
    g.r[e] = r;
    g.env[e] = envelope(r, rcut, cfg.env_exp_edge);
    g.denv[e] = envelope_dr(r, rcut, cfg.env_exp_edge);
    T q[4];
    edge_quaternion(v, eps, q);
    wigner_d(q, g.L, &g.D[static_cast<size_t>(e) * g.wsize]);
  }
  edge_radial_basis_forward(w, g);
}

// A committee follower's geometry from its leader's where only the radial basis differs
// (GeometryShare::kExceptRadialBasis, engine/engine.h): vectors, lengths, envelope and Wigner-D
// blocks copied, the radial basis computed from the copied lengths; the same numbers as
// edge_geometry_forward on the same edges.
template <class T>
void edge_geometry_from(const ModelW<T>& w, const EdgeGeometry<T>& leader, EdgeGeometry<T>& g) {
  g.E = leader.E;
  g.L = leader.L;
  g.wsize = leader.wsize;
  g.vec = leader.vec;
  g.r = leader.r;
  g.env = leader.env;
  g.denv = leader.denv;
  g.D = leader.D;
  edge_radial_basis_forward(w, g);
}

// How much of model a's geometry model b can take (EdgeGeometryKey, engine/engine.h: the fields
// everything above reads; never with ZBL bridging), so that a committee computes it once
// (Engine::compute_like).
template <class T>
EdgeGeometryKey edge_geometry_key(const ModelW<T>& w) {
  std::vector<double> f(w.freqs.data(), w.freqs.data() + w.freqs.size());
  return edge_geometry_key(w.cfg, f.data(), static_cast<int>(f.size()));
}
template <class T>
GeometryShare edge_geometry_share(const ModelW<T>& a, const ModelW<T>& b) {
  return geometry_share(edge_geometry_key(a), edge_geometry_key(b));
}

// Adjoints collected from all consumers of the geometry of one edge set.
template <class T>
struct EdgeGeometryGrad {
  std::vector<T> r;    // dE/dr_e through explicit r dependence (not via env or rbf)
  std::vector<T> env;  // dE/d env_e
  std::vector<T> rbf;  // dE/d rbf_e   (E, nr)
  std::vector<T> D;    // dE/d D_e     (E, wsize)
  std::vector<T> vec;  // dE/dv_e direct contributions (env-seed direction terms)
  std::vector<T> gate;  // dE/d gate_e (bridging only)
  void reset(const EdgeGeometry<T>& g) {
    gate.assign(g.gate.size(), T(0));
    r.assign(g.E, T(0));
    env.assign(g.E, T(0));
    rbf.assign(static_cast<size_t>(g.E) * g.nr, T(0));
    D.assign(static_cast<size_t>(g.E) * g.wsize, T(0));
    vec.assign(3 * static_cast<size_t>(g.E), T(0));
  }
};

// dE/dv_e (E, 3) from the collected adjoints.
template <class T>
void edge_geometry_backward(const ModelW<T>& w, const EdgeGeometry<T>& g, const EdgeGeometryGrad<T>& gb,
                            double* v_bar) {
  const ModelConfig& cfg = w.cfg;
  const T rcut = static_cast<T>(cfg.rcut), eps = static_cast<T>(cfg.eps);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < g.E; ++e) {
    const T* v = &g.vec[3 * static_cast<size_t>(e)];
    T r_bar = gb.r[e] + gb.env[e] * g.denv[e];
    radial_basis_backward(g.r[e], rcut, cfg.env_exp_rbf, w.freqs.data(), g.nr,
                          &gb.rbf[static_cast<size_t>(e) * g.nr], &r_bar);
    T vb[3];
    for (int a = 0; a < 3; ++a) vb[a] = gb.vec[3 * static_cast<size_t>(e) + a] + r_bar * v[a] / g.r[e];
    wigner_d_backward(v, eps, &g.D[static_cast<size_t>(e) * g.wsize], g.L, &gb.D[static_cast<size_t>(e) * g.wsize], vb);
    for (int a = 0; a < 3; ++a) v_bar[3 * static_cast<size_t>(e) + a] = static_cast<double>(vb[a]);
  }
}

}  // namespace sezm
