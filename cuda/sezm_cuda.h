#pragma once
// Public interface of the CUDA engine, a sezm::Engine (src/engine/engine.h). This header needs no
// CUDA headers. Front ends do not include it: they call sezm::make_engine, which reaches this
// engine through make_cuda_engine (cuda/engine_factory.cu); tests may include it directly.
//
// Same graph contract and result as the CPU engine (src/graph/graph.h). Arithmetic is IEEE
// fp32 (no TF32) on the device; energies and virial sums are accumulated in double. CudaMode and
// default_chunk_edges live in src/engine/engine.h.
#include <memory>
#include <string>

#include "engine/engine.h"
#include "model/weights.h"

namespace sezm {

// True when a CUDA device can be used; otherwise `why` says what is missing.
bool cuda_device_available(std::string* why = nullptr);
// Number of visible CUDA devices (0 when none is usable).
int cuda_device_count();

class CudaEngine final : public Engine {
 public:
  // device: CUDA device ordinal; throws sezm::Error when it cannot be used.
  CudaEngine(const ModelW<double>& w, int device, CudaMode mode);
  ~CudaEngine() override;
  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;

  const ModelConfig& config() const override;
  EngineResult compute(const Graph& g, bool gradients, FeatureExchange<double>* ex = nullptr) override;
  // The forces, the global virial and (atom_virial) the per-atom virial assembled on the device
  // in a fixed order (force_assembly.cu; EngineResult::forces ...), except for a ZBL-bridged
  // model, whose bridge maps dE/dv on the host (bridging.cuh): that returns edge_grad.
  EngineResult compute_forces(const Graph& g, bool atom_virial, FeatureExchange<double>* ex = nullptr) override;
  // "CUDA device N (NAME), mode M, K edges per chunk, precision P" (the pair style logs it per rank)
  std::string description() const override;

  // Largest number of edges whose value-path activations live on the device at once (a chunk
  // is whole destination segments, so one centre's edges may exceed it); n <= 0 restores the
  // mode's default (default_chunk_edges; in fast mode on the chained stack rounded to whole rounds of
  // its persistent grid, five times as many under `precision tf32`). Larger chunks are faster
  // (fewer, fuller launches) and cost ~11 KB of device memory per chunk edge, ~8.7 KB under
  // `precision tf32` on Hopper (measured: docs/lammps.md, `chunk`; docs/ARCHITECTURE.md).
  void set_chunk_edges(int n);
  int chunk_edges() const override;
  // kTf32: the tile products in one TF32 pass (`precision tf32`); otherwise IEEE fp32 FFMA.
  void set_precision(Precision p);
  // Where the per-edge geometry, radial features and their adjoints live (EdgeState, engine.h):
  // kAuto (the default) decides per call from the call's sizes and the device's free memory.
  void set_edge_state(EdgeState e);
  // What the latest call used: kKeep or kChunk (kAuto before the first call).
  EdgeState last_edge_state() const;
  // With the edge state per chunk the node steps run in batches of n nodes (at least the most
  // centres of a chunk; n <= 0: the default, 16384) with scratch for one batch. Tests set it
  // small so that small graphs run several batches.
  void set_node_batch(int n);

  // Peak device memory held by this engine since construction (bytes), and the device's name.
  size_t peak_device_bytes() const override;
  std::string device_name() const;

  // Committees: a CudaEngine leader on the same device and graph hands this engine its uploaded
  // graph and per-edge geometry, all of it or all but the radial basis (device-to-device copies
  // instead of the upload and the geometry kernel; Engine::compute_like). The buffers persist
  // between calls, so keep_geometry has nothing to do.
  EngineResult compute_like(const Engine& leader, const Graph& g, bool gradients,
                            FeatureExchange<double>* ex = nullptr) override;
  EngineResult compute_forces_like(const Engine& leader, const Graph& g, bool atom_virial,
                                   FeatureExchange<double>* ex = nullptr) override;
  GeometryShare last_geometry_share() const override;

 private:
  struct Impl;
  // forces: 0 edge gradients, 1 forces and virial, 2 also the per-atom virial (Impl::force_output).
  EngineResult call(const Graph& g, bool gradients, FeatureExchange<double>* ex, const Impl* from,
                    GeometryShare share, int forces = 0);
  const Impl* leader_of(const Engine& leader, const Graph& g, GeometryShare* share) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sezm
