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
//  - types[k] (k < n_total) is the model type index of node k (an index into the type_map);
//  - optional, the compact geometry (below): where pos is not empty, vec is also given, bit for
//    bit, by positions and image shifts, so that an engine on another device moves ~5 bytes per
//    edge instead of vec's 24 and forms vec there (cuda/graph_upload.cu).
#include <vector>

namespace sezm {

struct Graph {
  int n_nodes = 0;               // centres
  int n_total = 0;               // centres + ghosts; src may refer to any of them
  std::vector<int> src, dst;     // E
  std::vector<int> dst_offsets;  // n_nodes + 1
  std::vector<double> vec;       // 3E, row-major
  std::vector<int> types;        // n_total

  // The compact geometry, filled by the builders (neighbor/neighbor_list.cpp, the LAMMPS edge
  // layer) or left empty. pos: 3 per row of the builder's own atom indexing (dst[e] is a row;
  // ghosts and images may be further rows); at: per edge the row of its source (empty: src[e]);
  // image and shifts: per edge an index into shifts, 3 doubles per distinct image shift (both
  // empty: no shift). The builder guarantees, in IEEE double with one rounding per operation,
  //   vec[3e+k] == (pos[3 a + k] + shifts[3 image[e] + k]) - pos[3 dst[e] + k]   (with shifts)
  //   vec[3e+k] ==  pos[3 a + k] - pos[3 dst[e] + k]                           (without)
  // for a = at.empty() ? src[e] : at[e]. Code that edits vec after the build must clear pos
  // (compact_geometry below catches most that do not).
  std::vector<double> pos;
  std::vector<int> at;
  std::vector<unsigned char> image;
  std::vector<double> shifts;

  int n_edges() const { return static_cast<int>(src.size()); }
};

// Whether g carries the compact geometry. Throws sezm::Error naming the cause where its arrays'
// sizes contradict the graph, or where a checked edge's row indices are out of range or its vec
// is not the compact form's bit for bit (a graph edited after its build without clearing pos).
// Checks `sample` edges spread evenly over the graph (the engines: a cheap guard per call), or
// every edge with sample <= 0 (the tests).
bool compact_geometry(const Graph& g, int sample = 64);

}  // namespace sezm
