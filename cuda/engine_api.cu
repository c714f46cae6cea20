// CudaEngine's public wrappers around CudaEngine::Impl (the orchestration: engine.cu,
// engine_backward.cu): construction, description, compute and the committee's compute_like, the
// out-of-memory message, and the setters.
#include <cstdio>

#include "engine_impl.cuh"

namespace sezm {

CudaEngine::CudaEngine(const ModelW<double>& w, int device, CudaMode mode) : impl_(new Impl(w, device, mode)) {}
CudaEngine::~CudaEngine() = default;
const ModelConfig& CudaEngine::config() const { return impl_->cfg; }
std::string CudaEngine::description() const {
  return "CUDA device " + std::to_string(impl_->device) + " (" + impl_->name + "), mode " +
         cuda_mode_name(impl_->mode) + ", " + std::to_string(impl_->effective_chunk_edges()) + " edges per chunk, " +
         (impl_->d.tf32_one_pass ? "precision tf32 (one TF32 pass)" : "precision fp32") +
         (impl_->d.wgmma ? std::string(", stack on wgmma (") + (impl_->d.tf32_one_pass ? "one TF32 pass" : impl_->d.stack_f16 ? "3xTF32, chains in 3xFP16" : "3xTF32") +
                               (impl_->d.stack_ws == 2 ? ", WS tile but the gated backward"
                                : impl_->d.stack_ws    ? ", WS tile"
                                                       : "") +
                               (stack_ws_chain(impl_->d) ? ", forward chained" : "") +
                               (stack_z_f16(impl_->d)     ? ", output and z in binary16 rows)"
                                : stack_out_f16(impl_->d) ? ", output in binary16 rows)"
                                                          : ")")
                         : std::string()) +
         ", edge state " + edge_state_name(impl_->edge_state) +
         (impl_->edge_state == EdgeState::kAuto && impl_->last_state != EdgeState::kAuto
              ? std::string(" (") + edge_state_name(impl_->last_state) + " in the latest call)"
              : std::string());
}
EngineResult CudaEngine::compute(const Graph& g, bool gradients, FeatureExchange<double>* ex) {
  return call(g, gradients, ex, nullptr, GeometryShare::kNone);
}
EngineResult CudaEngine::compute_forces(const Graph& g, bool atom_virial, FeatureExchange<double>* ex) {
  return call(g, true, ex, nullptr, GeometryShare::kNone, atom_virial ? 2 : 1);
}

// A committee follower (Engine::compute_like): the leader's graph and geometry buffers are read
// on this engine's stream without an event, because the leader's compute() synchronises its own
// stream before it returns and is not called again (the one host thread is here) before this
// call has synchronised its stream in turn.
const CudaEngine::Impl* CudaEngine::leader_of(const Engine& leader, const Graph& g, GeometryShare* share) const {
  const auto* l = dynamic_cast<const CudaEngine*>(&leader);
  *share = l && l != this && l->impl_->device == impl_->device && l->impl_->stamp == GraphStamp::of(g)
               ? sezm::geometry_share(l->impl_->key, impl_->key)
               : GeometryShare::kNone;
  return *share == GeometryShare::kNone ? nullptr : l->impl_.get();
}
EngineResult CudaEngine::compute_like(const Engine& leader, const Graph& g, bool gradients,
                                      FeatureExchange<double>* ex) {
  GeometryShare share;
  const Impl* from = leader_of(leader, g, &share);
  return call(g, gradients, ex, from, share);
}
EngineResult CudaEngine::compute_forces_like(const Engine& leader, const Graph& g, bool atom_virial,
                                             FeatureExchange<double>* ex) {
  GeometryShare share;
  const Impl* from = leader_of(leader, g, &share);
  return call(g, true, ex, from, share, atom_virial ? 2 : 1);
}

GeometryShare CudaEngine::last_geometry_share() const { return impl_->share_level; }

EngineResult CudaEngine::call(const Graph& g, bool gradients, FeatureExchange<double>* ex, const Impl* from,
                              GeometryShare share, int forces) {
  struct Reset {  // geometry_from and force_output live for this call only
    Impl& i;
    ~Reset() {
      i.geometry_from = nullptr;
      i.force_output = 0;
    }
  } reset{*impl_};
  impl_->stamp = GraphStamp();
  impl_->geometry_from = from;
  impl_->force_output = forces;
  impl_->share_level = from ? share : GeometryShare::kNone;
  try {
    EngineResult r = impl_->compute(g, gradients, ex);
    impl_->stamp = GraphStamp::of(g);
    return r;
  } catch (const cuda::OutOfMemory& e) {
    // Name what the chunking and the mode cost and what to change (docs/errors.md; the bytes per
    // edge of each mode are in docs/ARCHITECTURE.md, "Device memory per edge").
    const bool fast = impl_->mode == CudaMode::kFast;
    char msg[768];
    std::snprintf(msg, sizeof msg,
                  "device cuda (GPU %d, mode %s, %d edges per chunk): out of GPU memory allocating %.2f GiB (the "
                  "engine holds %.2f GiB already) for %d atoms and %d edges; %s a smaller chunk (pair_style ... "
                  "chunk N, sezm-bench --chunk N; each chunk edge costs about %.1f kB), or fewer atoms per GPU "
                  "(more MPI ranks / GPUs)",
                  impl_->device, cuda_mode_name(impl_->mode), impl_->effective_chunk_edges(), e.bytes / 1073741824.0,
                  e.held / 1073741824.0, g.n_total, g.n_edges(),
                  fast ? impl_->lean_advice().c_str() : "use", 1e-3 * impl_->chunk_edge_bytes);
    throw Error(msg);
  }
}
void CudaEngine::set_chunk_edges(int n) { impl_->chunk_edges = n > 0 ? n : 0; }
void CudaEngine::set_precision(Precision p) { impl_->d.tf32_one_pass = p == Precision::kTf32 ? 1 : 0; }
void CudaEngine::set_edge_state(EdgeState e) { impl_->edge_state = e; }
void CudaEngine::set_node_batch(int n) { impl_->node_batch = n > 0 ? n : kNodeBatch; }
EdgeState CudaEngine::last_edge_state() const { return impl_->last_state; }
int CudaEngine::chunk_edges() const { return impl_->effective_chunk_edges(); }
size_t CudaEngine::peak_device_bytes() const { return impl_->mem.peak; }
std::string CudaEngine::device_name() const { return impl_->name; }

}  // namespace sezm
