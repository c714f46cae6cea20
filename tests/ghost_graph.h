#pragma once
// A graph with explicit ghost nodes, as the LAMMPS layer builds it: every periodic image that
// appears as an edge source becomes a ghost row whose owner is the image's atom. Used to test
// the engines' FeatureExchange path against the standalone (images-as-edges) graph. Two fake
// exchanges: OwnerExchange (every ghost copied from its owned atom, as one swap would) and
// ChainExchange (ghosts of one atom filled one from the next, as LAMMPS's multi-hop swaps do when
// the cutoff exceeds a subdomain); both name their sent rows (FeatureExchange::sent_rows) unless
// told not to.
#include <algorithm>
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

// Sorted unique rows of v (the sent rows of a list of sources).
inline std::vector<int> sorted_unique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

template <class T>
class OwnerExchange : public sezm::FeatureExchange<T> {
 public:
  // name_sent_rows false: sent_rows() is unknown (nullptr), as for an exchange that cannot say.
  explicit OwnerExchange(const GhostGraph& g, bool name_sent_rows = true)
      : sent(sorted_unique(g.owner)), g_(g), named_(name_sent_rows) {}
  const std::vector<int>* sent_rows() const override { return named_ ? &sent : nullptr; }
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
  std::vector<int> sent;  // the owners of the ghosts (a test may drop one)

 private:
  const GhostGraph& g_;
  bool named_;
};

// Ghost k reads row src[k]: the previous ghost of the same atom where there is one (a ghost row
// forwarded onward), else the atom. Forward fills the ghosts in order, reverse folds them back in
// the opposite order, as LAMMPS's swaps do; every ghost ends with its owner's row.
template <class T>
class ChainExchange : public sezm::FeatureExchange<T> {
 public:
  explicit ChainExchange(const GhostGraph& g, bool name_sent_rows = true) : g_(g), named_(name_sent_rows) {
    std::map<int, int> last;  // atom -> its latest ghost row
    for (size_t k = 0; k < g.owner.size(); ++k) {
      const auto it = last.find(g.owner[k]);
      src.push_back(it == last.end() ? g.owner[k] : it->second);
      last[g.owner[k]] = g.n_nodes + static_cast<int>(k);
    }
    sent = sorted_unique(src);
  }
  const std::vector<int>* sent_rows() const override { return named_ ? &sent : nullptr; }
  void forward(T* rows, int width) override {
    for (size_t k = 0; k < src.size(); ++k)
      for (int c = 0; c < width; ++c)
        rows[(g_.n_nodes + k) * width + c] = rows[static_cast<size_t>(src[k]) * width + c];
  }
  void reverse(T* rows, int width) override {
    for (size_t k = src.size(); k-- > 0;)
      for (int c = 0; c < width; ++c) {
        rows[static_cast<size_t>(src[k]) * width + c] += rows[(g_.n_nodes + k) * width + c];
        rows[(g_.n_nodes + k) * width + c] = 0;
      }
  }
  // Ghost rows that are sent onward (multi-hop).
  int forwarded_ghosts() const {
    return static_cast<int>(std::count_if(sent.begin(), sent.end(), [&](int r) { return r >= g_.n_nodes; }));
  }
  std::vector<int> src, sent;

 private:
  const GhostGraph& g_;
  bool named_;
};

// r x r x r copies of a periodic cell (rows of `cell` are the lattice vectors): a cell wider than
// twice the cutoff, whose inner atoms are nobody's image.
struct Supercell {
  int n = 0;
  std::vector<double> pos, cell;
  std::vector<int> types;
};
inline Supercell replicate(const double* pos, const int* types, int n, const double* cell, int r) {
  Supercell s;
  s.n = n * r * r * r;
  for (int a = 0; a < r; ++a)
    for (int b = 0; b < r; ++b)
      for (int c = 0; c < r; ++c)
        for (int i = 0; i < n; ++i) {
          for (int k = 0; k < 3; ++k)
            s.pos.push_back(pos[3 * i + k] + a * cell[k] + b * cell[3 + k] + c * cell[6 + k]);
          s.types.push_back(types[i]);
        }
  for (int k = 0; k < 9; ++k) s.cell.push_back(r * cell[k]);
  return s;
}

// Forces on owned atoms: ghost rows folded into their owners.
inline std::vector<double> fold_forces(const GhostGraph& gg, const std::vector<double>& f_total) {
  std::vector<double> f(f_total.begin(), f_total.begin() + 3 * gg.n_nodes);
  for (size_t k = 0; k < gg.owner.size(); ++k)
    for (int a = 0; a < 3; ++a) f[3 * gg.owner[k] + a] += f_total[3 * (gg.n_nodes + k) + a];
  return f;
}

}  // namespace sezm_test
