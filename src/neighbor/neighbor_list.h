#pragma once
// Standalone neighbour search: every (centre, neighbour, image) triple within rcut, as the
// engines' Graph (src/graph/graph.h). The LAMMPS layer (kokkos/) builds the same Graph from its
// own neighbour lists, with ghosts.
#include "graph/graph.h"

namespace sezm {

// positions: n*3 (any coordinates, need not be inside the cell); types: n model type indices
// (copied into the graph); cell: 9 values row-major (rows = lattice vectors) or nullptr for an
// open system. The result has no ghosts (n_total == n_nodes == n): dst is the centre atom i, src
// the neighbour j, vec = r_src + S·cell - r_dst (S integer image shift). All pairs (i, j, S)
// with 1e-10 < |v|^2 <= rcut^2, including periodic self-images (i == j, S != 0) and several
// images of the same pair when the cell is smaller than 2*rcut; excluding i==j, S==0.
//
// Within a centre, edges are ordered by src, then by the image shift S (lexicographic), so
// the result does not depend on the binning. vec is computed from the coordinates as given
// (never from wrapped copies), with exactly the expression r_src + S·cell - r_dst; the graph's
// compact geometry (graph/graph.h) holds the positions and each distinct S·cell (none where a
// tiny cell gives more than 256 distinct shifts).
// O(N + E) time and memory (cell list). Throws sezm::Error for a singular cell, rcut <= 0, a
// cell so small against rcut that the image count explodes, or memory exhaustion (naming the
// edges built); sezm::AtomError for a non-finite coordinate and for two distinct atoms closer
// than 1e-5 Å, also through a periodic image (docs/errors.md).
Graph build_graph(const double* positions, const int* types, int n, const double* cell, double rcut);

}  // namespace sezm
