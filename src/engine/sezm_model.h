#pragma once
// The SeZM CPU engine: energy and per-edge energy gradient for one graph.
//
// Graph contract (docs/ARCHITECTURE.md): n_nodes centres, n_total >= n_nodes nodes (the rest are
// ghosts whose features the caller refreshes through FeatureExchange), directed edges src -> dst
// grouped by dst in CSR order, v_e = r_src - r_dst (+ image shift). The engine knows nothing of
// MPI or LAMMPS: between blocks it calls the exchange hooks, which the LAMMPS glue implements
// with pair forward/reverse communication. Standalone use (periodic images as edges onto owned
// atoms) has n_total == n_nodes and no exchange.
#include <vector>

#include "engine/edge_geometry.h"
#include "engine/embeddings.h"
#include "engine/ffn.h"
#include "engine/fitting.h"
#include "engine/interaction_block.h"
#include "engine/radial_mlp.h"
#include "engine/readout.h"
#include "model/weights.h"

namespace sezm {

struct GraphView {
  int n_nodes = 0, n_total = 0, E = 0;
  const int* src = nullptr;
  const int* dst = nullptr;
  const int* dst_offsets = nullptr;  // n_nodes + 1
  const double* vec = nullptr;       // 3E
  const int* types = nullptr;        // n_total, indices into the model's type_map
};

// Ghost-row refresh between blocks; rows are `width` scalars wide, ghosts are rows
// [n_nodes, n_total).
template <class T>
class FeatureExchange {
 public:
  virtual ~FeatureExchange() = default;
  // Copy each ghost row from its owner's row.
  virtual void forward(T* rows, int width) = 0;
  // Add each ghost row into its owner's row, then zero the ghost rows.
  virtual void reverse(T* rows, int width) = 0;
};

struct EngineResult {
  double energy = 0.0;
  std::vector<double> atom_energy;  // n_nodes
  std::vector<double> edge_grad;    // 3E, dE/dv_e; empty unless gradients were requested
  // Wall time of the two passes, feature exchanges included (callers time those themselves).
  double seconds_forward = 0.0, seconds_backward = 0.0;
};

template <class T>
class SezmEngine {
 public:
  explicit SezmEngine(ModelW<T> w) : w_(std::move(w)), grid_(w_.cfg.lmax) {}
  const ModelConfig& config() const { return w_.cfg; }
  const ModelW<T>& weights() const { return w_; }

  EngineResult compute(const GraphView& g, bool gradients, FeatureExchange<T>* ex = nullptr) const;

 private:
  ModelW<T> w_;
  FFNGrid<T> grid_;
};

// Forces on the n_total nodes (F_k = sum_{dst=k} g_e - sum_{src=k} g_e), the global virial
// W[3k+j] = -sum_e g_{e,k} v_{e,j} (the LAMMPS sign) and optionally the per-atom virial
// (n_total x 9, half of each edge's term on each endpoint). Outputs are accumulated.
void assemble_forces_virial(const GraphView& g, const double* edge_grad, double* forces, double* virial,
                            double* atom_virial);

extern template class SezmEngine<double>;
extern template class SezmEngine<float>;

}  // namespace sezm
