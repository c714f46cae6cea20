#pragma once
// The CUDA engine's device buffers, grouped by lifetime, and their sizing per call (buffers.cu).
// All grow only (amortised across MD steps) and are counted in the engine's MemCounter.
// Layouts: cuda_common.cuh.
#include <algorithm>
#include <vector>

#include "graph/graph.h"
#include "model_dev.cuh"

namespace sezm::cuda {

// The call's graph, uploaded per call (graph_upload.cu, through graph_pin), and the results
// copied back.
struct GraphBuffers {
  DBuf<int> src, dst, off, types;
  DBuf<double> vec;
  DBuf<char> graph_in;  // the compact geometry as uploaded (graph/graph.h), vec formed from it
  PinnedBuf<char> graph_pin;
  DBuf<double> edge_grad;    // (E, 3) dE/dv_e
  DBuf<double> atom_energy;  // (N)
  // Assembled on the device (Engine::compute_forces; force_assembly.cuh): forces (NT, 3), the
  // centres' in-edge virials (N, 9), the per-atom virial (NT, 9, when asked) and the virial (9).
  DBuf<double> forces, node_virial, atom_virial, virial;
};

// Per edge. With the edge state kept (EdgeState::kKeep) every array holds the call's edges; per
// chunk (kChunk) the geometry, radial features, env-seed edge state and their adjoints hold one
// chunk's rows (recomputed where a step needs them, CudaEngine::Impl::chunk_geometry), and only
// alpha and the graph stay per call.
struct EdgeBuffers {
  DBuf<float> vecf, r, env, denv, rbf, Dc;  // geometry (EdgeGeomDev)
  DBuf<float> rho;                          // radial features (E, L+1, C)
  DBuf<float> g, seed;                      // env-seed edge MLP output and seed
  std::vector<DBuf<float>> alpha;           // per block: attention weights (E, F), always per call
  DBuf<float> Dc_bar, rbf_bar, env_bar, vec_bar;  // gradients: geometry adjoints (EdgeGeomBarDev)
  DBuf<double> eg_c;                        // per chunk: a (block, chunk) share of dE/dv (Ec, 3)
};

// Per node, kept for the whole call: the embedding and each block's forward state that the
// backward reads.
struct NodeBuffers {
  DBuf<float> isd, A, f;  // degree, env-seed A and FiLM inputs
  std::vector<DBuf<float>> X;  // n_blocks + 1 node features (NT, D, C)
  std::vector<DBuf<float>> H, q, k, qk_rho, gate_rho, gamma, P, O, post_rho, X1, pre_rho, Xt, ffn_h;  // per block
};

// Per node, reused by every block: forward scratch and the backward's running gradients. The
// pure scratch of the node steps (nodeA, ybuf, nodeA_bar, hbar, tmpN, and ffn_h where shared)
// has node_rows rows: every node with the edge state kept; with it per chunk (EdgeState::kChunk)
// one batch of nodes (kNodeBatch, or the most centres of a chunk), the node steps running batch
// by batch with the scratch rows counted from the batch's first node (CudaEngine::Impl::node_base).
struct NodeScratch {
  DBuf<float> nodeA, ybuf;                           // forward: gated aggregate, FFN grid values
  DBuf<float> grid_scratch, ro_desc, ro_dbar, mn_xbar;  // SO(3) grid nets (grid_net.cuh): scratch, read-out
                                                        // descriptor and its adjoint, message-node context adjoint
  DBuf<float> Xb, Xb_prev;                           // dE/dX of the current block's output / input
  DBuf<float> isd_bar, A_bar, tmpN;                  // embedding backward, norm scratch
  DBuf<float> nodeA_bar, Pb, gamma_bar, q_bar, k_bar, H_bar, hbar;  // block backward
  int node_rows = 0;        // rows of the node steps' scratch
  int node_batch = 16384;   // kChunk: nodes per batch (kNodeBatch below; CudaEngine::set_node_batch)
  bool share_ffn = false;   // EdgeState::kChunk: one FFN hidden buffer (ffn_h[0], node_rows rows) for
                            // every block, the blocks before the fused one recomputing it in their backward
};
// Nodes per batch of the node steps' scratch with the edge state per chunk (~40 kB per node for
// the shipped potentials: ~0.65 GB).
constexpr int kNodeBatch = 16384;

// Chunk scratch: every per-edge activation of the SO(2) value path lives here for one chunk.
// rho_bar_c: the chunk's radial-feature adjoint. The radial MLP's backward is linear in it, so
// each (block, chunk) share goes through it at once instead of a (E, L+1, C) sum being kept.
struct ChunkScratch {
  DBuf<float> U0, Ua;                   // the stack's two ping-pong activations (F, Ec, ROW), U0 its input
  DBuf<float> Ssrc, fc_p, alpha_fc;     // focus competition
  DBuf<float> Rh_c, kern_c;             // the chunk's radial tables
  DBuf<float> lbias_c;                  // the chunk's radial logit bias (Ec, F), from the folded tables
  DBuf<float> Ssrc_bar, Xloc_bar, alpha_bar, lbar, rho_bar_c;  // backward (Xloc_bar: two-kernel source path)
  std::vector<DBuf<float>> Zc;                 // the chunk's gated pre-activations (lean recompute, fused block)
  std::vector<std::vector<DBuf<float>>> Zall;  // fast: [block before the fused one][gated layer], every edge
  std::vector<DBuf<float>> Uall;               // fast: [block before the fused one], its stack output, every edge
  // fast with keep_src: [block before the fused one] its kernel values (E, Kp), S_src (per chunk
  // (F, Ec, Cf) at F e0 Cf), the focus competition's p and weights (E, F): what its backward read
  // from a recompute of the radial tables, the rotation and the competition.
  std::vector<DBuf<float>> Kall, Sall, FPall, FAall;
};

// The sizes of a call that set its device memory. max_ec, max_nc: the most edges and centres of
// a chunk; keep_stack: the forward keeps the gated pre-activations and the stack output of every
// edge of the blocks before the last (fast mode with gradients); chunk_geo: the per-edge geometry
// and its kin hold one chunk (EdgeState::kChunk); rho_chunk: the radial features hold one chunk
// whatever the edge state (lean mode where the blocks read none, radial_prep_folds: only the GIE
// does, and recomputes them per chunk); keep_src: with keep_stack, the blocks before the last
// also keep the stack's input side per edge (kernel values, S_src, the focus competition);
// compact_bytes: the graph's compact geometry as uploaded (compact_upload_bytes; 0: vec itself);
// no_rho: nothing of the call reads radial features (the blocks take the folded tables, the GIE's
// forward and backward the radial MLP's hidden layer): no rows of them at all.
struct CallShape {
  int N, NT;
  long E;
  int max_ec, max_nc, n_blocks;
  bool gradients, keep_stack, chunk_geo, rho_chunk, keep_src;
  int node_batch;
  size_t compact_bytes = 0;
  bool no_rho = false;
};

// Floats per edge of one block's kept stack input side (CallShape::keep_src; ChunkScratch's
// Kall, Sall, FPall, FAall): the kernel values, S_src, the focus competition's p and weights.
struct KeepSrcRows {
  size_t kern, ssrc, p, w;
  size_t total() const { return kern + ssrc + p + w; }
};
inline KeepSrcRows keep_src_rows(const Dims& d) {
  return {static_cast<size_t>(padded_kernel_size(d)), static_cast<size_t>(d.F) * d.Cf, static_cast<size_t>(d.F),
          static_cast<size_t>(d.F)};
}

// The bytes of g's compact geometry on the device (graph_upload.cu's layout), or 0 where g has
// none (graph/graph.h: compact_geometry, which also checks it and throws where it is not vec's).
size_t compact_upload_bytes(const Graph& g);

// Every buffer of the engine, the byte counter they share, and the current call's graph sizes.
struct EngineBuffers : GraphBuffers, EdgeBuffers, NodeBuffers, NodeScratch, ChunkScratch {
  MemCounter mem;
  int N = 0, NT = 0, E = 0;  // the current call's graph sizes

  template <class T>
  T* grow(DBuf<T>& b, size_t n) {
    b.set_counter(&mem);
    return b.resize(n);
  }
  template <class T>
  T* grow_zero(DBuf<T>& b, size_t n, cudaStream_t s) {
    T* p = grow(b, n);
    b.zero(s);
    return p;
  }

  // Uploads the graph on `s` and sizes every buffer the call of shape c (CallShape) needs before
  // the first launch (the per-block node state grows inside the block loop, grow_block).
  // graph_from: the buffers of an engine on the same device that holds the same graph already (a
  // committee's leader): its graph is copied device to device instead of uploaded.
  void size_for_call(const Graph& g, const Dims& d, const CallShape& c, cudaStream_t s,
                     const EngineBuffers* graph_from = nullptr);
  // The graph of the call (sizes N, NT, E set) onto the device on `s` (graph_upload.cu): vec
  // itself, or with compact_bytes > 0 its compact geometry, from which vec is formed there.
  void upload_graph(const Graph& g, size_t compact_bytes, cudaStream_t s);
  // The per-edge geometry (vecf, r, env, denv, Dc, and rbf where `with_rbf`) of `from`'s latest
  // call, of the same graph, copied device to device instead of computed (after size_for_call).
  void copy_geometry(const EngineBuffers& from, const Dims& d, bool with_rbf, cudaStream_t s);
  // Per-block node buffers of block b (grown as the forward reaches it).
  void grow_block(int b, const Dims& d);
};

// The rows of the node steps' scratch (NodeScratch::node_rows) for a call of N centres: all of
// them, or (chunk_geo) a batch, at least the most centres of a chunk.
inline int node_scratch_rows(int N, int max_nc, bool chunk_geo, int batch) {
  return chunk_geo ? std::min(N, std::max(std::max(batch, 1), max_nc)) : N;
}
// The engine buffers' bytes at the call's peak: every buffer size_for_call, grow_block, the
// block loop and the backward grow, with DBuf's slack, the same sizes as the code (buffers.cu).
// Not counted: the weights (held since construction), the source grouping's segment arrays (a
// few bytes per edge; its permutation is counted), a bridged model's per-edge gate (8 bytes
// per edge) and the device-assembled forces and virials (at most 168 bytes per node). For the
// edge-state choice and the up-front memory check (CudaEngine::Impl::prepare_call).
size_t call_device_bytes(const Dims& d, const CallShape& c);

}  // namespace sezm::cuda
