// The CUDA engine's buffer sizing per call (host side): the graph upload (or a committee
// leader's graph and geometry copied on the device) and every buffer grown to the call's node,
// edge and chunk sizes.
#include "buffers.cuh"

#include "grid_net.cuh"
#include "source_backward.cuh"
#include "f16_rows_layout.h"
#include "stack.cuh"

#include <algorithm>
#include <utility>

namespace sezm::cuda {
namespace {

// Floats of a buffer of a call's rows (E edges, N centres) that fast mode keeps (Zall, Uall; with
// N = 1 one chunk's, Zc): fp32 rows (F, E, ROW), or binary16 rows (stack_z_f16, stack_out_f16:
// f16_kept_floats, about half).
size_t kept_rows_floats(const Dims& d, bool f16, size_t E, size_t N) {
  return f16 ? f16_kept_floats(d.F, d.ROW, E, N) : static_cast<size_t>(d.F) * E * d.ROW;
}

}  // namespace

void EngineBuffers::size_for_call(const Graph& gv, const Dims& d, const CallShape& cs, cudaStream_t s,
                                  const EngineBuffers* graph_from) {
  const int max_ec = cs.max_ec, max_nc = cs.max_nc, n_blocks = cs.n_blocks;
  const bool gradients = cs.gradients, keep_stack = cs.keep_stack, chunk_geo = cs.chunk_geo;
  N = gv.n_nodes; NT = gv.n_total; E = gv.n_edges();
  // graph upload (the source grouping follows in ChunkPlan::group_sources)
  for (DBuf<int>* b : {&src, &dst, &off, &types}) b->set_counter(&mem);
  vec.set_counter(&mem);
  graph_in.set_counter(&mem);
  if (graph_from) {
    src.copy_device(graph_from->src, E, s);
    dst.copy_device(graph_from->dst, E, s);
    off.copy_device(graph_from->off, N + 1, s);
    types.copy_device(graph_from->types, NT, s);
    vec.copy_device(graph_from->vec, 3 * static_cast<size_t>(E), s);
  } else {
    upload_graph(gv, cs.compact_bytes, s);
  }

  const size_t Er = static_cast<size_t>(E), W = static_cast<size_t>(d.L + 1) * d.C;
  const size_t nodeW = static_cast<size_t>(d.D) * d.C, nodeWw = static_cast<size_t>(d.D) * d.Cw;
  // The per-edge geometry and its kin: the call's edges, or one chunk's rows plus 4 floats, so
  // that a chunk's rows can start at the 16-byte phase they have in the call's arrays
  // (CudaEngine::Impl::ev). Switching to per-chunk rows gives a keep call's arrays back.
  auto edge = [&](DBuf<float>& b, size_t stride, bool per_chunk) {
    const size_t n = per_chunk ? static_cast<size_t>(max_ec) * stride + 4 : Er * stride;
    if (per_chunk && b.capacity() > 2 * n + 64) b.free();
    grow(b, n);
  };
  // The node steps' scratch: node_rows rows (every node, or one batch: kChunk).
  node_rows = node_scratch_rows(N, max_nc, chunk_geo, node_batch);
  share_ffn = chunk_geo;
  const size_t Ns = node_rows;
  auto scratch = [&](DBuf<float>& b, size_t n) {
    if (chunk_geo && b.capacity() > 2 * n + 64) b.free();
    grow(b, n);
  };
  for (auto [b, stride] : {std::pair<DBuf<float>*, size_t>{&vecf, 3}, {&r, 1}, {&env, 1}, {&denv, 1}, {&rbf, d.nr},
                           {&Dc, d.dc_size}, {&g, d.es_emb}, {&seed, 4}})
    edge(*b, stride, chunk_geo);
  if (cs.no_rho) rho.free();
  else edge(rho, W, chunk_geo || cs.rho_chunk);
  grow(isd, N); grow(A, static_cast<size_t>(N) * 4 * d.es_emb); grow(f, static_cast<size_t>(N) * 2 * d.C);
  const int nb = n_blocks;
  X.resize(nb + 1); H.resize(nb); q.resize(nb); k.resize(nb); qk_rho.resize(nb); gate_rho.resize(nb);
  gamma.resize(nb); P.resize(nb); O.resize(nb); post_rho.resize(nb); X1.resize(nb); pre_rho.resize(nb);
  Xt.resize(nb); ffn_h.resize(nb); alpha.resize(nb);
  for (int b = 0; b <= nb; ++b) grow_zero(X[b], static_cast<size_t>(NT) * nodeW, s);
  const size_t chunkU = static_cast<size_t>(d.F) * max_ec * d.ROW;
  grow(U0, chunkU); grow(Ua, chunkU);
  grow(Ssrc, static_cast<size_t>(d.F) * max_ec * d.Cf);
  grow(fc_p, static_cast<size_t>(max_ec) * d.F); grow(alpha_fc, static_cast<size_t>(max_ec) * d.F);
  scratch(nodeA, Ns * nodeWw);
  if (d.grid_scratch > 0) {
    grow(grid_scratch, static_cast<size_t>(kGridBatch) * d.grid_scratch);
    grow(ro_desc, static_cast<size_t>(N) * d.C);
  }
  grow(Rh_c, d.degree_mixer ? 1 : static_cast<size_t>(max_ec) * (d.L + 1) * d.Cw);  // the mixer needs only kern
  grow(kern_c, static_cast<size_t>(max_ec) * padded_kernel_size(d));
  grow(lbias_c, static_cast<size_t>(max_ec) * d.F);
  if (keep_stack) {  // energy-only calls keep nothing
    Zall.resize(std::max(nb - 1, 0));
    for (auto& zb : Zall) {
      zb.resize(std::max(d.ngated, 0));
      for (auto& z : zb) grow(z, kept_rows_floats(d, stack_z_f16(d), Er, static_cast<size_t>(N)));
    }
    Uall.resize(std::max(nb - 1, 0));
    for (auto& u : Uall) grow(u, kept_rows_floats(d, stack_out_f16(d), Er, static_cast<size_t>(N)));
  }
  if (keep_stack && cs.keep_src) {
    const size_t m = std::max(nb - 1, 0);
    Kall.resize(m); Sall.resize(m); FPall.resize(m); FAall.resize(m);
    const KeepSrcRows k = keep_src_rows(d);
    for (size_t b = 0; b < m; ++b) {
      grow(Kall[b], Er * k.kern); grow(Sall[b], Er * k.ssrc); grow(FPall[b], Er * k.p); grow(FAall[b], Er * k.w);
    }
  }
  atom_energy.set_counter(&mem);
  atom_energy.resize(N);
  if (gradients) {
    grow_zero(Xb, static_cast<size_t>(NT) * nodeW, s);
    grow(Xb_prev, static_cast<size_t>(NT) * nodeW);
    grow(rho_bar_c, static_cast<size_t>(max_ec) * W);
    if (chunk_geo) {  // zeroed per (block, chunk) share (CudaEngine::Impl::zero_chunk_bars)
      edge(Dc_bar, d.dc_size, true); edge(rbf_bar, d.nr, true); edge(env_bar, 1, true); edge(vec_bar, 3, true);
      eg_c.set_counter(&mem);
      eg_c.resize(3 * static_cast<size_t>(max_ec));
      edge_grad.set_counter(&mem);
      edge_grad.resize(3 * Er);  // the shares are added into it
      edge_grad.zero(s);
    } else {
      grow_zero(Dc_bar, Er * d.dc_size, s); grow_zero(rbf_bar, Er * d.nr, s);
      grow_zero(env_bar, Er, s); grow_zero(vec_bar, 3 * Er, s);
    }
    grow(Ssrc_bar, static_cast<size_t>(d.F) * max_ec * d.Cf);
    // X̄_loc per edge: only the two-kernel source backward writes it (source_backward.cuh).
    grow(Xloc_bar, source_backward_fused(d) ? 0 : static_cast<size_t>(max_ec) * d.Dm * d.Cw);
    grow(alpha_bar, static_cast<size_t>(max_ec) * d.F); grow(lbar, static_cast<size_t>(max_ec) * d.F);
    Zc.resize(std::max(d.ngated, 0));
    for (auto& z : Zc) grow(z, kept_rows_floats(d, stack_z_f16(d), static_cast<size_t>(max_ec), 1));  // one chunk's rows
    scratch(nodeA_bar, Ns * nodeWw); grow(Pb, static_cast<size_t>(N) * nodeWw);
    grow(gamma_bar, static_cast<size_t>(N) * d.F);
    scratch(hbar, Ns * d.D * 2 * d.KF * d.H);
    if (d.grid_scratch > 0) {
      grow(ro_dbar, static_cast<size_t>(N) * d.C);
      grow(mn_xbar, static_cast<size_t>(N) * nodeWw);
    }
    scratch(tmpN, Ns * nodeW);
  }
}

void EngineBuffers::copy_geometry(const EngineBuffers& from, const Dims& d, bool with_rbf, cudaStream_t s) {
  const size_t Er = static_cast<size_t>(E);
  vecf.copy_device(from.vecf, 3 * Er, s);
  r.copy_device(from.r, Er, s);
  env.copy_device(from.env, Er, s);
  denv.copy_device(from.denv, Er, s);
  if (with_rbf) rbf.copy_device(from.rbf, Er * d.nr, s);
  Dc.copy_device(from.Dc, Er * d.dc_size, s);
}

void EngineBuffers::grow_block(int b, const Dims& d) {
  const size_t Er = static_cast<size_t>(E);
  const size_t nodeW = static_cast<size_t>(d.D) * d.C, nodeWw = static_cast<size_t>(d.D) * d.Cw;
  grow(q[b], static_cast<size_t>(NT) * d.Cw); grow(k[b], static_cast<size_t>(NT) * d.Cw);
  grow(qk_rho[b], static_cast<size_t>(NT) * d.F); grow(gate_rho[b], static_cast<size_t>(N) * d.F);
  grow(gamma[b], static_cast<size_t>(N) * d.F);
  grow(alpha[b], Er * d.F);
  grow(P[b], static_cast<size_t>(N) * nodeWw);
  grow(O[b], static_cast<size_t>(N) * nodeW);
  grow(X1[b], static_cast<size_t>(N) * nodeW); grow(post_rho[b], N); grow(pre_rho[b], N);
  grow(Xt[b], static_cast<size_t>(N) * nodeW);
  const size_t Ns = node_rows, hid = static_cast<size_t>(d.D) * d.KF * d.H;
  if (share_ffn) {  // one hidden buffer of node_rows rows; the other blocks' are given back
    if (b == 0)
      for (size_t i = 1; i < ffn_h.size(); ++i) ffn_h[i].free();
    if (ffn_h[0].capacity() > 2 * Ns * 2 * hid + 64) ffn_h[0].free();
    grow(ffn_h[0], Ns * 2 * hid);
    if (ybuf.capacity() > 2 * Ns * hid + 64) ybuf.free();
  } else {
    grow(ffn_h[b], static_cast<size_t>(N) * 2 * hid);
  }
  grow(ybuf, Ns * hid);
}

size_t call_device_bytes(const Dims& d, const CallShape& c) {
  size_t total = 0;
  // DBuf::resize's allocation for n elements of `bytes` each
  auto add = [&](size_t n, size_t bytes) {
    if (n > 0) total += (n + n / 32 + 16) * bytes;
  };
  const size_t N = c.N, NT = c.NT, E = static_cast<size_t>(c.E), Ec = c.max_ec, nb = c.n_blocks;
  const size_t W = static_cast<size_t>(d.L + 1) * d.C, nodeW = static_cast<size_t>(d.D) * d.C;
  const size_t nodeWw = static_cast<size_t>(d.D) * d.Cw, hid = static_cast<size_t>(d.D) * d.KF * d.H;
  const size_t f = sizeof(float), i4 = sizeof(int), f8 = sizeof(double);
  // graph, per-atom energies, dE/dv, the source grouping's permutation
  add(E, i4); add(E, i4); add(N + 1, i4); add(NT, i4); add(3 * E, f8); add(N, f8); add(c.compact_bytes, 1);
  if (c.gradients) { add(3 * E, f8); add(E, i4); }
  // per-edge geometry and its kin (size_for_call's `edge`)
  const size_t Eg = c.chunk_geo ? Ec : E, pad = c.chunk_geo ? 4 : 0;
  for (size_t stride : {size_t(3), size_t(1), size_t(1), size_t(1), size_t(d.nr), size_t(d.dc_size),
                        size_t(d.es_emb), size_t(4)})
    add(Eg * stride + pad, f);
  if (!c.no_rho) add(c.chunk_geo || c.rho_chunk ? Ec * W + 4 : E * W, f);  // rho
  if (c.gradients) {
    for (size_t stride : {size_t(d.dc_size), size_t(d.nr), size_t(1), size_t(3)}) add(Eg * stride + pad, f);
    if (c.chunk_geo) add(3 * Ec, f8);
  }
  add(E * d.F, f * nb);  // alpha per block
  if (c.keep_stack && nb > 1) {  // Zall, Uall
    add(kept_rows_floats(d, stack_z_f16(d), E, N), f * (nb - 1) * d.ngated);
    add(kept_rows_floats(d, stack_out_f16(d), E, N), f * (nb - 1));
  }
  if (c.keep_stack && c.keep_src && nb > 1) {  // Kall, Sall, FPall, FAall
    const KeepSrcRows k = keep_src_rows(d);
    for (size_t b = 0; b + 1 < nb; ++b) { add(E * k.kern, f); add(E * k.ssrc, f); add(E * k.p, f); add(E * k.w, f); }
  }
  // per node: embedding, X per block boundary, per-block state (grow_block, H), node scratch
  add(N, f); add(N * 4 * d.es_emb, f); add(N * 2 * d.C, f);
  add(NT * nodeW, f * (nb + 1));
  const size_t Ns = node_scratch_rows(c.N, c.max_nc, c.chunk_geo, c.node_batch);  // the node steps' scratch rows
  for (size_t b = 0; b < nb; ++b) {
    add(NT * nodeWw, f);                          // H
    add(NT * d.Cw, f); add(NT * d.Cw, f);         // q, k
    add(NT * d.F, f); add(N * d.F, f); add(N * d.F, f);  // qk_rho, gate_rho, gamma
    add(N * nodeWw, f);                           // P
    add(N * nodeW, f); add(N * nodeW, f); add(N * nodeW, f);  // O, X1, Xt
    add(N, f); add(N, f);                         // post_rho, pre_rho
    if (!c.chunk_geo) add(N * 2 * hid, f);        // ffn_h per block
  }
  if (c.chunk_geo) add(Ns * 2 * hid, f);          // ffn_h shared
  add(Ns * hid, f);                               // ybuf
  add(Ns * nodeWw, f);                            // nodeA
  if (d.grid_scratch > 0) { add(static_cast<size_t>(kGridBatch) * d.grid_scratch, f); add(N * d.C, f); }
  // chunk scratch
  const size_t chunkU = static_cast<size_t>(d.F) * Ec * d.ROW;
  add(chunkU, f * 2);                             // U0, Ua
  add(static_cast<size_t>(d.F) * Ec * d.Cf, f);
  add(Ec * d.F, f); add(Ec * d.F, f);
  add(Ec * d.F, f);                               // lbias_c
  add(d.degree_mixer ? 1 : Ec * (d.L + 1) * d.Cw, f);
  add(Ec * padded_kernel_size(d), f);
  if (c.gradients) {
    add(NT * nodeW, f); add(NT * nodeW, f);       // Xb, Xb_prev
    add(Ec * W, f);                               // rho_bar_c
    add(static_cast<size_t>(d.F) * Ec * d.Cf, f); // Ssrc_bar
    add(source_backward_fused(d) ? 0 : Ec * d.Dm * d.Cw, f);  // Xloc_bar (two-kernel path only)
    add(Ec * d.F, f); add(Ec * d.F, f);           // alpha_bar, lbar
    if (d.ngated > 0) add(kept_rows_floats(d, stack_z_f16(d), Ec, 1), f * d.ngated);  // Zc
    add(Ns * nodeWw, f); add(N * nodeWw, f);      // nodeA_bar, Pb
    add(N * d.F, f);                              // gamma_bar
    add(Ns * 2 * hid, f);                         // hbar
    if (d.grid_scratch > 0) { add(N * d.C, f); add(N * nodeWw, f); }
    add(Ns * nodeW, f);                           // tmpN
    add(N, f); add(N * 4 * d.es_emb, f);          // isd_bar, A_bar
    add(N * d.Cw, f); add(NT * d.Cw, f); add(NT * nodeWw, f);  // q_bar, k_bar, H_bar
  }
  return total;
}

}  // namespace sezm::cuda
