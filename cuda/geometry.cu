// Per-edge geometry, radial MLP, degree, environment-seed FiLM and GIE on the device, forward and
// backward side by side (CPU twins: engine/edge_geometry.h, radial_mlp.h, embeddings.h).
// One thread per edge or per node: these steps are O(E * few thousand flops), small next to the
// SO(2) stack, so they favour simple, obviously-correct code over tiling.
#include <cfloat>

#include "kernels.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxL = 3;
constexpr int kMaxW = 84;  // wigner_size(3)
constexpr int kPow = 13;   // exponent stride of the CPU tables (2 * kWignerMaxL + 1)

__device__ float envelope_d(float r, float rc, int p) {
  const float u = fminf(fmaxf((rc - r) / rc, 0.0f), 1.0f), x = 1.0f - u;
  // sum_{k<p} C(k+3,3) x^k by Horner
  float acc = 0.0f;
  for (int k = p - 1; k >= 0; --k) acc = acc * x + (float)((k + 1) * (k + 2) * (k + 3) / 6);
  const float u2 = u * u;
  return u2 * u2 * acc;
}
__device__ float envelope_dr_d(float r, float rc, int p) {
  const float x = r / rc;
  if (x >= 1.0f || x <= 0.0f) return 0.0f;
  // -4 C(p+3,4) x^(p-1) (1-x)^3 / rc
  float c = 1.0f;
  for (int i = 0; i < 4; ++i) c *= (float)(p + 3 - i);
  c /= 24.0f;
  float xp = 1.0f;
  for (int i = 0; i < p - 1; ++i) xp *= x;
  const float om = 1.0f - x;
  return -4.0f * c * xp * om * om * om / rc;
}

__device__ void quat_nrm(const float* in, float eps, float* out) {
  const float s = rsqrtf(in[0] * in[0] + in[1] * in[1] + in[2] * in[2] + in[3] * in[3] + eps * eps);
  for (int i = 0; i < 4; ++i) out[i] = in[i] * s;
}

// 01 §7.3, as engine/wigner_d.h edge_quaternion.
__device__ void edge_quaternion_d(const float* v, float eps, float* q) {
  const float lam = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + 2.0f * eps * eps);
  const float ux = v[0] / lam, uy = v[1] / lam, uz = v[2] / lam;
  const float qp_raw[4] = {1.0f + uz, uy, -ux, 0.0f}, qn_raw[4] = {-ux, 0.0f, 1.0f - uz, uy};
  float qp[4], qn[4];
  quat_nrm(qp_raw, eps, qp);
  quat_nrm(qn_raw, eps, qn);
  const float t = fminf(fmaxf(0.5f * (uz + 1.0f), 0.0f), 1.0f);
  float b;
  if (t <= 0.0f) b = 0.0f;
  else if (t >= 1.0f) b = 1.0f;
  else {
    const float e0 = expf(-1.0f / fmaxf(t, FLT_EPSILON)), e1 = expf(-1.0f / fmaxf(1.0f - t, FLT_EPSILON));
    b = e0 / (e0 + e1);
  }
  const float dot = qn[0] * qp[0] + qn[1] * qp[1] + qn[2] * qp[2] + qn[3] * qp[3];
  const float sp = dot < 0.0f ? -b : b;
  float bl[4];
  for (int i = 0; i < 4; ++i) bl[i] = (1.0f - b) * qn[i] + sp * qp[i];
  quat_nrm(bl, eps, q);
}

struct Cxf { float re, im; };
__device__ inline Cxf cmulf(Cxf a, Cxf b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }

// All Wigner blocks l <= L of q_e into D (packed like the CPU engine).
__device__ void wigner_full_d(const float* q_in, int L, float eps, const WignerTablesDev& wt, float* D) {
  float q[4];
  quat_nrm(q_in, eps, q);
  D[0] = 1.0f;
  if (L < 1) return;
  const float w = q[0], x = q[1], y = q[2], z = q[3];
  float R[9];
  R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - w * z); R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z); R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y); R[7] = 2 * (y * z + w * x); R[8] = 1 - 2 * (x * x + y * y);
  const int perm[3] = {1, 2, 0};
  const float sgn[3] = {-1.0f, -1.0f, 1.0f};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) D[1 + 3 * i + j] = sgn[i] * sgn[j] * R[3 * perm[i] + perm[j]];
  if (L < 2) return;
  const int np = 2 * L + 1;
  Cxf pa[2 * kMaxL + 1], pb[2 * kMaxL + 1];
  pa[0] = pb[0] = Cxf{1.0f, 0.0f};
  const Cxf ra{w, -z}, rb{y, -x};
  for (int i = 1; i < np; ++i) {
    pa[i] = cmulf(pa[i - 1], ra);
    pb[i] = cmulf(pb[i - 1], rb);
  }
  Cxf Dc[49];
  for (int l = 2; l <= L; ++l) {
    const int n = (2 * l + 1) * (2 * l + 1);
    const int* cb = wt.ck_begin + wt.ck_begin_off[l];
    const CkTermF* ck = wt.ck + wt.ck_off[l];
    for (int e = 0; e < n; ++e) {
      float re = 0.0f, im = 0.0f;
      for (int t = cb[e]; t < cb[e + 1]; ++t) {
        const CkTermF tm = ck[t];
        const int ai = tm.a / kPow, aj = tm.a % kPow, bk = tm.b / kPow, bn = tm.b % kPow;
        const Cxf A = cmulf(pa[ai], Cxf{pa[aj].re, -pa[aj].im});
        const Cxf B = cmulf(pb[bk], Cxf{pb[bn].re, -pb[bn].im});
        const Cxf p = cmulf(A, B);
        re += tm.coef * p.re;
        im += tm.coef * p.im;
      }
      Dc[e] = Cxf{re, im};
    }
    const RealTermF* rt = wt.rt + wt.rt_off[l];
    const int off = l * (2 * l - 1) * (2 * l + 1) / 3;
    for (int e = 0; e < n; ++e) {
      float acc = 0.0f;
      for (int k = 0; k < 4; ++k) acc += rt[4 * e + k].cre * Dc[rt[4 * e + k].idx].re - rt[4 * e + k].cim * Dc[rt[4 * e + k].idx].im;
      D[off + e] = acc;
    }
  }
}

__global__ void geometry_forward_k(Dims d, int E, const double* __restrict__ vec, const float* __restrict__ freqs,
                                   WignerTablesDev wt, float* vecf, float* r_o, float* env_o, float* denv_o,
                                   float* rbf_o, float* Dc_o) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const float v[3] = {(float)vec[3 * (size_t)e], (float)vec[3 * (size_t)e + 1], (float)vec[3 * (size_t)e + 2]};
  for (int a = 0; a < 3; ++a) vecf[3 * (size_t)e + a] = v[a];
  const float r = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + d.eps * d.eps);
  r_o[e] = r;
  env_o[e] = envelope_d(r, d.rcut, d.p_edge);
  denv_o[e] = envelope_dr_d(r, d.rcut, d.p_edge);
  const float e7 = envelope_d(r, d.rcut, d.p_rbf);
  for (int n = 0; n < d.nr; ++n) rbf_o[(size_t)e * d.nr + n] = sinf(freqs[n] * r) / r * e7;
  float q[4], D[kMaxW];
  edge_quaternion_d(v, d.eps, q);
  wigner_full_d(q, d.L, d.eps, wt, D);
  float* dc = Dc_o + (size_t)e * d.dc_size;
  dc[0] = 1.0f;
  for (int l = 1; l <= d.L; ++l) {
    const int n = 2 * l + 1, off = l * (2 * l - 1) * (2 * l + 1) / 3;
    for (int rr = 0; rr < 3; ++rr)
      for (int c = 0; c < n; ++c) dc[dc_off(l) + rr * n + c] = D[off + (l - 1 + rr) * n + c];
  }
}

__global__ void geometry_backward_k(Dims d, int E, const float* __restrict__ vecf, const float* __restrict__ r_i,
                                    const float* __restrict__ denv, const float* __restrict__ freqs,
                                    WignerTablesDev wt, const float* __restrict__ env_bar,
                                    const float* __restrict__ rbf_bar, const float* __restrict__ Dc_bar,
                                    const float* __restrict__ vec_bar, double* edge_grad) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const float v[3] = {vecf[3 * (size_t)e], vecf[3 * (size_t)e + 1], vecf[3 * (size_t)e + 2]};
  const float r = r_i[e];
  // r_bar from the envelope and the radial basis phi_n = sin(w r)/r E7(r).
  float rb = env_bar[e] * denv[e];
  const float e7 = envelope_d(r, d.rcut, d.p_rbf), de7 = envelope_dr_d(r, d.rcut, d.p_rbf);
  for (int n = 0; n < d.nr; ++n) {
    const float w = freqs[n], sw = sinf(w * r), cw = cosf(w * r);
    rb += rbf_bar[(size_t)e * d.nr + n] * ((w * cw / r - sw / (r * r)) * e7 + sw / r * de7);
  }
  float vb[3];
  for (int a = 0; a < 3; ++a) vb[a] = vec_bar[3 * (size_t)e + a] + rb * v[a] / r;
  // Tilt formula (01 §13(e)) with the full D recomputed from v; Dbar lives on rows |m| <= 1.
  float q[4], D[kMaxW];
  edge_quaternion_d(v, d.eps, q);
  wigner_full_d(q, d.L, d.eps, wt, D);
  const float* db = Dc_bar + (size_t)e * d.dc_size;
  float G[2] = {0.0f, 0.0f};
  for (int l = 1; l <= d.L; ++l) {
    const int n = 2 * l + 1, off = l * (2 * l - 1) * (2 * l + 1) / 3;
    for (int a = 0; a < 2; ++a) {
      const GenNzF* nz = wt.jnz + wt.jnz_off[l][a];
      for (int t = 0; t < wt.jnz_n[l][a]; ++t) {
        const int ri = nz[t].i - (l - 1);  // compact row of the Dbar row
        if (ri < 0 || ri > 2) continue;
        float dot = 0.0f;
        for (int j = 0; j < n; ++j) dot += db[dc_off(l) + ri * n + j] * D[off + nz[t].k * n + j];
        G[a] += nz[t].val * dot;
      }
    }
  }
  const float* D1 = D + 1;
  const float ax[3] = {D1[8], -D1[6], -D1[7]}, bx[3] = {-D1[2], D1[0], D1[1]};
  const float inv_lam = rsqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + 2.0f * d.eps * d.eps);
  for (int i = 0; i < 3; ++i) edge_grad[3 * (size_t)e + i] = (double)(vb[i] + (G[0] * bx[i] - G[1] * ax[i]) * inv_lam);
}

constexpr int kMaxC = 64;  // channels supported by the per-thread MLP kernels

// The radial MLP per edge (one thread per edge). KC > 0 compiles the channel count in, so the
// per-thread vectors below live in registers (with a runtime count they sit in local memory);
// KC = 0 is the generic fallback. Every sum runs in the same order in both.
template <int KC>
__device__ __forceinline__ void radial_hidden(const Dims& d, const ModelWDev& w, const float* rbf, float* h, float* y,
                                              float& rho) {
  const int C = KC > 0 ? KC : d.C;
#pragma unroll
  for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
    if (c < C) h[c] = 0.0f;
  for (int n = 0; n < d.nr; ++n) {
    const float r = rbf[n];
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) h[c] += r * w.rad_w0[n * C + c];
  }
  rho = 1.0f;
  if (d.edge_norm) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) s += h[c] * h[c];
    rho = rsqrtf(s / C + 1e-7f);
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) y[c] = h[c] * rho * w.rad_norm[c];
  } else {
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); ++c)
      if (c < C) y[c] = h[c];
  }
}

template <int KC>
__global__ void radial_forward_k(Dims d, ModelWDev w, int E, const float* __restrict__ rbf,
                                 const float* __restrict__ env, float* rho_o) {
  constexpr int NC = KC > 0 ? KC : kMaxC;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const int C = KC > 0 ? KC : d.C;
  float h[NC], y[NC], rho;
  radial_hidden<KC>(d, w, rbf + (size_t)e * d.nr, h, y, rho);
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) y[c] = siluf_(y[c]);
  const int W = (d.L + 1) * C;
  const float en = env[e];
  for (int o = 0; o < W; ++o) {
    float m = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) m += y[c] * w.rad_w1[c * W + o];
    rho_o[(size_t)e * W + o] = en * m;
  }
}

template <int KC>
__global__ void radial_backward_k(Dims d, ModelWDev w, int E, const float* __restrict__ rbf,
                                  const float* __restrict__ env, const float* __restrict__ rho_bar, float* env_bar,
                                  float* rbf_bar) {
  constexpr int NC = KC > 0 ? KC : kMaxC;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const int C = KC > 0 ? KC : d.C;
  float h[NC], y[NC], a[NC], abar[NC], rho;
  radial_hidden<KC>(d, w, rbf + (size_t)e * d.nr, h, y, rho);
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) {
      a[c] = siluf_(y[c]);
      abar[c] = 0.0f;
    }
  const int W = (d.L + 1) * C;
  const float en = env[e];
  float eb = 0.0f;
  for (int o = 0; o < W; ++o) {
    float m = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) m += a[c] * w.rad_w1[c * W + o];
    const float rbo = rho_bar[(size_t)e * W + o];
    eb += rbo * m;
    const float mb = rbo * en;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) abar[c] += mb * w.rad_w1[c * W + o];
  }
  env_bar[e] += eb;
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) abar[c] *= silu_gradf_(y[c]);  // now y_bar
  if (d.edge_norm) {
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) dot += abar[c] * w.rad_norm[c] * h[c] * rho;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) abar[c] = rho * (abar[c] * w.rad_norm[c] - h[c] * rho * dot / C);
  }
  for (int n = 0; n < d.nr; ++n) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) s += abar[c] * w.rad_w0[n * C + c];
    rbf_bar[(size_t)e * d.nr + n] += s;
  }
}

__global__ void degree_forward_k(int N, const int* __restrict__ off, const float* __restrict__ env, float* isd) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float deg = 0.0f;
  for (int e = off[n]; e < off[n + 1]; ++e) deg += env[e] * env[e];
  isd[n] = rsqrtf(deg + 0.25f);
}

__global__ void degree_backward_k(int N, const int* __restrict__ off, const float* __restrict__ env,
                                  const float* __restrict__ isd, const float* __restrict__ isd_bar, float* env_bar) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float db = -0.5f * isd[n] * isd[n] * isd[n] * isd_bar[n];
  for (int e = off[n]; e < off[n + 1]; ++e) env_bar[e] += 2.0f * env[e] * db;
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
// One CTA per node, threads over the entries of A and then of f (a thread per node left the GPU
// idle for small systems: its serial loops set the latency of every MD step). Each entry is
// accumulated in the order of the serial version.
constexpr int kNodeT = 128;
__global__ void __launch_bounds__(kNodeT) env_seed_node_forward_k(Dims d, ModelWDev w, int N,
                                                                  const int* __restrict__ off,
                                                                  const int* __restrict__ types,
                                                                  const float* __restrict__ g,
                                                                  const float* __restrict__ seed,
                                                                  const float* __restrict__ isd, float* A_o,
                                                                  float* f_o, float* X0) {
  __shared__ float A[4 * 128], f[2 * kMaxC];
  const int n = blockIdx.x, t = threadIdx.x;
  const int emb = d.es_emb, ax = d.es_ax, C = d.C;
  for (int idx = t; idx < 4 * emb; idx += kNodeT) {
    const int k = idx / emb, i = idx % emb;
    float a = 0.0f;
    for (int e = off[n]; e < off[n + 1]; ++e) a += seed[4 * (size_t)e + k] * g[(size_t)e * emb + i];
    a *= isd[n];
    A[idx] = a;
    A_o[(size_t)n * 4 * emb + idx] = a;
  }
  __syncthreads();
  for (int o = t; o < 2 * C; o += kNodeT) {
    float v = 0.0f;
    for (int i = 0; i < emb; ++i)
      for (int j = 0; j < ax; ++j) {
        float Gij = 0.0f;
        for (int k = 0; k < 4; ++k) Gij += A[k * emb + i] * A[k * emb + j];
        v += Gij * w.es_out[(size_t)(i * ax + j) * 2 * C + o];
      }
    f[o] = v;
    f_o[(size_t)n * 2 * C + o] = v;
  }
  __syncthreads();
  float rs, rh;
  film_rms(d, f, C, rs, rh);
  const float* te = w.type_emb + (size_t)types[n] * C;
  for (int c = t; c < C; c += kNodeT) {
    float sn, hn;
    film_args(d, w, f, C, c, rs, rh, sn, hn);
    X0[(size_t)n * d.D * C + c] = te[c] * (1.0f + w.film_as * tanhf(sn)) + w.film_ah * tanhf(hn);
  }
}

// One CTA per node: FiLM and norm backward (threads over channels), G_bar = f_bar W_out^T
// (threads over (i, j)), A_bar (threads over its entries, each summed in the serial order).
__global__ void __launch_bounds__(kNodeT) env_seed_node_backward_k(Dims d, ModelWDev w, int N,
                                                                   const int* __restrict__ types,
                                                                   const float* __restrict__ A_i,
                                                                   const float* __restrict__ f_i,
                                                                   const float* __restrict__ isd,
                                                                   const float* __restrict__ X0_bar, float* A_bar_o,
                                                                   float* isd_bar) {
  __shared__ float fb[2 * kMaxC], A[4 * 128], Ab[4 * 128], Gb[128 * 8];
  const int n = blockIdx.x, t = threadIdx.x;
  const int emb = d.es_emb, ax = d.es_ax, C = d.C;
  const float* f = f_i + (size_t)n * 2 * C;
  for (int i = t; i < 4 * emb; i += kNodeT) A[i] = A_i[(size_t)n * 4 * emb + i];
  float rs, rh;
  film_rms(d, f, C, rs, rh);
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
    float ds = 0.0f, dh = 0.0f;
    for (int c = 0; c < C; ++c) {
      ds += fb[c] * w.film_s[c] * f[c] * rs;
      dh += fb[C + c] * w.film_h[c] * f[C + c] * rh;
    }
    __syncthreads();  // every thread has read fb before it is overwritten
    for (int c = t; c < C; c += kNodeT) {
      fb[c] = rs * (fb[c] * w.film_s[c] - f[c] * rs * ds / C);
      fb[C + c] = rh * (fb[C + c] * w.film_h[c] - f[C + c] * rh * dh / C);
    }
    __syncthreads();
  }
  for (int ij = t; ij < emb * ax; ij += kNodeT) {
    const float* wo = w.es_out + (size_t)ij * 2 * C;
    float v = 0.0f;
    for (int o = 0; o < 2 * C; ++o) v += fb[o] * wo[o];
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
                                         const float* __restrict__ A_bar, float* rbf_bar, float* vec_bar) {
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
  float p1[kMaxHid], gin[kMaxHid], g1[kMaxHid], gb[kMaxHid];
  env_seed_edge(d, w, rbf + (size_t)e * d.nr, types[src[e]], types[dst[e]], p1, gin, g1, gb);
  for (int i = 0; i < emb; ++i) {
    float a = 0.0f;
    for (int k = 0; k < 4; ++k) a += Ab[k * emb + i] * se[k];
    gb[i] = isd[n] * a;
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
  // Seed Jacobian (01 §13(c)).
  const float r = r_i[e], s = env[e] / r, sp = denv[e] / r - env[e] / (r * r);
  const float u[3] = {vecf[3 * (size_t)e] / r, vecf[3 * (size_t)e + 1] / r, vecf[3 * (size_t)e + 2] / r};
  const float ub = u[0] * sb[1] + u[1] * sb[2] + u[2] * sb[3];
  for (int b = 0; b < 3; ++b)
    vec_bar[3 * (size_t)e + b] += sb[0] * sp * u[b] + ub * sp * u[b] + (s / r) * (sb[1 + b] - ub * u[b]);
}

// GIE rows l >= 1: one thread per (node, packed row p >= 1, channel).
__global__ void gie_forward_k(Dims d, int N, const int* __restrict__ off, const float* __restrict__ Dc,
                              const float* __restrict__ isd, const float* __restrict__ rho, float* X0) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int C = d.C;
  if (idx >= (long)N * (d.D - 1) * C) return;
  const int c = idx % C, p = 1 + (idx / C) % (d.D - 1), n = idx / ((long)C * (d.D - 1));
  const int l = degree_of_packed(p), m = p - l * l - l;
  float acc = 0.0f;
  for (int e = off[n]; e < off[n + 1]; ++e)
    acc += Dc[(size_t)e * d.dc_size + dc_off(l) + (2 * l + 1) + m + l] * rho[((size_t)e * (d.L + 1) + l) * C + c];
  X0[((size_t)n * d.D + p) * C + c] = isd[n] * acc;
}

__global__ void gie_isd_backward_k(Dims d, int N, const float* __restrict__ isd, const float* __restrict__ X0,
                                   const float* __restrict__ X0_bar, float* isd_bar) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float acc = 0.0f;
  for (int i = d.C; i < d.D * d.C; ++i) acc += X0[(size_t)n * d.D * d.C + i] * X0_bar[(size_t)n * d.D * d.C + i];
  isd_bar[n] += acc / isd[n];
}

// GIE backward, split so that every global access is coalesced or per-thread contiguous:
//  rho_bar[e, l, c] += isd[n] sum_m X0_bar[n, p(l,m), c] Dc[e, k(l,m)]   (thread per (e, l >= 1, c));
//  Dc_bar[e, k(l,m)] += isd[n] sum_c X0_bar[n, p(l,m), c] rho[e, l, c]   (thread per (e, p >= 1)).
__global__ void gie_rho_backward_k(Dims d, int E, const int* __restrict__ dst, const float* __restrict__ Dc,
                                   const float* __restrict__ isd, const float* __restrict__ X0_bar, float* rho_bar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int C = d.C;
  if (idx >= (long)E * d.L * C) return;
  const int c = idx % C, l = 1 + (int)((idx / C) % d.L);
  const int e = (int)(idx / ((long)C * d.L)), n = dst[e];
  const float* xb = X0_bar + (size_t)n * d.D * C + c;
  const float* z = Dc + (size_t)e * d.dc_size + dc_off(l) + (2 * l + 1) + l;
  float rb = 0.0f;
  for (int m = -l; m <= l; ++m) rb += xb[(size_t)packed(l, m) * C] * z[m];
  rho_bar[((size_t)e * (d.L + 1) + l) * C + c] += isd[n] * rb;
}

__global__ void gie_dc_backward_k(Dims d, int E, const int* __restrict__ dst, const float* __restrict__ isd,
                                  const float* __restrict__ rho, const float* __restrict__ X0_bar, float* Dc_bar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)E * (d.D - 1)) return;
  const int p = 1 + (int)(idx % (d.D - 1)), e = (int)(idx / (d.D - 1)), n = dst[e], C = d.C;
  const int l = degree_of_packed(p), m = p - l * l - l;
  const float* xb = X0_bar + ((size_t)n * d.D + p) * C;
  const float* re = rho + ((size_t)e * (d.L + 1) + l) * C;
  float zb = 0.0f;
  for (int c = 0; c < C; ++c) zb += xb[c] * re[c];
  Dc_bar[(size_t)e * d.dc_size + dc_off(l) + (2 * l + 1) + m + l] += isd[n] * zb;
}

constexpr int kThreads = 128;

}  // namespace

void launch_geometry_forward(const Dims& d, int E, const double* vec, const float* freqs, const WignerTablesDev& wt,
                             float* vecf, float* r, float* env, float* denv, float* rbf, float* Dc, cudaStream_t s) {
  if (E == 0) return;
  geometry_forward_k<<<div_up(E, kThreads), kThreads, 0, s>>>(d, E, vec, freqs, wt, vecf, r, env, denv, rbf, Dc);
  SEZM_LAUNCH("geometry_forward");
}
void launch_geometry_backward(const Dims& d, int E, const float* vecf, const float* r, const float* denv,
                              const float* freqs, const WignerTablesDev& wt, const float* env_bar,
                              const float* rbf_bar, const float* Dc_bar, const float* vec_bar, double* edge_grad,
                              cudaStream_t s) {
  if (E == 0) return;
  geometry_backward_k<<<div_up(E, kThreads), kThreads, 0, s>>>(d, E, vecf, r, denv, freqs, wt, env_bar, rbf_bar,
                                                               Dc_bar, vec_bar, edge_grad);
  SEZM_LAUNCH("geometry_backward");
}
void launch_radial_forward(const Dims& d, const ModelWDev& w, int E, const float* rbf, const float* env, float* rho,
                           cudaStream_t s) {
  if (E == 0) return;
  if (d.C == 32) radial_forward_k<32><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, rbf, env, rho);
  else if (d.C == 16) radial_forward_k<16><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, rbf, env, rho);
  else radial_forward_k<0><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, rbf, env, rho);
  SEZM_LAUNCH("radial_forward");
}
void launch_radial_backward(const Dims& d, const ModelWDev& w, int E, const float* rbf, const float* env,
                            const float* rho_bar, float* env_bar, float* rbf_bar, cudaStream_t s) {
  if (E == 0) return;
  if (d.C == 32)
    radial_backward_k<32><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, rbf, env, rho_bar, env_bar, rbf_bar);
  else if (d.C == 16)
    radial_backward_k<16><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, rbf, env, rho_bar, env_bar, rbf_bar);
  else
    radial_backward_k<0><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, rbf, env, rho_bar, env_bar, rbf_bar);
  SEZM_LAUNCH("radial_backward");
}
void launch_degree_forward(int N, const int* off, const float* env, float* isd, cudaStream_t s) {
  if (N == 0) return;
  degree_forward_k<<<div_up(N, kThreads), kThreads, 0, s>>>(N, off, env, isd);
  SEZM_LAUNCH("degree_forward");
}
void launch_degree_backward(int N, const int* off, const float* env, const float* isd, const float* isd_bar,
                            float* env_bar, cudaStream_t s) {
  if (N == 0) return;
  degree_backward_k<<<div_up(N, kThreads), kThreads, 0, s>>>(N, off, env, isd, isd_bar, env_bar);
  SEZM_LAUNCH("degree_backward");
}
void launch_env_seed_forward(const Dims& d, const ModelWDev& w, int N, int E, const int* src, const int* dst,
                             const int* dst_off, const int* types, const float* vecf, const float* r,
                             const float* env, const float* rbf, const float* isd, float* g, float* seed, float* A,
                             float* f, float* X0, cudaStream_t s) {
  if (E > 0) {
    env_seed_edge_forward_k<<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, src, dst, types, vecf, r, env, rbf, g,
                                                                    seed);
    SEZM_LAUNCH("env_seed_edge_forward");
  }
  if (N > 0) {
    env_seed_node_forward_k<<<N, kNodeT, 0, s>>>(d, w, N, dst_off, types, g, seed, isd, A, f, X0);
    SEZM_LAUNCH("env_seed_node_forward");
  }
}
void launch_env_seed_backward(const Dims& d, const ModelWDev& w, int N, int E, const int* src, const int* dst,
                              const int* /*dst_off*/, const int* types, const float* vecf, const float* r,
                              const float* env, const float* denv, const float* rbf, const float* isd,
                              const float* g, const float* seed, const float* A, const float* f, const float* X0_bar,
                              float* A_bar, float* isd_bar, float* rbf_bar, float* vec_bar, cudaStream_t s) {
  if (N > 0) {
    env_seed_node_backward_k<<<N, kNodeT, 0, s>>>(d, w, N, types, A, f, isd, X0_bar, A_bar, isd_bar);
    SEZM_LAUNCH("env_seed_node_backward");
  }
  if (E > 0) {
    env_seed_edge_backward_k<<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, src, dst, types, vecf, r, env, denv,
                                                                     rbf, isd, g, seed, A_bar, rbf_bar, vec_bar);
    SEZM_LAUNCH("env_seed_edge_backward");
  }
}
void launch_gie_forward(const Dims& d, int N, const int* dst_off, const float* Dc, const float* isd, const float* rho,
                        float* X0, cudaStream_t s) {
  const long n = (long)N * (d.D - 1) * d.C;
  if (n == 0) return;
  gie_forward_k<<<div_up(n, 256), 256, 0, s>>>(d, N, dst_off, Dc, isd, rho, X0);
  SEZM_LAUNCH("gie_forward");
}
void launch_gie_rho_backward(const Dims& d, int E, const int* dst, const float* Dc, const float* isd,
                             const float* X0_bar, float* rho_bar, cudaStream_t s) {
  if (E == 0 || d.L == 0) return;
  gie_rho_backward_k<<<div_up((long)E * d.L * d.C, kThreads), kThreads, 0, s>>>(d, E, dst, Dc, isd, X0_bar, rho_bar);
  SEZM_LAUNCH("gie_rho_backward");
}
void launch_gie_backward(const Dims& d, int N, int E, const int* dst, const float* Dc, const float* isd,
                         const float* rho, const float* X0, const float* X0_bar, float* isd_bar, float* Dc_bar,
                         cudaStream_t s) {
  if (N > 0) {
    gie_isd_backward_k<<<div_up(N, kThreads), kThreads, 0, s>>>(d, N, isd, X0, X0_bar, isd_bar);
    SEZM_LAUNCH("gie_isd_backward");
  }
  if (E > 0 && d.L > 0) {
    gie_dc_backward_k<<<div_up((long)E * (d.D - 1), kThreads), kThreads, 0, s>>>(d, E, dst, isd, rho, X0_bar, Dc_bar);
    SEZM_LAUNCH("gie_dc_backward");
  }
}

}  // namespace sezm::cuda
