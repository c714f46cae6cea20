#pragma once
// CudaEngine::Impl, the CUDA engine's state and the steps of its orchestration (the order and
// names of the CPU engine, src/engine/sezm_model.cpp). Its forward, the call and the public
// wrappers are defined in engine.cu, the backward steps in engine_backward.cu; engine-private.
#include <algorithm>
#include <cstdio>
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
#include "f16_rows_layout.h"
#include "embeddings.cuh"
#include "focus_compete.cuh"
#include "force_assembly.cuh"
#include "geometry.cuh"
#include "grid_net.cuh"
#include "host_support.cuh"
#include "node_steps.cuh"
#include "radial.cuh"
#include "radial_tables.cuh"
#include "sezm_cuda.h"
#include "source_backward.cuh"
#include "stack.cuh"
#include "value_path.cuh"

namespace sezm {
using namespace cuda;

// b[i] += a[i] for i < n on stream s (the residual adds of the node steps).
void launch_add(long n, const float* a, float* b, cudaStream_t s);
void launch_add(long n, const double* a, double* b, cudaStream_t s);

struct CudaEngine::Impl : EngineBuffers {
  ModelConfig cfg;
  Dims d{};
  CudaMode mode;
  int device = 0;
  std::string name;
  cudaStream_t s = nullptr;
  int chunk_edges = 0;  // 0: the mode's default (default_chunk_chains)
  int sms = 0;          // the GPU's multiprocessors: the chained stack's persistent grid
  int effective_chunk_edges() const { return chunk_edges > 0 ? chunk_edges : default_chunk_chains(); }
  // The mode's default (default_chunk_edges), in fast mode on the chained stack rounded to the
  // nearest multiple of 128 sms / F edges: a chunk's F ceil(Ec / 128) items (128 rows of one
  // focus) then fill whole rounds of the persistent grid (a CTA per SM). C.pt on 132 SMs: 131,072
  // -> 135,168 edges, 16 full rounds a chunk where the last of 16 left 64 CTAs idle; at 4,096 atoms
  // 77 rounds per chunk pass instead of 79 (docs/performance.md, 2026-12-05 seventeenth session).
  // Lean's chunk stays: the same rounding measured no faster there (fifteenth session, "Tried").
  // Under `precision tf32` fast mode takes five times as many rounds (C.pt on 132 SMs: 675,840
  // edges): a chunk costs ~0.6 ms beyond its edges' work (the chained launches' ramps and tails,
  // the fused last block's node steps on a chunk's few hundred centres), and the binary16 rows make
  // a chunk edge ~8.7 KB, not fp32's ~11: H100, C.pt, 4,096 atoms 26.8 -> 24.5 ms at 4.72 -> 9.09
  // GiB, 32,768 atoms 213 -> 191 ms (docs/performance.md, 2026-12-06 twenty-fifth session). fp32
  // keeps its chunk: fast mode at 4,096 atoms stays under 8 GB.
  static constexpr int kTf32ChunkFactor = 5;
  int default_chunk_chains() const {
    const int base = default_chunk_edges(mode);
    if (mode != CudaMode::kFast || !d.wgmma || !d.stack_ws || sms <= 0) return base;
    const long unit = 128L * sms % d.F == 0 ? 128L * sms / d.F : 128L * sms;
    const long k = std::max(1L, (base + unit / 2) / unit) * (d.tf32_one_pass ? kTf32ChunkFactor : 1);
    return static_cast<int>(k * unit);
  }

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
    sms = prop.multiProcessorCount;
    d = model_dims(w);
    check_stack_fits(d, prop);
    d.wgmma = use_wgmma(d, prop);
    d.stack_ws = use_stack_ws(d);
    d.stack_f16 = use_stack_f16(d, stack_weight_max(w));
    d.radial_fold = !env_on("SEZM_CUDA_RADIAL_LEGACY");
    const char* f16 = std::getenv("SEZM_CUDA_F16_ROWS");
    d.f16_rows = f16 != nullptr && f16[0] == '0' ? 0 : 1;
    const char* f16z = std::getenv("SEZM_CUDA_F16_Z");
    d.f16_z = f16z != nullptr && f16z[0] == '0' ? 0 : 1;
    SEZM_CUDA(cudaStreamCreate(&s));
    const char* tv = std::getenv("SEZM_CUDA_TIMING");
    timer.enabled = tv && *tv && *tv != '0';
    dw.upload(w, d, &mem, s);
    fixed_bytes = mem.current;
    bridge.init(w);
  }
  ~Impl() {
    if (s) cudaStreamDestroy(s);
  }

  // ---- edge state (EdgeState, engine.h; docs/ARCHITECTURE.md, "Device memory per edge") ----
  EdgeState edge_state = EdgeState::kAuto;  // as set (set_edge_state)
  EdgeState last_state = EdgeState::kAuto;  // what the latest call used
  bool chunk_geo = false;  // this call: geometry, radial features, env-seed edge state and their adjoints per chunk
  // This call: the radial tables and the attention's logit bias from the radial MLP's hidden layer
  // (radial_prep_folds), the softmax per chunk after them, and the blocks reading no radial features;
  // the blocks' radial adjoint from the kernel and logit adjoints (radial_backward_folds, with the
  // fused source backward that leaves them).
  bool fold_prep = false, fold_bwd = false;
  // This call: rho holds one chunk's rows with the edge state kept too (with fold_prep, in lean
  // mode, and in fast mode with gie_fold: only the GIE reads it; its backward, and its forward
  // without gie_fold, recompute it per chunk: 512 B per edge less).
  bool rho_chunk = false;
  // This call: the GIE's forward from the radial MLP's hidden layer (launch_gie_forward_folded), so
  // the embedding's forward reads no radial features; every edge state and mode alike (same bits).
  bool gie_fold = false;
  // This call: the GIE's edge backward from the radial MLP's hidden layer too (gie_backward_folds):
  // no radial features recomputed for it, no rho_bar; the radial backward takes its G rows.
  bool gie_fold_bwd = false;
  // This call: nothing reads radial features (CallShape::no_rho): rho holds no rows, rho_v is null.
  bool no_rho = false;
  size_t fixed_bytes = 0;  // held from construction on (the weights): not the call's to reuse
  size_t checked_keep_bytes = 0;  // the largest kept-edge-state call found to fit (prepare_call)
  // chunk_geo: the chunk whose rows the edge buffers hold, and which of them are computed.
  enum : unsigned { kGeo = 1, kRho = 2, kSeed = 4 };
  int held_e0 = -1, held_e1 = -1;
  unsigned held = 0;

  // Edge e's row of a per-edge buffer of `stride` floats, addressed by the absolute edge index e
  // for any edge of chunk c: the call's array itself, or (per_chunk; chunk_geo by default) the chunk's rows, stored
  // from (e0 stride) mod 4 floats on and shifted back by e0 rows, so every kernel indexes them as
  // it indexes the call's arrays and every row keeps its 16-byte phase (the allocation is
  // 256-byte aligned). Only rows e0 .. e1 - 1 of the shifted pointer are ever touched.
  template <class T>
  T* ev(const DBuf<T>& b, size_t stride, const Chunk& c, bool per_chunk) const {
    if (!per_chunk) return b.data();
    const size_t at = static_cast<size_t>(c.e0) * stride;
    return b.data() + (at & 3) - at;
  }
  template <class T>
  T* ev(const DBuf<T>& b, size_t stride, const Chunk& c) const {
    return ev(b, stride, c, chunk_geo);
  }
  // The whole call as one chunk (for the views of the kept edge state).
  Chunk whole() const { return Chunk{0, N, 0, E, 0, 0}; }

  // ---- views of the buffers the launchers take ----
  GraphDev graph() const { return GraphDev{N, NT, E, src.data(), dst.data(), off.data(), types.data()}; }
  EdgeGeomDev geom(const Chunk& c) const {
    return EdgeGeomDev{ev(vecf, 3, c), ev(r, 1, c),     ev(env, 1, c),
                       ev(denv, 1, c), ev(rbf, d.nr, c), ev(Dc, d.dc_size, c)};
  }
  EdgeGeomBarDev geom_bar(const Chunk& c) const {
    return EdgeGeomBarDev{ev(env_bar, 1, c), ev(rbf_bar, d.nr, c), ev(Dc_bar, d.dc_size, c), ev(vec_bar, 3, c)};
  }
  // The same views moved to the chunk's first edge (for launchers that index edges from 0).
  EdgeGeomDev geom_at(const Chunk& c) const {
    EdgeGeomDev g = geom(c);
    const size_t e0 = c.e0;
    return EdgeGeomDev{g.vecf + 3 * e0, g.r + e0, g.env + e0, g.denv + e0, g.rbf + e0 * d.nr, g.Dc + e0 * d.dc_size};
  }
  EdgeGeomBarDev geom_bar_at(const Chunk& c) const {
    EdgeGeomBarDev b = geom_bar(c);
    const size_t e0 = c.e0;
    return EdgeGeomBarDev{b.env_bar + e0, b.rbf_bar + e0 * d.nr, b.Dc_bar + e0 * d.dc_size, b.vec_bar + 3 * e0};
  }
  // The radial features: the call's rows, or one chunk's (chunk_geo, rho_chunk) shifted as ev's.
  float* rho_v(const Chunk& c) const {
    if (no_rho) return nullptr;
    return ev(rho, static_cast<size_t>(d.L + 1) * d.C, c, chunk_geo || rho_chunk);
  }
  EdgeRadialIn radial_in(const Chunk& c) const {
    return EdgeRadialIn{rho_v(c), dw.mw.type_emb, src.data(), dst.data(), types.data()};
  }
  EnvSeedArgs env_seed_args() {
    EnvSeedArgs a{};
    a.g = graph();
    a.geo = geom(whole());
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

  // chunk_geo: computes what `need` (kGeo | kRho | kSeed) asks of chunk c's edge state into the
  // edge buffers, unless they hold it already (the fused block's forward and backward of a
  // chunk share one computation). Nothing with the edge state kept (computed once per call).
  void chunk_geometry(const Chunk& c, unsigned need);
  // chunk_geo, with gradients: clears chunk c's geometry adjoints before a (block, chunk) share,
  // and maps the share through the geometry backward into dE/dv (added; linear in the adjoints).
  void zero_chunk_bars(const Chunk& c);
  void geometry_share(const Chunk& c);
  // The radial MLP's forward on chunk c's edges into its rows of rho (rho_v), and the GIE's
  // forward on its centres (their in-edges are the chunk's; X[0]'s rows l >= 1).
  void radial_forward_chunk(const Chunk& c);
  void gie_forward_chunk(const Chunk& c);
  // chunk_geo: the embedding's forward (degree, radial features, env-seed, GIE) chunk by chunk,
  // and its backward after the blocks' (node parts over all centres, then per chunk).
  void embedding_forward_chunks();
  void embedding_backward_chunks();
  // The envelope softmax of block b over the centres of chunk c (all centres: whole()).
  // lbias: the chunk's radial logit bias from the folded tables (chunk_forward), else nullptr (from R).
  void softmax_forward(int b, const Chunk& c, const float* lbias = nullptr);

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
  bool keep_stack = false;  // fast mode on a call with gradients: the forward keeps z and the stack output
  float* chunk_z(int b, int k, const Chunk& c) {
    if (mode != CudaMode::kFast || b == fused_block) return Zc[k].data();
    return Zall[b][k].data() + kept_offset(stack_z_f16(d), c);
  }
  // Where chunk c's rows start in a buffer of the call's rows (Zall, Uall): (F, e0, ROW) floats on,
  // or binary16 rows (f16_rows.cuh), half the bytes (f16_kept_offset).
  size_t kept_offset(bool f16, const Chunk& c) const {
    return f16 ? f16_kept_offset(d.F, d.ROW, c.e0, c.n0) : (size_t)d.F * c.e0 * d.ROW;
  }
  // The out-of-memory messages' advice for fast mode: what lean keeps less per edge (z and the
  // stack output of the blocks before the last, 4 bytes each).
  std::string lean_advice() const {
    const auto rows = [&](bool f16) { return f16 ? d.F * d.ROW / 2.0 + 2 * d.F : 1.0 * d.F * d.ROW; };  // kept_offset's
    const double row = d.ngated * rows(stack_z_f16(d)) + rows(stack_out_f16(d)) + (keep_src ? keep_src_rows(d).total() : 0);
    const double kb = cfg.n_blocks > 1 ? 4e-3 * (cfg.n_blocks - 1) * row : 0.0;
    char a[96];
    std::snprintf(a, sizeof a, "use mode lean (it keeps about %.1f kB less per edge), or", kb);
    return a;
  }
  // Fast mode's kept stack output of chunk c of block b (the blocks before the fused one, with
  // keep_stack), or null: its backward reads it instead of recomputing the stack.
  float* kept_u(int b, const Chunk& c) {
    return keep_stack && b != fused_block ? Uall[b].data() + kept_offset(stack_out_f16(d), c) : nullptr;
  }
  // This call: fast mode's blocks before the fused one keep their stack's input side too (the
  // kernel values, S_src, the focus competition: 384 B per edge for C.pt), so their backward
  // recomputes nothing of the forward (with the degree mixer, whose tables need no Rh rows).
  bool keep_src = false;
  // The rows of chunk c of block b's stack input side: kept (keep_src, the blocks before the
  // fused one) or the chunk scratch. The backward overwrites kern with its adjoint (the source
  // backward), which the radial backward then reads.
  struct SrcRows {
    float *kern, *Ssrc, *fc_p, *alpha_fc;
  };
  SrcRows src_rows(int b, const Chunk& c) {
    if (!keep_src || b == fused_block) return SrcRows{kern_c.data(), Ssrc.data(), fc_p.data(), alpha_fc.data()};
    const size_t e0 = c.e0;
    const KeepSrcRows k = keep_src_rows(d);
    return SrcRows{Kall[b].data() + e0 * k.kern, Sall[b].data() + e0 * k.ssrc, FPall[b].data() + e0 * k.p,
                   FAall[b].data() + e0 * k.w};
  }

  // What one chunk edge costs on a call's route (geo: the edge state per chunk), in bytes: the
  // call's sizing less that of a chunk of no edges; the latest call's in chunk_edge_bytes (the
  // out-of-memory messages, engine.cu and engine_api.cu).
  double chunk_edge_cost(CallShape shape, bool geo) const;
  double chunk_edge_bytes = 0.0;

  // Forward of one chunk's value path up to the stack output; returns the buffer holding it. In
  // the backward (`recompute`), lean mode recomputes every layer and keeps the chunk's gated
  // pre-activations; fast mode recomputes only the stack's input side (the radial tables, the
  // focus competition's state) and returns the kept stack output. The fused block's forward keeps
  // the pre-activations in chunk scratch for its backward right behind.
  float* chunk_forward(int b, const Chunk& c, bool recompute);

  // Block b's node steps after its aggregation on the nodes [n0, n0 + n): output gate, post
  // linear and norm, FFN, residual. Every node's rows depend only on its own, which is what lets
  // the fused block run them chunk by chunk.
  void node_forward(int b, int n0, int n);
  // The same over every centre (batches of node_rows with the edge state per chunk).
  void node_forward_all(int b);
  void node_backward_all(int b);
  // The node steps' scratch rows count from node_base (0 with the edge state kept; the batch's or
  // the chunk's first centre per chunk: NodeScratch). The FFN hidden rows of block b from node n0.
  int node_base = 0;
  float* ffn_hidden(int b, int n0) {
    return ffn_h[share_ffn ? 0 : b].data() + (size_t)(n0 - node_base) * d.D * 2 * d.KF * d.H;
  }

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

  // rho_bar_c (the chunk's rows) through the radial MLP's backward into env_bar and rbf_bar; with
  // `fold`, that block's kernel adjoint (kb: the chunk's rows) and logit adjoint instead; with
  // `plain`, G = W1 rho_bar's rows in kb (the folded GIE backward).
  void radial_backward_chunk(const Chunk& c, const BlockWDev* fold = nullptr, const float* kb = nullptr,
                             bool plain = false);
  // The GIE's edge shares of chunk c (Wigner-row and gate adjoints) and, through the radial MLP's
  // backward, its radial share: folded (gie_fold_bwd) or through rho_bar (rho: the chunk's radial
  // features, read by the unfolded route only).
  void gie_radial_backward_chunk(const Chunk& c, const float* rho);

  void begin_block_backward();

  // After every chunk of block b's backward: the attention node steps, X_bar = X1_bar (centres) +
  // H_bar W_pre^T (all nodes), the ghost rows' gradients folded back to their owners.
  void end_block_backward(int b, FeatureExchange<double>* ex);

  // Plans the call's chunks and sizes its buffers (size_for_call). With gradients the last block
  // runs its backward chunk by chunk right behind its forward (everything after its aggregation
  // is per node): it keeps its gated pre-activations in chunk scratch, is never recomputed, and
  // fast mode keeps z only for the blocks before it.
  // The edge state is chosen here (kAuto: kept when the call's buffers with it fit in 90 % of the
  // device's free memory plus what the engine holds, else per chunk); a call that does not fit
  // even per chunk is refused before any allocation with a sezm::Error saying what it needs.
  void prepare_call(const Graph& gv, bool gradients);

  EngineResult compute(const Graph& gv, bool gradients, FeatureExchange<double>* ex);

  // What this call hands back with gradients (set by CudaEngine::call for the call's duration):
  // 0 dE/dv per edge; 1 the forces and virial assembled on the device (Engine::compute_forces);
  // 2 also the per-atom virial. A bridged model returns dE/dv whatever is asked (its bridge maps
  // it on the host, bridging.cuh).
  int force_output = 0;
  // After the backward (edge_grad complete, the sources grouped): the forces, virial and
  // (force_output 2) per-atom virial on the device, copied into res; synchronises the stream.
  // Where a force is not finite res.edge_grad is copied too (require_finite_result names the edge).
  void assemble_forces(EngineResult& res);
};

}  // namespace sezm
