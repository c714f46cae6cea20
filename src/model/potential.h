#pragma once
// A loaded SeZM potential for standalone use (CLI, tests, benchmarks): checkpoint -> validated
// config -> weights -> CPU engine, plus the O(N) neighbour search for periodic or open systems.
#include <memory>
#include <string>
#include <vector>

#include "engine/sezm_model.h"
#include "model/config.h"

namespace sezm {

struct Evaluation {
  double energy = 0.0;
  std::vector<double> atom_energy;  // N
  std::vector<double> forces;       // 3N (empty unless requested)
  std::vector<double> virial;       // 9, W[3k+j] (empty unless requested)
  std::vector<double> atom_virial;  // 9N (empty unless requested)
  size_t n_edges = 0;
};

struct EdgeList;

// The engines' view of an edge list built by the standalone neighbour search.
GraphView graph_view(const EdgeList& el, const int* types);
// Energy, per-atom energy and (optionally) forces/virials from an engine result on graph g.
Evaluation make_evaluation(const GraphView& g, const EngineResult& r, bool forces, bool atom_virial);

class Potential {
 public:
  // Reads a deepmd-kit training checkpoint; throws sezm::Error naming the file and the cause.
  static Potential load(const std::string& path);

  const ModelConfig& config() const { return engine_->config(); }
  const std::string& path() const { return path_; }
  // Index of an element in the model's type_map; Error naming the element and the type_map.
  int type_index(const std::string& element) const;

  // cell: 9 values, rows = lattice vectors, or nullptr for an open system.
  Evaluation evaluate(const double* positions, const int* types, int n, const double* cell, bool forces,
                      bool atom_virial = false) const;

  const SezmEngine<double>& engine() const { return *engine_; }

 private:
  std::string path_;
  std::shared_ptr<const SezmEngine<double>> engine_;
};

}  // namespace sezm
