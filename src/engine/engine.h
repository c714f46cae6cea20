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
  // Optional: the rows forward() reads, sorted, unique, each < n_total: the owned rows it sends
  // and the ghost rows it forwards onward (multi-hop: a ghost filled earlier in the same call);
  // reverse() adds into the same rows and no others. nullptr (the default): unknown, forward()
  // may read any owned row. A device engine that knows them moves only these owned rows and the
  // ghost rows between device and host (cuda/host_support.cuh, GhostStaging); rows it does not
  // move hold NaN on the host side, so a row missing from the list turns the result non-finite
  // (docs/multi-gpu.md).
  virtual const std::vector<int>* sent_rows() const { return nullptr; }
};

// How much of a committee leader's per-edge geometry an engine took (Engine::compute_like).
enum class GeometryShare { kNone, kExceptRadialBasis, kAll };

struct EngineResult {
  double energy = 0.0;
  std::vector<double> atom_energy;  // n_nodes
  std::vector<double> edge_grad;    // 3E, dE/dv_e; empty unless gradients were requested
  // Set by Engine::compute_forces where the engine assembled the forces itself (edge_grad is then
  // empty, unless a force is not finite: require_finite_result names the edge from it). The
  // values assemble_forces_virial would add into zeroed arrays, to the rounding of its sums.
  std::vector<double> forces;       // 3 n_total
  std::vector<double> virial;       // 9, W[3k+j]
  std::vector<double> atom_virial;  // 9 n_total, only where compute_forces was asked for it
  // Wall time of the two passes, feature exchanges included (callers time those themselves).
  double seconds_forward = 0.0, seconds_backward = 0.0;
  // Host wall time of the ghost-row staging (device<->host copies, float<->double conversion and
  // the FeatureExchange calls themselves) and the bytes it moved between device and host, summed
  // over the call's exchanges; part of the two times above. Zero on the CPU engine and without
  // an exchange.
  double seconds_exchange = 0.0;
  double exchange_bytes = 0.0;
};

enum class Device { kCpu, kCuda };

// What per-edge data the CUDA forward keeps for the backward (docs/ARCHITECTURE.md has the bytes):
//  kFast: the gated layers' pre-activations and the stack output of every edge for the blocks
//         before the last (their backward recomputes only the radial tables, the rotation's
//         source sums and the focus competition; with the degree mixer and 32 channels it keeps
//         those too, and no radial features);
//  kLean: nothing per edge beyond the geometry (nothing beyond the graph and the attention
//         weights with the edge state per chunk, EdgeState); the backward recomputes each chunk's
//         value path on chip (flash-style), and, where the blocks read no radial features (the
//         degree mixer's folded tables), the embedding recomputes them per chunk.
// In both modes the last block's backward runs chunk by chunk right behind its forward, so it
// is neither kept nor recomputed.
enum class CudaMode { kFast, kLean };

// Arithmetic of the engine. kDeviceDefault: float64 on the CPU; IEEE fp32 on CUDA (double
// accumulation of energies and virials). kTf32 (CUDA only, opt-in): the stack's and the radial
// tables' tile products in one TF32 pass on tensor cores (10-bit mantissa operands); see
// docs/performance.md for its error against float64 and its energy drift.
enum class Precision { kDeviceDefault, kTf32 };

// Where the CUDA engine holds what it derives from the edge vectors (geometry, Wigner rows,
// radial basis and features, env-seed edge state) and their adjoints (docs/ARCHITECTURE.md,
// "Device memory per edge"). kKeep: per edge for the whole call (computed once; ~1.2 kB per
// edge). kChunk: recomputed per chunk into chunk scratch wherever a step needs them, their
// adjoints mapped into dE/dv per (block, chunk) share (~0.1 kB per edge: a million diamond atoms
// on one H200). kAuto: kKeep when the call fits the device's free memory with it, else kChunk.
// Energies are bit-identical between kKeep and kChunk; forces agree to fp32 rounding.
enum class EdgeState { kAuto, kKeep, kChunk };

struct EngineOptions {
  Device device = Device::kCpu;
  int gpu = 0;                      // CUDA device ordinal
  CudaMode mode = CudaMode::kLean;  // CUDA only
  int chunk_edges = 0;              // CUDA only: edges per value-path chunk; 0 = the mode's default
  Precision precision = Precision::kDeviceDefault;
  EdgeState edge_state = EdgeState::kAuto;  // CUDA only
};

const char* device_name(Device d);     // "cpu" | "cuda"
const char* cuda_mode_name(CudaMode m);  // "lean" | "fast"
const char* precision_name(Precision p);  // "default" | "tf32"
// "default" / "fp32" -> kDeviceDefault, "tf32" -> kTf32; false for anything else.
bool parse_precision(const std::string& s, Precision* p);
const char* edge_state_name(EdgeState e);  // "auto" | "keep" | "chunk"
// "auto" / "keep" / "chunk"; false for anything else.
bool parse_edge_state(const std::string& s, EdgeState* e);

// Default edges per chunk of the CUDA engine: lean 81920 (its chunk scratch, ~0.96 GB, keeps 4096
// atoms of C.pt at 1.83 GiB, under 2 GB; on an H200 49.4 ms per call against 52.3 at 57344, fewer
// and fuller launches: docs/performance.md, 2026-12-04 fifth session), fast 131072 (~1.5 GB of
// scratch; at 4096 atoms on an H200 14 % less time than 32768; the CUDA engine rounds it to whole
// rounds of the chained stack's grid, and takes five times that under `precision tf32` there:
// CudaEngine::Impl::default_chunk_chains).
inline int default_chunk_edges(CudaMode m) { return m == CudaMode::kFast ? 131072 : 81920; }

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const ModelConfig& config() const = 0;
  // Energy, per-atom energies and (with gradients) dE/dv per edge of graph g. A graph with ghosts
  // needs `ex`. Not const: a device engine reuses its buffers from call to call.
  virtual EngineResult compute(const Graph& g, bool gradients, FeatureExchange<double>* ex = nullptr) = 0;
  // compute(g, true, ex) for a caller that wants forces and virials, not dE/dv: an engine that
  // can assembles the forces on the n_total nodes, the global virial and (atom_virial) the
  // per-atom virial itself (EngineResult::forces ...; the CUDA engine on the device, where it
  // then copies back 3 n_total forces instead of 3E edge gradients); the default returns
  // edge_grad. add_forces_virial takes either result.
  virtual EngineResult compute_forces(const Graph& g, bool /*atom_virial*/, FeatureExchange<double>* ex = nullptr) {
    return compute(g, true, ex);
  }
  // One line for logs: "cpu, float64, 8 threads", "CUDA device 0 (NVIDIA H200), mode lean, 40960 edges per chunk".
  virtual std::string description() const = 0;
  // Peak device memory held by the engine since construction (0 on the CPU).
  virtual size_t peak_device_bytes() const { return 0; }
  // Edges per chunk of the value path where the engine works in chunks (0 where it does not).
  virtual int chunk_edges() const { return 0; }

  // ---- committees (docs/lammps.md, "Model deviation"): one geometry for several models ----
  // A committee's leader keeps the per-edge geometry of its latest compute() for followers
  // (compute_like). The CPU engine holds it between calls only when asked (a single model holds
  // nothing extra); the CUDA engine's buffers persist anyway and it ignores the flag.
  virtual void keep_geometry(bool /*keep*/) {}
  // compute(g, gradients, ex), reusing `leader`'s work where it can. Contract: g is the graph of
  // leader's latest compute() (or compute_like()), unchanged since. Where both engines are the
  // same kind (CPU and CPU, or CUDA and CUDA on the same device), the leader has its geometry
  // and geometry_share(leader's key, this engine's key) allows it, this engine takes the
  // leader's per-edge geometry (on CUDA also its uploaded graph) instead of computing and
  // uploading its own: all of it (kAll), or all but the radial basis, which it then computes
  // from the leader's lengths (kExceptRadialBasis: the trained basis frequencies differ, as they
  // do between independently trained models); otherwise it computes its own. The result is the
  // same either way, to the bit (the same code computes the same numbers). A cheap guard checks
  // the graph: the leader records the edge, node and ghost counts and g.vec.data() of its latest
  // call, and any mismatch means computing afresh.
  virtual EngineResult compute_like(const Engine& /*leader*/, const Graph& g, bool gradients,
                                    FeatureExchange<double>* ex = nullptr) {
    return compute(g, gradients, ex);
  }
  // compute_forces, reusing `leader`'s work as compute_like does.
  virtual EngineResult compute_forces_like(const Engine& leader, const Graph& g, bool /*atom_virial*/,
                                           FeatureExchange<double>* ex = nullptr) {
    return compute_like(leader, g, true, ex);
  }
  // How much of a leader's geometry the latest call used (kNone after compute()).
  virtual GeometryShare last_geometry_share() const { return GeometryShare::kNone; }
};

// What one model's per-edge geometry depends on (engine/edge_geometry.h, envelope.h,
// radial_basis.h, wigner_d.h; CUDA twin cuda/geometry.cu). Edge vectors, safe lengths, the edge
// envelope and the Wigner-D blocks depend on rcut, eps, lmax and env_exp_edge; the radial basis
// also on n_radial, env_exp_rbf and the frequencies. ZBL bridging computes the geometry of
// clamped vectors (docs/model.md §9) and never shares.
struct EdgeGeometryKey {
  double rcut = 0, eps = 0;
  int lmax = -1, env_exp_edge = 0;
  int n_radial = 0, env_exp_rbf = 0;
  std::vector<double> freqs;  // the radial basis frequencies (weights: trained)
  bool zbl = false;
};
EdgeGeometryKey edge_geometry_key(const ModelConfig& cfg, const double* freqs, int n_freqs);
// How much of a leader's geometry a follower can take (see Engine::compute_like).
GeometryShare geometry_share(const EdgeGeometryKey& leader, const EdgeGeometryKey& follower);

// The compute_like guard: which graph an engine's latest call saw.
struct GraphStamp {
  int n_edges = -1, n_nodes = -1, n_total = -1;
  const double* vec = nullptr;
  static GraphStamp of(const Graph& g) { return {g.n_edges(), g.n_nodes, g.n_total, g.vec.data()}; }
  bool operator==(const GraphStamp& o) const {
    return n_edges == o.n_edges && n_nodes == o.n_nodes && n_total == o.n_total && vec == o.vec;
  }
};

// Throws sezm::AtomError for the first non-finite per-atom energy (naming the atom), edge
// gradient (naming the edge's two atoms) or engine-assembled force (naming the atom) of r, graph
// indices, so that a NaN never reaches an output as a number (docs/errors.md, "Run time").
// O(N + E); the front ends call it per evaluation.
void require_finite_result(const Graph& g, const EngineResult& r);

// Forces on the n_total nodes (F_k = sum_{dst=k} g_e - sum_{src=k} g_e), the global virial
// W[3k+j] = -sum_e g_{e,k} v_{e,j} (the LAMMPS sign) and optionally the per-atom virial
// (n_total x 9, half of each edge's term on each endpoint). Outputs are accumulated; each may be
// nullptr except forces.
void assemble_forces_virial(const Graph& g, const double* edge_grad, double* forces, double* virial,
                            double* atom_virial);
// The same from a result with gradients: the engine's assembled forces, virial and per-atom
// virial (Engine::compute_forces) where it has them, added; else assemble_forces_virial on
// r.edge_grad. A per-atom virial from assembled forces needs compute_forces(..., true): without
// it this throws sezm::Error.
void add_forces_virial(const Graph& g, const EngineResult& r, double* forces, double* virial, double* atom_virial);

}  // namespace sezm
