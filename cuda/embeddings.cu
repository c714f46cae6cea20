// The initial node embedding, forward and backward side by side (CPU twin:
// engine/embeddings.h): degree, environment-seed FiLM (edge MLP in tiles of edges for the shipped
// widths, env_seed_tiled.cuh, else a thread per edge; node sums one CTA per node). The GIE's
// kernels are in gie.cu. Every sum runs in a fixed order: repeated runs are bit-identical.
#include "embeddings.cuh"
#include "env_seed_tiled.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxC = 64;  // channels supported by the per-thread kernels

__global__ void degree_forward_k(int N, const int* __restrict__ off, const float* __restrict__ env, float* isd) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float deg = 0.0f;
  for (int e = off[n]; e < off[n + 1]; ++e) deg += env[e] * env[e];
  isd[n] = rsqrtf(deg + 0.25f);
}

// A warp per node, lanes over its edges (each edge's entry is its own: no order to keep); a thread
// per node walked its ~160 edges one load after another (40 us at 4,096 atoms on an H100).
__global__ void degree_backward_k(int N, const int* __restrict__ off, const float* __restrict__ env,
                                  const float* __restrict__ isd, const float* __restrict__ isd_bar, float* env_bar) {
  const int n = static_cast<int>((static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  if (n >= N) return;
  const float db = -0.5f * isd[n] * isd[n] * isd[n] * isd_bar[n];
  for (int e = off[n] + (threadIdx.x & 31); e < off[n + 1]; e += 32) env_bar[e] += 2.0f * env[e] * db;
}

constexpr int kMaxHid = 256;

// out[o] = sum_i act(in[i]) W[i * n_out + o], act = SiLU or identity (one thread's dense layer).
template <bool kSilu>
__device__ __forceinline__ void dense(const float* in, int n_in, const float* __restrict__ W, int n_out, float* out) {
  for (int o = 0; o < n_out; ++o) {
    float a = 0.0f;
    for (int i = 0; i < n_in; ++i) a += (kSilu ? siluf_(in[i]) : in[i]) * W[i * n_out + o];
    out[o] = a;
  }
}

// Per-edge env-seed MLP: g (emb) and the seed [s, s v/r]. Keeps p1 and g1 pre-activations in
// the caller's arrays when asked (backward).
__device__ void env_seed_edge(const Dims& d, const ModelWDev& w, const float* rbf, int tsrc, int tdst, float* p1,
                              float* gin, float* g1, float* g) {
  dense<false>(rbf, d.nr, w.es_p1, d.es_ro, p1);
  dense<true>(p1, d.es_ro, w.es_p2, d.es_ro, gin);
  for (int i = 0; i < d.es_td; ++i) {
    gin[d.es_ro + i] = w.es_tau[tsrc * d.es_td + i];
    gin[d.es_ro + d.es_td + i] = w.es_tau[tdst * d.es_td + i];
  }
  dense<false>(gin, d.es_gin, w.es_g1, d.es_hid, g1);
  dense<true>(g1, d.es_hid, w.es_g2, d.es_emb, g);
}

__global__ void env_seed_edge_forward_k(Dims d, ModelWDev w, int E, const int* __restrict__ src,
                                        const int* __restrict__ dst, const int* __restrict__ types,
                                        const float* __restrict__ vecf, const float* __restrict__ r,
                                        const float* __restrict__ env, const float* __restrict__ rbf, float* g_o,
                                        float* seed_o) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  float p1[kMaxHid], gin[kMaxHid], g1[kMaxHid], g[kMaxHid];
  env_seed_edge(d, w, rbf + (size_t)e * d.nr, types[src[e]], types[dst[e]], p1, gin, g1, g);
  for (int o = 0; o < d.es_emb; ++o) g_o[(size_t)e * d.es_emb + o] = g[o];
  const float s = env[e] / r[e];
  seed_o[4 * (size_t)e] = s;
  for (int a = 0; a < 3; ++a) seed_o[4 * (size_t)e + 1 + a] = s * vecf[3 * (size_t)e + a] / r[e];
}

// The FiLM inputs of channel c: the shift/scale halves of f, RMS-normalised with the edge norm.
__device__ void film_rms(const Dims& d, const float* f, int C, float& rs, float& rh) {
  rs = rh = 1.0f;
  if (!d.edge_norm) return;
  float ss = 0.0f, sh = 0.0f;
  for (int c = 0; c < C; ++c) { ss += f[c] * f[c]; sh += f[C + c] * f[C + c]; }
  rs = rsqrtf(ss / C + d.eps);
  rh = rsqrtf(sh / C + d.eps);
}
__device__ void film_args(const Dims& d, const ModelWDev& w, const float* f, int C, int c, float rs, float rh,
                          float& sn, float& hn) {
  sn = d.edge_norm ? f[c] * rs * w.film_s[c] : f[c];
  hn = d.edge_norm ? f[C + c] * rh * w.film_h[c] : f[C + c];
}

// Per node: A = isd sum seed g^T, G = A^T A[:, :ax], f = vec(G) W_out, FiLM -> X0 row 0.
// One CTA per node, threads over the entries of A, of G and then of f (a thread per node left the
// GPU idle for small systems: its serial loops set the latency of every MD step). Each entry is
// accumulated in the order of the serial version. The loops over a node's edges and over G load
// kBatch terms before they add them (in order): a loop that loaded one term and added it waited on
// memory at every trip (docs/performance.md, 2026-12-05 sixteenth session); G is formed once per
// node, not once per output.
constexpr int kNodeT = 128, kBatch = 8;

// The FiLM norms' scales rs, rh (film_rms) formed by thread 0 and shared through rr[2]; the
// caller's barrier follows before rr is read.
__device__ __forceinline__ void film_rms_once(const Dims& d, const float* f, int C, float* rr) {
  if (threadIdx.x == 0) film_rms(d, f, C, rr[0], rr[1]);
}

__global__ void __launch_bounds__(kNodeT) env_seed_node_forward_k(Dims d, ModelWDev w, int N,
                                                                  const int* __restrict__ off,
                                                                  const int* __restrict__ types,
                                                                  const float* __restrict__ g,
                                                                  const float* __restrict__ seed,
                                                                  const float* __restrict__ isd,
                                                                  const float* __restrict__ gate, float* A_o,
                                                                  float* f_o, float* X0) {
  __shared__ float A[4 * 128], f[2 * kMaxC], G[128 * 8], rr[2];
  const int n = blockIdx.x, t = threadIdx.x;
  const int emb = d.es_emb, ax = d.es_ax, C = d.C, e0 = off[n], e1 = off[n + 1];
  for (int idx = t; idx < 4 * emb; idx += kNodeT) {
    const int k = idx / emb, i = idx % emb;
    float a = 0.0f;
    // bridging: each edge's outer product times its source gate
    auto term = [&](int e) { return gate ? gate[e] * g[(size_t)e * emb + i] : g[(size_t)e * emb + i]; };
    int e = e0;
    for (; e + kBatch <= e1; e += kBatch) {
      float s[kBatch], v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        s[u] = seed[4 * (size_t)(e + u) + k];
        v[u] = term(e + u);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) a += s[u] * v[u];
    }
    for (; e < e1; ++e) a += seed[4 * (size_t)e + k] * term(e);
    a *= isd[n];
    A[idx] = a;
    A_o[(size_t)n * 4 * emb + idx] = a;
  }
  __syncthreads();
  const int nij = emb * ax;
  for (int ij = t; ij < nij; ij += kNodeT) {
    const int i = ij / ax, j = ij % ax;
    float Gij = 0.0f;
    for (int k = 0; k < 4; ++k) Gij += A[k * emb + i] * A[k * emb + j];
    G[ij] = Gij;
  }
  __syncthreads();
  for (int o = t; o < 2 * C; o += kNodeT) {
    const float* wo = w.es_out + o;
    float v = 0.0f;
    int ij = 0;
    for (; ij + kBatch <= nij; ij += kBatch) {
      float x[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) x[u] = wo[(size_t)(ij + u) * 2 * C];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v += G[ij + u] * x[u];
    }
    for (; ij < nij; ++ij) v += G[ij] * wo[(size_t)ij * 2 * C];
    f[o] = v;
    f_o[(size_t)n * 2 * C + o] = v;
  }
  __syncthreads();
  film_rms_once(d, f, C, rr);
  __syncthreads();
  const float rs = rr[0], rh = rr[1];
  const float* te = w.type_emb + (size_t)types[n] * C;
  for (int c = t; c < C; c += kNodeT) {
    float sn, hn;
    film_args(d, w, f, C, c, rs, rh, sn, hn);
    X0[(size_t)n * d.D * C + c] = te[c] * (1.0f + w.film_as * tanhf(sn)) + w.film_ah * tanhf(hn);
  }
}

// One CTA per node: FiLM and norm backward (threads over channels; the norms' sums by thread 0),
// G_bar = f_bar W_out^T (threads over (i, j), reading W_out^T's rows: coalesced; each row of W_out
// was 2 C floats apart from the next thread's, a line per lane), A_bar (threads over its entries,
// each summed in the serial order).
__global__ void __launch_bounds__(kNodeT) env_seed_node_backward_k(Dims d, ModelWDev w, int N,
                                                                   const int* __restrict__ types,
                                                                   const float* __restrict__ A_i,
                                                                   const float* __restrict__ f_i,
                                                                   const float* __restrict__ isd,
                                                                   const float* __restrict__ X0_bar, float* A_bar_o,
                                                                   float* isd_bar) {
  __shared__ float fb[2 * kMaxC], A[4 * 128], Ab[4 * 128], Gb[128 * 8], rr[4];
  const int n = blockIdx.x, t = threadIdx.x;
  const int emb = d.es_emb, ax = d.es_ax, C = d.C;
  const float* f = f_i + (size_t)n * 2 * C;
  for (int i = t; i < 4 * emb; i += kNodeT) A[i] = A_i[(size_t)n * 4 * emb + i];
  film_rms_once(d, f, C, rr);
  __syncthreads();
  const float rs = rr[0], rh = rr[1];
  const float* te = w.type_emb + (size_t)types[n] * C;
  const float* xb = X0_bar + (size_t)n * d.D * C;
  for (int c = t; c < C; c += kNodeT) {
    float sn, hn;
    film_args(d, w, f, C, c, rs, rh, sn, hn);
    const float ts = tanhf(sn), th = tanhf(hn);
    fb[c] = xb[c] * te[c] * w.film_as * (1.0f - ts * ts);
    fb[C + c] = xb[c] * w.film_ah * (1.0f - th * th);
  }
  __syncthreads();
  if (d.edge_norm) {
    if (t == 0) {
      float ds = 0.0f, dh = 0.0f;
      for (int c = 0; c < C; ++c) {
        ds += fb[c] * w.film_s[c] * f[c] * rs;
        dh += fb[C + c] * w.film_h[c] * f[C + c] * rh;
      }
      rr[2] = ds;
      rr[3] = dh;
    }
    __syncthreads();  // ds, dh are formed from every fb before fb is overwritten
    const float ds = rr[2], dh = rr[3];
    for (int c = t; c < C; c += kNodeT) {
      fb[c] = rs * (fb[c] * w.film_s[c] - f[c] * rs * ds / C);
      fb[C + c] = rh * (fb[C + c] * w.film_h[c] - f[C + c] * rh * dh / C);
    }
    __syncthreads();
  }
  const int nij = emb * ax;
  for (int ij = t; ij < nij; ij += kNodeT) {
    const float* wo = w.es_out_t + ij;  // W_out[ij, o] = wo[o nij]
    float v = 0.0f;
    int o = 0;
    for (; o + kBatch <= 2 * C; o += kBatch) {
      float x[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) x[u] = wo[(size_t)(o + u) * nij];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v += fb[o + u] * x[u];
    }
    for (; o < 2 * C; ++o) v += fb[o] * wo[(size_t)o * nij];
    Gb[ij] = v;
  }
  __syncthreads();
  // G_ij = sum_k A[k,i] A[k,j]: A_bar[k,m] collects G_bar[m][j] A[k,j] (i = m) and G_bar[i][m] A[k,i]
  // (j = m), in the (i, j) order of the serial loop.
  for (int idx = t; idx < 4 * emb; idx += kNodeT) {
    const int k = idx / emb, m = idx % emb;
    float v = 0.0f;
    for (int i = 0; i < emb; ++i) {
      if (i == m) {
        for (int j = 0; j < ax; ++j) {
          v += Gb[m * ax + j] * A[k * emb + j];
          if (j == m) v += Gb[m * ax + m] * A[k * emb + m];
        }
      } else if (m < ax) {
        v += Gb[i * ax + m] * A[k * emb + i];
      }
    }
    Ab[idx] = v;
    A_bar_o[(size_t)n * 4 * emb + idx] = v;
  }
  __syncthreads();
  if (t == 0) {
    float acc = 0.0f;
    for (int i = 0; i < 4 * emb; ++i) acc += Ab[i] * A[i];
    isd_bar[n] += acc / isd[n];
  }
}

__global__ void env_seed_edge_backward_k(Dims d, ModelWDev w, int E, const int* __restrict__ src,
                                         const int* __restrict__ dst, const int* __restrict__ types,
                                         const float* __restrict__ vecf, const float* __restrict__ r_i,
                                         const float* __restrict__ env, const float* __restrict__ denv,
                                         const float* __restrict__ rbf, const float* __restrict__ isd,
                                         const float* __restrict__ g_i, const float* __restrict__ seed_i,
                                         const float* __restrict__ A_bar, float* rbf_bar, float* vec_bar,
                                         const float* __restrict__ gate, float* gate_bar) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const int n = dst[e], emb = d.es_emb;
  const float* Ab = A_bar + (size_t)n * 4 * emb;
  const float* ge = g_i + (size_t)e * emb;
  const float* se = seed_i + 4 * (size_t)e;
  float sb[4];
  for (int k = 0; k < 4; ++k) {
    float a = 0.0f;
    for (int i = 0; i < emb; ++i) a += Ab[k * emb + i] * ge[i];
    sb[k] = isd[n] * a;
  }
  if (gate) {  // bridging: sb above is w.r.t. the gated product seed^T (gate g)
    float gsum = 0.0f;
    for (int k = 0; k < 4; ++k) gsum += sb[k] * se[k];
    gate_bar[e] += gsum;
    for (int k = 0; k < 4; ++k) sb[k] *= gate[e];
  }
  float p1[kMaxHid], gin[kMaxHid], g1[kMaxHid], gb[kMaxHid];
  env_seed_edge(d, w, rbf + (size_t)e * d.nr, types[src[e]], types[dst[e]], p1, gin, g1, gb);
  for (int i = 0; i < emb; ++i) {
    float a = 0.0f;
    for (int k = 0; k < 4; ++k) a += Ab[k * emb + i] * se[k];
    gb[i] = isd[n] * a;
    if (gate) gb[i] *= gate[e];
  }
  // back through g = silu(g1) Wg2, g1 = gin Wg1 (only the rbf-projection part of gin matters).
  for (int o = 0; o < d.es_hid; ++o) {
    float a = 0.0f;
    for (int i = 0; i < emb; ++i) a += gb[i] * w.es_g2[o * emb + i];
    g1[o] = a * silu_gradf_(g1[o]);  // g1_bar
  }
  for (int i = 0; i < d.es_ro; ++i) {
    float a = 0.0f;
    for (int o = 0; o < d.es_hid; ++o) a += g1[o] * w.es_g1[i * d.es_hid + o];
    gin[i] = a;  // a_bar
  }
  for (int i = 0; i < d.es_ro; ++i) {
    float a = 0.0f;
    for (int o = 0; o < d.es_ro; ++o) a += gin[o] * w.es_p2[i * d.es_ro + o];
    p1[i] = a * silu_gradf_(p1[i]);  // p1_bar
  }
  for (int m = 0; m < d.nr; ++m) {
    float a = 0.0f;
    for (int i = 0; i < d.es_ro; ++i) a += p1[i] * w.es_p1[m * d.es_ro + i];
    rbf_bar[(size_t)e * d.nr + m] += a;
  }
  // Seed Jacobian (docs/model.md §7.3).
  const float r = r_i[e], s = env[e] / r, sp = denv[e] / r - env[e] / (r * r);
  const float u[3] = {vecf[3 * (size_t)e] / r, vecf[3 * (size_t)e + 1] / r, vecf[3 * (size_t)e + 2] / r};
  const float ub = u[0] * sb[1] + u[1] * sb[2] + u[2] * sb[3];
  for (int b = 0; b < 3; ++b)
    vec_bar[3 * (size_t)e + b] += sb[0] * sp * u[b] + ub * sp * u[b] + (s / r) * (sb[1 + b] - ub * u[b]);
}

constexpr int kThreads = 128;

}  // namespace

void launch_degree_forward(const DegreeArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  degree_forward_k<<<div_up(a.N, kThreads), kThreads, 0, s>>>(a.N, a.off, a.env, a.isd);
  SEZM_LAUNCH("degree_forward");
}
void launch_degree_backward(const DegreeArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  degree_backward_k<<<div_up(32L * a.N, kThreads), kThreads, 0, s>>>(a.N, a.off, a.env, a.isd, a.isd_bar, a.env_bar);
  SEZM_LAUNCH("degree_backward");
}
void launch_env_seed_forward(const Dims& d, const ModelWDev& w, const EnvSeedArgs& a, cudaStream_t s) {
  const GraphDev& g = a.g;
  if (g.E > 0 && !es_tiled::launch(d, w, a, false, s)) {
    env_seed_edge_forward_k<<<div_up(g.E, kThreads), kThreads, 0, s>>>(d, w, g.E, g.src, g.dst, g.types, a.geo.vecf,
                                                                      a.geo.r, a.geo.env, a.geo.rbf, a.gemb, a.seed);
    SEZM_LAUNCH("env_seed_edge_forward");
  }
  if (g.N > 0) {
    env_seed_node_forward_k<<<g.N, kNodeT, 0, s>>>(d, w, g.N, g.off, g.types, a.gemb, a.seed, a.isd, a.gate, a.A, a.f,
                                                    a.X0);
    SEZM_LAUNCH("env_seed_node_forward");
  }
}
void launch_env_seed_backward(const Dims& d, const ModelWDev& w, const EnvSeedArgs& a, cudaStream_t s) {
  const GraphDev& g = a.g;
  if (g.N > 0) {
    env_seed_node_backward_k<<<g.N, kNodeT, 0, s>>>(d, w, g.N, g.types, a.A, a.f, a.isd, a.X0_bar, a.A_bar,
                                                    a.isd_bar);
    SEZM_LAUNCH("env_seed_node_backward");
  }
  if (g.E > 0 && !es_tiled::launch(d, w, a, true, s)) {
    env_seed_edge_backward_k<<<div_up(g.E, kThreads), kThreads, 0, s>>>(
        d, w, g.E, g.src, g.dst, g.types, a.geo.vecf, a.geo.r, a.geo.env, a.geo.denv, a.geo.rbf, a.isd, a.gemb, a.seed,
        a.A_bar, a.rbf_bar, a.vec_bar, a.gate, a.gate_bar);
    SEZM_LAUNCH("env_seed_edge_backward");
  }
}

}  // namespace sezm::cuda
