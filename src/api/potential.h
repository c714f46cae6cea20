#pragma once
// A loaded SeZM potential for standalone use (CLI, benchmark, tests): checkpoint -> validated
// config -> weights -> an engine from the factory (CPU or CUDA, EngineOptions), plus the O(N)
// neighbour search for periodic or open systems. The LAMMPS pair style builds its own graphs
// (kokkos/) and uses load_model_weights and make_engine directly.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "graph/graph.h"
#include "model/charge_spin.h"
#include "model/config.h"
#include "model/weights.h"

namespace sezm {

struct Evaluation {
  double energy = 0.0;
  std::vector<double> atom_energy;  // N
  std::vector<double> forces;       // 3N (empty unless requested)
  std::vector<double> virial;       // 9, W[3k+j] (empty unless requested)
  std::vector<double> atom_virial;  // 9N (empty unless requested)
  size_t n_edges = 0;
};

// Energy, per-atom energy and (optionally) forces/virials from an engine result on graph g.
Evaluation make_evaluation(const Graph& g, const EngineResult& r, bool forces, bool atom_virial);

// Reads a deepmd-kit training checkpoint into double weights (float32 checkpoints too: every
// engine is built from double weights); throws sezm::Error naming the file and the cause.
// `head` picks the branch of a multi-task checkpoint (model/multitask.h: name or alias, exact
// or ignoring case; empty: the branch aliased "Default"); the choice and its reason are in
// cfg.head / cfg.head_reason. A head for a single-task checkpoint is an error.
ModelW<double> load_model_weights(const std::string& path, const std::string& head = "");
// Index of an element in the model's type_map; Error naming the element, the type_map and `path`.
int model_type_index(const ModelConfig& cfg, const std::string& element, const std::string& path);

class Potential {
 public:
  // Reads a checkpoint and builds the engine `options` ask for; throws sezm::Error naming the
  // file (or the device) and the cause.
  // `head`: the branch of a multi-task checkpoint (load_model_weights). `charge_spin`: the frame's
  // (Q, S) for a model conditioned on them (apply_charge_spin: the model's default_chg_spin where
  // absent; an error for a model without the embedding).
  static Potential load(const std::string& path, const EngineOptions& options = {}, const std::string& head = "",
                        const std::optional<ChargeSpin>& charge_spin = std::nullopt);
  // The charge/spin condition the engine computes with (for logs).
  const ChargeSpinUse& charge_spin() const { return charge_spin_; }

  const ModelConfig& config() const { return engine_->config(); }
  const std::string& path() const { return path_; }
  int type_index(const std::string& element) const { return model_type_index(config(), element, path_); }

  // cell: 9 values, rows = lattice vectors, or nullptr for an open system. Run-time errors
  // (docs/errors.md): sezm::AtomError, by index into positions, for a non-finite coordinate, two
  // atoms closer than 1e-5 Å, or a non-finite result; sezm::Error naming the step and its size
  // when memory runs out.
  Evaluation evaluate(const double* positions, const int* types, int n, const double* cell, bool forces,
                      bool atom_virial = false) const;

  // The engine is not part of the potential's observable state (a device engine only reuses its
  // buffers between calls), so a const Potential still computes.
  Engine& engine() const { return *engine_; }

 private:
  std::string path_;
  std::shared_ptr<Engine> engine_;
  ChargeSpinUse charge_spin_;
};

}  // namespace sezm
