#pragma once
// A graph with explicit ghost nodes, as the LAMMPS layer builds it: every periodic image that
// appears as an edge source becomes a ghost row whose owner is the image's atom. Used to test
// the engines' FeatureExchange path against the standalone (images-as-edges) graph.
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "engine/engine.h"
#include "graph/graph.h"

namespace sezm_test {

struct GhostGraph : sezm::Graph {
  std::vector<int> owner;  // owner[g - n_nodes] for ghosts
  const sezm::Graph& view() const { return *this; }
};

// el: a standalone graph (no ghosts) of the atoms at pos, with their types.
inline GhostGraph make_ghost_graph(const sezm::Graph& el, const double* pos, const int* types) {
  GhostGraph gg;
  gg.n_nodes = el.n_nodes;
  gg.src = el.src;
  gg.dst = el.dst;
  gg.dst_offsets = el.dst_offsets;
  gg.vec = el.vec;
  gg.types.assign(types, types + el.n_nodes);
  std::map<std::tuple<int, long, long, long>, int> ghosts;
  for (size_t e = 0; e < el.src.size(); ++e) {
    const int i = el.dst[e], j = el.src[e];
    double sh[3];
    bool image = false;
    for (int a = 0; a < 3; ++a) {
      sh[a] = el.vec[3 * e + a] - (pos[3 * j + a] - pos[3 * i + a]);
      image |= std::fabs(sh[a]) > 1e-8;
    }
    if (!image) continue;
    const auto key = std::make_tuple(j, std::lround(sh[0] * 1e6), std::lround(sh[1] * 1e6), std::lround(sh[2] * 1e6));
    auto it = ghosts.find(key);
    if (it == ghosts.end()) {
      it = ghosts.emplace(key, el.n_nodes + static_cast<int>(gg.owner.size())).first;
      gg.owner.push_back(j);
      gg.types.push_back(types[j]);
    }
    gg.src[e] = it->second;
  }
  gg.n_total = el.n_nodes + static_cast<int>(gg.owner.size());
  return gg;
}

template <class T>
class OwnerExchange : public sezm::FeatureExchange<T> {
 public:
  explicit OwnerExchange(const GhostGraph& g) : g_(g) {}
  void forward(T* rows, int width) override {
    ++forwards;
    for (size_t k = 0; k < g_.owner.size(); ++k)
      for (int c = 0; c < width; ++c)
        rows[(g_.n_nodes + k) * width + c] = rows[static_cast<size_t>(g_.owner[k]) * width + c];
  }
  void reverse(T* rows, int width) override {
    ++reverses;
    for (size_t k = 0; k < g_.owner.size(); ++k)
      for (int c = 0; c < width; ++c) {
        rows[static_cast<size_t>(g_.owner[k]) * width + c] += rows[(g_.n_nodes + k) * width + c];
        rows[(g_.n_nodes + k) * width + c] = 0;
      }
  }
  int forwards = 0, reverses = 0;

 private:
  const GhostGraph& g_;
};

// Forces on owned atoms: ghost rows folded into their owners.
inline std::vector<double> fold_forces(const GhostGraph& gg, const std::vector<double>& f_total) {
  std::vector<double> f(f_total.begin(), f_total.begin() + 3 * gg.n_nodes);
  for (size_t k = 0; k < gg.owner.size(); ++k)
    for (int a = 0; a < 3; ++a) f[3 * gg.owner[k] + a] += f_total[3 * (gg.n_nodes + k) + a];
  return f;
}

}  // namespace sezm_test
