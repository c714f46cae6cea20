// Per-edge geometry on the device, forward and backward side by side (CPU twins:
// engine/edge_geometry.h, envelope.h, radial_basis.h, wigner_d.{h,cpp}): safe length, envelopes,
// Bessel basis, edge quaternion, Wigner blocks reduced to the compact rows the SO(2) value path
// reads. One thread per edge. The fast kernels (templated on L) compute only the Wigner rows each
// side reads, with compile-time table indices (wigner_rows.cuh), so everything lives in registers,
// and move a CTA's compact rows through shared memory (coalesced global rows); the legacy kernels
// (runtime tables, an 848-byte local frame per thread) stay for A/B with SEZM_CUDA_GEOM_LEGACY=1
// and for lmax outside 1..3.
#include <cfloat>
#include <cstdlib>

#include "async_copy.cuh"
#include "geometry.cuh"
#include "wigner_rows.cuh"

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

// docs/model.md §3.3, as engine/wigner_d.h edge_quaternion.
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

// Block D^1 (3 x 3, row-major) of the normalised q (wigner_full_d's, the fast kernels').
__device__ __forceinline__ void d1_block(const float q[4], float (&D1)[9]) {
  const float w = q[0], x = q[1], y = q[2], z = q[3];
  float R[9];
  R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - w * z); R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z); R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y); R[7] = 2 * (y * z + w * x); R[8] = 1 - 2 * (x * x + y * y);
  const int perm[3] = {1, 2, 0};
  const float sgn[3] = {-1.0f, -1.0f, 1.0f};
#pragma unroll
  for (int i = 0; i < 3; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j) D1[3 * i + j] = sgn[i] * sgn[j] * R[3 * perm[i] + perm[j]];
}

// All Wigner blocks l <= L of q_e into D (packed like the CPU engine).
__device__ void wigner_full_d(const float* q_in, int L, float eps, const WignerTablesDev& wt, float* D) {
  float q[4];
  quat_nrm(q_in, eps, q);
  D[0] = 1.0f;
  if (L < 1) return;
  float D1[9];
  d1_block(q, D1);
  for (int i = 0; i < 9; ++i) D[1 + i] = D1[i];
  if (L < 2) return;
  const float w = q[0], x = q[1], y = q[2], z = q[3];
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

// The edge's float vector (also stored to vecf), its safe length and the edge envelope with its
// derivative (both forward kernels).
__device__ __forceinline__ void edge_length_forward(const Dims& d, int e, const double* vec, float* vecf, float* r_o,
                                                     float* env_o, float* denv_o, float (&v)[3]) {
  for (int a = 0; a < 3; ++a) v[a] = (float)vec[3 * (size_t)e + a];
  for (int a = 0; a < 3; ++a) vecf[3 * (size_t)e + a] = v[a];
  const float r = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + d.eps * d.eps);
  r_o[e] = r;
  env_o[e] = envelope_d(r, d.rcut, d.p_edge);
  denv_o[e] = envelope_dr_d(r, d.rcut, d.p_edge);
}

// vec_bar before the tilt term (both backward kernels): the edge's own adjoint plus the length's,
// r_bar from the edge envelope and the radial basis phi_n = sin(w r)/r E7(r); rbf_bar_e is the
// edge's row of the basis adjoint (global or staged), freqs the frequencies (global or staged).
__device__ __forceinline__ void vec_bar_radial(const Dims& d, int e, const float (&v)[3], float r,
                                               const float* env_bar, const float* denv, const float* freqs,
                                               const float* rbf_bar_e, const float* vec_bar, float (&vb)[3]) {
  float rb = env_bar[e] * denv[e];
  const float e7 = envelope_d(r, d.rcut, d.p_rbf), de7 = envelope_dr_d(r, d.rcut, d.p_rbf);
  for (int n = 0; n < d.nr; ++n) {
    const float w = freqs[n], sw = sinf(w * r), cw = cosf(w * r);
    rb += rbf_bar_e[n] * ((w * cw / r - sw / (r * r)) * e7 + sw / r * de7);
  }
  for (int a = 0; a < 3; ++a) vb[a] = vec_bar[3 * (size_t)e + a] + rb * v[a] / r;
}

// edge_grad = vec_bar + the tilt term (docs/model.md §7.5) from G and the D^1 block (both backward
// kernels).
__device__ __forceinline__ void edge_grad_out(const Dims& d, int e, const float (&v)[3], const float (&vb)[3],
                                              const float (&G)[2], const float* D1, double* edge_grad) {
  const float ax[3] = {D1[8], -D1[6], -D1[7]}, bx[3] = {-D1[2], D1[0], D1[1]};
  const float inv_lam = rsqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + 2.0f * d.eps * d.eps);
  for (int i = 0; i < 3; ++i) edge_grad[3 * (size_t)e + i] = (double)(vb[i] + (G[0] * bx[i] - G[1] * ax[i]) * inv_lam);
}

// Everything but the radial basis (radial_basis_forward_k: a committee follower of other
// frequencies runs only that one on its leader's lengths, so both routes compute it alike).
__global__ void geometry_forward_k(Dims d, int E, const double* __restrict__ vec, WignerTablesDev wt, float* vecf,
                                   float* r_o, float* env_o, float* denv_o, float* Dc_o) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  float v[3];
  edge_length_forward(d, e, vec, vecf, r_o, env_o, denv_o, v);
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

// One thread per entry (e, n) of the basis: the stores coalesce. A thread per edge wrote its nr
// entries nr floats apart, one frequency load and store after another (long-scoreboard stalls 77 %
// of the warp samples, 147 us for 647,168 edges on an H100; docs/performance.md, 2026-12-05
// sixteenth session). The envelope is formed per entry by the same arithmetic: the same bits.
__global__ void radial_basis_forward_k(Dims d, int E, const float* __restrict__ r_i, const float* __restrict__ freqs,
                                       float* __restrict__ rbf_o) {
  const size_t x = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= static_cast<size_t>(E) * d.nr) return;
  const size_t e = x / d.nr;
  const int n = static_cast<int>(x - e * d.nr);
  const float r = r_i[e];
  const float e7 = envelope_d(r, d.rcut, d.p_rbf);
  rbf_o[x] = sinf(freqs[n] * r) / r * e7;
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
  float vb[3];
  vec_bar_radial(d, e, v, r, env_bar, denv, freqs, rbf_bar + (size_t)e * d.nr, vec_bar, vb);
  // Tilt formula (docs/model.md §7.5) with the full D recomputed from v; Dbar lives on rows |m| <= 1.
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
  edge_grad_out(d, e, v, vb, G, D + 1, edge_grad);
}

// ---- fast kernels: lmax L = 1..3 at compile time ----
constexpr int kGeoT = 128;  // edges (threads) per CTA
constexpr int kStageNr = 32;  // the backward stages rbf_bar's rows (16 KiB) for nr up to this

// The CTA's rows of a per-edge table (E, w) between global and shared memory, coalesced: the CTA's
// edges e_base.. are contiguous (w floats each). stage_in issues every copy before it waits
// (copy_async_span): a load-then-store loop held one load per thread in flight, and the
// backward's wait on its Dc_bar rows took half its warp samples (docs/performance.md, 2026-12-05
// sixteenth session). The caller's barrier follows.
__device__ __forceinline__ void stage_in(const float* __restrict__ g, float* sh, int e_base, int ne, int w) {
  copy_async_span(sh, g + (size_t)e_base * w, ne * w, threadIdx.x, blockDim.x);
  copy_async_wait();
}
__device__ __forceinline__ void stage_out(const float* sh, float* __restrict__ g, int e_base, int ne, int w) {
  float* dst = g + (size_t)e_base * w;
  for (int i = threadIdx.x; i < ne * w; i += blockDim.x) dst[i] = sh[i];
}

// Forward as geometry_forward_k; the compact rows (m = -1, 0, 1 of each block) go through shared
// memory (dc_size floats per edge) to global.
template <int L>
__global__ void __launch_bounds__(kGeoT) geometry_forward_fast_k(Dims d, int E, const double* __restrict__ vec,
                                                                 WignerTablesDev wt, float* vecf, float* r_o,
                                                                 float* env_o, float* denv_o, float* Dc_o) {
  constexpr int kDc = 1 + 3 * ((L + 1) * (L + 1) - 1);  // dc_size
  __shared__ float sdc[kGeoT * kDc];
  const int e_base = blockIdx.x * kGeoT, ne = min(kGeoT, E - e_base);
  const int e = e_base + threadIdx.x;
  if (e < E) {
    float v[3];
    edge_length_forward(d, e, vec, vecf, r_o, env_o, denv_o, v);
    float qe[4], q[4];
    edge_quaternion_d(v, d.eps, qe);
    quat_nrm(qe, d.eps, q);  // wigner_full_d's re-normalisation
    float* dc = sdc + threadIdx.x * kDc;
    dc[0] = 1.0f;
    float D1[9];
    d1_block(q, D1);
#pragma unroll
    for (int i = 0; i < 9; ++i) dc[1 + i] = D1[i];
    if constexpr (L >= 2) {
      wrows::Cx pa[2 * L + 1], pb[2 * L + 1];
      wrows::powers(q, pa, pb);
      wrows::static_for<2, L + 1>([&](auto LL) {
        constexpr int l = decltype(LL)::value, n = 2 * l + 1;
        float Dr[3][n];
        wrows::rows<l, 1>(pa, pb, wt.ck + wt.ck_off[l], wt.rt + wt.rt_off[l], Dr);
#pragma unroll
        for (int rr = 0; rr < 3; ++rr)
#pragma unroll
          for (int c = 0; c < n; ++c) dc[dc_off(l) + rr * n + c] = Dr[rr][c];
      });
    }
  }
  __syncthreads();
  stage_out(sdc, Dc_o, e_base, ne, kDc);
}

// Backward as geometry_backward_k: Dc_bar's compact rows staged in shared memory, the Wigner rows
// |m| <= 2 recomputed in registers, the generators J_x, J_y densified per CTA (jd).
template <int L>
__global__ void __launch_bounds__(kGeoT) geometry_backward_fast_k(Dims d, int E, const float* __restrict__ vecf,
                                                                  const float* __restrict__ r_i,
                                                                  const float* __restrict__ denv,
                                                                  const float* __restrict__ freqs, WignerTablesDev wt,
                                                                  const float* __restrict__ env_bar,
                                                                  const float* __restrict__ rbf_bar,
                                                                  const float* __restrict__ Dc_bar,
                                                                  const float* __restrict__ vec_bar, double* edge_grad) {
  constexpr int kDc = 1 + 3 * ((L + 1) * (L + 1) - 1);
  __shared__ __align__(16) float sdb[kGeoT * kDc];
  __shared__ __align__(16) float srb[kGeoT * kStageNr];  // rbf_bar's rows where nr <= kStageNr
  __shared__ float sfreq[kStageNr];
  __shared__ float jd[L][30];  // [l - 1][a * 15 + ri * 5 + m_k + 2]
  const int e_base = blockIdx.x * kGeoT, ne = min(kGeoT, E - e_base);
  const bool stage_rbf = d.nr <= kStageNr;
  for (int i = threadIdx.x; i < L * 30; i += blockDim.x) (&jd[0][0])[i] = 0.0f;
  __syncthreads();
  // Each (i, k) appears once per generator: plain stores, no sums.
  for (int l = 1; l <= L; ++l)
    for (int a = 0; a < 2; ++a)
      for (int t = threadIdx.x; t < wt.jnz_n[l][a]; t += blockDim.x) {
        const GenNzF nz = wt.jnz[wt.jnz_off[l][a] + t];
        const int ri = nz.i - (l - 1), mk = nz.k - l;
        if (ri >= 0 && ri <= 2 && mk >= -2 && mk <= 2) jd[l - 1][a * 15 + ri * 5 + mk + 2] = nz.val;
      }
  if (stage_rbf) {
    for (int n = threadIdx.x; n < d.nr; n += blockDim.x) sfreq[n] = freqs[n];
    stage_in(rbf_bar, srb, e_base, ne, d.nr);
  }
  stage_in(Dc_bar, sdb, e_base, ne, kDc);
  __syncthreads();
  const int e = e_base + threadIdx.x;
  if (e >= E) return;
  const float v[3] = {vecf[3 * (size_t)e], vecf[3 * (size_t)e + 1], vecf[3 * (size_t)e + 2]};
  const float r = r_i[e];
  float vb[3];
  vec_bar_radial(d, e, v, r, env_bar, denv, stage_rbf ? sfreq : freqs,
                 stage_rbf ? srb + threadIdx.x * d.nr : rbf_bar + (size_t)e * d.nr, vec_bar, vb);
  float qe[4], q[4];
  edge_quaternion_d(v, d.eps, qe);
  quat_nrm(qe, d.eps, q);
  const float* db = sdb + threadIdx.x * kDc;
  float G[2] = {0.0f, 0.0f};
  float D1[9];
  d1_block(q, D1);
  wrows::tilt_block1(D1, db + dc_off(1), jd[0], G);
  if constexpr (L >= 2) {
    wrows::Cx pa[2 * L + 1], pb[2 * L + 1];
    wrows::powers(q, pa, pb);
    wrows::static_for<2, L + 1>([&](auto LL) {
      constexpr int l = decltype(LL)::value;
      wrows::tilt_block<l>(pa, pb, wt.ck + wt.ck_off[l], wt.rt + wt.rt_off[l], db + dc_off(l), jd[l - 1], G);
    });
  }
  edge_grad_out(d, e, v, vb, G, D1, edge_grad);
}

bool geom_legacy() {
  static const bool on = env_on("SEZM_CUDA_GEOM_LEGACY");
  return on;
}

constexpr int kThreads = 128;

}  // namespace

void launch_geometry_forward(const Dims& d, const GeometryForwardArgs& a, cudaStream_t s) {
  if (a.E == 0) return;
  const EdgeGeomDev& g = a.geo;
  auto fast = [&](auto kernel) {
    kernel<<<div_up(a.E, kGeoT), kGeoT, 0, s>>>(d, a.E, a.vec, a.wt, g.vecf, g.r, g.env, g.denv, g.Dc);
  };
  if (geom_legacy() || d.L < 1 || d.L > 3 || d.dc_size != dc_off(d.L + 1))
    geometry_forward_k<<<div_up(a.E, kThreads), kThreads, 0, s>>>(d, a.E, a.vec, a.wt, g.vecf, g.r, g.env, g.denv,
                                                                   g.Dc);
  else if (d.L == 1) fast(geometry_forward_fast_k<1>);
  else if (d.L == 2) fast(geometry_forward_fast_k<2>);
  else fast(geometry_forward_fast_k<3>);
  SEZM_LAUNCH("geometry_forward");
  launch_radial_basis_forward(d, a.E, g.r, a.freqs, g.rbf, s);
}
void launch_radial_basis_forward(const Dims& d, int E, const float* r, const float* freqs, float* rbf,
                                 cudaStream_t s) {
  if (E == 0) return;
  radial_basis_forward_k<<<div_up(static_cast<long>(E) * d.nr, kThreads), kThreads, 0, s>>>(d, E, r, freqs, rbf);
  SEZM_LAUNCH("radial_basis_forward");
}
void launch_geometry_backward(const Dims& d, const GeometryBackwardArgs& a, cudaStream_t s) {
  if (a.E == 0) return;
  auto fast = [&](auto kernel) {
    kernel<<<div_up(a.E, kGeoT), kGeoT, 0, s>>>(d, a.E, a.geo.vecf, a.geo.r, a.geo.denv, a.freqs, a.wt,
                                                a.bar.env_bar, a.bar.rbf_bar, a.bar.Dc_bar, a.bar.vec_bar,
                                                a.edge_grad);
  };
  if (geom_legacy() || d.L < 1 || d.L > 3 || d.dc_size != dc_off(d.L + 1))
    geometry_backward_k<<<div_up(a.E, kThreads), kThreads, 0, s>>>(d, a.E, a.geo.vecf, a.geo.r, a.geo.denv, a.freqs,
                                                                   a.wt, a.bar.env_bar, a.bar.rbf_bar, a.bar.Dc_bar,
                                                                   a.bar.vec_bar, a.edge_grad);
  else if (d.L == 1) fast(geometry_backward_fast_k<1>);
  else if (d.L == 2) fast(geometry_backward_fast_k<2>);
  else fast(geometry_backward_fast_k<3>);
  SEZM_LAUNCH("geometry_backward");
}

}  // namespace sezm::cuda
