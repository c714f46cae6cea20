// CUDA engine: weight upload, buffers, chunking and the orchestration of forward and backward
// (same order and names as the CPU engine, src/engine/sezm_model.cpp).
//
// Edges are processed in chunks of whole destination segments (at most `chunk_edges` edges):
// every per-edge activation of the SO(2) value path lives only in chunk-sized scratch, so device
// memory is O(E * geometry + chunk * activations). In lean mode the backward recomputes each
// chunk's rotation and whole stack; in fast mode the forward keeps the gated layers'
// pre-activations of every edge, and the backward replays those layers elementwise (no GEMM),
// recomputing only the rotation and the final linear layer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/lebedev.h"
#include "engine/wigner_d.h"
#include "kernels.cuh"
#include "sezm_cuda.h"

namespace sezm {
using namespace cuda;

namespace {

__global__ void add_k(long n, const float* __restrict__ a, float* b) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] += a[i];
}

// Host-side float arena: weights are appended, uploaded once, and referenced by offset.
struct Arena {
  std::vector<float> h;
  size_t add(const float* p, size_t n) {
    const size_t o = h.size();
    h.insert(h.end(), p, p + n);
    while (h.size() % 32) h.push_back(0.0f);  // 128-byte alignment of every tensor
    return o;
  }
  size_t add(const Mat<double>& m) {
    std::vector<float> f(m.size());
    for (Eigen::Index i = 0; i < m.size(); ++i) f[i] = static_cast<float>(m.data()[i]);
    return add(f.data(), f.size());
  }
  size_t add_t(const Mat<double>& m) {
    Mat<double> t = m.transpose();
    return add(t);
  }
  size_t add(const Vec<double>& v) {
    std::vector<float> f(v.size());
    for (Eigen::Index i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
    return add(f.data(), f.size());
  }
  size_t add(const std::vector<Mat<double>>& ms) {
    const size_t o = h.size();
    for (const auto& m : ms) {
      std::vector<float> f(m.size());
      for (Eigen::Index i = 0; i < m.size(); ++i) f[i] = static_cast<float>(m.data()[i]);
      h.insert(h.end(), f.begin(), f.end());
    }
    while (h.size() % 32) h.push_back(0.0f);
    return o;
  }
};

constexpr size_t kNone = static_cast<size_t>(-1);

// Page-locked host staging (grow-only) for the ghost exchange's device<->host copies: measured in
// LAMMPS at 4096 atoms the engine's share of a step fell from 0.41 s to 0.31 s (~15 ms of that from
// kernel changes of the same revision), the ghost rows crossing twice per block. (The
// per-edge gradient goes straight to the caller's vector: staging it cost a host copy as long as
// the saved transfer time.)
template <class T>
struct PinnedBuf {
  T* p = nullptr;
  size_t cap = 0;
  T* get(size_t n) {
    if (n > cap) {
      if (p) cudaFreeHost(p);
      p = nullptr;
      SEZM_CUDA(cudaMallocHost(&p, n * sizeof(T)));
      cap = n;
    }
    return p;
  }
  ~PinnedBuf() {
    if (p) cudaFreeHost(p);
  }
};

}  // namespace

bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

struct CudaEngine::Impl {
  ModelConfig cfg;
  Dims d{};
  CudaMode mode;
  int device = 0;
  std::string name;
  cudaStream_t s = nullptr;
  MemCounter mem;
  int chunk_edges = 0;  // 0: the mode's default (default_chunk_edges)
  int effective_chunk_edges() const { return chunk_edges > 0 ? chunk_edges : default_chunk_edges(mode); }

  // weights
  DBuf<float> wbuf;
  DBuf<int> fit_dims_d;
  DBuf<double> atom_bias_d;
  int n_fit = 0;
  size_t fit_w_off = 0, fit_b_off = 0, fit_out_off = 0;
  ModelWDev mw{};
  std::vector<BlockWDev> bw;
  // Wigner tables
  DBuf<int> wt_ckb;
  DBuf<CkTermF> wt_ck;
  DBuf<RealTermF> wt_rt;
  DBuf<GenNzF> wt_jnz;
  WignerTablesDev wt{};

  // graph
  DBuf<int> src, dst, off, types, perm, seg_node, seg_off;
  DBuf<double> vec, edge_grad, atom_energy;
  // per edge
  DBuf<float> vecf, r, env, denv, rbf, Dc, rho, Dc_bar, rbf_bar, env_bar, vec_bar, g, seed;
  std::vector<DBuf<float>> alpha;
  // per node
  DBuf<float> isd, isd_bar, A, f, A_bar, tmpN;
  std::vector<DBuf<float>> X, H, q, k, qk_rho, gate_rho, gamma, P, O, post_rho, X1, pre_rho, Xt, ffn_h;
  DBuf<float> Xb, Xb_prev, nodeA, nodeA_bar, Pb, gamma_bar, q_bar, k_bar, H_bar, ybuf, hbar;
  // chunk scratch
  // rho_bar_c: the chunk's radial-feature adjoint. The radial MLP's backward is linear in it, so
  // each (block, chunk) share goes through it at once instead of a (E, L+1, C) sum being kept.
  DBuf<float> U0, Ua, Ub, Ssrc, Ssrc_bar, fc_p, alpha_fc, Xloc_bar, alpha_bar, lbar, Rh_c, kern_c, rho_bar_c;
  std::vector<DBuf<float>> Zc;                 // the chunk's gated pre-activations (lean recompute, fused block)
  std::vector<std::vector<DBuf<float>>> Zall;  // fast: [block before the fused one][gated layer], every edge

  // Optional per-phase timing (SEZM_CUDA_TIMING=1): CUDA events between named marks, summed per
  // name over a call and printed to stderr.
  bool timing = false;
  std::vector<std::pair<const char*, cudaEvent_t>> marks;
  std::vector<cudaEvent_t> event_pool;
  size_t event_used = 0;
  void mark(const char* name) {
    if (!timing) return;
    if (event_used == event_pool.size()) {
      cudaEvent_t e;
      SEZM_CUDA(cudaEventCreate(&e));
      event_pool.push_back(e);
    }
    cudaEvent_t e = event_pool[event_used++];
    SEZM_CUDA(cudaEventRecord(e, s));
    marks.emplace_back(name, e);
  }
  void report_timing() {
    if (!timing || marks.empty()) return;
    SEZM_CUDA(cudaStreamSynchronize(s));
    std::vector<std::pair<std::string, double>> acc;
    for (size_t i = 0; i + 1 < marks.size(); ++i) {
      float ms = 0;
      SEZM_CUDA(cudaEventElapsedTime(&ms, marks[i].second, marks[i + 1].second));
      auto it = std::find_if(acc.begin(), acc.end(), [&](const auto& p) { return p.first == marks[i].first; });
      if (it == acc.end()) acc.emplace_back(marks[i].first, ms);
      else it->second += ms;
    }
    double tot = 0;
    for (const auto& p : acc) tot += p.second;
    std::fprintf(stderr, "[sezm cuda timing] total %.2f ms\n", tot);
    for (const auto& p : acc) std::fprintf(stderr, "  %-28s %9.3f ms  %5.1f%%\n", p.first.c_str(), p.second, 100 * p.second / tot);
    marks.clear();
    event_used = 0;
  }

  struct Chunk { int n0, n1, e0, e1, s0, s1; };  // s: segment range in seg_node/seg_off
  std::vector<Chunk> chunks;

  template <class T>
  void track(T& b) { b.set_counter(&mem); }

  Impl(const ModelW<double>& w, int dev, CudaMode m) : cfg(w.cfg), mode(m), device(dev) {
    std::string why;
    if (!cuda_device_available(&why)) throw Error("device cuda: " + why);
    int n = 0;
    SEZM_CUDA(cudaGetDeviceCount(&n));
    if (dev < 0 || dev >= n)
      throw Error("device cuda: gpu " + std::to_string(dev) + " does not exist (" + std::to_string(n) + " visible)");
    SEZM_CUDA(cudaSetDevice(dev));
    cudaDeviceProp prop{};
    SEZM_CUDA(cudaGetDeviceProperties(&prop, dev));
    name = prop.name;
    set_dims(w);
    // The fused stack keeps a tile of edges and its gate sigmoids on chip; refuse models whose
    // tile does not fit this device rather than fail at the first launch.
    const size_t need_smem = stack_smem_bytes(d);
    if (need_smem > prop.sharedMemPerBlockOptin)
      throw Error("device cuda: the model's SO(2) stack tile needs " + std::to_string(need_smem / 1024) +
                  " KiB of shared memory per block, " + name + " offers " +
                  std::to_string(prop.sharedMemPerBlockOptin / 1024) + " KiB (focus width too large for this GPU)");
    SEZM_CUDA(cudaStreamCreate(&s));
    const char* tv = std::getenv("SEZM_CUDA_TIMING");
    timing = tv && *tv && *tv != '0';
    upload_weights(w);
    upload_wigner();
  }
  ~Impl() {
    for (cudaEvent_t e : event_pool) cudaEventDestroy(e);
    if (s) cudaStreamDestroy(s);
  }

  void set_dims(const ModelW<double>& w) {
    const ModelConfig& c = w.cfg;
    d.C = c.channels; d.L = c.lmax; d.D = c.n_coeff(); d.Dm = c.n_reduced(); d.F = c.n_focus;
    d.Cf = c.focus_width(); d.Cw = c.wide(); d.ROW = d.Dm * d.Cf; d.M0 = (d.L + 1) * d.Cf; d.M1 = d.L * d.Cf;
    d.K = (d.L + 1) * (d.L + 1) + d.L * d.L; d.H = c.ffn_hidden(); d.nr = c.n_radial; d.ntypes = w.ntypes;
    d.nL = c.mixing_layers; d.ngated = c.mixing_layers - 1;
    d.dc_size = 1 + 3 * ((d.L + 1) * (d.L + 1) - 1); d.wsize = wigner_size(d.L);
    d.es_ro = c.es_rbf_out(); d.es_td = c.es_type_dim(); d.es_emb = c.es_embed(); d.es_ax = c.es_axis();
    d.es_gin = c.es_g_in(); d.es_hid = c.es_hidden();
    d.degree_mixer = c.radial_so2_mode == "degree_channel"; d.has_rh = d.Cw != d.C; d.edge_norm = c.edge_norm;
    d.rcut = static_cast<float>(c.rcut); d.eps = static_cast<float>(c.eps); d.p_rbf = c.env_exp_rbf; d.p_edge = c.env_exp_edge;
    // Limits of the kernels' fixed-size per-thread arrays.
    auto need = [&](bool ok, const std::string& what) {
      if (!ok) throw Error("device cuda: model outside the CUDA engine's limits: " + what);
    };
    need(d.L <= 3, "lmax <= 3");
    need(d.C <= 64 && d.C % 4 == 0, "channels <= 64 and a multiple of 4");
    need(d.Cf <= 64 && d.Cf % 4 == 0, "focus width <= 64 and a multiple of 4");
    need(d.Cw <= 256 && d.F <= 8, "n_focus * focus width <= 256, n_focus <= 8");
    need((d.Cw < 32 && (d.Cw & (d.Cw - 1)) == 0) || d.Cw % 32 == 0, "n_focus * focus width a power of two below 32 or a multiple of 32");
    need((d.Cf & (d.Cf - 1)) == 0 || d.Cf % 32 == 0, "focus width a power of two or a multiple of 32");
    need(d.M0 <= 384 && 2 * d.M1 <= 384, "(lmax+1) * focus width <= 384 and 2 lmax focus width <= 384");
    need(d.H <= 256 && d.D * d.C >= d.H, "FFN width <= 256");
    need(d.es_hid <= 256 && d.es_gin <= 256 && d.es_emb <= 128 && d.es_ax <= 8, "env-seed widths");
    need(w.fit_w.size() <= 4, "at most 4 fitting layers");
  }

  void upload_weights(const ModelW<double>& w) {
    Arena a;
    const int L = d.L;
    size_t o_freqs = a.add(w.freqs), o_te = a.add(w.type_embedding), o_r0 = a.add(w.radial_w0);
    size_t o_rn = w.radial_norm ? a.add(w.radial_norm_scale) : kNone, o_r1 = a.add(w.radial_w1);
    size_t o_p1 = a.add(w.es_proj1), o_p2 = a.add(w.es_proj2), o_tau = a.add(w.es_type_embedding);
    size_t o_g1 = a.add(w.es_g1), o_g2 = a.add(w.es_g2), o_out = a.add(w.es_out);
    size_t o_fs = w.film_norm ? a.add(w.film_scale_norm) : kNone, o_fh = w.film_norm ? a.add(w.film_shift_norm) : kNone;
    size_t o_ro1 = a.add(w.readout_w1), o_ro2 = a.add(w.readout_w2);
    const S2Grid grid = make_s2_grid(L);
    std::vector<float> gT(grid.T.begin(), grid.T.end()), gP(grid.P.begin(), grid.P.end());
    size_t o_gT = a.add(gT.data(), gT.size()), o_gP = a.add(gP.data(), gP.size());
    // fitting
    std::vector<float> fw, fb;
    std::vector<int> dims;
    for (size_t k = 0; k < w.fit_w.size(); ++k) {
      for (Eigen::Index i = 0; i < w.fit_w[k].size(); ++i) fw.push_back(static_cast<float>(w.fit_w[k].data()[i]));
      for (Eigen::Index i = 0; i < w.fit_b[k].size(); ++i) fb.push_back(static_cast<float>(w.fit_b[k][i]));
      dims.push_back(static_cast<int>(w.fit_b[k].size() / 2));
    }
    n_fit = static_cast<int>(dims.size());
    // The read-out kernels hold each layer's vector in shared memory (node_ops.cu: 4 fitting
    // layers, 512 gated outputs).
    int widest = std::max(2 * d.H, d.C);
    for (int h : dims) widest = std::max(widest, 2 * h);
    if (n_fit > 4 || widest > 512)
      throw Error("device cuda: the fitting net (" + std::to_string(n_fit) + " layers, " + std::to_string(widest) +
                  " gated outputs at most) exceeds what the CUDA read-out supports (4 layers, 512)");
    fit_w_off = a.add(fw.data(), fw.size());
    fit_b_off = a.add(fb.data(), fb.size());
    fit_out_off = a.add(w.fit_out);
    // blocks
    struct BO {
      size_t pre, post, rh, rhT, mix, mixT, mixp, cb, A, AT, W1, W1T, G, GT, fcw, fcn, qkn, gn, Wq, Wk, lu, lz, gw, ps, pb, qs, qb, f1, sg, f2;
    };
    std::vector<BO> bos;
    for (const BlockW<double>& b : w.blocks) {
      BO o{};
      o.pre = a.add(b.pre_focus_mix);
      o.post = a.add(b.post_focus_mix);
      o.rh = b.has_radial_hidden_proj ? a.add(b.radial_hidden_proj) : kNone;
      o.rhT = b.has_radial_hidden_proj ? a.add_t(b.radial_hidden_proj) : kNone;
      o.mix = b.degree_mixer ? a.add(b.mixer_weight) : kNone;
      o.mixT = o.mixp = kNone;
      if (b.degree_mixer) {
        // The kernel values only ever see R through W_rh: fold it into the mixer per degree, in
        // double (mixp = blockdiag(W_rh) W_mix), so one product R mixp gives them. K padded with
        // zeros to a multiple of 4 for the tile products' 16-byte loads.
        const int kp = padded_kernel_size(d), K = static_cast<int>(b.mixer_weight.cols());
        Mat<double> m = Mat<double>::Zero(static_cast<Eigen::Index>(d.L + 1) * d.C, kp);
        for (int l = 0; l <= d.L; ++l) {
          const Mat<double> ml = b.mixer_weight.block(static_cast<Eigen::Index>(l) * d.Cw, 0, d.Cw, K);
          m.block(static_cast<Eigen::Index>(l) * d.C, 0, d.C, K) =
              b.has_radial_hidden_proj ? Mat<double>(b.radial_hidden_proj * ml) : ml;
        }
        o.mixp = a.add(m);
        o.mixT = a.add_t(m);
      }
      o.cb = b.degree_mixer ? a.add(b.channel_basis) : kNone;
      std::vector<Mat<double>> As, ATs, W1s, W1Ts, Gs, GTs;
      for (const auto& layer : b.layers)
        for (int f = 0; f < d.F; ++f) {
          As.push_back(layer.A[f]);
          ATs.push_back(layer.A[f].transpose());
          W1s.push_back(layer.W1[f]);
          W1Ts.push_back(layer.W1[f].transpose());
          if (!layer.G.empty()) {
            Gs.push_back(layer.G[f]);
            GTs.push_back(layer.G[f].transpose());
          }
        }
      o.A = a.add(As); o.AT = a.add(ATs); o.W1 = a.add(W1s); o.W1T = a.add(W1Ts);
      o.G = Gs.empty() ? kNone : a.add(Gs);
      o.GT = GTs.empty() ? kNone : a.add(GTs);
      o.fcw = d.F > 1 ? a.add(b.focus_compete_w) : kNone;
      o.fcn = (d.F > 1 && b.focus_norm) ? a.add(b.focus_compete_norm) : kNone;
      o.qkn = a.add(b.qk_norm); o.gn = a.add(b.gate_norm);
      o.Wq = a.add(b.q_proj); o.Wk = a.add(b.k_proj);
      // Radial logit bias R0 . u_f with u_f = W_rh[:, f-block] W_logit[:, f] (or W_logit placed).
      Mat<double> U = Mat<double>::Zero(d.F, d.C);
      for (int f = 0; f < d.F; ++f) {
        if (b.has_radial_hidden_proj)
          U.row(f) = (b.radial_hidden_proj.middleCols(f * d.Cf, d.Cf) * b.logit_w.col(f)).transpose();
        else
          for (int c = 0; c < d.Cf; ++c) U(f, f * d.Cf + c) = b.logit_w(c, f);
      }
      o.lu = a.add(U);
      o.lz = a.add(b.log_zeta); o.gw = a.add(b.gate_w);
      o.ps = a.add(b.post_so2_norm.scale); o.pb = a.add(b.post_so2_norm.bias);
      o.qs = a.add(b.pre_ffn_norm.scale); o.qb = a.add(b.pre_ffn_norm.bias);
      o.f1 = a.add(b.ffn_w1); o.sg = a.add(b.ffn_scalar_gate); o.f2 = a.add(b.ffn_w2);
      bos.push_back(o);
    }
    track(wbuf);
    wbuf.upload(a.h.data(), a.h.size(), s);
    const float* base = wbuf.data();
    auto P = [&](size_t o) -> const float* { return o == kNone ? nullptr : base + o; };
    mw.freqs = P(o_freqs); mw.type_emb = P(o_te); mw.rad_w0 = P(o_r0); mw.rad_norm = P(o_rn); mw.rad_w1 = P(o_r1);
    mw.es_p1 = P(o_p1); mw.es_p2 = P(o_p2); mw.es_tau = P(o_tau); mw.es_g1 = P(o_g1); mw.es_g2 = P(o_g2);
    mw.es_out = P(o_out); mw.film_s = P(o_fs); mw.film_h = P(o_fh);
    mw.film_as = static_cast<float>(w.film_scale_alpha); mw.film_ah = static_cast<float>(w.film_shift_alpha);
    mw.ro_w1 = P(o_ro1); mw.ro_w2 = P(o_ro2); mw.gridT = P(o_gT); mw.gridP = P(o_gP); mw.G = grid.G;
    for (size_t i = 0; i < bos.size(); ++i) {
      const BO& o = bos[i];
      const BlockW<double>& b = w.blocks[i];
      BlockWDev x{};
      x.pre = P(o.pre); x.post = P(o.post); x.rh = P(o.rh); x.rhT = P(o.rhT); x.mix = P(o.mix); x.mixT = P(o.mixT); x.mixp = P(o.mixp); x.cb = P(o.cb);
      x.A = P(o.A); x.AT = P(o.AT); x.W1 = P(o.W1); x.W1T = P(o.W1T); x.G = P(o.G); x.GT = P(o.GT);
      x.fc_w = P(o.fcw); x.fc_norm = P(o.fcn); x.qk_norm = P(o.qkn); x.gate_norm = P(o.gn);
      x.Wq = P(o.Wq); x.Wk = P(o.Wk); x.logit_u = P(o.lu); x.log_zeta = P(o.lz); x.gate_w = P(o.gw);
      x.post_scale = P(o.ps); x.post_bias = P(o.pb); x.pre_scale = P(o.qs); x.pre_bias = P(o.qb);
      x.post_eps = static_cast<float>(b.post_so2_norm.eps); x.pre_eps = static_cast<float>(b.pre_ffn_norm.eps);
      x.ffn_w1 = P(o.f1); x.ffn_sg = P(o.sg); x.ffn_w2 = P(o.f2);
      bw.push_back(x);
    }
    track(fit_dims_d);
    fit_dims_d.upload(dims.data(), dims.size(), s);
    track(atom_bias_d);
    atom_bias_d.upload(w.atom_bias.data(), w.atom_bias.size(), s);
  }

  void upload_wigner() {
    std::vector<int> ckb;
    std::vector<CkTermF> ck;
    std::vector<RealTermF> rt;
    std::vector<GenNzF> jnz;
    for (int l = 0; l <= 3; ++l) {
      const auto& tb = detail::wigner_block_tables(l);
      wt.ck_begin_off[l] = static_cast<int>(ckb.size());
      wt.ck_off[l] = static_cast<int>(ck.size());
      wt.rt_off[l] = static_cast<int>(rt.size());
      for (int e = 0; e <= tb.n_entries; ++e) ckb.push_back(tb.ck_begin[e]);
      for (int t = 0; t < tb.ck_begin[tb.n_entries]; ++t)
        ck.push_back(CkTermF{static_cast<float>(tb.ck[t].coef), tb.ck[t].a, tb.ck[t].b});
      for (int e = 0; e < 4 * tb.n_entries; ++e)
        rt.push_back(RealTermF{tb.rt[e].idx, static_cast<float>(tb.rt[e].cre), static_cast<float>(tb.rt[e].cim)});
      for (int a = 0; a < 2; ++a) {
        wt.jnz_off[l][a] = static_cast<int>(jnz.size());
        wt.jnz_n[l][a] = tb.J_nnz[a];
        for (int z = 0; z < tb.J_nnz[a]; ++z)
          jnz.push_back(GenNzF{tb.J_nz[a][z].i, tb.J_nz[a][z].k, static_cast<float>(tb.J_nz[a][z].val)});
      }
    }
    track(wt_ckb); track(wt_ck); track(wt_rt); track(wt_jnz);
    wt_ckb.upload(ckb.data(), ckb.size(), s);
    wt_ck.upload(ck.data(), ck.size(), s);
    wt_rt.upload(rt.data(), rt.size(), s);
    wt_jnz.upload(jnz.data(), jnz.size(), s);
    wt.ck_begin = wt_ckb.data();
    wt.ck = wt_ck.data();
    wt.rt = wt_rt.data();
    wt.jnz = wt_jnz.data();
  }

  // Chunks of whole destination segments (cheap: O(nodes)).
  void plan_chunks(const Graph& gv) {
    chunks.clear();
    const int limit = effective_chunk_edges();
    int n0 = 0;
    while (n0 < gv.n_nodes) {
      int n1 = n0 + 1;
      while (n1 < gv.n_nodes && gv.dst_offsets[n1 + 1] - gv.dst_offsets[n0] <= limit) ++n1;
      chunks.push_back(Chunk{n0, n1, gv.dst_offsets[n0], gv.dst_offsets[n1], 0, 0});
      n0 = n1;
    }
  }

  // Per chunk, its edges grouped by source (a counting sort: stable, so the order within a source
  // segment is the edge order), for the backward's source-side sums. Only calls with gradients
  // need it, and it is done on the host while the GPU runs the forward of the first blocks.
  std::vector<int> src_count, src_pos, touched;  // per node / per chunk, reused across calls
  std::vector<int> perm_h, seg_node_h, seg_off_h;
  bool grouped = false;
  void group_sources(const Graph& gv) {
    if (grouped) return;
    grouped = true;
    perm_h.resize(gv.n_edges());
    seg_node_h.clear();
    seg_off_h.assign(1, 0);
    src_count.assign(gv.n_total, 0);
    src_pos.resize(gv.n_total);
    for (Chunk& c : chunks) {
      c.s0 = static_cast<int>(seg_node_h.size());
      touched.clear();
      for (int e = c.e0; e < c.e1; ++e)
        if (src_count[gv.src[e]]++ == 0) touched.push_back(gv.src[e]);
      std::sort(touched.begin(), touched.end());
      int at = c.e0;
      for (int v : touched) {
        seg_node_h.push_back(v);
        src_pos[v] = at;
        at += src_count[v];
        seg_off_h.push_back(at);
        src_count[v] = 0;
      }
      for (int e = c.e0; e < c.e1; ++e) perm_h[src_pos[gv.src[e]]++] = e;
      c.s1 = static_cast<int>(seg_node_h.size());
    }
    perm.upload(perm_h.data(), perm_h.size(), s);
    seg_node.upload(seg_node_h.data(), seg_node_h.size(), s);
    seg_off.upload(seg_off_h.data(), seg_off_h.size(), s);
    if (timing) {
      int longest = 0;
      for (size_t i = 0; i + 1 < seg_off_h.size(); ++i) longest = std::max(longest, seg_off_h[i + 1] - seg_off_h[i]);
      std::fprintf(stderr, "[sezm cuda timing] %zu chunks, %zu source segments (longest %d edges)\n", chunks.size(),
                   seg_node_h.size(), longest);
    }
  }

  template <class T>
  T* grow(DBuf<T>& b, size_t n) {
    track(b);
    return b.resize(n);
  }
  template <class T>
  T* grow_zero(DBuf<T>& b, size_t n) {
    T* p = grow(b, n);
    b.zero(s);
    return p;
  }

  PinnedBuf<float> pin_rows;
  std::vector<double> ex_rows;
  void exchange_forward(float* rows, int NT, int N, FeatureExchange<double>* ex) {
    const size_t w = static_cast<size_t>(d.D) * d.C, n = static_cast<size_t>(NT) * w, own = static_cast<size_t>(N) * w;
    float* hf = pin_rows.get(n);
    SEZM_CUDA(cudaMemcpyAsync(hf, rows, own * sizeof(float), cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    ex_rows.assign(n, 0.0);
    for (size_t i = 0; i < own; ++i) ex_rows[i] = hf[i];
    ex->forward(ex_rows.data(), static_cast<int>(w));
    for (size_t i = own; i < n; ++i) hf[i] = static_cast<float>(ex_rows[i]);
    SEZM_CUDA(cudaMemcpyAsync(rows + own, hf + own, (n - own) * sizeof(float), cudaMemcpyHostToDevice, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
  }
  void exchange_reverse(float* rows, int NT, FeatureExchange<double>* ex) {
    const size_t w = static_cast<size_t>(d.D) * d.C, n = static_cast<size_t>(NT) * w;
    float* hf = pin_rows.get(n);
    SEZM_CUDA(cudaMemcpyAsync(hf, rows, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    ex_rows.assign(hf, hf + n);
    ex->reverse(ex_rows.data(), static_cast<int>(w));
    for (size_t i = 0; i < n; ++i) hf[i] = static_cast<float>(ex_rows[i]);
    SEZM_CUDA(cudaMemcpyAsync(rows, hf, n * sizeof(float), cudaMemcpyHostToDevice, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
  }

  EdgeRadialIn radial_in() const { return EdgeRadialIn{rho.data(), mw.type_emb, src.data(), dst.data(), types.data()}; }

  // The gated pre-activations of layer k for chunk c, as the backward reads them: fast mode keeps
  // them for every edge of the blocks before the fused one; otherwise they live in chunk scratch.
  int fused_block = -1;  // with gradients, the last block runs its backward chunk by chunk
  float* chunk_z(int b, int k, const Chunk& c) {
    return mode == CudaMode::kFast && b != fused_block ? Zall[b][k].data() + (size_t)d.F * c.e0 * d.ROW
                                                       : Zc[k].data();
  }

  // Forward of one chunk's value path up to the stack output; returns the buffer holding it. In
  // the backward (`recompute`), lean mode recomputes every layer and keeps the chunk's gated
  // pre-activations; fast mode replays the gated layers from the kept pre-activations. The fused
  // block's forward keeps them in chunk scratch for its backward right behind.
  bool keep_z = false;  // fast mode on a call with gradients: the forward keeps z of every edge
  float* chunk_forward(int b, const Chunk& c, bool recompute) {
    const int Ec = c.e1 - c.e0;
    const BlockWDev& w = bw[b];
    const bool fast = mode == CudaMode::kFast;
    const bool save_z = recompute || b == fused_block || keep_z;
    mark(recompute ? "bwd: recompute radial prep" : "fwd: radial prep");
    launch_radial_prep(d, w, c.e0, Ec, radial_in(), Rh_c.data(), kern_c.data(), s);
    mark(recompute ? "bwd: recompute rotate" : "fwd: rotate+condition");
    launch_rotate_condition(d, w, c.e0, Ec, src.data(), Dc.data(), H[b].data(), Rh_c.data(), kern_c.data(),
                            U0.data(), Ssrc.data(), s);
    mark(recompute ? "bwd: recompute focus compete" : "fwd: focus compete");
    launch_focus_compete(d, w, Ec, Ssrc.data(), fc_p.data(), alpha_fc.data(), s);
    float* in = U0.data();
    float* bufs[2] = {Ua.data(), Ub.data()};
    for (int k = 0; k < d.nL; ++k) {
      float* out = bufs[k % 2];
      const bool gated = k < d.ngated;
      // Gated and linear layers timed apart (the gate products and epilogue are the difference).
      if (gated) mark(recompute ? (fast ? "bwd: replay stack, gated" : "bwd: recompute stack, gated") : "fwd: stack, gated");
      else mark(recompute ? "bwd: recompute stack, linear" : "fwd: stack, linear");
      if (gated && fast && recompute)
        launch_stack_layer_replay(d, w, k, Ec, in, out, chunk_z(b, k, c), s);
      else
        launch_stack_layer_forward(d, w, k, Ec, in, out, gated && save_z ? chunk_z(b, k, c) : nullptr, s);
      in = out;
    }
    return in;
  }

  // Block b's node steps after its aggregation on the nodes [n0, n0 + n): output gate, post
  // linear and norm, FFN, residual. Every node's rows depend only on its own, which is what lets
  // the fused block run them chunk by chunk.
  void node_forward(int b, int n0, int n) {
    if (n <= 0) return;
    const BlockWDev& w = bw[b];
    const size_t o = n0, nodeW = (size_t)d.D * d.C, nodeWw = (size_t)d.D * d.Cw;
    launch_gate_post(d, n, gamma[b].data() + o * d.F, P[b].data() + o * nodeWw, nodeA.data() + o * nodeWw, s);
    launch_per_degree_linear(n, d.L, d.Cw, d.C, nodeA.data() + o * nodeWw, w.post, O[b].data() + o * nodeW, false,
                             false, s);
    launch_eq_norm_forward(n, d.L, d.C, O[b].data() + o * nodeW, w.post_scale, w.post_bias, w.post_eps,
                           X1[b].data() + o * nodeW, post_rho[b].data() + o, X[b].data() + o * nodeW, s);
    launch_eq_norm_forward(n, d.L, d.C, X1[b].data() + o * nodeW, w.pre_scale, w.pre_bias, w.pre_eps,
                           Xt[b].data() + o * nodeW, pre_rho[b].data() + o, nullptr, s);
    launch_ffn_forward(d, mw, w, n, Xt[b].data() + o * nodeW, ffn_h[b].data() + o * d.D * 2 * d.H,
                       ybuf.data() + o * d.D * d.H, X[b + 1].data() + o * nodeW, s);
    const long nn = static_cast<long>(n) * nodeW;
    add_k<<<div_up(nn, 256), 256, 0, s>>>(nn, X1[b].data() + o * nodeW, X[b + 1].data() + o * nodeW);
    SEZM_LAUNCH("residual");
  }

  // Its backward on the same nodes: from Xb = dE/dX[b+1] (rows n0..) to P_bar and gamma_bar; Xb's
  // rows become X1_bar in place.
  void node_backward(int b, int n0, int n) {
    if (n <= 0) return;
    const BlockWDev& w = bw[b];
    const size_t o = n0, nodeW = (size_t)d.D * d.C, nodeWw = (size_t)d.D * d.Cw;
    float* X1b = Xb.data() + o * nodeW;
    float* t = tmpN.data() + o * nodeW;
    // FFN branch and norms: X1_bar = Y_bar + norm_pre^T(FFN^T(Y_bar)); O_bar = norm_post^T(X1_bar).
    launch_ffn_backward(d, mw, w, n, ffn_h[b].data() + o * d.D * 2 * d.H, X1b, ybuf.data() + o * d.D * d.H,
                        hbar.data() + o * d.D * 2 * d.H, t, s);
    launch_eq_norm_backward(n, d.L, d.C, X1[b].data() + o * nodeW, w.pre_scale, pre_rho[b].data() + o, t, X1b, s);
    SEZM_CUDA(cudaMemsetAsync(t, 0, n * nodeW * sizeof(float), s));
    launch_eq_norm_backward(n, d.L, d.C, O[b].data() + o * nodeW, w.post_scale, post_rho[b].data() + o, X1b, t, s);
    launch_per_degree_linear(n, d.L, d.C, d.Cw, t, w.post, nodeA_bar.data() + o * nodeWw, true, false, s);
    launch_gate_backward(d, n, gamma[b].data() + o * d.F, P[b].data() + o * nodeWw, nodeA_bar.data() + o * nodeWw,
                         Pb.data() + o * nodeWw, gamma_bar.data() + o * d.F, s);
  }

  void readout_forward(int n0, int n) {
    if (n <= 0) return;
    launch_readout_fitting_forward(d, mw, n, X[cfg.n_blocks].data() + (size_t)n0 * d.D * d.C, types.data() + n0,
                                   wbuf.data() + fit_w_off, wbuf.data() + fit_b_off, fit_dims_d.data(), n_fit,
                                   wbuf.data() + fit_out_off, atom_bias_d.data(), atom_energy.data() + n0, s);
  }
  void readout_backward(int n0, int n) {  // into Xb's rows n0.. (zeroed by the caller)
    if (n <= 0) return;
    const size_t o = (size_t)n0 * d.D * d.C;
    launch_readout_fitting_backward(d, mw, n, X[cfg.n_blocks].data() + o, wbuf.data() + fit_w_off,
                                    wbuf.data() + fit_b_off, fit_dims_d.data(), n_fit, wbuf.data() + fit_out_off,
                                    Xb.data() + o, s);
  }

  // The edge part of block b's backward for chunk c, with the chunk's forward state in the chunk
  // buffers and its stack output in Uf.
  void chunk_backward(int b, const Chunk& c, float* Uf) {
    const BlockWDev& w = bw[b];
    const int Ec = c.e1 - c.e0;
    // The stack's input and its other ping-pong buffer are free now: the stack gradients live
    // there (two chunk activations fewer than separate buffers).
    float* Gbuf = Uf == Ua.data() ? Ub.data() : Ua.data();
    float* Gbuf2 = U0.data();
    mark("bwd: aggregate");
    launch_aggregate_backward(d, c.e0, Ec, dst.data(), Dc.data(), Uf, alpha_fc.data(), alpha[b].data(), Pb.data(),
                              Gbuf, alpha_bar.data(), Dc_bar.data(), s);
    mark("bwd: softmax");
    launch_softmax_backward(d, w, c.n0, c.n1, c.e0, src.data(), off.data(), env.data(), alpha[b].data(),
                            alpha_bar.data(), q[b].data(), k[b].data(), lbar.data(), q_bar.data(), env_bar.data(), s);
    mark("bwd: focus compete");
    launch_focus_compete_backward(d, w, c.e0, Ec, Ssrc.data(), alpha[b].data(), alpha_bar.data(), fc_p.data(),
                                  alpha_fc.data(), Ssrc_bar.data(), s);
    float* gin = Gbuf;
    float* bufs[2] = {Gbuf2, Gbuf};
    for (int kk = d.nL - 1, t = 0; kk >= 0; --kk, ++t) {
      float* gout = bufs[t % 2];
      mark(kk < d.ngated ? "bwd: stack, gated" : "bwd: stack, linear");
      launch_stack_layer_backward(d, w, kk, Ec, gin, gout, kk < d.ngated ? chunk_z(b, kk, c) : nullptr, s);
      gin = gout;
    }
    mark("bwd: condition+rotate");
    const size_t W = static_cast<size_t>(d.L + 1) * d.C;
    SEZM_CUDA(cudaMemsetAsync(rho_bar_c.data(), 0, Ec * W * sizeof(float), s));
    launch_condition_rotate_backward(d, w, c.e0, Ec, src.data(), Dc.data(), H[b].data(), Rh_c.data(), kern_c.data(),
                                     gin, Ssrc_bar.data(), lbar.data(), Xloc_bar.data(), rho_bar_c.data(),
                                     Dc_bar.data(), s);
    mark("bwd: radial");
    radial_backward_chunk(c);
    mark("bwd: source scatter");
    launch_src_scatter(d, c.s1 - c.s0, seg_node.data() + c.s0, seg_off.data() + c.s0, perm.data(), c.e0, dst.data(),
                       Dc.data(), Xloc_bar.data(), lbar.data(), q[b].data(), H_bar.data(), k_bar.data(), s);
  }

  // rho_bar_c (the chunk's rows) through the radial MLP's backward into env_bar and rbf_bar.
  void radial_backward_chunk(const Chunk& c) {
    launch_radial_backward(d, mw, c.e1 - c.e0, rbf.data() + (size_t)c.e0 * d.nr, env.data() + c.e0,
                           rho_bar_c.data(), env_bar.data() + c.e0, rbf_bar.data() + (size_t)c.e0 * d.nr, s);
  }

  void begin_block_backward(int NT, int N) {
    grow_zero(q_bar, static_cast<size_t>(N) * d.Cw);
    grow_zero(k_bar, static_cast<size_t>(NT) * d.Cw);
    grow_zero(H_bar, static_cast<size_t>(NT) * d.D * d.Cw);
  }

  // After every chunk of block b's backward: the attention node steps, X_bar = X1_bar (centres) +
  // H_bar W_pre^T (all nodes), the ghost rows' gradients folded back to their owners.
  void end_block_backward(int b, int NT, int N, FeatureExchange<double>* ex) {
    const BlockWDev& w = bw[b];
    const size_t nodeW = (size_t)d.D * d.C;
    mark("bwd: node (attention, mix)");
    launch_attention_node_backward(d, w, N, NT, H[b].data(), qk_rho[b].data(), gate_rho[b].data(), gamma[b].data(),
                                   q_bar.data(), k_bar.data(), gamma_bar.data(), H_bar.data(), s);
    SEZM_CUDA(cudaMemcpyAsync(Xb_prev.data(), Xb.data(), static_cast<size_t>(NT) * nodeW * sizeof(float),
                              cudaMemcpyDeviceToDevice, s));
    if (NT > N)
      SEZM_CUDA(cudaMemsetAsync(Xb_prev.data() + static_cast<size_t>(N) * nodeW, 0,
                                static_cast<size_t>(NT - N) * nodeW * sizeof(float), s));
    launch_per_degree_linear(NT, d.L, d.Cw, d.C, H_bar.data(), w.pre, Xb_prev.data(), true, true, s);
    mark("bwd: exchange");
    if (ex) exchange_reverse(Xb_prev.data(), NT, ex);
    std::swap(Xb, Xb_prev);
  }

  EngineResult compute(const Graph& gv, bool gradients, FeatureExchange<double>* ex) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    SEZM_CUDA(cudaSetDevice(device));
    const int N = gv.n_nodes, NT = gv.n_total, E = gv.n_edges();
    if (NT > N && !ex) throw Error("CudaEngine: a graph with ghost nodes needs a feature exchange");
    for (int i = 0; i < NT; ++i)
      if (gv.types[i] < 0 || gv.types[i] >= d.ntypes)
        throw Error("CudaEngine: atom type index " + std::to_string(gv.types[i]) + " outside the model's type_map");
    plan_chunks(gv);
    grouped = false;
    // graph upload (the source grouping follows in group_sources)
    track(src); track(dst); track(off); track(types); track(perm); track(seg_node); track(seg_off); track(vec);
    src.upload(gv.src.data(), E, s);
    dst.upload(gv.dst.data(), E, s);
    off.upload(gv.dst_offsets.data(), N + 1, s);
    types.upload(gv.types.data(), NT, s);
    vec.upload(gv.vec.data(), 3 * static_cast<size_t>(E), s);

    const size_t Er = static_cast<size_t>(E), W = static_cast<size_t>(d.L + 1) * d.C;
    const size_t nodeW = static_cast<size_t>(d.D) * d.C, nodeWw = static_cast<size_t>(d.D) * d.Cw;
    grow(vecf, 3 * Er); grow(r, Er); grow(env, Er); grow(denv, Er); grow(rbf, Er * d.nr);
    grow(Dc, Er * d.dc_size); grow(rho, Er * W);
    grow(g, Er * d.es_emb); grow(seed, Er * 4);
    grow(isd, N); grow(A, static_cast<size_t>(N) * 4 * d.es_emb); grow(f, static_cast<size_t>(N) * 2 * d.C);
    const int nb = cfg.n_blocks;
    X.resize(nb + 1); H.resize(nb); q.resize(nb); k.resize(nb); qk_rho.resize(nb); gate_rho.resize(nb);
    gamma.resize(nb); P.resize(nb); O.resize(nb); post_rho.resize(nb); X1.resize(nb); pre_rho.resize(nb);
    Xt.resize(nb); ffn_h.resize(nb); alpha.resize(nb);
    for (int b = 0; b <= nb; ++b) grow_zero(X[b], static_cast<size_t>(NT) * nodeW);
    int max_ec = 0;
    for (const Chunk& c : chunks) max_ec = std::max(max_ec, c.e1 - c.e0);
    const size_t chunkU = static_cast<size_t>(d.F) * max_ec * d.ROW;
    grow(U0, chunkU); grow(Ua, chunkU); grow(Ub, chunkU);
    grow(Ssrc, static_cast<size_t>(d.F) * max_ec * d.Cf);
    grow(fc_p, static_cast<size_t>(max_ec) * d.F); grow(alpha_fc, static_cast<size_t>(max_ec) * d.F);
    grow(nodeA, static_cast<size_t>(N) * nodeWw);
    grow(Rh_c, d.degree_mixer ? 1 : static_cast<size_t>(max_ec) * (d.L + 1) * d.Cw);  // the mixer needs only kern
    grow(kern_c, static_cast<size_t>(max_ec) * padded_kernel_size(d));
    // With gradients the last block runs its backward chunk by chunk right behind its forward
    // (everything after its aggregation is per node): it keeps its gated pre-activations in chunk
    // scratch, is never recomputed, and fast mode keeps z only for the blocks before it.
    fused_block = gradients ? nb - 1 : -1;
    keep_z = mode == CudaMode::kFast && gradients;
    if (keep_z) {  // energy-only calls keep nothing
      Zall.resize(std::max(nb - 1, 0));
      for (auto& zb : Zall) {
        zb.resize(std::max(d.ngated, 0));
        for (auto& z : zb) grow(z, static_cast<size_t>(d.F) * Er * d.ROW);
      }
    }
    track(atom_energy);
    atom_energy.resize(N);
    if (gradients) {
      grow_zero(Xb, static_cast<size_t>(NT) * nodeW);
      grow(Xb_prev, static_cast<size_t>(NT) * nodeW);
      grow(rho_bar_c, static_cast<size_t>(max_ec) * W);
      grow_zero(Dc_bar, Er * d.dc_size); grow_zero(rbf_bar, Er * d.nr);
      grow_zero(env_bar, Er); grow_zero(vec_bar, 3 * Er);
      grow(Ssrc_bar, static_cast<size_t>(d.F) * max_ec * d.Cf);
      grow(Xloc_bar, static_cast<size_t>(max_ec) * d.Dm * d.Cw);
      grow(alpha_bar, static_cast<size_t>(max_ec) * d.F); grow(lbar, static_cast<size_t>(max_ec) * d.F);
      Zc.resize(std::max(d.ngated, 0));
      for (auto& z : Zc) grow(z, chunkU);
      grow(nodeA_bar, static_cast<size_t>(N) * nodeWw); grow(Pb, static_cast<size_t>(N) * nodeWw);
      grow(gamma_bar, static_cast<size_t>(N) * d.F);
      grow(hbar, static_cast<size_t>(N) * d.D * 2 * d.H);
      grow(tmpN, static_cast<size_t>(N) * nodeW);
    }

    // ---- geometry and initial embedding ----
    mark("fwd: geometry");
    launch_geometry_forward(d, E, vec.data(), mw.freqs, wt, vecf.data(), r.data(), env.data(), denv.data(),
                            rbf.data(), Dc.data(), s);
    mark("fwd: degree+radial");
    launch_degree_forward(N, off.data(), env.data(), isd.data(), s);
    launch_radial_forward(d, mw, E, rbf.data(), env.data(), rho.data(), s);
    mark("fwd: env-seed+GIE");
    launch_env_seed_forward(d, mw, N, E, src.data(), dst.data(), off.data(), types.data(), vecf.data(), r.data(),
                            env.data(), rbf.data(), isd.data(), g.data(), seed.data(), A.data(), f.data(),
                            X[0].data(), s);
    launch_gie_forward(d, N, off.data(), Dc.data(), isd.data(), rho.data(), X[0].data(), s);

    // ---- blocks ----
    for (int b = 0; b < nb; ++b) {
      const BlockWDev& w = bw[b];
      mark("fwd: exchange");
      if (ex) exchange_forward(X[b].data(), NT, N, ex);
      mark("fwd: node (attention, mix)");
      grow(H[b], static_cast<size_t>(NT) * nodeWw);
      launch_per_degree_linear(NT, d.L, d.C, d.Cw, X[b].data(), w.pre, H[b].data(), false, false, s);
      grow(q[b], static_cast<size_t>(NT) * d.Cw); grow(k[b], static_cast<size_t>(NT) * d.Cw);
      grow(qk_rho[b], static_cast<size_t>(NT) * d.F); grow(gate_rho[b], static_cast<size_t>(N) * d.F);
      grow(gamma[b], static_cast<size_t>(N) * d.F);
      launch_attention_node_forward(d, w, N, NT, H[b].data(), q[b].data(), k[b].data(), qk_rho[b].data(),
                                    gate_rho[b].data(), gamma[b].data(), s);
      grow(alpha[b], Er * d.F);
      launch_attention_softmax_forward(d, w, N, src.data(), off.data(), env.data(), radial_in(), q[b].data(),
                                       k[b].data(), alpha[b].data(), s);
      grow(P[b], static_cast<size_t>(N) * nodeWw);
      grow(O[b], static_cast<size_t>(N) * nodeW);
      grow(X1[b], static_cast<size_t>(N) * nodeW); grow(post_rho[b], N); grow(pre_rho[b], N);
      grow(Xt[b], static_cast<size_t>(N) * nodeW);
      grow(ffn_h[b], static_cast<size_t>(N) * d.D * 2 * d.H);
      grow(ybuf, static_cast<size_t>(N) * d.D * d.H);
      const bool fused = b == fused_block;
      if (fused) {
        group_sources(gv);
        begin_block_backward(NT, N);
      }
      for (const Chunk& c : chunks) {
        float* Uf = chunk_forward(b, c, false);
        mark("fwd: rotate back+aggregate");
        launch_rotate_back_aggregate(d, c.n0, c.n1, c.e0, c.e1 - c.e0, off.data(), Dc.data(), Uf, alpha_fc.data(),
                                     alpha[b].data(), P[b].data(), s);
        if (!fused) continue;
        // The chunk's destinations are complete: their node steps, energies and the backward down
        // to the chunk's edges, while its stack state is still on hand.
        mark("fwd: node (norms, FFN)");
        node_forward(b, c.n0, c.n1 - c.n0);
        mark("fwd: read-out+fitting");
        readout_forward(c.n0, c.n1 - c.n0);
        mark("bwd: read-out+fitting");
        readout_backward(c.n0, c.n1 - c.n0);
        mark("bwd: node (FFN, norms, gate)");
        node_backward(b, c.n0, c.n1 - c.n0);
        chunk_backward(b, c, Uf);
      }
      if (fused) {
        end_block_backward(b, NT, N, ex);
        continue;
      }
      mark("fwd: node (norms, FFN)");
      node_forward(b, 0, N);
    }

    // ---- read-out and fitting (the fused block did it per chunk) ----
    if (fused_block < 0) {
      mark("fwd: read-out+fitting");
      readout_forward(0, N);
    }
    EngineResult res;
    res.atom_energy.resize(N);
    if (N) SEZM_CUDA(cudaMemcpyAsync(res.atom_energy.data(), atom_energy.data(), N * sizeof(double),
                                     cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    for (double e : res.atom_energy) res.energy += e;
    const auto t1 = clock::now();
    res.seconds_forward = std::chrono::duration<double>(t1 - t0).count();
    if (!gradients) {
      mark("end");
      report_timing();
      return res;
    }

    // ---- backward of the blocks before the fused one ----
    for (int b = nb - 2; b >= 0; --b) {
      mark("bwd: node (FFN, norms, gate)");
      node_backward(b, 0, N);
      begin_block_backward(NT, N);
      for (const Chunk& c : chunks) chunk_backward(b, c, chunk_forward(b, c, true));
      end_block_backward(b, NT, N, ex);
    }
    mark("bwd: env-seed");
    grow_zero(isd_bar, N);
    grow(A_bar, static_cast<size_t>(N) * 4 * d.es_emb);
    launch_env_seed_backward(d, mw, N, E, src.data(), dst.data(), off.data(), types.data(), vecf.data(), r.data(),
                             env.data(), denv.data(), rbf.data(), isd.data(), g.data(), seed.data(), A.data(),
                             f.data(), Xb.data(), A_bar.data(), isd_bar.data(), rbf_bar.data(), vec_bar.data(), s);
    mark("bwd: GIE");
    launch_gie_backward(d, N, E, dst.data(), Dc.data(), isd.data(), rho.data(), X[0].data(), Xb.data(), isd_bar.data(),
                        Dc_bar.data(), s);
    for (const Chunk& c : chunks) {
      mark("bwd: GIE");
      SEZM_CUDA(cudaMemsetAsync(rho_bar_c.data(), 0, (c.e1 - c.e0) * W * sizeof(float), s));
      launch_gie_rho_backward(d, c.e1 - c.e0, dst.data() + c.e0, Dc.data() + (size_t)c.e0 * d.dc_size, isd.data(),
                              Xb.data(), rho_bar_c.data(), s);
      mark("bwd: radial");
      radial_backward_chunk(c);
    }
    mark("bwd: degree");
    launch_degree_backward(N, off.data(), env.data(), isd.data(), isd_bar.data(), env_bar.data(), s);
    track(edge_grad);
    edge_grad.resize(3 * Er);
    mark("bwd: geometry");
    launch_geometry_backward(d, E, vecf.data(), r.data(), denv.data(), mw.freqs, wt, env_bar.data(), rbf_bar.data(),
                             Dc_bar.data(), vec_bar.data(), edge_grad.data(), s);
    res.edge_grad.resize(3 * Er);
    if (E) SEZM_CUDA(cudaMemcpyAsync(res.edge_grad.data(), edge_grad.data(), 3 * Er * sizeof(double),
                                     cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    mark("end");
    report_timing();
    res.seconds_backward = std::chrono::duration<double>(clock::now() - t1).count();
    return res;
  }
};

CudaEngine::CudaEngine(const ModelW<double>& w, int device, CudaMode mode) : impl_(new Impl(w, device, mode)) {}
CudaEngine::~CudaEngine() = default;
std::string CudaEngine::description() const {
  return "CUDA device " + std::to_string(impl_->device) + " (" + impl_->name + "), mode " +
         cuda_mode_name(impl_->mode) + ", " + std::to_string(impl_->effective_chunk_edges()) + " edges per chunk";
}
const ModelConfig& CudaEngine::config() const { return impl_->cfg; }
EngineResult CudaEngine::compute(const Graph& g, bool gradients, FeatureExchange<double>* ex) {
  return impl_->compute(g, gradients, ex);
}
void CudaEngine::set_chunk_edges(int n) { impl_->chunk_edges = n > 0 ? n : 0; }
int CudaEngine::chunk_edges() const { return impl_->effective_chunk_edges(); }
size_t CudaEngine::peak_device_bytes() const { return impl_->mem.peak; }
std::string CudaEngine::device_name() const { return impl_->name; }

}  // namespace sezm
