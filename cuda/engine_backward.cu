// The CUDA engine's backward steps (CudaEngine::Impl, engine_impl.cuh; the forward and the call:
// engine.cu): per chunk the aggregate, softmax, focus-competition and stack backward, the
// rotation/conditioning and radial adjoints and the source sums (fused: source_backward.cu); per
// block the node steps' backward and the ghost-row fold (CPU twin: the backward in
// src/engine/sezm_model.cpp).
#include <algorithm>

#include "engine_impl.cuh"

namespace sezm {

// The backward of node_forward (engine.cu) on the same nodes: from Xb = dE/dX[b+1] (rows n0..) to
// P_bar and gamma_bar; Xb's rows become X1_bar in place.
void CudaEngine::Impl::node_backward(int b, int n0, int n) {
  if (n <= 0) return;
  const BlockWDev& w = dw.bw[b];
  const size_t o = n0, nodeW = (size_t)d.D * d.C, nodeWw = (size_t)d.D * d.Cw;
  const size_t so = n0 - node_base;  // row of node n0 in the node steps' scratch
  float* X1b = Xb.data() + o * nodeW;
  float* t = tmpN.data() + so * nodeW;
  float* Ab = nodeA.data() + so * nodeWw;
  float* Abar = nodeA_bar.data() + so * nodeWw;
  float* ybuf_n = ybuf.data() + so * d.D * d.KF * d.H;
  if (share_ffn && b != fused_block)  // the shared hidden buffer holds another block's: recompute it
    launch_ffn_forward(d, dw.mw, w, n, Xt[b].data() + o * nodeW, ffn_hidden(b, n0), ybuf_n, t, grid_scratch.data(), s);
  // FFN branch and norms: X1_bar = Y_bar + norm_pre^T(FFN^T(Y_bar)); O_bar = norm_post^T(X1_bar)
  // (the norms ride on the FFN's last linear).
  EqNormPairBackwardArgs na{};
  na.N = n; na.L = d.L; na.C = d.C; na.O = O[b].data() + o * nodeW; na.X1 = X1[b].data() + o * nodeW;
  na.post_scale = w.post_scale; na.pre_scale = w.pre_scale;
  na.post_rho = post_rho[b].data() + o; na.pre_rho = pre_rho[b].data() + o;
  na.X1_bar = X1b; na.t = t;
  launch_ffn_backward(d, dw.mw, w, n, ffn_hidden(b, n0), X1b, ybuf_n, hbar.data() + so * d.D * 2 * d.KF * d.H, t,
                      grid_scratch.data(), s, &na);
  OutputGateArgs ga{};
  ga.N = n; ga.gamma = gamma[b].data() + o * d.F; ga.P = P[b].data() + o * nodeWw;
  if (!w.has_mn) {  // A_bar = O_bar W_post^T, then the gate's backward (one launch)
    ga.P_bar = Pb.data() + o * nodeWw; ga.gamma_bar = gamma_bar.data() + o * d.F;
    launch_post_mix_backward(d, n, t, w.post, Abar, ga, s);
    return;
  }
  launch_per_degree_linear(n, d.L, d.C, d.Cw, t, w.post, Abar, true, false, s);
  // The message-node net's backward (§7.12) on the gated aggregate before it (recomputed into
  // nodeA): nodeA_bar gains the query adjoint, mn_xbar takes the context's (added to H_bar in
  // end_block_backward, after H_bar is cleared for the block).
  ga.A = Ab;
  launch_gate_post(d, ga, s);
  launch_grid_cross_backward(d, dw.mw.so3, w.mn, n, Ab, H[b].data() + o * nodeWw, Abar, mn_xbar.data() + o * nodeWw,
                             grid_scratch.data(), s);
  ga.A_bar = Abar; ga.P_bar = Pb.data() + o * nodeWw; ga.gamma_bar = gamma_bar.data() + o * d.F;
  launch_gate_backward(d, ga, s);
}

void CudaEngine::Impl::readout_backward(int n0, int n) {
  if (n <= 0) return;
  const size_t o = (size_t)n0 * d.D * d.C;
  if (dw.mw.ro_so3) {
    float* db = ro_dbar.data() + (size_t)n0 * d.C;
    launch_readout_fitting_backward(d, dw.mw, dw.fit, n, X[cfg.n_blocks].data() + o, Xb.data() + o,
                                    ro_desc.data() + (size_t)n0 * d.C, db, s);
    launch_grid_readout_backward(d, dw.mw, n, X[cfg.n_blocks].data() + o, db, Xb.data() + o, grid_scratch.data(), s);
    return;
  }
  launch_readout_fitting_backward(d, dw.mw, dw.fit, n, X[cfg.n_blocks].data() + o, Xb.data() + o, nullptr, nullptr,
                                  s);
}

// The edge part of block b's backward for chunk c, with the chunk's forward state in the chunk
// buffers and its stack output in Uf.
void CudaEngine::Impl::chunk_backward(int b, const Chunk& c, float* Uf) {
  const BlockWDev& w = dw.bw[b];
  const int Ec = c.e1 - c.e0;
  // The stack gradients live in the chunk's two buffers: Ū in the one not holding the output Uf,
  // the stack's ping-pong in the other: Uf's once the aggregate's backward has read Uf (nothing
  // after it does), or, where Uf is fast mode's kept output (kept_u: a chunk's share of the call's
  // rows, binary16 under precision tf32, half a chunk buffer), U0, which that backward leaves
  // unwritten (chunk_forward's inputs_only).
  float* Gbuf = Uf == Ua.data() ? U0.data() : Ua.data();
  float* Gbuf2 = Uf == Ua.data() ? Uf : U0.data();
  // The chunk's edge state (the call's arrays, or the chunk's rows: chunk_geo), addressed by the
  // absolute edge index; per chunk, the share's geometry adjoints start from zero.
  float* Dcv = ev(Dc, d.dc_size, c);
  float* Dc_barv = ev(Dc_bar, d.dc_size, c);
  const SrcRows sr = src_rows(b, c);
  zero_chunk_bars(c);
  mark("bwd: aggregate");
  launch_aggregate_backward(d,
                            AggregateBackwardArgs{c.e0, Ec, dst.data(), Dcv, Uf, sr.alpha_fc, alpha[b].data(),
                                                  Pb.data(), Gbuf, alpha_bar.data(), Dc_barv},
                            s);
  mark("bwd: softmax");
  launch_softmax_backward(d, w,
                          SoftmaxBackwardArgs{c.n0, c.n1, c.e0, src.data(), off.data(), ev(env, 1, c), alpha[b].data(),
                                              alpha_bar.data(), k[b].data(), lbar.data(), q_bar.data(),
                                              ev(env_bar, 1, c), bridge.gate(), bridge.gate_bar()},
                          s);
  mark("bwd: focus compete");
  launch_focus_compete_backward(d, w,
                                FocusCompeteArgs{c.e0, Ec, sr.Ssrc, sr.fc_p, sr.alpha_fc,
                                                 alpha[b].data(), alpha_bar.data(), Ssrc_bar.data()},
                                s);
  float* gin = Gbuf;
  if (stack_ws_chain_bwd(d)) {  // every layer in one launch, the same buffers and bits
    mark("bwd: stack, chained");
    float* zs[kStackChainMax] = {};
    for (int kk = 0; kk < d.ngated; ++kk) zs[kk] = chunk_z(b, kk, c);  // ngated <= nL <= the max
    gin = launch_stack_chain_backward(d, w, Ec, Gbuf, Gbuf2, zs, s);
  } else {
    float* bufs[2] = {Gbuf2, Gbuf};
    for (int kk = d.nL - 1, t = 0; kk >= 0; --kk, ++t) {
      float* gout = bufs[t % 2];
      mark(kk < d.ngated ? "bwd: stack, gated" : "bwd: stack, linear");
      launch_stack_layer_backward(d, w, kk, Ec, gin, gout, kk < d.ngated ? chunk_z(b, kk, c) : nullptr, s);
      gin = gout;
    }
  }
  const size_t W = static_cast<size_t>(d.L + 1) * d.C;
  if (source_backward_fused(d)) {  // conditioning, rotation and source sums in one pass (source_backward.cuh)
    // With the degree mixer the radial adjoint stays as the kernel and logit adjoints, which the
    // radial backward takes through the block's fold (radial.cu): no R̄ rows formed.
    const bool fold = fold_bwd;
    mark("bwd: source backward");
    if (!fold) SEZM_CUDA(cudaMemsetAsync(rho_bar_c.data(), 0, Ec * W * sizeof(float), s));
    launch_source_backward(d, w,
                           SourceBackwardArgs{c.e0, Ec, c.s1 - c.s0, plan.seg_node() + c.s0, plan.seg_off() + c.s0,
                                              plan.perm(), dst.data(), Dcv, H[b].data(), Rh_c.data(), sr.kern,
                                              gin, Ssrc_bar.data(), lbar.data(), q[b].data(),
                                              fold ? nullptr : rho_bar_c.data(), Dc_barv, H_bar.data(), k_bar.data()},
                           s);
    mark("bwd: radial");
    radial_backward_chunk(c, fold ? &w : nullptr, sr.kern);
  } else {  // SEZM_CUDA_SRCBWD_LEGACY=1 (or shapes outside the warp kernels): X̄_loc per edge, then the scatter
    mark("bwd: condition+rotate");
    SEZM_CUDA(cudaMemsetAsync(rho_bar_c.data(), 0, Ec * W * sizeof(float), s));
    launch_condition_rotate_backward(d, w,
                                     ConditionRotateBackwardArgs{c.e0, Ec, src.data(), Dcv, H[b].data(), Rh_c.data(),
                                                                 sr.kern, gin, Ssrc_bar.data(), lbar.data(),
                                                                 Xloc_bar.data(), rho_bar_c.data(), Dc_barv},
                                     s);
    mark("bwd: radial");
    radial_backward_chunk(c);
    mark("bwd: source scatter");
    launch_src_scatter(d,
                       SourceSumArgs{c.s1 - c.s0, plan.seg_node() + c.s0, plan.seg_off() + c.s0, plan.perm(), c.e0,
                                     dst.data(), Dcv, Xloc_bar.data(), lbar.data(), q[b].data(), H_bar.data(),
                                     k_bar.data()},
                       s);
  }
  geometry_share(c);  // chunk_geo: this (block, chunk) share into dE/dv
}

// rho_bar_c (the chunk's rows), or with `fold` that block's kernel and logit adjoints (kb: the
// chunk's kernel-adjoint rows, src_rows(b, c).kern; and lbar), or with `plain` G = W1 rho_bar's rows
// in kb (the folded GIE backward; the identity fold), through the radial MLP's backward into
// env_bar and rbf_bar.
void CudaEngine::Impl::radial_backward_chunk(const Chunk& c, const BlockWDev* fold, const float* kb, bool plain) {
  RadialMlpArgs a{};
  a.E = c.e1 - c.e0;
  const EdgeGeomDev geo = geom_at(c);
  const EdgeGeomBarDev bar = geom_bar_at(c);
  a.rbf = geo.rbf;
  a.env = geo.env;
  a.rho_bar = rho_bar_c.data();
  if (fold || plain) {
    if (!kb) throw Error("CudaEngine: the folded radial backward needs the adjoint's rows");
    a.fold = plain ? dw.mw.rad_eye : fold->rad_fold;
    a.kb = kb;
    a.lbar = plain ? nullptr : lbar.data();
    a.plain = plain;
  }
  a.env_bar = bar.env_bar;
  a.rbf_bar = bar.rbf_bar;
  launch_radial_backward(d, dw.mw, a, s);
}

void CudaEngine::Impl::gie_radial_backward_chunk(const Chunk& c, const float* rho) {
  const int Ec = c.e1 - c.e0;
  const size_t e0 = c.e0;
  const EdgeGeomDev geo = geom_at(c);
  const EdgeGeomBarDev bar = geom_bar_at(c);
  const float* gate = bridge.gate();
  float* gate_bar = bridge.gate_bar();
  mark("bwd: GIE");
  if (gie_fold_bwd) {  // G = W1 rho_bar into rho_bar_c's first Ec C floats (gie_fold_backward.cu)
    const GieFoldArgs ga{c.n0, c.n1 - c.n0, c.e0, off.data(), geo.Dc, geo.rbf, geo.env,
                         gate ? gate + e0 : nullptr, isd.data(), Xb.data(), bar.Dc_bar,
                         gate_bar ? gate_bar + e0 : nullptr, rho_bar_c.data()};
    launch_gie_edge_backward_folded(d, dw.mw, ga, s);
    mark("bwd: radial");
    radial_backward_chunk(c, nullptr, rho_bar_c.data(), true);
    return;
  }
  GieArgs gc{};  // the chunk's edges (N = 0): Wigner-row (and gate) adjoints, then rho_bar (written whole)
  gc.N = 0; gc.E = Ec; gc.dst = dst.data() + e0; gc.off = off.data();
  gc.Dc = geo.Dc; gc.isd = isd.data(); gc.rho = rho;
  gc.X0_bar = Xb.data(); gc.Dc_bar = bar.Dc_bar;
  gc.gate = gate ? gate + e0 : nullptr; gc.gate_bar = gate_bar ? gate_bar + e0 : nullptr;
  gc.rho_bar = rho_bar_c.data();
  launch_gie_edge_backward(d, gc, s);
  mark("bwd: radial");
  radial_backward_chunk(c);
}

void CudaEngine::Impl::begin_block_backward() {
  grow_zero(q_bar, static_cast<size_t>(N) * d.Cw, s);
  grow_zero(k_bar, static_cast<size_t>(NT) * d.Cw, s);
  grow_zero(H_bar, static_cast<size_t>(NT) * d.D * d.Cw, s);
}

// After every chunk of block b's backward: the attention node steps, X_bar = X1_bar (centres) +
// H_bar W_pre^T (all nodes), the ghost rows' gradients folded back to their owners.
void CudaEngine::Impl::end_block_backward(int b, FeatureExchange<double>* ex) {
  const BlockWDev& w = dw.bw[b];
  const size_t nodeW = (size_t)d.D * d.C;
  mark("bwd: node (attention, mix)");
  if (w.has_mn) {  // the message-node net's context adjoint (node_backward), centres only
    const long nn = static_cast<long>(N) * d.D * d.Cw;
    launch_add(nn, mn_xbar.data(), H_bar.data(), s);
    SEZM_LAUNCH("message-node context adjoint");
  }
  AttentionNodeArgs an = attention_node_args(b);
  an.q_bar = q_bar.data(); an.k_bar = k_bar.data(); an.gamma_bar = gamma_bar.data(); an.H_bar = H_bar.data();
  launch_attention_node_backward(d, w, an, s);
  SEZM_CUDA(cudaMemcpyAsync(Xb_prev.data(), Xb.data(), static_cast<size_t>(NT) * nodeW * sizeof(float),
                            cudaMemcpyDeviceToDevice, s));
  if (NT > N)
    SEZM_CUDA(cudaMemsetAsync(Xb_prev.data() + static_cast<size_t>(N) * nodeW, 0,
                              static_cast<size_t>(NT - N) * nodeW * sizeof(float), s));
  launch_per_degree_linear(NT, d.L, d.Cw, d.C, H_bar.data(), w.pre, Xb_prev.data(), true, true, s);
  mark("bwd: exchange");
  if (ex) ghosts.reverse(Xb_prev.data(), nodeW, NT, N, ex, &mem, s);
  std::swap(Xb, Xb_prev);
}

}  // namespace sezm
