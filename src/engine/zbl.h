#pragma once
// ZBL screened nuclear repulsion added to the learned energy of a bridged model
// (model.bridging_method "zbl"; docs/model.md §9.3), in double:
//
//   V(r) = k Z_i Z_j / r * phi(r / a),  a = 0.88534 a_0 / (Z_i^0.23 + Z_j^0.23),
//   phi(x) = 0.18175 e^{-3.1998 x} + 0.50986 e^{-0.94229 x} + 0.28022 e^{-0.4029 x}
//            + 0.028171 e^{-0.20162 x},   k = 14.3996 eV Å, a_0 = 0.5291772109 Å,
//
// on the raw (unclamped) length of every directed edge of the graph, i.e. every pair within
// rcut in both directions, with no cutoff smoothing; each edge gives V/2 to its destination's
// energy, so a pair gives V/2 to each atom. dE/dv_e = (V'(r)/2) v_e / r joins the learned
// energy's edge gradient, and assemble_forces_virial turns both into forces and virials.
#include <vector>

#include "graph/graph.h"

namespace sezm {

// Adds the ZBL energy to atom_energy (n_nodes) and, when edge_grad is not null, its gradient
// to edge_grad (3E). z: nuclear charge per type. Returns the total ZBL energy.
double zbl_forward_backward(const Graph& g, const std::vector<double>& z, double* atom_energy, double* edge_grad);

// V(r) and dV/dr of one pair (exposed for the tests).
void zbl_pair(double r, double zi, double zj, double* v, double* dv);

}  // namespace sezm
