// Interaction-block edge and node steps other than the mixing stack (docs/sezm/02 §3–§5, §9):
// attention q/k/gate, the envelope softmax, gather + rotate + radial conditioning, focus
// competition, rotate-back + weighted destination sum, and their backward. Edges arrive in
// chunks of whole destination segments, so every destination-side sum is a plain loop over its
// CSR segment; source-side sums use a per-chunk source grouping (no atomics, deterministic).
#include <algorithm>

#include "kernels.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxCf = 64, kMaxDm = 10, kMaxD = 16;

__device__ float scalar_rms(const float* x, int n, const float* scale, float eps, float* y) {
  float s = 0.0f;
  for (int c = 0; c < n; ++c) s += x[c] * x[c];
  const float rho = rsqrtf(s / n + eps);
  for (int c = 0; c < n; ++c) y[c] = x[c] * rho * scale[c];
  return rho;
}
__device__ void scalar_rms_backward(const float* x, int n, const float* scale, float rho, const float* yb, float* xb) {
  float dot = 0.0f;
  for (int c = 0; c < n; ++c) dot += yb[c] * scale[c] * x[c] * rho;
  for (int c = 0; c < n; ++c) xb[c] += rho * (yb[c] * scale[c] - x[c] * rho * dot / n);
}

// One thread per (node, focus).
__global__ void attention_node_forward_k(Dims d, BlockWDev w, int N, int NT, const float* __restrict__ H, float* q,
                                         float* k, float* qk_rho, float* gate_rho, float* gamma) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= NT * d.F) return;
  const int n = i / d.F, f = i % d.F, Cf = d.Cf;
  const float* h0 = H + (size_t)n * d.D * d.Cw + f * Cf;
  float hn[kMaxCf];
  qk_rho[i] = scalar_rms(h0, Cf, w.qk_norm + f * Cf, d.eps, hn);
  const float* Wq = w.Wq + (size_t)f * Cf * Cf;
  const float* Wk = w.Wk + (size_t)f * Cf * Cf;
  for (int b = 0; b < Cf; ++b) {
    float sq = 0.0f, sk = 0.0f;
    for (int a = 0; a < Cf; ++a) {
      sq += hn[a] * Wq[a * Cf + b];
      sk += hn[a] * Wk[a * Cf + b];
    }
    q[(size_t)n * d.Cw + f * Cf + b] = sq;
    k[(size_t)n * d.Cw + f * Cf + b] = sk;
  }
  if (n < N) {
    gate_rho[i] = scalar_rms(h0, Cf, w.gate_norm + f * Cf, d.eps, hn);
    float z = 0.0f;
    for (int a = 0; a < Cf; ++a) z += hn[a] * w.gate_w[a * d.F + f];
    gamma[i] = sigmoidf_(z);
  }
}

// One warp per (centre, focus), lanes over the centre's edges: logits, max, denominator, alpha
// (02 §4.2 shifted form). Warp reductions in a fixed tree: deterministic.
__global__ void softmax_forward_k(Dims d, BlockWDev w, int N, const int* __restrict__ src, const int* __restrict__ off,
                                  const float* __restrict__ env, EdgeRadialIn R,
                                  const float* __restrict__ q, const float* __restrict__ k, float* alpha) {
  const long gw = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (gw >= (long)N * d.F) return;  // whole warps leave together
  const int n = gw / d.F, f = gw % d.F, Cf = d.Cf;
  const float scale = rsqrtf((float)Cf);
  const float* qn = q + (size_t)n * d.Cw + f * Cf;
  const float* u = w.logit_u + (size_t)f * d.C;
  const float log_null = w.log_zeta[f];
  float mx = log_null;
  for (int e = off[n] + lane; e < off[n + 1]; e += 32) {
    if (!(env[e] > 0.0f)) continue;
    const float* kn = k + (size_t)src[e] * d.Cw + f * Cf;
    float l = 0.0f;
    for (int c = 0; c < Cf; ++c) l += qn[c] * kn[c];
    l *= scale;
    for (int c = 0; c < d.C; ++c) l += R(d, e, 0, c) * u[c];
    const float eff = l + 2.0f * logf(env[e]);
    alpha[(size_t)e * d.F + f] = eff;  // stash the logit, normalised below
    mx = fmaxf(mx, eff);
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float part = 0.0f;
  for (int e = off[n] + lane; e < off[n + 1]; e += 32) {
    const float a = env[e] > 0.0f ? expf(alpha[(size_t)e * d.F + f] - mx) : 0.0f;
    alpha[(size_t)e * d.F + f] = a;
    part += a;
  }
  for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
  const float den = expf(log_null - mx) + part;
  for (int e = off[n] + lane; e < off[n + 1]; e += 32) alpha[(size_t)e * d.F + f] /= den;
}

// CTA-wide sums of a per-thread register vector. Threads are taken in their linear order (x
// fastest, as warps are formed), so 2-D blocks work too. The thread count is a power of two
// below 32 or a multiple of 32 (checked at engine construction for Cw; softmax_backward's Cw x R
// keeps it). Full warps reduce-scatter: at each butterfly step a lane keeps one half of its
// vector and trades the other, so N values cost ~N shuffles instead of 5 N and every lane ends
// with N/32 warp sums; one shared-memory pass then adds the warps. Fixed order: deterministic.
// One reduce-scatter step: lanes whose bit O is set keep the upper half t[H..2H) (moved down),
// the others the lower half; each adds its partner's copy of the half it keeps.
template <int H, int O, int NP>
__device__ __forceinline__ void rs_step(float (&t)[NP], int lane, int& base) {
  const bool upper = lane & O;
  if (upper) base += H;
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const float send = upper ? t[k] : t[k + H];
    const float keep = upper ? t[k + H] : t[k];
    t[k] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}

template <int N>
__device__ __forceinline__ void cta_sum(const float (&v)[N], float* red, float* out) {
  const int nt = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int width = nt >= 32 ? 32 : nt, lane = tid % width, warp = tid / width;
  if (nt >= 32) {
    constexpr int NP = (N + 31) / 32 * 32;
    float t[NP];
#pragma unroll
    for (int k = 0; k < NP; ++k) t[k] = k < N ? v[k] : 0.0f;
    int base = 0;  // original index of t[0] on this lane after the steps so far
    rs_step<NP / 2, 16>(t, lane, base);
    rs_step<NP / 4, 8>(t, lane, base);
    rs_step<NP / 8, 4>(t, lane, base);
    rs_step<NP / 16, 2>(t, lane, base);
    rs_step<NP / 32, 1>(t, lane, base);
#pragma unroll
    for (int k = 0; k < NP / 32; ++k)
      if (base + k < N) red[warp * N + base + k] = t[k];
  } else {
    const unsigned mask = (1u << nt) - 1u;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float t = v[k];
      for (int o = width / 2; o > 0; o >>= 1) t += __shfl_xor_sync(mask, t, o, width);
      if (lane == 0) red[warp * N + k] = t;
    }
  }
  __syncthreads();
  const int nw = (nt + width - 1) / width;
  for (int k = tid; k < N; k += nt) {
    float t = 0.0f;
    for (int w = 0; w < nw; ++w) t += red[w * N + k];
    out[k] = t;
  }
  __syncthreads();
}

template <int LT>
__host__ __device__ constexpr int kernel_size() { return (LT + 1) * (LT + 1) + LT * LT; }

__device__ inline int kernel_index(int L, int li, int lo, int m) {
  return m == 0 ? li * (L + 1) + lo : (L + 1) * (L + 1) + (li - 1) * L + (lo - 1);
}

// Gather H[src] rows into the edge frame for one channel: xl[j] (mmax = 1 rows).
template <int LT>
__device__ void rotate_in(const Dims& d, const float* Dce, const float* Hs, int c, float* xl) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  #pragma unroll
  for (int j = 0; j < kDm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    if (l == 0) {
      xl[j] = Hs[c];
      continue;
    }
    const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
    float v = 0.0f;
    #pragma unroll
    for (int mp = -l; mp <= l; ++mp) v += row[mp + l] * Hs[(size_t)packed(l, mp) * d.Cw + c];
    xl[j] = v;
  }
}

// One CTA (Cw threads) per edge: rotate + radial conditioning -> U0 focus-major, S_src. The wide
// radial features and the degree kernel of the chunk's edges come precomputed (launch_radial_prep),
// so the kernel needs no shared memory and no barrier.
template <int LT>
__global__ void rotate_condition_k(Dims d, BlockWDev w, int e0, int Ec, const int* __restrict__ src,
                                   const float* __restrict__ Dc, const float* __restrict__ H,
                                   const float* __restrict__ Rh_c, const float* __restrict__ kern_c,
                                   float* __restrict__ U0, float* __restrict__ Ssrc) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  const int i = blockIdx.x, e = e0 + i, c = threadIdx.x;
  const float* Rh = Rh_c + (size_t)i * (LT + 1) * d.Cw;
  const float* kern = kern_c + (size_t)i * padded_kernel_size(d);
  float xl[kMaxDm];
  rotate_in<LT>(d, Dc + (size_t)e * kDcs, H + (size_t)src[e] * kD * d.Cw, c, xl);
  const int f = c / d.Cf, cf = c % d.Cf;
  float* U = U0 + ((size_t)f * Ec + i) * d.ROW;
  #pragma unroll
  for (int o = 0; o < kDm; ++o) {
    const int lo = red_l(o, LT), mo = red_m(o, LT);
    float v;
    if (!d.degree_mixer) {
      v = xl[o] * Rh[lo * d.Cw + c];
    } else {
      v = 0.0f;
      #pragma unroll
      for (int in = 0; in < kDm; ++in) {
        if (red_m(in, LT) != mo) continue;
        v += kern[kernel_index(LT, red_l(in, LT), lo, mo)] * xl[in];
      }
      v *= w.cb[c];
    }
    U[o * d.Cf + cf] = v;
    if (o == 0 && d.F > 1) Ssrc[((size_t)f * Ec + i) * d.Cf + cf] = v;
  }
}

// Cross-focus competition weights (02 §3.5), one warp per edge of the chunk: lanes over the
// focus channels, so the S_src rows are read coalesced; sums are xor butterflies (every lane
// gets the same bits, deterministic).
constexpr int kMaxF = 8, kFcWarps = 4;
__global__ void focus_compete_k(Dims d, BlockWDev w, int Ec, const float* __restrict__ Ssrc, float* fc_p,
                                float* alpha_fc) {
  const int i = blockIdx.x * kFcWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (i >= Ec) return;  // whole warps leave together
  const int Cf = d.Cf;
  float lam[kMaxF], mx = -INFINITY;
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    const float* x = Ssrc + ((size_t)f * Ec + i) * Cf;
    float xv[kMaxCf / 32];
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) xv[t] = lane + 32 * t < Cf ? x[lane + 32 * t] : 0.0f;
    float rho = 1.0f;
    if (w.fc_norm) {
      float s = 0.0f;
      #pragma unroll
      for (int t = 0; t < kMaxCf / 32; ++t) s += xv[t] * xv[t];
      rho = rsqrtf(warp_sum(s) / Cf + d.eps);
    }
    float l = 0.0f;
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      if (a >= Cf) continue;
      const float nu = w.fc_norm ? xv[t] * rho * w.fc_norm[f * Cf + a] : xv[t];
      l += nu * w.fc_w[a * d.F + f];
    }
    lam[f] = warp_sum(l);
    mx = fmaxf(mx, lam[f]);
  }
  float den = 0.0f;
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f)
    if (f < d.F) den += expf(lam[f] - mx);
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    if (lane != f) continue;
    const float p = expf(lam[f] - mx) / den;
    fc_p[(size_t)i * d.F + f] = p;
    alpha_fc[(size_t)i * d.F + f] = 0.98f * p + 0.02f / d.F;
  }
}

// One CTA per (centre, focus), Cf x kAggRows threads: P[n, p, c] = sum_e alpha rho_l D^T
// (alpha_fc U). A chunk holds only ~100 centres, so the focus and the in-edges are spread over
// CTAs and R thread rows to keep the GPU busy; partial sums are added in a fixed order
// (deterministic).
// 8 rows: 16 rows for focus width 32 was measured slower on the H200 (6.3 vs 5.9 ms per 4096-atom
// call); double partials of at most 57 KiB (sm_89 allows 99 KiB).
constexpr int kAggRows = 8;

// Thread rows over a segment's edges for the softmax backward and the source-side sums: 8, fewer
// when Cw x 8 would pass the 1024 threads of a CTA.
inline int edge_rows(const Dims& d) { return std::max(1, std::min(8, 1024 / d.Cw)); }
template <int LT>
__global__ void rotate_back_aggregate_k(Dims d, int n0, int e0, int Ec, const int* __restrict__ off,
                                        const float* __restrict__ Dc, const float* __restrict__ U,
                                        const float* __restrict__ alpha_fc, const float* __restrict__ alpha,
                                        float* __restrict__ P) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ double part[];  // (R - 1) x kD x Cf
  const int n = n0 + blockIdx.x, f = blockIdx.y, cf = threadIdx.x, c = f * d.Cf + cf, y = threadIdx.y;
  double acc[kMaxD];  // the destination sum feeds every later step: keep it in double
  #pragma unroll
  for (int p = 0; p < kD; ++p) acc[p] = 0.0;
  const int R = blockDim.y;
  for (int e = off[n] + y; e < off[n + 1]; e += R) {
    const int i = e - e0;
    const float a = alpha[(size_t)e * d.F + f] * (d.F > 1 ? alpha_fc[(size_t)i * d.F + f] : 1.0f);
    const float* u = U + ((size_t)f * Ec + i) * d.ROW + cf;
    const float* Dce = Dc + (size_t)e * kDcs;
    #pragma unroll
    for (int j = 0; j < kDm; ++j) {
      const int l = red_l(j, LT), m = red_m(j, LT);
      const float v = a * rotate_back_scalef(l) * u[j * d.Cf];
      if (l == 0) {
        acc[0] += v;
        continue;
      }
      const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
      #pragma unroll
      for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] += row[mp + l] * v;
    }
  }
  if (y > 0) {
    #pragma unroll
    for (int p = 0; p < kD; ++p) part[((size_t)(y - 1) * kD + p) * d.Cf + cf] = acc[p];
  }
  __syncthreads();
  if (y == 0) {
    #pragma unroll
    for (int p = 0; p < kD; ++p) {
      for (int yy = 1; yy < R; ++yy) acc[p] += part[((size_t)(yy - 1) * kD + p) * d.Cf + cf];
      P[((size_t)n * kD + p) * d.Cw + c] = (float)acc[p];
    }
  }
}

__global__ void gate_post_k(Dims d, int N, const float* __restrict__ gamma, const float* __restrict__ P, float* A) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long)N * d.D * d.Cw) return;
  const int c = i % d.Cw, n = i / ((long)d.D * d.Cw);
  A[i] = gamma[(size_t)n * d.F + c / d.Cf] * P[i];
}

// ---------------------------------------------------------------------------------------------
// Backward.

// One warp per (centre, focus): P_bar = gamma A_bar, gamma_bar = <A_bar, P> (a warp-tree sum;
// the last block runs this on one chunk's destinations at a time).
__global__ void gate_backward_k(Dims d, int N, const float* __restrict__ gamma, const float* __restrict__ P,
                                const float* __restrict__ A_bar, float* P_bar, float* gamma_bar) {
  const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (i >= (long)N * d.F) return;  // whole warps: blockDim is a multiple of 32
  const int n = i / d.F, f = i % d.F;
  const float g = gamma[i];
  float gb = 0.0f;
  for (int t = lane; t < d.D * d.Cf; t += 32) {
    const size_t o = ((size_t)n * d.D + t / d.Cf) * d.Cw + f * d.Cf + t % d.Cf;
    P_bar[o] = g * A_bar[o];
    gb += A_bar[o] * P[o];
  }
  gb = warp_sum(gb);
  if (lane == 0) gamma_bar[i] = gb;
}

// One CTA (Cw threads) per edge: Q = rho D P_bar[dst]; G = alpha alpha_fc Q (gradient wrt the
// pre-scale stack output); alpha_bar; Dc_bar from the rotate-back.
template <int LT>
__global__ void aggregate_backward_k(Dims d, int e0, int Ec, const int* __restrict__ dst, const float* __restrict__ Dc,
                                     const float* __restrict__ U, const float* __restrict__ alpha_fc,
                                     const float* __restrict__ alpha, const float* __restrict__ P_bar,
                                     float* __restrict__ Gbuf, float* __restrict__ alpha_bar,
                                     float* __restrict__ Dc_bar) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ float sh[];
  float* red = sh;                       // (dc_size + F) * Cw
  float* out = red + (kDcs + d.F) * d.Cw;  // dc_size + F
  float* redf = out + kDcs + d.F;          // Cw
  const int i = blockIdx.x, e = e0 + i, c = threadIdx.x, f = c / d.Cf, cf = c % d.Cf;
  const float* Pb = P_bar + (size_t)dst[e] * kD * d.Cw + c;
  const float* Dce = Dc + (size_t)e * kDcs;
  const float afc = d.F > 1 ? alpha_fc[(size_t)i * d.F + f] : 1.0f;
  const float a = alpha[(size_t)e * d.F + f] * afc;
  const float* u = U + ((size_t)f * Ec + i) * d.ROW + cf;
  float* G = Gbuf + ((size_t)f * Ec + i) * d.ROW + cf;
  float v[kDcs];
  #pragma unroll
  for (int k = 0; k < kDcs; ++k) v[k] = 0.0f;
  float ab = 0.0f;
  #pragma unroll
  for (int j = 0; j < kDm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    const float sc = rotate_back_scalef(l), uj = u[j * d.Cf];
    float Q;
    if (l == 0) {
      Q = Pb[0];
      v[0] += a * uj * Pb[0];
    } else {
      const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
      Q = 0.0f;
      #pragma unroll
      for (int mp = -l; mp <= l; ++mp) {
        const float pb = Pb[(size_t)packed(l, mp) * d.Cw];
        Q += row[mp + l] * pb;
        v[dc_off(l) + (m + 1) * (2 * l + 1) + mp + l] += sc * a * uj * pb;
      }
    }
    Q *= sc;
    G[j * d.Cf] = a * Q;
    ab += Q * uj;
  }
  cta_sum<kDcs>(v, red, out);
  for (int k = c; k < kDcs; k += d.Cw) Dc_bar[(size_t)e * kDcs + k] += out[k];
  // alpha_bar[f]: sum of ab over the Cf channels of focus f (segments of min(Cf, 32) lanes).
  {
    const int seg = d.Cf < 32 ? d.Cf : 32;
    const unsigned mask = d.Cw >= 32 ? 0xffffffffu : ((1u << d.Cw) - 1u);
    float t = ab * afc;
    for (int o = seg / 2; o > 0; o >>= 1) t += __shfl_xor_sync(mask, t, o, seg);
    if (c % seg == 0) redf[c / seg] = t;
    __syncthreads();
    if (c < d.F) {
      float sum = 0.0f;
      for (int q = c * d.Cf / seg; q < (c + 1) * d.Cf / seg; ++q) sum += redf[q];
      alpha_bar[(size_t)i * d.F + c] = sum;
    }
  }
}

// One CTA of Cw x R threads per centre of the chunk: softmax backward over its segment, all foci.
// Edges are spread over all threads for the per-edge terms; for q_bar, x runs over the channels
// and the R thread rows over the edges, so no thread walks a whole segment (~150 in-edges) alone;
// the rows' partial sums are added in a fixed order (deterministic).
__global__ void softmax_backward_k(Dims d, BlockWDev w, int n0, int e0, const int* __restrict__ src,
                                   const int* __restrict__ off, const float* __restrict__ env,
                                   const float* __restrict__ alpha, const float* __restrict__ alpha_bar,
                                   const float* __restrict__ k, float* lbar, float* q_bar, float* env_bar) {
  __shared__ float red[32 * 8], dots[8];
  extern __shared__ float qpart[];  // (R - 1) x Cw
  const int n = n0 + blockIdx.x, c = threadIdx.x, y = threadIdx.y, R = blockDim.y;
  const int nt = blockDim.x * R, tid = y * blockDim.x + c;
  const int s0 = off[n], s1 = off[n + 1];
  float part[8];
#pragma unroll
  for (int f = 0; f < 8; ++f) part[f] = 0.0f;
  for (int e = s0 + tid; e < s1; e += nt)
    for (int f = 0; f < d.F; ++f) part[f] += alpha[(size_t)e * d.F + f] * alpha_bar[(size_t)(e - e0) * d.F + f];
  cta_sum<8>(part, red, dots);
  for (int e = s0 + tid; e < s1; e += nt) {
    float eb = 0.0f;
    for (int f = 0; f < d.F; ++f) {
      const float lb = alpha[(size_t)e * d.F + f] * (alpha_bar[(size_t)(e - e0) * d.F + f] - dots[f]);
      const bool live = env[e] > 0.0f;
      lbar[(size_t)(e - e0) * d.F + f] = live ? lb : 0.0f;
      if (live) eb += 2.0f * lb / env[e];
    }
    env_bar[e] += eb;
  }
  __syncthreads();  // lbar of this segment is complete
  const int f = c / d.Cf;
  const float scale = rsqrtf((float)d.Cf);
  float qb = 0.0f;
  for (int e = s0 + y; e < s1; e += R) qb += lbar[(size_t)(e - e0) * d.F + f] * k[(size_t)src[e] * d.Cw + c];
  if (y > 0) qpart[(y - 1) * d.Cw + c] = qb;
  __syncthreads();
  if (y == 0) {
    for (int yy = 1; yy < R; ++yy) qb += qpart[(yy - 1) * d.Cw + c];
    q_bar[(size_t)n * d.Cw + c] += scale * qb;
  }
}

// Focus competition backward, one warp per edge (lanes over the focus channels, as the forward):
// rescales nothing (G carries alpha_fc) and produces S_src_bar. The competition's adjoint needs
// <G_f, U_f> = alpha alpha_fc <Q_f, U_f> = alpha alpha_bar (aggregate_backward): two scalars
// per (edge, focus) instead of the stack rows.
__global__ void focus_compete_backward_k(Dims d, BlockWDev w, int e0, int Ec, const float* __restrict__ Ssrc,
                                         const float* __restrict__ alpha, const float* __restrict__ alpha_bar,
                                         const float* __restrict__ fc_p, const float* __restrict__ alpha_fc,
                                         float* Ssrc_bar) {
  const int i = blockIdx.x * kFcWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (i >= Ec) return;  // whole warps leave together
  const int Cf = d.Cf;
  const size_t e = (size_t)e0 + i;
  float pbar[kMaxF], sum = 0.0f;
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    const float s = alpha[e * d.F + f] * alpha_bar[(size_t)i * d.F + f];
    pbar[f] = 0.98f * s / alpha_fc[(size_t)i * d.F + f];
    sum += fc_p[(size_t)i * d.F + f] * pbar[f];
  }
  #pragma unroll
  for (int f = 0; f < kMaxF; ++f) {
    if (f >= d.F) break;
    const float lb = fc_p[(size_t)i * d.F + f] * (pbar[f] - sum);
    const float* x = Ssrc + ((size_t)f * Ec + i) * Cf;
    float* xb = Ssrc_bar + ((size_t)f * Ec + i) * Cf;
    if (!w.fc_norm) {
      #pragma unroll
      for (int t = 0; t < kMaxCf / 32; ++t) {
        const int a = lane + 32 * t;
        if (a < Cf) xb[a] = lb * w.fc_w[a * d.F + f];
      }
      continue;
    }
    const float* scale = w.fc_norm + f * Cf;
    float xv[kMaxCf / 32], nub[kMaxCf / 32], ss = 0.0f;
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      xv[t] = a < Cf ? x[a] : 0.0f;
      nub[t] = a < Cf ? lb * w.fc_w[a * d.F + f] : 0.0f;
      ss += xv[t] * xv[t];
    }
    const float rho = rsqrtf(warp_sum(ss) / Cf + d.eps);
    float dot = 0.0f;
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      if (a < Cf) dot += nub[t] * scale[a] * xv[t] * rho;
    }
    dot = warp_sum(dot);
    #pragma unroll
    for (int t = 0; t < kMaxCf / 32; ++t) {
      const int a = lane + 32 * t;
      if (a < Cf) xb[a] = rho * (nub[t] * scale[a] - xv[t] * rho * dot / Cf);
    }
  }
}

// One CTA (Cw threads) per edge: radial conditioning and rotation backward -> Xloc_bar (for the
// source-side sum), Dc_bar, the attention logit bias's share of R_bar, and the radial adjoint
// the chunk products of launch_condition_rotate_backward turn into R_bar: with the degree mixer
// the kernel adjoint kb (written over the edge's kern row), without it Rh_bar (written over the
// edge's Rh rows, or added to R_bar when there is no hidden projection). Keeping the two
// weight products (kb W_mix^T, Rh_bar W_rh^T) out of this kernel turns ~360 weight loads per
// thread and edge into register-tiled products.
template <int LT>
__global__ void condition_rotate_backward_k(Dims d, BlockWDev w, int e0, int Ec, const int* __restrict__ src,
                                            const float* __restrict__ Dc, const float* __restrict__ H,
                                            float* __restrict__ Rh_c, float* __restrict__ kern_c,
                                            const float* __restrict__ Gbuf, const float* __restrict__ Ssrc_bar,
                                            const float* __restrict__ lbar, float* __restrict__ Xloc_bar,
                                            float* __restrict__ R_bar, float* __restrict__ Dc_bar) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ float sh[];
  const int redn = d.K > kDcs ? d.K : kDcs;
  float* red = sh;                // redn Cw
  float* kb = red + redn * d.Cw;  // redn
  float* vo = kb + redn;          // redn
  const int i = blockIdx.x, e = e0 + i, c = threadIdx.x, f = c / d.Cf, cf = c % d.Cf;
  float* Rh = Rh_c + (size_t)i * (LT + 1) * d.Cw;  // precomputed by launch_radial_prep
  float* kern = kern_c + (size_t)i * padded_kernel_size(d);
  const float* Hs = H + (size_t)src[e] * kD * d.Cw;
  const float* Dce = Dc + (size_t)e * kDcs;
  float xl[kMaxDm], ub[kMaxDm], xb[kMaxDm];
  rotate_in<LT>(d, Dce, Hs, c, xl);
  const float* g = Gbuf + ((size_t)f * Ec + i) * d.ROW + cf;
  #pragma unroll
  for (int o = 0; o < kDm; ++o) ub[o] = g[o * d.Cf];
  if (d.F > 1) ub[0] += Ssrc_bar[((size_t)f * Ec + i) * d.Cf + cf];
  if (!d.degree_mixer) {
    float rhb[LT + 1];
    #pragma unroll
    for (int l = 0; l <= LT; ++l) rhb[l] = 0.0f;
    #pragma unroll
    for (int o = 0; o < kDm; ++o) {
      const int lo = red_l(o, LT);
      xb[o] = ub[o] * Rh[lo * d.Cw + c];
      rhb[lo] += ub[o] * xl[o];
    }
    // Each thread reads and writes only its own column of the edge's rows: in place is safe.
    float* Rb = R_bar + (size_t)i * (LT + 1) * d.C;
    #pragma unroll
    for (int l = 0; l <= LT; ++l) {
      if (d.has_rh) Rh[l * d.Cw + c] = rhb[l];
      else Rb[l * d.C + c] += rhb[l];
    }
  } else {
    constexpr int K = kernel_size<LT>();
    float kpart[K];
    #pragma unroll
    for (int q = 0; q < K; ++q) kpart[q] = 0.0f;
    const float b = w.cb[c];
    #pragma unroll
    for (int in = 0; in < kDm; ++in) xb[in] = 0.0f;
    #pragma unroll
    for (int o = 0; o < kDm; ++o) {
      const int lo = red_l(o, LT), mo = red_m(o, LT);
      const float bub = b * ub[o];
      #pragma unroll
      for (int in = 0; in < kDm; ++in) {
        if (red_m(in, LT) != mo) continue;
        const int q = kernel_index(LT, red_l(in, LT), lo, mo);
        xb[in] += kern[q] * bub;
        kpart[q] += bub * xl[in];
      }
    }
    cta_sum<K>(kpart, red, kb);  // its barriers also order every read of kern before the writes
    for (int q = c; q < padded_kernel_size(d); q += d.Cw) kern[q] = q < K ? kb[q] : 0.0f;
  }
  #pragma unroll
  for (int j = 0; j < kDm; ++j) Xloc_bar[((size_t)i * kDm + j) * d.Cw + c] = xb[j];
  // Dc_bar from the rotation: sum_c xb[j] H[src, p(l_j, m'), c].
  float v[kDcs];
  #pragma unroll
  for (int k = 0; k < kDcs; ++k) v[k] = 0.0f;
  #pragma unroll
  for (int j = 0; j < kDm; ++j) {
    const int l = red_l(j, LT), m = red_m(j, LT);
    if (l == 0) continue;
    #pragma unroll
    for (int mp = -l; mp <= l; ++mp)
      v[dc_off(l) + (m + 1) * (2 * l + 1) + mp + l] += xb[j] * Hs[(size_t)packed(l, mp) * d.Cw + c];
  }
  cta_sum<kDcs>(v, red, vo);
  for (int k = c; k < kDcs; k += d.Cw) Dc_bar[(size_t)e * kDcs + k] += vo[k];
  // The attention logit bias reads R[e, 0, :]: its adjoint lands on R_bar directly.
  float* Rb = R_bar + (size_t)i * (LT + 1) * d.C;
  for (int a = c; a < d.C; a += d.Cw) {
    float s = 0.0f;
    for (int ff = 0; ff < d.F; ++ff) s += lbar[(size_t)i * d.F + ff] * w.logit_u[(size_t)ff * d.C + a];
    Rb[a] += s;
  }
}

// One CTA of Cw x R threads per source segment of the chunk: H_bar[s] += sum_e D^T Xloc_bar,
// k_bar[s] += scale sum_e lbar q[dst]. A source near the chunk's centres has tens of edges in it
// (49 at most for the 4096-atom diamond): thread row y takes every R-th of them, so no thread
// walks a whole segment's chain of dependent loads alone; the rows' partial sums are added in a
// fixed order.
template <int LT>
__global__ void __launch_bounds__(1024) src_scatter_k(Dims d, const int* __restrict__ seg_node, const int* __restrict__ seg_off,
                              const int* __restrict__ perm, int e0, const int* __restrict__ dst,
                              const float* __restrict__ Dc, const float* __restrict__ Xloc_bar,
                              const float* __restrict__ lbar, const float* __restrict__ q, float* __restrict__ H_bar,
                              float* __restrict__ k_bar) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ float spart[];  // (R - 1) x (kD + 1) x Cw
  const int sgi = blockIdx.x, c = threadIdx.x, y = threadIdx.y, R = blockDim.y, f = c / d.Cf;
  const int s = seg_node[sgi];
  const float scale = rsqrtf((float)d.Cf);
  float acc[kD + 1];  // acc[kD]: the k_bar sum
  #pragma unroll
  for (int p = 0; p <= kD; ++p) acc[p] = 0.0f;
  for (int t = seg_off[sgi] + y; t < seg_off[sgi + 1]; t += R) {
    const int e = perm[t], i = e - e0;
    const float* Dce = Dc + (size_t)e * kDcs;
    const float* xb = Xloc_bar + (size_t)i * kDm * d.Cw + c;
    #pragma unroll
    for (int j = 0; j < kDm; ++j) {
      const int l = red_l(j, LT), m = red_m(j, LT);
      const float x = xb[j * d.Cw];
      if (l == 0) {
        acc[0] += x;
        continue;
      }
      const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
      #pragma unroll
      for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] += row[mp + l] * x;
    }
    acc[kD] += scale * lbar[(size_t)i * d.F + f] * q[(size_t)dst[e] * d.Cw + c];
  }
  if (y > 0) {
    #pragma unroll
    for (int p = 0; p <= kD; ++p) spart[((size_t)(y - 1) * (kD + 1) + p) * d.Cw + c] = acc[p];
  }
  __syncthreads();
  if (y > 0) return;
  #pragma unroll
  for (int p = 0; p <= kD; ++p)
    for (int yy = 1; yy < R; ++yy) acc[p] += spart[((size_t)(yy - 1) * (kD + 1) + p) * d.Cw + c];
  float* hb = H_bar + (size_t)s * kD * d.Cw + c;
  #pragma unroll
  for (int p = 0; p < kD; ++p) hb[(size_t)p * d.Cw] += acc[p];
  k_bar[(size_t)s * d.Cw + c] += acc[kD];
}

// One thread per (node, focus): q/k projections and norms, output gate -> H_bar[n, 0, :].
__global__ void attention_node_backward_k(Dims d, BlockWDev w, int N, int NT, const float* __restrict__ H,
                                          const float* __restrict__ qk_rho, const float* __restrict__ gate_rho,
                                          const float* __restrict__ gamma, const float* __restrict__ q_bar,
                                          const float* __restrict__ k_bar, const float* __restrict__ gamma_bar,
                                          float* H_bar) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= NT * d.F) return;
  const int n = i / d.F, f = i % d.F, Cf = d.Cf;
  const float* h0 = H + (size_t)n * d.D * d.Cw + f * Cf;
  float* hb0 = H_bar + (size_t)n * d.D * d.Cw + f * Cf;
  const float* Wq = w.Wq + (size_t)f * Cf * Cf;
  const float* Wk = w.Wk + (size_t)f * Cf * Cf;
  float hb[kMaxCf];
  for (int a = 0; a < Cf; ++a) {
    float s = 0.0f;
    for (int b = 0; b < Cf; ++b)
      s += (n < N ? q_bar[(size_t)n * d.Cw + f * Cf + b] : 0.0f) * Wq[a * Cf + b] +
           k_bar[(size_t)n * d.Cw + f * Cf + b] * Wk[a * Cf + b];
    hb[a] = s;
  }
  scalar_rms_backward(h0, Cf, w.qk_norm + f * Cf, qk_rho[i], hb, hb0);
  if (n < N) {
    const float g = gamma[i], tb = gamma_bar[i] * g * (1.0f - g);
    for (int a = 0; a < Cf; ++a) hb[a] = tb * w.gate_w[a * d.F + f];
    scalar_rms_backward(h0, Cf, w.gate_norm + f * Cf, gate_rho[i], hb, hb0);
  }
}

constexpr int kT = 128;

}  // namespace

void launch_attention_node_forward(const Dims& d, const BlockWDev& w, int N, int NT, const float* H, float* q,
                                   float* k, float* qk_rho, float* gate_rho, float* gamma, cudaStream_t s) {
  if (NT == 0) return;
  attention_node_forward_k<<<div_up((long)NT * d.F, kT), kT, 0, s>>>(d, w, N, NT, H, q, k, qk_rho, gate_rho, gamma);
  SEZM_LAUNCH("attention_node_forward");
}
void launch_attention_softmax_forward(const Dims& d, const BlockWDev& w, int N, const int* src, const int* dst_off,
                                      const float* env, const EdgeRadialIn& R, const float* q, const float* k, float* alpha,
                                      cudaStream_t s) {
  if (N == 0) return;
  softmax_forward_k<<<div_up((long)N * d.F * 32, kT), kT, 0, s>>>(d, w, N, src, dst_off, env, R, q, k, alpha);
  SEZM_LAUNCH("softmax_forward");
}
void launch_rotate_condition(const Dims& d, const BlockWDev& w, int e0, int Ec, const int* src, const float* Dc,
                             const float* H, const float* Rh, const float* kern, float* U0, float* Ssrc,
                             cudaStream_t s) {
  if (Ec == 0) return;
  if (d.L == 1) rotate_condition_k<1><<<Ec, d.Cw, 0, s>>>(d, w, e0, Ec, src, Dc, H, Rh, kern, U0, Ssrc);
  else if (d.L == 2) rotate_condition_k<2><<<Ec, d.Cw, 0, s>>>(d, w, e0, Ec, src, Dc, H, Rh, kern, U0, Ssrc);
  else rotate_condition_k<3><<<Ec, d.Cw, 0, s>>>(d, w, e0, Ec, src, Dc, H, Rh, kern, U0, Ssrc);
  SEZM_LAUNCH("rotate_condition");
}
void launch_focus_compete(const Dims& d, const BlockWDev& w, int Ec, const float* Ssrc, float* fc_p,
                          float* alpha_fc, cudaStream_t s) {
  if (Ec == 0 || d.F < 2) return;
  focus_compete_k<<<div_up(Ec, kFcWarps), 32 * kFcWarps, 0, s>>>(d, w, Ec, Ssrc, fc_p, alpha_fc);
  SEZM_LAUNCH("focus_compete");
}
void launch_rotate_back_aggregate(const Dims& d, int n0, int n1, int e0, int Ec, const int* dst_off, const float* Dc,
                                  const float* U, const float* alpha_fc, const float* alpha, float* P,
                                  cudaStream_t s) {
  if (n1 <= n0) return;
  const int rows = kAggRows;
  const dim3 block(d.Cf, rows), grid(n1 - n0, d.F);
  const size_t bytes = (size_t)(rows - 1) * d.D * d.Cf * sizeof(double);
  if (bytes > 48 * 1024) {  // focus width 64: 57 KiB of partial sums
    const void* fn = d.L == 1 ? (const void*)rotate_back_aggregate_k<1>
                   : d.L == 2 ? (const void*)rotate_back_aggregate_k<2> : (const void*)rotate_back_aggregate_k<3>;
    SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  }
  if (d.L == 1) rotate_back_aggregate_k<1><<<grid, block, bytes, s>>>(d, n0, e0, Ec, dst_off, Dc, U, alpha_fc, alpha, P);
  else if (d.L == 2) rotate_back_aggregate_k<2><<<grid, block, bytes, s>>>(d, n0, e0, Ec, dst_off, Dc, U, alpha_fc, alpha, P);
  else rotate_back_aggregate_k<3><<<grid, block, bytes, s>>>(d, n0, e0, Ec, dst_off, Dc, U, alpha_fc, alpha, P);
  SEZM_LAUNCH("rotate_back_aggregate");
}
void launch_gate_post(const Dims& d, int N, const float* gamma, const float* P, float* A, cudaStream_t s) {
  const long n = (long)N * d.D * d.Cw;
  if (n == 0) return;
  gate_post_k<<<div_up(n, 256), 256, 0, s>>>(d, N, gamma, P, A);
  SEZM_LAUNCH("gate_post");
}
void launch_gate_backward(const Dims& d, int N, const float* gamma, const float* P, const float* A_bar, float* P_bar,
                          float* gamma_bar, cudaStream_t s) {
  if (N == 0) return;
  static_assert(kT % 32 == 0, "gate_backward_k runs whole warps");
  gate_backward_k<<<div_up((long)N * d.F * 32, kT), kT, 0, s>>>(d, N, gamma, P, A_bar, P_bar, gamma_bar);
  SEZM_LAUNCH("gate_backward");
}
void launch_aggregate_backward(const Dims& d, int e0, int Ec, const int* dst, const float* Dc, const float* U,
                               const float* alpha_fc, const float* alpha, const float* P_bar, float* Gbuf,
                               float* alpha_bar, float* Dc_bar, cudaStream_t s) {
  if (Ec == 0) return;
  const size_t bytes = ((size_t)(d.dc_size + d.F + 1) * d.Cw + d.dc_size + d.F) * sizeof(float);
  if (d.L == 1) aggregate_backward_k<1><<<Ec, d.Cw, bytes, s>>>(d, e0, Ec, dst, Dc, U, alpha_fc, alpha, P_bar, Gbuf, alpha_bar, Dc_bar);
  else if (d.L == 2) aggregate_backward_k<2><<<Ec, d.Cw, bytes, s>>>(d, e0, Ec, dst, Dc, U, alpha_fc, alpha, P_bar, Gbuf, alpha_bar, Dc_bar);
  else aggregate_backward_k<3><<<Ec, d.Cw, bytes, s>>>(d, e0, Ec, dst, Dc, U, alpha_fc, alpha, P_bar, Gbuf, alpha_bar, Dc_bar);
  SEZM_LAUNCH("aggregate_backward");
}
void launch_softmax_backward(const Dims& d, const BlockWDev& w, int n0, int n1, int e0, const int* src,
                             const int* dst_off, const float* env, const float* alpha, const float* alpha_bar,
                             const float* /*q*/, const float* k, float* lbar, float* q_bar, float* env_bar,
                             cudaStream_t s) {
  if (n1 <= n0) return;
  const int rows = edge_rows(d);
  const dim3 block(d.Cw, rows);
  const size_t bytes = (size_t)(rows - 1) * d.Cw * sizeof(float);
  softmax_backward_k<<<n1 - n0, block, bytes, s>>>(d, w, n0, e0, src, dst_off, env, alpha, alpha_bar, k, lbar, q_bar,
                                                   env_bar);
  SEZM_LAUNCH("softmax_backward");
}
void launch_focus_compete_backward(const Dims& d, const BlockWDev& w, int e0, int Ec, const float* Ssrc,
                                   const float* alpha, const float* alpha_bar, const float* fc_p,
                                   const float* alpha_fc, float* Ssrc_bar, cudaStream_t s) {
  if (Ec == 0 || d.F < 2) return;
  focus_compete_backward_k<<<div_up(Ec, kFcWarps), 32 * kFcWarps, 0, s>>>(d, w, e0, Ec, Ssrc, alpha, alpha_bar, fc_p,
                                                                         alpha_fc, Ssrc_bar);
  SEZM_LAUNCH("focus_compete_backward");
}
void launch_condition_rotate_backward(const Dims& d, const BlockWDev& w, int e0, int Ec, const int* src,
                                      const float* Dc, const float* H, float* Rh, float* kern,
                                      const float* Gbuf, const float* Ssrc_bar, const float* lbar, float* Xloc_bar,
                                      float* R_bar, float* Dc_bar, cudaStream_t s) {
  if (Ec == 0) return;
  const int redn = d.K > d.dc_size ? d.K : d.dc_size;
  const size_t bytes = ((size_t)redn * d.Cw + 2 * (size_t)redn) * sizeof(float);
  if (d.L == 1)
    condition_rotate_backward_k<1><<<Ec, d.Cw, bytes, s>>>(d, w, e0, Ec, src, Dc, H, Rh, kern, Gbuf, Ssrc_bar, lbar,
                                                           Xloc_bar, R_bar, Dc_bar);
  else if (d.L == 2)
    condition_rotate_backward_k<2><<<Ec, d.Cw, bytes, s>>>(d, w, e0, Ec, src, Dc, H, Rh, kern, Gbuf, Ssrc_bar, lbar,
                                                           Xloc_bar, R_bar, Dc_bar);
  else
    condition_rotate_backward_k<3><<<Ec, d.Cw, bytes, s>>>(d, w, e0, Ec, src, Dc, H, Rh, kern, Gbuf, Ssrc_bar, lbar,
                                                           Xloc_bar, R_bar, Dc_bar);
  SEZM_LAUNCH("condition_rotate_backward");
  launch_radial_adjoint(d, w, e0, Ec, Rh, kern, R_bar, s);
}
void launch_src_scatter(const Dims& d, int nseg, const int* seg_node, const int* seg_off, const int* perm, int e0,
                        const int* dst, const float* Dc, const float* Xloc_bar, const float* lbar, const float* q,
                        float* H_bar, float* k_bar, cudaStream_t s) {
  if (nseg == 0) return;
  const int rows = edge_rows(d);
  const dim3 block(d.Cw, rows);
  const size_t bytes = (size_t)(rows - 1) * (d.D + 1) * d.Cw * sizeof(float);
  if (bytes > 48 * 1024) {  // Cw >= 128, L = 3: up to 61 KiB of partial sums
    const void* fn = d.L == 1 ? (const void*)src_scatter_k<1>
                   : d.L == 2 ? (const void*)src_scatter_k<2> : (const void*)src_scatter_k<3>;
    SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  }
  if (d.L == 1) src_scatter_k<1><<<nseg, block, bytes, s>>>(d, seg_node, seg_off, perm, e0, dst, Dc, Xloc_bar, lbar, q, H_bar, k_bar);
  else if (d.L == 2) src_scatter_k<2><<<nseg, block, bytes, s>>>(d, seg_node, seg_off, perm, e0, dst, Dc, Xloc_bar, lbar, q, H_bar, k_bar);
  else src_scatter_k<3><<<nseg, block, bytes, s>>>(d, seg_node, seg_off, perm, e0, dst, Dc, Xloc_bar, lbar, q, H_bar, k_bar);
  SEZM_LAUNCH("src_scatter");
}
void launch_attention_node_backward(const Dims& d, const BlockWDev& w, int N, int NT, const float* H,
                                    const float* qk_rho, const float* gate_rho, const float* gamma,
                                    const float* q_bar, const float* k_bar, const float* gamma_bar, float* H_bar,
                                    cudaStream_t s) {
  if (NT == 0) return;
  attention_node_backward_k<<<div_up((long)NT * d.F, kT), kT, 0, s>>>(d, w, N, NT, H, qk_rho, gate_rho, gamma, q_bar,
                                                                      k_bar, gamma_bar, H_bar);
  SEZM_LAUNCH("attention_node_backward");
}

}  // namespace sezm::cuda
