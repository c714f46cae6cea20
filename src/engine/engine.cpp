#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/error.h"

#include "engine/threads.h"

namespace sezm {

const char* device_name(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }
const char* cuda_mode_name(CudaMode m) { return m == CudaMode::kFast ? "fast" : "lean"; }
const char* precision_name(Precision p) { return p == Precision::kTf32 ? "tf32" : "default"; }
const char* edge_state_name(EdgeState e) {
  return e == EdgeState::kKeep ? "keep" : e == EdgeState::kChunk ? "chunk" : "auto";
}
bool parse_edge_state(const std::string& s, EdgeState* e) {
  if (s == "auto") *e = EdgeState::kAuto;
  else if (s == "keep") *e = EdgeState::kKeep;
  else if (s == "chunk") *e = EdgeState::kChunk;
  else return false;
  return true;
}
bool parse_precision(const std::string& s, Precision* p) {
  if (s == "default" || s == "fp32") *p = Precision::kDeviceDefault;
  else if (s == "tf32") *p = Precision::kTf32;
  else return false;
  return true;
}

EdgeGeometryKey edge_geometry_key(const ModelConfig& cfg, const double* freqs, int n_freqs) {
  EdgeGeometryKey k;
  k.rcut = cfg.rcut;
  k.eps = cfg.eps;
  k.lmax = cfg.lmax;
  k.n_radial = cfg.n_radial;
  k.env_exp_edge = cfg.env_exp_edge;
  k.env_exp_rbf = cfg.env_exp_rbf;
  k.freqs.assign(freqs, freqs + n_freqs);
  k.zbl = cfg.zbl;
  return k;
}

GeometryShare geometry_share(const EdgeGeometryKey& a, const EdgeGeometryKey& b) {
  if (a.zbl || b.zbl || a.rcut != b.rcut || a.eps != b.eps || a.lmax != b.lmax || a.env_exp_edge != b.env_exp_edge)
    return GeometryShare::kNone;
  if (a.n_radial != b.n_radial || a.env_exp_rbf != b.env_exp_rbf || a.freqs != b.freqs)
    return GeometryShare::kExceptRadialBasis;
  return GeometryShare::kAll;
}

void require_finite_result(const Graph& g, const EngineResult& r) {
  char v[64];
  for (size_t i = 0; i < r.atom_energy.size(); ++i)
    if (!std::isfinite(r.atom_energy[i])) {
      std::snprintf(v, sizeof v, "%g", r.atom_energy[i]);
      throw AtomError("engine result", std::string("has a non-finite energy (") + v +
                                           " eV): non-finite weights or positions, or a numerical overflow",
                      static_cast<int>(i));
    }
  for (size_t k = 0; k < r.edge_grad.size(); ++k)
    if (!std::isfinite(r.edge_grad[k])) {
      const size_t e = k / 3;
      std::snprintf(v, sizeof v, "%g", r.edge_grad[k]);
      throw AtomError("engine result", std::string("have a non-finite force along their edge (dE/dv = ") + v +
                                           "): non-finite weights or positions, or a numerical overflow",
                      g.dst[e], g.src[e]);
    }
  for (size_t k = 0; k < r.forces.size(); ++k)
    if (!std::isfinite(r.forces[k])) {
      std::snprintf(v, sizeof v, "%g", r.forces[k]);
      throw AtomError("engine result", std::string("has a non-finite force (") + v +
                                           " eV/A): non-finite weights or positions, or a numerical overflow",
                      static_cast<int>(k / 3));
    }
}

namespace {
void add_edge_virial(const double* ge, const double* v, double* w) {
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 3; ++j) w[3 * k + j] -= ge[k] * v[j];
}
}  // namespace

void assemble_forces_virial(const Graph& g, const double* edge_grad, double* forces, double* virial,
                            double* atom_virial) {
  const int E = g.n_edges();
  if (atom_virial) {  // per-atom virials (an optional LAMMPS compute): one plain pass
    for (int e = 0; e < E; ++e) {
      const double* ge = edge_grad + 3 * static_cast<size_t>(e);
      double w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      add_edge_virial(ge, g.vec.data() + 3 * static_cast<size_t>(e), w);
      for (int a = 0; a < 3; ++a) {
        forces[3 * static_cast<size_t>(g.dst[e]) + a] += ge[a];
        forces[3 * static_cast<size_t>(g.src[e]) + a] -= ge[a];
      }
      for (int k = 0; k < 9; ++k) {
        if (virial) virial[k] += w[k];
        atom_virial[9 * static_cast<size_t>(g.dst[e]) + k] += 0.5 * w[k];
        atom_virial[9 * static_cast<size_t>(g.src[e]) + k] += 0.5 * w[k];
      }
    }
    return;
  }
  // Every sum in edge order, as one thread adds it, so the result does not depend on the thread
  // count: each thread sums the edges of a range of destinations (CSR: a contiguous edge range of
  // about E / threads) into their forces, and the source-side terms of a range of sources (reading
  // every edge's source) into one buffer, added after; the virial is one pass. Small graphs use
  // one thread.
  const int nthreads = E < 65536 ? 1 : std::min(engine_threads(), 8);
  std::vector<double> part(3 * static_cast<size_t>(g.n_total), 0.0);
#pragma omp parallel num_threads(nthreads)
  {
    const int t = engine_thread_id(), team = engine_team_size();
    const int* off = g.dst_offsets.data();
    const auto first_node = [&](int r) {  // first destination whose edges start at or after E r / T
      const long long e = static_cast<long long>(E) * r / team;
      return static_cast<int>(std::lower_bound(off, off + g.n_nodes, e) - off);
    };
    const int i0 = first_node(t), i1 = t + 1 == team ? g.n_nodes : first_node(t + 1);
    for (int i = i0; i < i1; ++i) {
      double f[3] = {0, 0, 0};
      for (int e = off[i]; e < off[i + 1]; ++e)
        for (int a = 0; a < 3; ++a) f[a] += edge_grad[3 * static_cast<size_t>(e) + a];
      for (int a = 0; a < 3; ++a) forces[3 * static_cast<size_t>(i) + a] += f[a];
    }
    const int s0 = static_cast<int>(static_cast<long long>(g.n_total) * t / team);
    const int s1 = static_cast<int>(static_cast<long long>(g.n_total) * (t + 1) / team);
    for (int e = 0; e < E; ++e) {
      const int j = g.src[e];
      if (j < s0 || j >= s1) continue;
      for (int a = 0; a < 3; ++a) part[3 * static_cast<size_t>(j) + a] -= edge_grad[3 * static_cast<size_t>(e) + a];
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (size_t k = 0; k < part.size(); ++k) forces[k] += part[k];
  }
  if (virial) {
    double w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < E; ++e)
      add_edge_virial(edge_grad + 3 * static_cast<size_t>(e), g.vec.data() + 3 * static_cast<size_t>(e), w);
    for (int k = 0; k < 9; ++k) virial[k] += w[k];
  }
}

void add_forces_virial(const Graph& g, const EngineResult& r, double* forces, double* virial, double* atom_virial) {
  if (r.forces.empty()) {
    assemble_forces_virial(g, r.edge_grad.data(), forces, virial, atom_virial);
    return;
  }
  if (atom_virial && r.atom_virial.empty())
    throw Error("add_forces_virial: a per-atom virial was asked of a result without one (compute_forces(g, true, ...))");
  for (size_t k = 0; k < r.forces.size(); ++k) forces[k] += r.forces[k];
  if (virial)
    for (size_t k = 0; k < r.virial.size(); ++k) virial[k] += r.virial[k];
  if (atom_virial)
    for (size_t k = 0; k < r.atom_virial.size(); ++k) atom_virial[k] += r.atom_virial[k];
}

}  // namespace sezm
