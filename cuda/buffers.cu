// The CUDA engine's buffer sizing per call (host side): the graph upload (or a committee
// leader's graph and geometry copied on the device) and every buffer grown to the call's node,
// edge and chunk sizes.
#include "buffers.cuh"

#include "grid_net.cuh"

#include <algorithm>

namespace sezm::cuda {

void EngineBuffers::size_for_call(const Graph& gv, const Dims& d, int n_blocks, int max_ec, bool gradients,
                                  bool keep_z, cudaStream_t s, const EngineBuffers* graph_from) {
  N = gv.n_nodes; NT = gv.n_total; E = gv.n_edges();
  // graph upload (the source grouping follows in ChunkPlan::group_sources)
  for (DBuf<int>* b : {&src, &dst, &off, &types}) b->set_counter(&mem);
  vec.set_counter(&mem);
  if (graph_from) {
    src.copy_device(graph_from->src, E, s);
    dst.copy_device(graph_from->dst, E, s);
    off.copy_device(graph_from->off, N + 1, s);
    types.copy_device(graph_from->types, NT, s);
    vec.copy_device(graph_from->vec, 3 * static_cast<size_t>(E), s);
  } else {
    src.upload(gv.src.data(), E, s);
    dst.upload(gv.dst.data(), E, s);
    off.upload(gv.dst_offsets.data(), N + 1, s);
    types.upload(gv.types.data(), NT, s);
    vec.upload(gv.vec.data(), 3 * static_cast<size_t>(E), s);
  }

  const size_t Er = static_cast<size_t>(E), W = static_cast<size_t>(d.L + 1) * d.C;
  const size_t nodeW = static_cast<size_t>(d.D) * d.C, nodeWw = static_cast<size_t>(d.D) * d.Cw;
  grow(vecf, 3 * Er); grow(r, Er); grow(env, Er); grow(denv, Er); grow(rbf, Er * d.nr);
  grow(Dc, Er * d.dc_size); grow(rho, Er * W);
  grow(g, Er * d.es_emb); grow(seed, Er * 4);
  grow(isd, N); grow(A, static_cast<size_t>(N) * 4 * d.es_emb); grow(f, static_cast<size_t>(N) * 2 * d.C);
  const int nb = n_blocks;
  X.resize(nb + 1); H.resize(nb); q.resize(nb); k.resize(nb); qk_rho.resize(nb); gate_rho.resize(nb);
  gamma.resize(nb); P.resize(nb); O.resize(nb); post_rho.resize(nb); X1.resize(nb); pre_rho.resize(nb);
  Xt.resize(nb); ffn_h.resize(nb); alpha.resize(nb);
  for (int b = 0; b <= nb; ++b) grow_zero(X[b], static_cast<size_t>(NT) * nodeW, s);
  const size_t chunkU = static_cast<size_t>(d.F) * max_ec * d.ROW;
  grow(U0, chunkU); grow(Ua, chunkU); grow(Ub, chunkU);
  grow(Ssrc, static_cast<size_t>(d.F) * max_ec * d.Cf);
  grow(fc_p, static_cast<size_t>(max_ec) * d.F); grow(alpha_fc, static_cast<size_t>(max_ec) * d.F);
  grow(nodeA, static_cast<size_t>(N) * nodeWw);
  if (d.grid_scratch > 0) {
    grow(grid_scratch, static_cast<size_t>(kGridBatch) * d.grid_scratch);
    grow(ro_desc, static_cast<size_t>(N) * d.C);
  }
  grow(Rh_c, d.degree_mixer ? 1 : static_cast<size_t>(max_ec) * (d.L + 1) * d.Cw);  // the mixer needs only kern
  grow(kern_c, static_cast<size_t>(max_ec) * padded_kernel_size(d));
  if (keep_z) {  // energy-only calls keep nothing
    Zall.resize(std::max(nb - 1, 0));
    for (auto& zb : Zall) {
      zb.resize(std::max(d.ngated, 0));
      for (auto& z : zb) grow(z, static_cast<size_t>(d.F) * Er * d.ROW);
    }
  }
  atom_energy.set_counter(&mem);
  atom_energy.resize(N);
  if (gradients) {
    grow_zero(Xb, static_cast<size_t>(NT) * nodeW, s);
    grow(Xb_prev, static_cast<size_t>(NT) * nodeW);
    grow(rho_bar_c, static_cast<size_t>(max_ec) * W);
    grow_zero(Dc_bar, Er * d.dc_size, s); grow_zero(rbf_bar, Er * d.nr, s);
    grow_zero(env_bar, Er, s); grow_zero(vec_bar, 3 * Er, s);
    grow(Ssrc_bar, static_cast<size_t>(d.F) * max_ec * d.Cf);
    grow(Xloc_bar, static_cast<size_t>(max_ec) * d.Dm * d.Cw);
    grow(alpha_bar, static_cast<size_t>(max_ec) * d.F); grow(lbar, static_cast<size_t>(max_ec) * d.F);
    Zc.resize(std::max(d.ngated, 0));
    for (auto& z : Zc) grow(z, chunkU);
    grow(nodeA_bar, static_cast<size_t>(N) * nodeWw); grow(Pb, static_cast<size_t>(N) * nodeWw);
    grow(gamma_bar, static_cast<size_t>(N) * d.F);
    grow(hbar, static_cast<size_t>(N) * d.D * 2 * d.KF * d.H);
    if (d.grid_scratch > 0) {
      grow(ro_dbar, static_cast<size_t>(N) * d.C);
      grow(mn_xbar, static_cast<size_t>(N) * nodeWw);
    }
    grow(tmpN, static_cast<size_t>(N) * nodeW);
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
  grow(ffn_h[b], static_cast<size_t>(N) * d.D * 2 * d.KF * d.H);
  grow(ybuf, static_cast<size_t>(N) * d.D * d.KF * d.H);
}

}  // namespace sezm::cuda
