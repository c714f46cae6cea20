// The CUDA engine's per-chunk edge state (EdgeState::kChunk; docs/ARCHITECTURE.md, "Device memory
// per edge and per atom"): the geometry, radial features and env-seed edge state recomputed per
// chunk where a step needs them, each (block, chunk) share of the geometry adjoints mapped into
// dE/dv at once, and the embedding's forward and backward per chunk (CudaEngine::Impl,
// engine_impl.cuh; the kept route is in engine.cu). Same arithmetic per edge and per node as the
// kept route.
#include "engine_impl.cuh"

namespace sezm {

void CudaEngine::Impl::chunk_geometry(const Chunk& c, unsigned need) {
  if (!chunk_geo) return;
  if (c.e0 != held_e0 || c.e1 != held_e1) {
    held_e0 = c.e0; held_e1 = c.e1; held = 0;
  }
  if (need & (kRho | kSeed)) need |= kGeo;
  if ((need & held) == need) return;
  const int Ec = c.e1 - c.e0;
  const size_t e0 = c.e0;
  const EdgeGeomDev geo = geom_at(c);
  mark("edge state: recompute per chunk");
  if ((need & kGeo) && !(held & kGeo))
    launch_geometry_forward(d, GeometryForwardArgs{Ec, vec.data() + 3 * e0, dw.mw.freqs, dw.wt, geo}, s);
  if ((need & kRho) && !(held & kRho)) radial_forward_chunk(c);
  if ((need & kSeed) && !(held & kSeed)) {  // the env-seed edge MLP alone (no centres: N = 0)
    EnvSeedArgs a{};
    a.g = GraphDev{0, NT, Ec, src.data() + e0, dst.data() + e0, off.data(), types.data()};
    a.geo = geo;
    a.gemb = ev(g, d.es_emb, c) + e0 * d.es_emb; a.seed = ev(seed, 4, c) + 4 * e0;
    launch_env_seed_forward(d, dw.mw, a, s);
  }
  held |= need;
}

void CudaEngine::Impl::radial_forward_chunk(const Chunk& c) {
  if (no_rho) throw Error("CudaEngine: radial features asked for in a call that keeps none (no_rho)");
  const EdgeGeomDev geo = geom_at(c);
  RadialMlpArgs rad{};
  rad.E = c.e1 - c.e0; rad.rbf = geo.rbf; rad.env = geo.env;
  rad.rho = rho_v(c) + static_cast<size_t>(c.e0) * (d.L + 1) * d.C;
  launch_radial_forward(d, dw.mw, rad, s);
}

void CudaEngine::Impl::gie_forward_chunk(const Chunk& c) {
  const size_t n0 = c.n0;
  GieArgs gie{};
  gie.N = c.n1 - c.n0; gie.E = 0; gie.dst = dst.data(); gie.off = off.data() + n0;
  gie.Dc = ev(Dc, d.dc_size, c); gie.isd = isd.data() + n0; gie.rho = rho_v(c);
  gie.X0 = X[0].data() + n0 * d.D * d.C;
  gie.gate = bridge.gate();
  if (gie_fold) {
    gie.rbf = ev(rbf, d.nr, c); gie.env = ev(env, 1, c);
    launch_gie_forward_folded(d, dw.mw, gie, s);
  } else {
    launch_gie_forward(d, gie, s);
  }
}

void CudaEngine::Impl::zero_chunk_bars(const Chunk& c) {
  const size_t Ec = c.e1 - c.e0;
  if (!chunk_geo || Ec == 0) return;
  const EdgeGeomBarDev b = geom_bar_at(c);
  SEZM_CUDA(cudaMemsetAsync(b.Dc_bar, 0, Ec * d.dc_size * sizeof(float), s));
  SEZM_CUDA(cudaMemsetAsync(b.rbf_bar, 0, Ec * d.nr * sizeof(float), s));
  SEZM_CUDA(cudaMemsetAsync(b.env_bar, 0, Ec * sizeof(float), s));
  SEZM_CUDA(cudaMemsetAsync(b.vec_bar, 0, 3 * Ec * sizeof(float), s));
}

void CudaEngine::Impl::geometry_share(const Chunk& c) {
  const int Ec = c.e1 - c.e0;
  if (!chunk_geo || Ec == 0) return;
  chunk_geometry(c, kGeo);  // held already: the share's steps read it
  mark("bwd: geometry (per chunk)");
  launch_geometry_backward(d, GeometryBackwardArgs{Ec, geom_at(c), dw.mw.freqs, dw.wt, geom_bar_at(c), eg_c.data()},
                           s);
  launch_add(3L * Ec, eg_c.data(), edge_grad.data() + 3 * (size_t)c.e0, s);
}

// The embedding's forward chunk by chunk: every centre's degree, env-seed sums and GIE read only
// its own in-edges, which are the chunk's (the node launchers run on the chunk's centres, with
// their per-node arrays at n0 and the edge views addressed by the absolute edge index).
void CudaEngine::Impl::embedding_forward_chunks() {
  const size_t nodeX = static_cast<size_t>(d.D) * d.C;
  for (const Chunk& c : plan.chunks) {
    chunk_geometry(c, gie_fold ? kGeo | kSeed : kGeo | kRho | kSeed);
    mark("fwd: degree+env-seed+GIE (per chunk)");
    const int n = c.n1 - c.n0;
    const size_t n0 = c.n0;
    DegreeArgs deg{};
    deg.N = n; deg.off = off.data() + n0; deg.env = ev(env, 1, c); deg.isd = isd.data() + n0;
    launch_degree_forward(deg, s);
    EnvSeedArgs es{};  // the centres' sums alone (E = 0)
    es.g = GraphDev{n, NT, 0, src.data(), dst.data(), off.data() + n0, types.data() + n0};
    es.isd = isd.data() + n0;
    es.gemb = ev(g, d.es_emb, c); es.seed = ev(seed, 4, c);
    es.A = A.data() + n0 * 4 * d.es_emb; es.f = f.data() + n0 * 2 * d.C; es.X0 = X[0].data() + n0 * nodeX;
    es.gate = bridge.gate();
    launch_env_seed_forward(d, dw.mw, es, s);
    gie_forward_chunk(c);
  }
}

// chunk_geo: the embedding's backward. Its node parts (env-seed FiLM and sums, the GIE's isd
// share) run over all centres first, so isd_bar is complete before any chunk's degree backward;
// then per chunk the edge parts on the chunk's recomputed edge state, the radial and degree
// backward, and the chunk's geometry backward into dE/dv. Same arithmetic and order per edge
// and per node as the kept route.
void CudaEngine::Impl::embedding_backward_chunks() {
  mark("bwd: env-seed");
  EnvSeedArgs en{};  // the centres (E = 0)
  en.g = GraphDev{N, NT, 0, src.data(), dst.data(), off.data(), types.data()};
  en.A = A.data(); en.f = f.data(); en.isd = isd.data();
  en.X0_bar = Xb.data(); en.A_bar = A_bar.data(); en.isd_bar = isd_bar.data();
  launch_env_seed_backward(d, dw.mw, en, s);
  mark("bwd: GIE");
  GieArgs gn{};  // the isd share (E = 0)
  gn.N = N; gn.E = 0; gn.isd = isd.data(); gn.X0 = X[0].data(); gn.X0_bar = Xb.data(); gn.isd_bar = isd_bar.data();
  launch_gie_backward(d, gn, s);
  const size_t W = static_cast<size_t>(d.L + 1) * d.C;
  const float* gate = bridge.gate();
  float* gate_bar = bridge.gate_bar();
  for (const Chunk& c : plan.chunks) {
    const int Ec = c.e1 - c.e0;
    const size_t e0 = c.e0;
    chunk_geometry(c, gie_fold_bwd ? kGeo | kSeed : kGeo | kRho | kSeed);  // folded: no radial features read
    zero_chunk_bars(c);
    const EdgeGeomDev geo = geom_at(c);
    const EdgeGeomBarDev bar = geom_bar_at(c);
    mark("bwd: env-seed");
    EnvSeedArgs ee{};  // the chunk's edges (N = 0); centre rows by dst, absolute
    ee.g = GraphDev{0, NT, Ec, src.data() + e0, dst.data() + e0, off.data(), types.data()};
    ee.geo = geo;
    ee.isd = isd.data();
    ee.gemb = ev(g, d.es_emb, c) + e0 * d.es_emb; ee.seed = ev(seed, 4, c) + 4 * e0;
    ee.A_bar = A_bar.data(); ee.rbf_bar = bar.rbf_bar; ee.vec_bar = bar.vec_bar;
    ee.gate = gate ? gate + e0 : nullptr; ee.gate_bar = gate_bar ? gate_bar + e0 : nullptr;
    launch_env_seed_backward(d, dw.mw, ee, s);
    gie_radial_backward_chunk(c, gie_fold_bwd ? nullptr : rho_v(c) + e0 * W);
    mark("bwd: degree");
    DegreeArgs dg{};
    dg.N = c.n1 - c.n0; dg.off = off.data() + c.n0; dg.env = ev(env, 1, c); dg.isd = isd.data() + c.n0;
    dg.isd_bar = isd_bar.data() + c.n0; dg.env_bar = ev(env_bar, 1, c);
    launch_degree_backward(dg, s);
    geometry_share(c);
  }
}

}  // namespace sezm
