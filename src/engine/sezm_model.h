#pragma once
// The SeZM CPU engine: energy and per-edge energy gradient for one graph (the contract of
// src/graph/graph.h). Templated on the scalar type (float serves the CUDA tests' references);
// CpuEngine is the sezm::Engine the factory hands out, in double.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

#include "engine/edge_geometry.h"
#include "engine/embeddings.h"
#include "engine/ffn.h"
#include "engine/fitting.h"
#include "engine/interaction_block.h"
#include "engine/out_of_memory.h"
#include "engine/radial_mlp.h"
#include "engine/readout.h"
#include "model/weights.h"

namespace sezm {

// A committee leader's geometry for one call (Engine::compute_like) and where this call's goes.
template <class T>
struct GeometryIn {
  const EdgeGeometry<T>* leader = nullptr;  // of the same graph, or nullptr: compute the geometry
  bool own_radial_basis = false;  // GeometryShare::kExceptRadialBasis: compute only the radial basis
  std::shared_ptr<const EdgeGeometry<T>>* keep = nullptr;  // receives the geometry this call made
};

template <class T>
class SezmEngine {
 public:
  explicit SezmEngine(ModelW<T> w);
  const ModelConfig& config() const { return w_.cfg; }
  const ModelW<T>& weights() const { return w_; }

  // Throws sezm::Error for a bad graph and, when memory runs out, one naming the step and its
  // allocation (engine/out_of_memory.h) instead of std::bad_alloc.
  // geo.leader: the geometry of g's edges from a model whose EdgeGeometryKey allows it (a
  // committee's leader, Engine::compute_like), used instead of computing it; never with ZBL
  // bridging. geo.keep receives the geometry this call made (nothing when it used the leader's
  // as it is).
  EngineResult compute(const Graph& g, bool gradients, FeatureExchange<T>* ex = nullptr,
                       const GeometryIn<T>& geo = {}) const;

 private:
  EngineResult compute_steps(const Graph& g, bool gradients, FeatureExchange<T>* ex, MemoryStep& step,
                             const GeometryIn<T>& gin) const;
  ModelW<T> w_;
  FFNGrid<T> grid_;
};

// The CPU engine behind the Engine interface (float64, the reference arithmetic).
class CpuEngine final : public Engine {
 public:
  explicit CpuEngine(ModelW<double> w) : engine_(std::move(w)), key_(edge_geometry_key(engine_.weights())) {}
  const ModelConfig& config() const override { return engine_.config(); }
  EngineResult compute(const Graph& g, bool gradients, FeatureExchange<double>* ex = nullptr) override {
    return run(g, gradients, ex, nullptr, GeometryShare::kNone);
  }
  std::string description() const override;
  const SezmEngine<double>& engine() const { return engine_; }

  // Committees (Engine::compute_like): the leader keeps its latest geometry (a shared pointer,
  // released at the start of its next call); a CpuEngine follower of the same key and graph
  // reads it (or all of it but the radial basis) instead of computing its own.
  void keep_geometry(bool keep) override {
    keep_ = keep;
    if (!keep) kept_.reset();
  }
  EngineResult compute_like(const Engine& leader, const Graph& g, bool gradients,
                            FeatureExchange<double>* ex = nullptr) override;
  GeometryShare last_geometry_share() const override { return shared_; }

 private:
  EngineResult run(const Graph& g, bool gradients, FeatureExchange<double>* ex,
                   std::shared_ptr<const EdgeGeometry<double>> leader, GeometryShare share);
  SezmEngine<double> engine_;
  EdgeGeometryKey key_;
  bool keep_ = false;
  GeometryShare shared_ = GeometryShare::kNone;
  std::shared_ptr<const EdgeGeometry<double>> kept_;  // with keep_: the geometry of the graph in stamp_
  GraphStamp stamp_;
};

extern template class SezmEngine<double>;
extern template class SezmEngine<float>;

}  // namespace sezm
