#pragma once
// CudaEngine::Impl, the CUDA engine's state and the steps of its orchestration (the order and
// names of the CPU engine, src/engine/sezm_model.cpp). Its forward, the call and the public
// wrappers are defined in engine.cu, the backward steps in engine_backward.cu; engine-private.
#include <cstdlib>
#include <string>
#include <vector>

#include "attention.cuh"
#include "bridging.cuh"
#include "buffers.cuh"
#include "chunks.cuh"
#include "device.cuh"
#include "device_weights.cuh"
#include "engine/edge_geometry.h"  // edge_geometry_key: the committees' geometry key
#include "embeddings.cuh"
#include "focus_compete.cuh"
#include "geometry.cuh"
#include "grid_net.cuh"
#include "host_support.cuh"
#include "node_steps.cuh"
#include "radial.cuh"
#include "radial_tables.cuh"
#include "sezm_cuda.h"
#include "stack.cuh"
#include "value_path.cuh"

namespace sezm {
using namespace cuda;

// b[i] += a[i] for i < n on stream s (the residual adds of the node steps).
void launch_add(long n, const float* a, float* b, cudaStream_t s);

struct CudaEngine::Impl : EngineBuffers {
  ModelConfig cfg;
  Dims d{};
  CudaMode mode;
  int device = 0;
  std::string name;
  cudaStream_t s = nullptr;
  int chunk_edges = 0;  // 0: the mode's default (default_chunk_edges)
  int effective_chunk_edges() const { return chunk_edges > 0 ? chunk_edges : default_chunk_edges(mode); }

  DeviceWeights dw;
  ChunkPlan plan;
  GhostStaging ghosts;
  BridgingHost bridge;  // ZBL bridging (bridging.cuh); off for a model without it
  PhaseTimer timer;
  void mark(const char* what) { timer.mark(what, s); }

  // Committees (Engine::compute_like): this model's geometry key, the graph of the latest
  // completed call, and, for the duration of a compute_like that shares, the leader whose graph
  // and geometry buffers the call copies instead of uploading and computing them.
  EdgeGeometryKey key;
  GraphStamp stamp;
  const Impl* geometry_from = nullptr;
  GeometryShare share_level = GeometryShare::kNone;  // how much of a leader's geometry the latest call took

  Impl(const ModelW<double>& w, int dev, CudaMode m)
      : cfg(w.cfg), mode(m), device(dev), key(edge_geometry_key(w)) {
    const cudaDeviceProp prop = open_device(dev);
    name = prop.name;
    d = model_dims(w);
    check_stack_fits(d, prop);
    d.wgmma = use_wgmma(d, prop);
    SEZM_CUDA(cudaStreamCreate(&s));
    const char* tv = std::getenv("SEZM_CUDA_TIMING");
    timer.enabled = tv && *tv && *tv != '0';
    dw.upload(w, d, &mem, s);
    bridge.init(w);
  }
  ~Impl() {
    if (s) cudaStreamDestroy(s);
  }

  // ---- views of the buffers the launchers take ----
  GraphDev graph() const { return GraphDev{N, NT, E, src.data(), dst.data(), off.data(), types.data()}; }
  EdgeGeomDev geom() const { return EdgeGeomDev{vecf.data(), r.data(), env.data(), denv.data(), rbf.data(), Dc.data()}; }
  EdgeGeomBarDev geom_bar() const {
    return EdgeGeomBarDev{env_bar.data(), rbf_bar.data(), Dc_bar.data(), vec_bar.data()};
  }
  EdgeRadialIn radial_in() const {
    return EdgeRadialIn{rho.data(), dw.mw.type_emb, src.data(), dst.data(), types.data()};
  }
  EnvSeedArgs env_seed_args() {
    EnvSeedArgs a{};
    a.g = graph();
    a.geo = geom();
    a.isd = isd.data();
    a.gemb = g.data(); a.seed = seed.data(); a.A = A.data(); a.f = f.data();
    a.gate = bridge.gate(); a.gate_bar = bridge.gate_bar();
    return a;
  }
  GieArgs gie_args() {
    GieArgs a{};
    a.N = N; a.E = E; a.dst = dst.data(); a.off = off.data();
    a.Dc = Dc.data(); a.isd = isd.data(); a.rho = rho.data();
    a.gate = bridge.gate(); a.gate_bar = bridge.gate_bar();
    return a;
  }
  AttentionNodeArgs attention_node_args(int b) {
    AttentionNodeArgs a{};
    a.N = N; a.NT = NT; a.H = H[b].data();
    a.q = q[b].data(); a.k = k[b].data(); a.qk_rho = qk_rho[b].data(); a.gate_rho = gate_rho[b].data();
    a.gamma = gamma[b].data();
    return a;
  }

  // The gated pre-activations of layer k for chunk c, as the backward reads them: fast mode keeps
  // them for every edge of the blocks before the fused one; otherwise they live in chunk scratch.
  int fused_block = -1;  // with gradients, the last block runs its backward chunk by chunk
  bool keep_z = false;   // fast mode on a call with gradients: the forward keeps z of every edge
  float* chunk_z(int b, int k, const Chunk& c) {
    return mode == CudaMode::kFast && b != fused_block ? Zall[b][k].data() + (size_t)d.F * c.e0 * d.ROW
                                                       : Zc[k].data();
  }

  // Forward of one chunk's value path up to the stack output; returns the buffer holding it. In
  // the backward (`recompute`), lean mode recomputes every layer and keeps the chunk's gated
  // pre-activations; fast mode replays the gated layers from the kept pre-activations. The fused
  // block's forward keeps them in chunk scratch for its backward right behind.
  float* chunk_forward(int b, const Chunk& c, bool recompute);

  // Block b's node steps after its aggregation on the nodes [n0, n0 + n): output gate, post
  // linear and norm, FFN, residual. Every node's rows depend only on its own, which is what lets
  // the fused block run them chunk by chunk.
  void node_forward(int b, int n0, int n);

  // Its backward on the same nodes: from Xb = dE/dX[b+1] (rows n0..) to P_bar and gamma_bar; Xb's
  // rows become X1_bar in place.
  void node_backward(int b, int n0, int n);

  // so3_readout mlp: the descriptor comes from the grid read-out (grid_net.cu, docs/model.md §5.13),
  // the fitting net's backward hands dE/ddesc back to it.
  void readout_forward(int n0, int n);
  void readout_backward(int n0, int n);  // into Xb's rows n0.. (zeroed by the caller)

  // The edge part of block b's backward for chunk c, with the chunk's forward state in the chunk
  // buffers and its stack output in Uf.
  void chunk_backward(int b, const Chunk& c, float* Uf);

  // rho_bar_c (the chunk's rows) through the radial MLP's backward into env_bar and rbf_bar.
  void radial_backward_chunk(const Chunk& c);

  void begin_block_backward();

  // After every chunk of block b's backward: the attention node steps, X_bar = X1_bar (centres) +
  // H_bar W_pre^T (all nodes), the ghost rows' gradients folded back to their owners.
  void end_block_backward(int b, FeatureExchange<double>* ex);

  // Plans the call's chunks and sizes its buffers (size_for_call). With gradients the last block
  // runs its backward chunk by chunk right behind its forward (everything after its aggregation
  // is per node): it keeps its gated pre-activations in chunk scratch, is never recomputed, and
  // fast mode keeps z only for the blocks before it.
  void prepare_call(const Graph& gv, bool gradients);

  EngineResult compute(const Graph& gv, bool gradients, FeatureExchange<double>* ex);
};

}  // namespace sezm
