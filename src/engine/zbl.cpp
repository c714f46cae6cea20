#include "engine/zbl.h"

#include <algorithm>
#include <cmath>

namespace sezm {

void zbl_pair(double r, double zi, double zj, double* v, double* dv) {
  static constexpr double kA[4] = {0.18175, 0.50986, 0.28022, 0.028171};
  static constexpr double kB[4] = {3.1998, 0.94229, 0.4029, 0.20162};
  static constexpr double kKe = 14.3996;         // eV Å
  static constexpr double kBohr = 0.5291772109;  // Å
  const double a = 0.88534 * kBohr / (std::pow(zi, 0.23) + std::pow(zj, 0.23));
  const double x = r / a;
  double phi = 0.0, dphi = 0.0;
  for (int k = 0; k < 4; ++k) {
    const double t = kA[k] * std::exp(-kB[k] * x);
    phi += t;
    dphi -= kB[k] * t;
  }
  const double pre = kKe * zi * zj / r;
  *v = pre * phi;
  *dv = pre * (dphi / a - phi / r);
}

double zbl_forward_backward(const Graph& g, const std::vector<double>& z, double* atom_energy, double* edge_grad) {
  double total = 0.0;
  for (int e = 0; e < g.n_edges(); ++e) {
    const double* v = &g.vec[3 * static_cast<size_t>(e)];
    // deepmd-kit floors the length at 1e-10; the graph never holds |v|^2 <= 1e-10.
    const double r = std::max(std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), 1e-10);
    double V, dV;
    zbl_pair(r, z[g.types[g.src[e]]], z[g.types[g.dst[e]]], &V, &dV);
    atom_energy[g.dst[e]] += 0.5 * V;
    total += 0.5 * V;
    if (edge_grad)
      for (int a = 0; a < 3; ++a) edge_grad[3 * static_cast<size_t>(e) + a] += 0.5 * dV * v[a] / r;
  }
  return total;
}

}  // namespace sezm
