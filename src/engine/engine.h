#pragma once
// The one engine interface. Front ends (sezm-eval, sezm-bench, the LAMMPS pair style) hold a
// sezm::Engine made by sezm::make_engine (src/api/engine_factory.h) and never name a device's
// engine class: the CPU engine (engine/sezm_model.h) and the CUDA engine (cuda/sezm_cuda.h,
// linked in when built) both implement it, so a new device or option touches the options, the
// factory and that device's engine, not the front ends.
#include <cstddef>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "model/config.h"

namespace sezm {

// Ghost-row refresh between blocks; rows are `width` scalars wide, ghosts are rows
// [n_nodes, n_total). The LAMMPS glue implements it with pair forward/reverse communication;
// the engines know nothing of MPI or LAMMPS.
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

enum class Device { kCpu, kCuda };

// What per-edge data the CUDA forward keeps for the backward (docs/ARCHITECTURE.md has the bytes):
//  kFast: the gated layers' pre-activations of every edge for the blocks before the last
//         (their backward recomputes only the rotation and the last linear layer);
//  kLean: nothing per edge beyond geometry and radial features; the backward recomputes each
//         chunk's value path on chip (flash-style).
// In both modes the last block's backward runs chunk by chunk right behind its forward, so it
// is neither kept nor recomputed.
enum class CudaMode { kFast, kLean };

// Arithmetic of the engine. kDeviceDefault: float64 on the CPU; IEEE fp32 on CUDA (double
// accumulation of energies and virials). kTf32 (CUDA only, opt-in): the stack's and the radial
// tables' tile products in one TF32 pass on tensor cores (10-bit mantissa operands); see
// docs/performance.md for its error against float64 and its energy drift.
enum class Precision { kDeviceDefault, kTf32 };

struct EngineOptions {
  Device device = Device::kCpu;
  int gpu = 0;                      // CUDA device ordinal
  CudaMode mode = CudaMode::kLean;  // CUDA only
  int chunk_edges = 0;              // CUDA only: edges per value-path chunk; 0 = the mode's default
  Precision precision = Precision::kDeviceDefault;
};

const char* device_name(Device d);     // "cpu" | "cuda"
const char* cuda_mode_name(CudaMode m);  // "lean" | "fast"
const char* precision_name(Precision p);  // "default" | "tf32"
// "default" / "fp32" -> kDeviceDefault, "tf32" -> kTf32; false for anything else.
bool parse_precision(const std::string& s, Precision* p);

// Default edges per chunk of the CUDA engine: lean 32768 (its chunk scratch, ~0.5 GB, keeps
// 4096 atoms under 2 GB), fast 131072 (~2.1 GB of scratch; at 4096 atoms on an H200 14 % less
// time than 32768).
inline int default_chunk_edges(CudaMode m) { return m == CudaMode::kFast ? 131072 : 32768; }

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const ModelConfig& config() const = 0;
  // Energy, per-atom energies and (with gradients) dE/dv per edge of graph g. A graph with ghosts
  // needs `ex`. Not const: a device engine reuses its buffers from call to call.
  virtual EngineResult compute(const Graph& g, bool gradients, FeatureExchange<double>* ex = nullptr) = 0;
  // One line for logs: "cpu, float64, 8 threads", "CUDA device 0 (NVIDIA H200), mode lean, 32768 edges per chunk".
  virtual std::string description() const = 0;
  // Peak device memory held by the engine since construction (0 on the CPU).
  virtual size_t peak_device_bytes() const { return 0; }
  // Edges per chunk of the value path where the engine works in chunks (0 where it does not).
  virtual int chunk_edges() const { return 0; }
};

// Throws sezm::AtomError for the first non-finite per-atom energy (naming the atom) or edge
// gradient (naming the edge's two atoms) of r, graph indices, so that a NaN never reaches an
// output as a number (docs/errors.md, "Run time"). O(N + E); the front ends call it per evaluation.
void require_finite_result(const Graph& g, const EngineResult& r);

// Forces on the n_total nodes (F_k = sum_{dst=k} g_e - sum_{src=k} g_e), the global virial
// W[3k+j] = -sum_e g_{e,k} v_{e,j} (the LAMMPS sign) and optionally the per-atom virial
// (n_total x 9, half of each edge's term on each endpoint). Outputs are accumulated; each may be
// nullptr except forces.
void assemble_forces_virial(const Graph& g, const double* edge_grad, double* forces, double* virial,
                            double* atom_virial);

}  // namespace sezm
