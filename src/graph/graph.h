#pragma once
// The one graph every engine consumes and every edge builder produces (the standalone neighbour
// search, src/neighbor/; the LAMMPS edge layer, kokkos/). It owns its arrays, so a builder that
// runs every step (the LAMMPS layer) keeps one Graph and refills it: std::vector capacity only
// grows, and steady-state steps allocate nothing.
//
// Contract (docs/ARCHITECTURE.md):
//  - nodes [0, n_nodes) are centres, whose features and energies are computed; nodes
//    [n_nodes, n_total) are ghosts, whose features the caller refreshes through the engine's
//    FeatureExchange. A graph without ghosts (n_total == n_nodes) needs no exchange;
//  - directed edges e = (src -> dst): dst[e] < n_nodes is the centre, src[e] < n_total the
//    neighbour, vec[3e..3e+2] = r_src (+ image shift) - r_dst;
//  - edges are grouped by destination (CSR): dst is non-decreasing and the edges of centre i are
//    [dst_offsets[i], dst_offsets[i+1]);
//  - types[k] (k < n_total) is the model type index of node k (an index into the type_map).
#include <vector>

namespace sezm {

struct Graph {
  int n_nodes = 0;               // centres
  int n_total = 0;               // centres + ghosts; src may refer to any of them
  std::vector<int> src, dst;     // E
  std::vector<int> dst_offsets;  // n_nodes + 1
  std::vector<double> vec;       // 3E, row-major
  std::vector<int> types;        // n_total

  int n_edges() const { return static_cast<int>(src.size()); }
};

}  // namespace sezm
