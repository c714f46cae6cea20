#pragma once
// The SeZM CPU engine: energy and per-edge energy gradient for one graph (the contract of
// src/graph/graph.h). Templated on the scalar type (float serves the CUDA tests' references);
// CpuEngine is the sezm::Engine the factory hands out, in double.
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

template <class T>
class SezmEngine {
 public:
  explicit SezmEngine(ModelW<T> w);
  const ModelConfig& config() const { return w_.cfg; }
  const ModelW<T>& weights() const { return w_; }

  // Throws sezm::Error for a bad graph and, when memory runs out, one naming the step and its
  // allocation (engine/out_of_memory.h) instead of std::bad_alloc.
  EngineResult compute(const Graph& g, bool gradients, FeatureExchange<T>* ex = nullptr) const;

 private:
  EngineResult compute_steps(const Graph& g, bool gradients, FeatureExchange<T>* ex, MemoryStep& step) const;
  ModelW<T> w_;
  FFNGrid<T> grid_;
};

// The CPU engine behind the Engine interface (float64, the reference arithmetic).
class CpuEngine final : public Engine {
 public:
  explicit CpuEngine(ModelW<double> w) : engine_(std::move(w)) {}
  const ModelConfig& config() const override { return engine_.config(); }
  EngineResult compute(const Graph& g, bool gradients, FeatureExchange<double>* ex = nullptr) override {
    return engine_.compute(g, gradients, ex);
  }
  std::string description() const override;
  const SezmEngine<double>& engine() const { return engine_; }

 private:
  SezmEngine<double> engine_;
};

extern template class SezmEngine<double>;
extern template class SezmEngine<float>;

}  // namespace sezm
