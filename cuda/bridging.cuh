#pragma once
// ZBL bridging in the CUDA engine (docs/model.md §9), the host side: the inner clamp of the edge
// vectors, the source-freeze gate eta and the ZBL pair term are O(E), so they run on the host in
// double with the CPU engine's own functions (CPU twins: engine/bridging.h, engine/zbl.h) and the
// device sees only their results: the clamped edge vectors (in place of the raw ones) and the
// per-edge gate, which the embedding and attention kernels take as an optional array
// (embeddings.cuh, attention.cuh). The backward brings the kernels' dE/dgate back and maps the
// learned gradient, taken w.r.t. the clamped vectors, to the raw ones as the CPU engine does.
// A model without bridging never touches any of this (gate() is nullptr).
#include <cmath>  // before cuda_common.cuh, whose device helpers use expf/sqrtf (a .cpp sees no CUDA math header)
#include <vector>

#include "cuda_common.cuh"
#include "engine/bridging.h"
#include "engine/engine.h"
#include "graph/graph.h"
#include "model/weights.h"

namespace sezm::cuda {

class BridgingHost {
 public:
  // Copies what bridging needs from the model (nothing for a model without it).
  void init(const ModelW<double>& w);
  bool on() const { return on_; }

  // Before the first launch of a call, after the graph upload: clamps g's edge vectors and
  // uploads them over `vec`, computes eta (its ghost rows through ex, width 1) and uploads
  // gate_e = eta[src_e]; with gradients, zeroes the gate adjoint.
  void forward(const Graph& g, FeatureExchange<double>* ex, DBuf<double>& vec, bool gradients, MemCounter* mem,
               cudaStream_t s);
  const float* gate() const { return on_ ? gate_d_.data() : nullptr; }
  float* gate_bar() const { return on_ ? gate_bar_d_.data() : nullptr; }

  // The ZBL pair energy on the raw edges, added to atom_energy (n_nodes); with gradients its
  // dE/dv is kept for backward().
  void zbl_energy(const Graph& g, bool gradients, double* atom_energy);

  // After the device backward (edge_grad = dE/d(clamped v), on the host; the stream idle):
  // dE/dgate from the device through eta to dE/dv (ghost adjoints back through ex), plus the
  // ZBL term's gradient. edge_grad becomes dE/dv.
  void backward(const Graph& g, FeatureExchange<double>* ex, std::vector<double>& edge_grad, cudaStream_t s);

 private:
  bool on_ = false;
  ModelConfig cfg_;
  std::vector<double> z_;         // nuclear charge per type
  BridgingState br_;              // the call's clamp state (engine/bridging.h)
  std::vector<double> gate_;      // (E) gate_e in double
  std::vector<float> gate_f_;     // (E) its fp32 upload (kept alive for the async copy)
  std::vector<float> gate_bar_f_;
  std::vector<double> zbl_grad_;  // (3E) dE_zbl/dv
  DBuf<float> gate_d_, gate_bar_d_;
};

}  // namespace sezm::cuda
