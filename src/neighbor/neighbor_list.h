#pragma once
// Standalone neighbour search: every (centre, neighbour, image) triple within rcut, as a
// destination-grouped edge list. This is the edge contract the engines consume; the LAMMPS
// layer produces the same structure from its own neighbour lists (with ghosts).
#include <cstddef>
#include <vector>

namespace sezm {

// Directed edges e = (src -> dst): dst is the centre atom i, src the neighbour j,
// vec = r_src + S·cell - r_dst (S integer image shift, cell rows = lattice vectors).
// Edges are grouped by destination (CSR): dst is non-decreasing and the edges of
// centre i are [dst_offsets[i], dst_offsets[i+1]).
struct EdgeList {
  int n_nodes = 0;                 // centres (atoms whose features are computed)
  int n_total = 0;                 // nodes src may refer to (== n_nodes here; LAMMPS adds ghosts)
  std::vector<int> src, dst;       // size E
  std::vector<int> dst_offsets;    // size n_nodes + 1
  std::vector<double> vec;         // size 3E, row-major
  size_t size() const { return src.size(); }
};

// positions: n*3 (any coordinates, need not be inside the cell); cell: 9 values row-major
// (rows = lattice vectors) or nullptr for an open system. All pairs (i, j, S) with
// 1e-10 < |v|^2 <= rcut^2, including periodic self-images (i == j, S != 0) and several
// images of the same pair when the cell is smaller than 2*rcut; excluding i==j, S==0.
//
// Within a centre, edges are ordered by src, then by the image shift S (lexicographic), so
// the result does not depend on the binning. vec is computed from the coordinates as given
// (never from wrapped copies), with exactly the expression r_src + S·cell - r_dst.
// O(N + E) time and memory (cell list). Throws sezm::Error for a singular cell, non-finite
// coordinates, rcut <= 0, or a cell so small against rcut that the image count explodes.
EdgeList build_edge_list(const double* positions, int n, const double* cell, double rcut);

}  // namespace sezm
