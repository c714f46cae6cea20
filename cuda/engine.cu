// CUDA engine: the orchestration of forward and backward (same order and names as the CPU
// engine, src/engine/sezm_model.cpp) and store-or-recompute per mode. CudaEngine's public
// wrappers: engine_api.cu; the per-chunk edge state: engine_edge_state.cu; weights: device_weights.cpp; buffers and their sizing: buffers.cu;
// device queries: device.cu; chunks and source grouping: chunks.cu; timing and ghost staging:
// host_support.cuh (row gathers: ghost_rows.cu); kernels: one file per component.
//
// Edges are processed in chunks of whole destination segments (at most `chunk_edges` edges):
// every per-edge activation of the SO(2) value path lives only in chunk-sized scratch, so device
// memory is O(E * geometry + chunk * activations). In lean mode the backward recomputes each
// chunk's rotation and whole stack, and with the degree mixer it keeps no radial features: the
// GIE's forward reads none (launch_gie_forward_folded), nor for C = 32 its backward
// (launch_gie_edge_backward_folded; other widths recompute them per chunk, CallShape::rho_chunk);
// in fast mode the forward keeps the gated layers'
// pre-activations and the stack output of every edge (the blocks before the last), and the
// backward recomputes only the radial tables, the rotation's source sums and the focus competition.
//
// ZBL bridging (docs/model.md §9) runs on the host around this orchestration (bridging.cuh): the
// clamped edge vectors replace the raw ones before the geometry, the per-edge gate goes to the
// env-seed, GIE and softmax launchers (nullptr for an unbridged model), the pair energy is added
// to the per-atom energies, and the gate's adjoint is mapped back after the geometry backward.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine_impl.cuh"

namespace sezm {

namespace {

template <class T>
__global__ void add_k(long n, const T* __restrict__ a, T* b) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] += a[i];
}

}  // namespace

void launch_add(long n, const float* a, float* b, cudaStream_t s) {
  if (n > 0) add_k<float><<<div_up(n, 256), 256, 0, s>>>(n, a, b);
}
void launch_add(long n, const double* a, double* b, cudaStream_t s) {
  if (n > 0) add_k<double><<<div_up(n, 256), 256, 0, s>>>(n, a, b);
  SEZM_LAUNCH("add");
}

void CudaEngine::Impl::softmax_forward(int b, const Chunk& c, const float* lbias) {
  launch_attention_softmax_forward(d, dw.bw[b],
                                   SoftmaxArgs{c.n1 - c.n0, src.data(), off.data() + c.n0, ev(env, 1, c), radial_in(c),
                                               q[b].data() + (size_t)c.n0 * d.Cw, k[b].data(), alpha[b].data(),
                                               bridge.gate(), lbias, c.e0},
                                   s);
}

// Forward of one chunk's value path up to the stack output; returns the buffer holding it
// (engine_impl.cuh says what each mode keeps).
float* CudaEngine::Impl::chunk_forward(int b, const Chunk& c, bool recompute) {
  const int Ec = c.e1 - c.e0;
  const BlockWDev& w = dw.bw[b];
  const bool save_z = recompute || b == fused_block || keep_stack;
  float* const kept = kept_u(b, c);  // fast: the stack's output goes there, and its backward reads it
  if (recompute && kept && keep_src) return kept;  // its stack input side was kept too
  const bool inputs_only = recompute && kept;  // fast's backward: what the stack's backward reads besides
  const SrcRows sr = src_rows(b, c);
  mark(recompute ? "bwd: recompute radial prep" : "fwd: radial prep");
  // Folded, the softmax runs per chunk right here on the prep's logit bias, whatever the edge state,
  // so that both edge states give the same bits.
  const bool softmax_here = fold_prep && !recompute;
  const EdgeGeomDev geo = geom_at(c);
  const RadialFoldIn fold{fold_prep ? &dw.mw : nullptr, c.e0, Ec, geo.rbf, geo.env, src.data(), dst.data(),
                          types.data(), d.F, softmax_here ? lbias_c.data() : nullptr};
  launch_radial_prep(d, w, RadialTablesArgs{c.e0, Ec, radial_in(c), Rh_c.data(), sr.kern, nullptr, fold}, s);
  if (softmax_here) {
    mark("fwd: softmax (per chunk)");
    softmax_forward(b, c, lbias_c.data());
  }
  mark(recompute ? "bwd: recompute rotate" : "fwd: rotate+condition");
  launch_rotate_condition(d, w,
                          RotateConditionArgs{c.e0, Ec, src.data(), ev(Dc, d.dc_size, c), H[b].data(), Rh_c.data(),
                                              sr.kern, inputs_only ? nullptr : U0.data(), sr.Ssrc},
                          s);
  mark(recompute ? "bwd: recompute focus compete" : "fwd: focus compete");
  FocusCompeteArgs fc{};
  fc.e0 = c.e0; fc.Ec = Ec; fc.Ssrc = sr.Ssrc; fc.fc_p = sr.fc_p; fc.alpha_fc = sr.alpha_fc;
  launch_focus_compete(d, w, fc, s);
  if (inputs_only) return kept;  // the stack's output was kept (its pre-activations too)
  // Two buffers suffice: a layer reads only its input (its residual too) and writes its output,
  // and the backward reads only the stack output and the kept z (chunk_backward).
  if (stack_ws_chain(d)) {  // every layer in one launch
    mark(recompute ? "bwd: recompute stack, chained" : "fwd: stack, chained");
    float* zs[kStackChainMax] = {};
    for (int k = 0; k < d.ngated && save_z; ++k) zs[k] = chunk_z(b, k, c);  // ngated <= nL <= the max
    return launch_stack_chain_forward(d, w, Ec, U0.data(), Ua.data(), zs, kept, s);
  }
  float* in = U0.data();
  float* bufs[2] = {Ua.data(), U0.data()};
  for (int k = 0; k < d.nL; ++k) {
    float* out = k + 1 == d.nL && kept ? kept : bufs[k % 2];
    const bool gated = k < d.ngated;
    // Gated and linear layers timed apart (the gate products and epilogue are the difference).
    if (gated) mark(recompute ? "bwd: recompute stack, gated" : "fwd: stack, gated");
    else mark(recompute ? "bwd: recompute stack, linear" : "fwd: stack, linear");
    launch_stack_layer_forward(d, w, k, Ec, in, out, gated && save_z ? chunk_z(b, k, c) : nullptr, s);
    in = out;
  }
  return in;
}

// Block b's node steps after its aggregation on the nodes [n0, n0 + n): output gate, post
// linear and norm, FFN, residual. Every node's rows depend only on its own, which is what lets
// the fused block run them chunk by chunk.
void CudaEngine::Impl::node_forward(int b, int n0, int n) {
  if (n <= 0) return;
  const BlockWDev& w = dw.bw[b];
  const size_t o = n0, nodeW = (size_t)d.D * d.C, nodeWw = (size_t)d.D * d.Cw;
  const size_t so = n0 - node_base;  // row of node n0 in the node steps' scratch
  float* Ab = nodeA.data() + so * nodeWw;
  EqNormPairArgs na{};  // then X1 = norm_post(O) + X, Xt = norm_pre(X1)
  na.N = n; na.L = d.L; na.C = d.C; na.X = X[b].data() + o * nodeW;
  na.post_scale = w.post_scale; na.post_bias = w.post_bias; na.post_eps = w.post_eps;
  na.pre_scale = w.pre_scale; na.pre_bias = w.pre_bias; na.pre_eps = w.pre_eps;
  na.X1 = X1[b].data() + o * nodeW; na.post_rho = post_rho[b].data() + o;
  na.Xt = Xt[b].data() + o * nodeW; na.pre_rho = pre_rho[b].data() + o;
  if (w.has_mn) {  // A = gate(P), A += MN(A, H) (docs/model.md §5.11), then the post-focus mix
    OutputGateArgs ga{};
    ga.N = n; ga.gamma = gamma[b].data() + o * d.F; ga.P = P[b].data() + o * nodeWw; ga.A = Ab;
    launch_gate_post(d, ga, s);
    launch_grid_cross_forward(d, dw.mw.so3, w.mn, n, Ab, H[b].data() + o * nodeWw, grid_scratch.data(), s);
    launch_post_mix_norms(d, n, nullptr, Ab, w.post, O[b].data() + o * nodeW, na, s);
  } else {  // the gate folded into the mix's input
    launch_post_mix_norms(d, n, gamma[b].data() + o * d.F, P[b].data() + o * nodeWw, w.post, O[b].data() + o * nodeW,
                          na, s);
  }
  // X[b+1] = FFN(Xt) + X1, the residual added by the FFN's last linear.
  launch_ffn_forward(d, dw.mw, w, n, Xt[b].data() + o * nodeW, ffn_hidden(b, n0), ybuf.data() + so * d.D * d.KF * d.H,
                     X[b + 1].data() + o * nodeW, grid_scratch.data(), s, X1[b].data() + o * nodeW);
}

// Block b's node steps on every centre: at once, or (chunk_geo) batch by batch of the scratch's
// rows. Every node's rows depend only on its own, so the results are the same to the bit.
void CudaEngine::Impl::node_forward_all(int b) {
  for (int n0 = 0; n0 < N; n0 += node_rows) {
    node_base = n0;
    node_forward(b, n0, std::min(node_rows, N - n0));
  }
  node_base = 0;
}
void CudaEngine::Impl::node_backward_all(int b) {
  for (int n0 = 0; n0 < N; n0 += node_rows) {
    node_base = n0;
    node_backward(b, n0, std::min(node_rows, N - n0));
  }
  node_base = 0;
}

// so3_readout mlp: the descriptor comes from the grid read-out (grid_net.cu, docs/model.md §5.13),
// the fitting net's backward hands dE/ddesc back to it.
void CudaEngine::Impl::readout_forward(int n0, int n) {
  if (n <= 0) return;
  const float* Xn = X[cfg.n_blocks].data() + (size_t)n0 * d.D * d.C;
  const float* desc = nullptr;
  if (dw.mw.ro_so3) {
    launch_grid_readout_forward(d, dw.mw, n, Xn, ro_desc.data() + (size_t)n0 * d.C, grid_scratch.data(), s);
    desc = ro_desc.data() + (size_t)n0 * d.C;
  }
  launch_readout_fitting_forward(d, dw.mw, dw.fit, n, Xn, types.data() + n0, atom_energy.data() + n0, desc, s);
}

// What one chunk edge costs on a call's route (geo: the edge state per chunk): the call's bytes
// less those of a chunk of no edges (the out-of-memory messages).
double CudaEngine::Impl::chunk_edge_cost(CallShape shape, bool geo) const {
  const int ec = shape.max_ec;
  if (ec <= 0) return 0.0;
  shape.chunk_geo = geo;
  const size_t at = call_device_bytes(d, shape);
  shape.max_ec = 0;
  const size_t none = call_device_bytes(d, shape);
  return double(at - std::min(at, none)) / ec;
}

// Plans the call's chunks and sizes its buffers (size_for_call). With gradients the last block
// runs its backward chunk by chunk right behind its forward (everything after its aggregation
// is per node): it keeps its gated pre-activations in chunk scratch, is never recomputed, and
// fast mode keeps z only for the blocks before it.
void CudaEngine::Impl::prepare_call(const Graph& gv, bool gradients) {
  plan.plan(gv, effective_chunk_edges());
  fused_block = gradients ? cfg.n_blocks - 1 : -1;
  keep_stack = mode == CudaMode::kFast && gradients;
  fold_prep = d.radial_fold && radial_prep_folds(d);
  fold_bwd = d.radial_fold && radial_backward_folds(d) && source_backward_fused(d);
  gie_fold = d.radial_fold && gie_forward_folds(d);
  gie_fold_bwd = gradients && gie_backward_folds(d);
  // Fast mode keeps no rho either where the GIE's forward needs none: its memory pays for keeping
  // the blocks' stack input side instead (keep_src).
  rho_chunk = fold_prep && (mode == CudaMode::kLean || gie_fold);
  keep_src = keep_stack && d.degree_mixer && rho_chunk;
  // The blocks folded, and the GIE's forward and backward from the radial MLP's hidden layer: no
  // kernel of the call reads radial features (C.pt: 512 B per chunk edge less).
  no_rho = fold_prep && gie_fold && (!gradients || gie_fold_bwd);
  CallShape shape{gv.n_nodes, gv.n_total, gv.n_edges(), plan.max_edges(), plan.max_nodes(), cfg.n_blocks,
                  gradients,  keep_stack, false,        rho_chunk,        keep_src, node_batch,
                  geometry_from ? 0 : compact_upload_bytes(gv)};
  shape.no_rho = no_rho;
  const size_t keep_bytes = call_device_bytes(d, shape);
  shape.chunk_geo = true;
  const size_t chunk_bytes = call_device_bytes(d, shape);
  // The device query is a driver call: MD steps, whose sizes barely change, skip it while the
  // edge state is kept and the call needs no more than the latest call that was checked.
  if (edge_state != EdgeState::kChunk && keep_bytes <= checked_keep_bytes) {
    chunk_geo = false;
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    SEZM_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t budget = free_bytes + (mem.current - fixed_bytes);  // what the engine holds is reused
    chunk_geo = edge_state == EdgeState::kChunk || (edge_state == EdgeState::kAuto && keep_bytes > budget / 10 * 9);
    const size_t need = chunk_geo ? chunk_bytes : keep_bytes;
    if (need > budget) {
      const bool fast = mode == CudaMode::kFast;
      const double per_chunk_edge = chunk_edge_cost(shape, chunk_geo);
      char msg[900], chunk_advice[96];
      std::snprintf(chunk_advice, sizeof chunk_advice, "use edge state chunk (about %.1f kB less per edge), or",
                    gv.n_edges() > 0 ? 1e-3 * double(keep_bytes - std::min(chunk_bytes, keep_bytes)) / gv.n_edges()
                                     : 0.0);
      std::snprintf(msg, sizeof msg,
                    "device cuda (GPU %d, mode %s, %d edges per chunk, edge state %s): out of GPU memory: %d atoms and "
                    "%d edges need about %.2f GiB of engine buffers (%.0f bytes per atom), %.2f GiB are free (counting "
                    "the %.2f GiB the engine holds); %s a smaller chunk (pair_style ... chunk N, sezm-bench --chunk N; "
                    "each chunk edge costs about %.1f kB), or fewer atoms per GPU (more MPI ranks / GPUs)",
                    device, cuda_mode_name(mode), effective_chunk_edges(), chunk_geo ? "chunk" : "keep", gv.n_total,
                    gv.n_edges(), need / 1073741824.0, gv.n_total > 0 ? double(need) / gv.n_total : 0.0,
                    budget / 1073741824.0, (mem.current - fixed_bytes) / 1073741824.0,
                    fast ? lean_advice().c_str()
                         : chunk_geo ? "use" : chunk_advice,
                    1e-3 * per_chunk_edge);
      throw Error(msg);
    }
    if (!chunk_geo) checked_keep_bytes = keep_bytes;
  }
  chunk_edge_bytes = chunk_edge_cost(shape, chunk_geo);
  last_state = chunk_geo ? EdgeState::kChunk : EdgeState::kKeep;
  held_e0 = held_e1 = -1;
  held = 0;
  mark("call: buffers + graph upload");  // then the buffers' sizing and the graph's upload
  shape.chunk_geo = chunk_geo;
  size_for_call(gv, d, shape, s, geometry_from);
  node_base = 0;
}

EngineResult CudaEngine::Impl::compute(const Graph& gv, bool gradients, FeatureExchange<double>* ex) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  SEZM_CUDA(cudaSetDevice(device));
  mark("call: checks + chunk plan");  // host time to the first kernel: the checks, the chunk plan,
  if (gv.n_total > gv.n_nodes && !ex) throw Error("CudaEngine: a graph with ghost nodes needs a feature exchange");
  for (int i = 0; i < gv.n_total; ++i)
    if (gv.types[i] < 0 || gv.types[i] >= d.ntypes)
      throw Error("CudaEngine: atom type index " + std::to_string(gv.types[i]) + " outside the model's type_map");
  prepare_call(gv, gradients);
  ghosts.reset_stats();
  // Bridging (docs/model.md §9): the device sees the clamped edge vectors and the source gate.
  if (bridge.on()) bridge.forward(gv, ex, vec, gradients, &mem, s);
  const size_t Er = static_cast<size_t>(E), W = static_cast<size_t>(d.L + 1) * d.C;
  const size_t nodeW = static_cast<size_t>(d.D) * d.C, nodeWw = static_cast<size_t>(d.D) * d.Cw;
  const int nb = cfg.n_blocks;
  const std::vector<Chunk>& chunks = plan.chunks;

  // ---- geometry and initial embedding ----
  // Per chunk (chunk_geo) nothing of a leader's geometry is taken (it may hold one chunk only).
  const bool take_geometry = geometry_from && !chunk_geo && !geometry_from->chunk_geo;
  if (geometry_from && !take_geometry) share_level = GeometryShare::kNone;
  DegreeArgs deg{};
  EnvSeedArgs es = env_seed_args();
  GieArgs gie = gie_args();
  if (chunk_geo) {
    embedding_forward_chunks();
  } else {
    if (take_geometry) {  // a committee's leader computed it on this graph (compute_like)
      const bool all = share_level == GeometryShare::kAll;
      mark(all ? "fwd: geometry (shared)" : "fwd: geometry (shared, own radial basis)");
      copy_geometry(*geometry_from, d, all, s);
      if (!all) launch_radial_basis_forward(d, E, r.data(), dw.mw.freqs, rbf.data(), s);
    } else {
      mark("fwd: geometry");
      launch_geometry_forward(d, GeometryForwardArgs{E, vec.data(), dw.mw.freqs, dw.wt, geom(whole())}, s);
    }
    mark("fwd: degree+radial");
    deg.N = N; deg.off = off.data(); deg.env = env.data(); deg.isd = isd.data();
    launch_degree_forward(deg, s);
    if (!rho_chunk) {
      RadialMlpArgs rad{};
      rad.E = E; rad.rbf = rbf.data(); rad.env = env.data(); rad.rho = rho.data();
      launch_radial_forward(d, dw.mw, rad, s);
    }
    mark("fwd: env-seed+GIE");
    es.X0 = X[0].data();
    gie.X0 = X[0].data();  // the GIE's isd backward reads it too
    launch_env_seed_forward(d, dw.mw, es, s);
    if (gie_fold) {  // from the radial MLP's hidden layer: no radial features read
      gie.rbf = rbf.data(); gie.env = env.data();
      launch_gie_forward_folded(d, dw.mw, gie, s);
    } else if (rho_chunk) {  // only the GIE reads the radial features: one chunk's rows at a time
      for (const Chunk& c : chunks) {
        mark("fwd: radial+GIE (per chunk)");
        radial_forward_chunk(c);
        gie_forward_chunk(c);
      }
    } else {
      launch_gie_forward(d, gie, s);
    }
  }

  // ---- blocks ----
  for (int b = 0; b < nb; ++b) {
    const BlockWDev& w = dw.bw[b];
    mark("fwd: exchange");
    if (ex) ghosts.forward(X[b].data(), nodeW, NT, N, ex, &mem, s);
    mark("fwd: node (attention, mix)");
    grow(H[b], static_cast<size_t>(NT) * nodeWw);
    launch_per_degree_linear(NT, d.L, d.C, d.Cw, X[b].data(), w.pre, H[b].data(), false, false, s);
    grow_block(b, d);
    launch_attention_node_forward(d, w, attention_node_args(b), s);
    if (!chunk_geo && !fold_prep) softmax_forward(b, whole());  // per chunk below (or in chunk_forward) otherwise
    const bool fused = b == fused_block;
    if (fused) {
      plan.group_sources(gv, &mem, s, timer.enabled);
      begin_block_backward();
    }
    for (const Chunk& c : chunks) {
      // Folded, the blocks read no radial features (the softmax then runs in chunk_forward).
      if (chunk_geo) chunk_geometry(c, fold_prep ? kGeo : kGeo | kRho);
      if (chunk_geo && !fold_prep) {
        mark("fwd: softmax (per chunk)");
        softmax_forward(b, c);
      }
      float* Uf = chunk_forward(b, c, false);
      mark("fwd: rotate back+aggregate");
      launch_rotate_back_aggregate(d,
                                   AggregateArgs{c.n0, c.n1, c.e0, c.e1 - c.e0, off.data(), ev(Dc, d.dc_size, c), Uf,
                                                 src_rows(b, c).alpha_fc, alpha[b].data(), P[b].data()},
                                   s);
      if (!fused) continue;
      // The chunk's destinations are complete: their node steps, energies and the backward down
      // to the chunk's edges, while its stack state is still on hand.
      mark("fwd: node (norms, FFN)");
      node_base = chunk_geo ? c.n0 : 0;  // the chunk's centres fit the scratch (node_rows >= max_nc)
      node_forward(b, c.n0, c.n1 - c.n0);
      mark("fwd: read-out+fitting");
      readout_forward(c.n0, c.n1 - c.n0);
      mark("bwd: read-out+fitting");
      readout_backward(c.n0, c.n1 - c.n0);
      mark("bwd: node (FFN, norms, gate)");
      node_backward(b, c.n0, c.n1 - c.n0);
      chunk_backward(b, c, Uf);
    }
    node_base = 0;
    if (fused) {
      end_block_backward(b, ex);
      continue;
    }
    mark("fwd: node (norms, FFN)");
    node_forward_all(b);
  }

  // ---- read-out and fitting (the fused block did it per chunk) ----
  if (fused_block < 0) {
    mark("fwd: read-out+fitting");
    readout_forward(0, N);
  }
  EngineResult res;
  res.atom_energy.resize(N);
  mark("fwd: energies to host");
  if (N) SEZM_CUDA(cudaMemcpyAsync(res.atom_energy.data(), atom_energy.data(), N * sizeof(double),
                                   cudaMemcpyDeviceToHost, s));
  SEZM_CUDA(cudaStreamSynchronize(s));
  if (bridge.on()) bridge.zbl_energy(gv, gradients, res.atom_energy.data());  // on the raw edges (§9.3)
  for (double e : res.atom_energy) res.energy += e;
  const auto t1 = clock::now();
  res.seconds_forward = std::chrono::duration<double>(t1 - t0).count();
  res.seconds_exchange = ghosts.seconds;
  res.exchange_bytes = ghosts.bytes;
  if (!gradients) {
    mark("end");
    timer.report(s);
    return res;
  }

  // ---- backward of the blocks before the fused one ----
  for (int b = nb - 2; b >= 0; --b) {
    mark("bwd: node (FFN, norms, gate)");
    node_backward_all(b);
    begin_block_backward();
    for (const Chunk& c : chunks) {
      chunk_geometry(c, fold_prep ? kGeo : kGeo | kRho);
      chunk_backward(b, c, chunk_forward(b, c, true));
    }
    end_block_backward(b, ex);
  }
  grow_zero(isd_bar, N, s);
  grow(A_bar, static_cast<size_t>(N) * 4 * d.es_emb);
  if (chunk_geo) {
    embedding_backward_chunks();  // the geometry backward per chunk into edge_grad
  } else {
    mark("bwd: env-seed");
    es.X0_bar = Xb.data(); es.A_bar = A_bar.data(); es.isd_bar = isd_bar.data();
    es.rbf_bar = rbf_bar.data(); es.vec_bar = vec_bar.data();
    launch_env_seed_backward(d, dw.mw, es, s);
    mark("bwd: GIE");
    gie.X0_bar = Xb.data(); gie.isd_bar = isd_bar.data(); gie.Dc_bar = Dc_bar.data();
    GieArgs gn = gie;  // the isd share (E = 0); the edge shares per chunk below
    gn.E = 0;
    launch_gie_backward(d, gn, s);
    for (const Chunk& c : chunks) {
      if (rho_chunk && !gie_fold_bwd) {  // the chunk's radial features again (rho holds one chunk's rows)
        mark("bwd: recompute radial");
        radial_forward_chunk(c);
      }
      gie_radial_backward_chunk(c, gie_fold_bwd ? nullptr : rho_v(c) + static_cast<size_t>(c.e0) * W);
    }
    mark("bwd: degree");
    deg.isd_bar = isd_bar.data(); deg.env_bar = env_bar.data();
    launch_degree_backward(deg, s);
    edge_grad.set_counter(&mem);
    edge_grad.resize(3 * Er);
    mark("bwd: geometry");
    launch_geometry_backward(
        d, GeometryBackwardArgs{E, geom(whole()), dw.mw.freqs, dw.wt, geom_bar(whole()), edge_grad.data()}, s);
  }
  if (force_output && !bridge.on()) {
    assemble_forces(res);  // copies back the forces and virials, not dE/dv
  } else {
    res.edge_grad.resize(3 * Er);
    if (E) SEZM_CUDA(cudaMemcpyAsync(res.edge_grad.data(), edge_grad.data(), 3 * Er * sizeof(double),
                                     cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    if (bridge.on()) bridge.backward(gv, ex, res.edge_grad, s);  // d/d(clamped v) -> d/dv, plus ZBL
  }
  mark("end");
  timer.report(s);
  res.seconds_backward = std::chrono::duration<double>(clock::now() - t1).count();
  res.seconds_exchange = ghosts.seconds;
  res.exchange_bytes = ghosts.bytes;
  return res;
}

void CudaEngine::Impl::assemble_forces(EngineResult& res) {
  // The host's part (O(segments + nodes)) runs while the device works through the backward.
  plan.group_segments_by_node(NT, &mem, s);
  const size_t nt = static_cast<size_t>(NT);
  const bool with_atoms = force_output == 2;
  for (DBuf<double>* b : {&forces, &node_virial, &atom_virial, &virial}) b->set_counter(&mem);
  ForceAssemblyArgs a{};
  a.N = N; a.NT = NT; a.off = off.data();
  a.perm = plan.perm(); a.seg_off = plan.seg_off(); a.node_seg_off = plan.node_seg_off(); a.node_seg = plan.node_seg();
  a.edge_grad = edge_grad.data(); a.vec = vec.data();
  a.forces = forces.resize(3 * nt);
  a.node_virial = node_virial.resize(9 * static_cast<size_t>(N));
  a.atom_virial = with_atoms ? atom_virial.resize(9 * nt) : nullptr;
  a.virial = virial.resize(9);
  mark("bwd: forces and virial");
  launch_force_assembly(a, s);
  res.forces.resize(3 * nt);
  res.virial.resize(9);
  res.atom_virial.resize(with_atoms ? 9 * nt : 0);
  if (nt) SEZM_CUDA(cudaMemcpyAsync(res.forces.data(), a.forces, 3 * nt * sizeof(double), cudaMemcpyDeviceToHost, s));
  SEZM_CUDA(cudaMemcpyAsync(res.virial.data(), a.virial, 9 * sizeof(double), cudaMemcpyDeviceToHost, s));
  if (with_atoms && nt)
    SEZM_CUDA(cudaMemcpyAsync(res.atom_virial.data(), a.atom_virial, 9 * nt * sizeof(double), cudaMemcpyDeviceToHost,
                              s));
  SEZM_CUDA(cudaStreamSynchronize(s));
  for (double x : res.forces)
    if (!std::isfinite(x)) {  // an error follows (require_finite_result): fetch dE/dv to name the edge
      res.edge_grad.resize(3 * static_cast<size_t>(E));
      if (E) SEZM_CUDA(cudaMemcpy(res.edge_grad.data(), edge_grad.data(), 3 * static_cast<size_t>(E) * sizeof(double),
                                  cudaMemcpyDeviceToHost));
      break;
    }
}

}  // namespace sezm
