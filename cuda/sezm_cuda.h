#pragma once
// Public interface of the CUDA engine. This header needs no CUDA headers: front ends (CLI,
// benchmark, pair style) include it and link sezm_cuda when it was built.
//
// Same graph contract and result as the CPU engine (src/engine/sezm_model.h). Arithmetic is IEEE
// fp32 (no TF32) on the device; energies and virial sums are accumulated in double.
#include <memory>
#include <string>

#include "engine/sezm_model.h"
#include "model/weights.h"

namespace sezm {

// What per-edge data the forward keeps for the backward (docs/ARCHITECTURE.md has the bytes):
//  kFast: the gated layers' pre-activations of every edge for the blocks before the last
//         (their backward recomputes only the rotation and the last linear layer);
//  kLean: nothing per edge beyond geometry and radial features; the backward recomputes each
//         chunk's value path on chip (flash-style).
// In both modes the last block's backward runs chunk by chunk right behind its forward, so it
// is neither kept nor recomputed.
enum class CudaMode { kFast, kLean };

// Default edges per chunk: lean 32768 (its chunk scratch, ~0.5 GB, keeps 4096 atoms under 2 GB),
// fast 131072 (~1.8 GB of scratch; at 4096 atoms on an H200 14 % less time than 32768).
inline int default_chunk_edges(CudaMode m) { return m == CudaMode::kFast ? 131072 : 32768; }

// True when a CUDA device can be used; otherwise `why` says what is missing.
bool cuda_device_available(std::string* why = nullptr);
// Number of visible CUDA devices (0 when none is usable).
int cuda_device_count();

class CudaEngine {
 public:
  // device: CUDA device ordinal; throws sezm::Error when it cannot be used.
  CudaEngine(const ModelW<double>& w, int device, CudaMode mode);
  ~CudaEngine();
  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;

  const ModelConfig& config() const;
  EngineResult compute(const GraphView& g, bool gradients, FeatureExchange<double>* ex = nullptr);

  // Largest number of edges whose value-path activations live on the device at once (a chunk
  // is whole destination segments, so one centre's edges may exceed it); n <= 0 restores the
  // mode's default (default_chunk_edges). Larger chunks are faster (fewer, fuller launches) and
  // cost ~15 KB (lean) / ~10 KB (fast) of device memory per chunk edge.
  void set_chunk_edges(int n);
  int chunk_edges() const;

  // Peak device memory held by this engine since construction (bytes), and the device's name.
  size_t peak_device_bytes() const;
  std::string device_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sezm
