#pragma once
// The env-seed edge MLP (CPU twin: engine/embeddings.h, env_seed_forward/_backward) as tiles of
// kTE edges per step of a persistent CTA, for the widths of the shipped configurations
// (es_ro, es_hid, es_emb compile-time; n_radial, type width and type count (<= 8) at run time).
// Included by embeddings.cu only, which keeps the one-thread-per-edge kernels as the fallback.
//
// Why: one thread per edge kept four runtime-sized activation arrays in local memory and read
// every weight with a separate load. Here the weights sit in shared memory for the CTA's life,
// activations live in shared memory between layers as [feature][edge] tiles, and each layer is
// a register-tiled product: a thread owns 4 consecutive edges x RO outputs, a warp shares one
// output block, so per input step it reads one float4 of activations (conflict-free) and a
// broadcast row of weights for 4*RO FFMAs.
//
// Rounding: every output is one fp32 FMA chain over its inputs in ascending order, as in the
// per-thread kernels, except g1's type part: tau[t_src] and tau[t_dst] times their rows of W_g1
// come from per-type tables (each an FMA chain over the type width) built by every CTA, added
// once, and the chain over the radial part continues from that sum. Forward and backward use
// the same arithmetic, and nothing depends on the grid or on timing: repeated runs are
// bit-identical.
#include <algorithm>

#include "embeddings.cuh"

namespace sezm::cuda {
namespace es_tiled {

constexpr int kTE = 128;  // edges per tile
constexpr int kNT = 256;  // threads per CTA: 32 edge quads x 8 output blocks (one per warp)
constexpr int kMaxTypes = 8;

__host__ __device__ inline int up4(int n) { return (n + 3) & ~3; }
__host__ __device__ inline int imax(int a, int b) { return a > b ? a : b; }

// Shared-memory sections (floats, each a multiple of 4 so that float4 rows stay aligned).
struct Layout {
  int wp1, wp2, wg1, wg2, wg2t, wg1t, wp2t, wp1t, ts, tdt, bA, bB, bD, info, total;
  __host__ __device__ Layout(bool bwd, int nr, int ntypes, int RO, int HID, int EMB) {
    int o = 0;
    auto take = [&o](int n) { const int at = o; o += up4(n); return at; };
    wp1 = take(nr * RO); wp2 = take(RO * RO); wg1 = take(RO * HID);
    wg2 = bwd ? -1 : take(HID * EMB);
    wg2t = bwd ? take(EMB * HID) : -1;
    wg1t = bwd ? take(HID * RO) : -1;
    wp2t = bwd ? take(RO * RO) : -1;
    wp1t = bwd ? take(RO * nr) : -1;
    ts = take(ntypes * HID); tdt = take(ntypes * HID);
    if (!bwd) {
      bA = take(imax(nr, RO) * kTE);   // rbf, then a = silu(p1) W_p2
      bB = take(imax(RO, HID) * kTE);  // silu(p1), then silu(g1)
      bD = -1;
      info = take(2 * kTE);            // t_src, t_dst
    } else {
      bA = take(imax(nr + 1, RO) * kTE);  // rbf, a, a_bar, then rbf_bar as [edge][nr + 1]
      bB = take(imax(RO, EMB) * kTE);     // silu(p1), then g_bar, then p1_bar
      bD = take(HID * kTE);               // g (EMB <= HID rows), then silu'(g1), then g1_bar in place
      info = take(13 * kTE);              // t_src, t_dst, centre, isd, gate, seed (4), seed_bar (4)
    }
    total = o;
  }
};

// A broadcast row of RO weights (all lanes of a warp read the same address).
template <int RO>
__device__ __forceinline__ void load_row(const float* p, float (&w)[RO]) {
  if constexpr (RO % 4 == 0) {
#pragma unroll
    for (int j = 0; j < RO; j += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + j);
      w[j] = v.x; w[j + 1] = v.y; w[j + 2] = v.z; w[j + 3] = v.w;
    }
  } else if constexpr (RO % 2 == 0) {
#pragma unroll
    for (int j = 0; j < RO; j += 2) {
      const float2 v = *reinterpret_cast<const float2*>(p + j);
      w[j] = v.x; w[j + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < RO; ++j) w[j] = p[j];
  }
}

// out[e][o] = init(e, o) + sum_k in[k][e] W[k][o] (one FMA chain, k ascending) for the tile's
// kTE edges and NOUT outputs; in is [K][kTE], W is [K][NOUT], both in shared memory. The thread
// of edge quad q = tid % 32 and output block b = tid / 32 hands epi(e, o, j, v) each of its
// outputs o = b * per_thread<NOUT> + j with v = the values of edges e..e+3 (e = 4q), so tile
// stores are whole float4s; two layers of one NOUT give a thread the same (e, o), so a value can
// stay in its registers from one to the other.
template <int NOUT>
constexpr int per_thread = NOUT / (kNT / (kTE / 4));

template <int NOUT, class Init, class Epi>
__device__ __forceinline__ void layer(const float* __restrict__ in, int K, const float* __restrict__ W, Init init,
                                      Epi epi) {
  constexpr int kEB = kTE / 4, kNOB = kNT / kEB, RO = NOUT / kNOB;
  static_assert(kNT % kEB == 0 && NOUT % kNOB == 0, "tile shape");
  const int e = 4 * (threadIdx.x % kEB), o0 = RO * (threadIdx.x / kEB);
  float acc[4][RO];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int j = 0; j < RO; ++j) acc[r][j] = init(e + r, o0 + j);
  const float* wp = W + o0;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    const float4 a = *reinterpret_cast<const float4*>(in + k * kTE + e);
    float w[RO];
    load_row<RO>(wp + k * NOUT, w);
#pragma unroll
    for (int j = 0; j < RO; ++j) {
      acc[0][j] = fmaf(a.x, w[j], acc[0][j]);
      acc[1][j] = fmaf(a.y, w[j], acc[1][j]);
      acc[2][j] = fmaf(a.z, w[j], acc[2][j]);
      acc[3][j] = fmaf(a.w, w[j], acc[3][j]);
    }
  }
#pragma unroll
  for (int j = 0; j < RO; ++j) {
    float4 v = make_float4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
    epi(e, o0 + j, j, v);
  }
}

__device__ __forceinline__ float4 silu4(float4 v) { return make_float4(siluf_(v.x), siluf_(v.y), siluf_(v.z), siluf_(v.w)); }
__device__ __forceinline__ float4 silu_grad4(float4 v) {
  return make_float4(silu_gradf_(v.x), silu_gradf_(v.y), silu_gradf_(v.z), silu_gradf_(v.w));
}
__device__ __forceinline__ float4 mul4(float4 a, float4 b) { return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
__device__ __forceinline__ float4& at4(float* base, int o, int e) { return *reinterpret_cast<float4*>(base + o * kTE + e); }

// Weights of the radial part (W_p1, W_p2, rows < RO of W_g1) and the per-type tables of g1:
// ts[t][o] = sum_i tau[t][i] W_g1[RO + i][o], tdt[t][o] = sum_i tau[t][i] W_g1[RO + td + i][o].
template <int RO, int HID>
__device__ void stage_common(const Dims& d, const ModelWDev& w, float* sm, const Layout& L) {
  const int t = threadIdx.x, nr = d.nr, td = d.es_td;
  for (int i = t; i < nr * RO; i += kNT) sm[L.wp1 + i] = w.es_p1[i];
  for (int i = t; i < RO * RO; i += kNT) sm[L.wp2 + i] = w.es_p2[i];
  for (int i = t; i < RO * HID; i += kNT) sm[L.wg1 + i] = w.es_g1[i];
  for (int idx = t; idx < d.ntypes * HID; idx += kNT) {
    const int ty = idx / HID, o = idx % HID;
    const float* tau = w.es_tau + (size_t)ty * td;
    float s = 0.0f, h = 0.0f;
    for (int i = 0; i < td; ++i) {
      s = fmaf(tau[i], w.es_g1[(size_t)(RO + i) * HID + o], s);
      h = fmaf(tau[i], w.es_g1[(size_t)(RO + td + i) * HID + o], h);
    }
    sm[L.ts + idx] = s;
    sm[L.tdt + idx] = h;
  }
}

// Rows of `width` floats per edge (global, edge-major) into a [feature][edge] tile: each thread
// reads a float4 (width % 4 == 0: the engine's edge views keep such rows 16-byte aligned, also
// per chunk) or a float of one edge's row and
// writes it down the tile's columns (lanes over edges: conflict-free); zero beyond the last edge
// so padded lanes stay finite. The edge-strided reads are whole sectors, each used by two loads.
__device__ __forceinline__ void stage_rows(const float* __restrict__ src, int width, int e0, int ne, float* tile) {
  if (width % 4 == 0) {
    for (int idx = threadIdx.x; idx < width / 4 * kTE; idx += kNT) {
      const int e = idx % kTE, m = 4 * (idx / kTE);
      const float4 v = e < ne ? *reinterpret_cast<const float4*>(src + (size_t)(e0 + e) * width + m)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      tile[m * kTE + e] = v.x;
      tile[(m + 1) * kTE + e] = v.y;
      tile[(m + 2) * kTE + e] = v.z;
      tile[(m + 3) * kTE + e] = v.w;
    }
  } else {
    for (int idx = threadIdx.x; idx < width * kTE; idx += kNT) {
      const int e = idx % kTE, m = idx / kTE;
      tile[idx] = e < ne ? src[(size_t)(e0 + e) * width + m] : 0.0f;
    }
  }
}

template <int RO, int HID, int EMB>
__global__ void __launch_bounds__(kNT, HID <= 64 ? 2 : 1) edge_forward_k(Dims d, ModelWDev w, EnvSeedArgs a) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const Layout L(false, d.nr, d.ntypes, RO, HID, EMB);
  const int t = threadIdx.x, E = a.g.E;
  stage_common<RO, HID>(d, w, sm, L);
  for (int i = t; i < HID * EMB; i += kNT) sm[L.wg2 + i] = w.es_g2[i];
  float *bA = sm + L.bA, *bB = sm + L.bB;
  const float *ts = sm + L.ts, *tdt = sm + L.tdt;
  int* ty = reinterpret_cast<int*>(sm + L.info);  // [0, kTE) source types, [kTE, 2 kTE) centre types
  __syncthreads();
  for (int tile = blockIdx.x; tile * kTE < E; tile += gridDim.x) {
    const int e0 = tile * kTE, ne = min(kTE, E - e0);
    stage_rows(a.geo.rbf, d.nr, e0, ne, bA);
    if (t < kTE) {
      const int e = e0 + t;
      ty[t] = t < ne ? a.g.types[a.g.src[e]] : 0;
      ty[kTE + t] = t < ne ? a.g.types[a.g.dst[e]] : 0;
      if (t < ne) {
        const float r = a.geo.r[e], s = a.geo.env[e] / r;
        a.seed[4 * (size_t)e] = s;
        for (int k = 0; k < 3; ++k) a.seed[4 * (size_t)e + 1 + k] = s * a.geo.vecf[3 * (size_t)e + k] / r;
      }
    }
    __syncthreads();
    auto zero = [](int, int) { return 0.0f; };
    layer<RO>(bA, d.nr, sm + L.wp1, zero, [&](int e, int o, int, float4 v) { at4(bB, o, e) = silu4(v); });
    __syncthreads();
    layer<RO>(bB, RO, sm + L.wp2, zero, [&](int e, int o, int, float4 v) { at4(bA, o, e) = v; });
    __syncthreads();
    layer<HID>(bA, RO, sm + L.wg1, [&](int e, int o) { return ts[ty[e] * HID + o] + tdt[ty[kTE + e] * HID + o]; },
               [&](int e, int o, int, float4 v) { at4(bB, o, e) = silu4(v); });
    __syncthreads();
    constexpr int kG = per_thread<EMB>;
    float4 gv[kG];  // this thread's outputs o0..o0+kG-1 of edges e..e+3, stored as row pieces
    layer<EMB>(bB, HID, sm + L.wg2, zero, [&](int, int, int j, float4 v) { gv[j] = v; });
    {
      const int e = 4 * (t % (kTE / 4)), o0 = kG * (t / (kTE / 4));
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if (e + r >= ne) break;
        float* g = a.gemb + (size_t)(e0 + e + r) * EMB + o0;
        auto pick = [&](int j) { return r == 0 ? gv[j].x : r == 1 ? gv[j].y : r == 2 ? gv[j].z : gv[j].w; };
#pragma unroll
        for (int j = 0; j < kG; j += (kG % 4 == 0 ? 4 : 1)) {
          if constexpr (kG % 4 == 0)
            *reinterpret_cast<float4*>(g + j) = make_float4(pick(j), pick(j + 1), pick(j + 2), pick(j + 3));
          else
            g[j] = pick(j);
        }
      }
    }
    __syncthreads();  // the next tile restages bA and the types
  }
}

// Backward of the edge MLP and the seed Jacobian for each tile (same per-edge arithmetic as
// env_seed_edge_backward_k): seed_bar and g_bar from the centre's A_bar, then back through
// g = silu(g1) W_g2, g1 = [a, tau] W_g1, a = silu(p1) W_p2, p1 = rbf W_p1 (recomputed).
template <int RO, int HID, int EMB>
__global__ void __launch_bounds__(kNT, HID <= 64 ? 2 : 1) edge_backward_k(Dims d, ModelWDev w, EnvSeedArgs a) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const Layout L(true, d.nr, d.ntypes, RO, HID, EMB);
  const int t = threadIdx.x, E = a.g.E, nr = d.nr;
  stage_common<RO, HID>(d, w, sm, L);
  for (int idx = t; idx < HID * EMB; idx += kNT) {  // W_g2^T, W_g1^T (radial rows), W_p2^T
    const int o = idx / EMB, i = idx % EMB;
    sm[L.wg2t + i * HID + o] = w.es_g2[idx];
  }
  for (int idx = t; idx < RO * HID; idx += kNT) {
    const int i = idx / HID, o = idx % HID;
    sm[L.wg1t + o * RO + i] = w.es_g1[idx];
  }
  for (int idx = t; idx < RO * RO; idx += kNT) {
    const int i = idx / RO, o = idx % RO;
    sm[L.wp2t + o * RO + i] = w.es_p2[idx];
  }
  for (int idx = t; idx < nr * RO; idx += kNT) {  // W_p1^T (the rbf_bar layer at nr = 16)
    const int m = idx / RO, i = idx % RO;
    sm[L.wp1t + i * nr + m] = w.es_p1[idx];
  }
  static_assert(EMB <= HID, "g is staged in the g1 tile");
  float *bA = sm + L.bA, *bB = sm + L.bB, *bD = sm + L.bD;
  const float *ts = sm + L.ts, *tdt = sm + L.tdt;
  int* ty = reinterpret_cast<int*>(sm + L.info);         // t_src [kTE], t_dst [kTE]
  int* cen = ty + 2 * kTE;                                // centre, -1 for padding
  float* isd_e = sm + L.info + 3 * kTE;                   // isd of the centre (0 for padding)
  float* gate_e = isd_e + kTE;
  float* seed_e = gate_e + kTE;                           // [k][edge]
  float* sb_e = seed_e + 4 * kTE;                         // [k][edge], before the gate
  __syncthreads();
  for (int tile = blockIdx.x; tile * kTE < E; tile += gridDim.x) {
    const int e0 = tile * kTE, ne = min(kTE, E - e0);
    stage_rows(a.geo.rbf, nr, e0, ne, bA);
    stage_rows(a.gemb, EMB, e0, ne, bD);  // g as [i][edge]
    if (t < kTE) {
      const bool v = t < ne;
      const int e = e0 + t, n = v ? a.g.dst[e] : -1;
      ty[t] = v ? a.g.types[a.g.src[e]] : 0;
      ty[kTE + t] = v ? a.g.types[n] : 0;
      cen[t] = n;
      isd_e[t] = v ? a.isd[n] : 0.0f;
      gate_e[t] = v && a.gate ? a.gate[e] : 1.0f;
      for (int k = 0; k < 4; ++k) seed_e[k * kTE + t] = v ? a.seed[4 * (size_t)e + k] : 0.0f;
    }
    __syncthreads();
    auto zero = [](int, int) { return 0.0f; };
    float4 sgp[per_thread<RO>];  // silu'(p1) of this thread's outputs, read back by the p1_bar layer
    layer<RO>(bA, nr, sm + L.wp1, zero, [&](int e, int o, int j, float4 v) {
      at4(bB, o, e) = silu4(v);
      sgp[j] = silu_grad4(v);
    });
    for (int idx = t; idx < 4 * kTE; idx += kNT) {  // seed_bar = isd A_bar g (before the gate)
      const int e = idx % kTE, k = idx / kTE, n = cen[e];
      float s = 0.0f;
      if (n >= 0) {
        const float* Ab = a.A_bar + (size_t)n * 4 * EMB + k * EMB;
        for (int i = 0; i < EMB; ++i) s += Ab[i] * bD[i * kTE + e];
        s *= isd_e[e];
      }
      sb_e[idx] = s;
    }
    __syncthreads();
    layer<RO>(bB, RO, sm + L.wp2, zero, [&](int e, int o, int, float4 v) { at4(bA, o, e) = v; });
    if (t < ne) {  // the gate's adjoint and the seed Jacobian (docs/model.md §7.3)
      const size_t e = e0 + t;
      float sb[4];
      for (int k = 0; k < 4; ++k) sb[k] = sb_e[k * kTE + t];
      if (a.gate) {
        float gsum = 0.0f;
        for (int k = 0; k < 4; ++k) gsum += sb[k] * seed_e[k * kTE + t];
        a.gate_bar[e] += gsum;
        for (int k = 0; k < 4; ++k) sb[k] *= gate_e[t];
      }
      const float r = a.geo.r[e], s = a.geo.env[e] / r, sp = a.geo.denv[e] / r - a.geo.env[e] / (r * r);
      const float u[3] = {a.geo.vecf[3 * e] / r, a.geo.vecf[3 * e + 1] / r, a.geo.vecf[3 * e + 2] / r};
      const float ub = u[0] * sb[1] + u[1] * sb[2] + u[2] * sb[3];
      for (int b = 0; b < 3; ++b)
        a.vec_bar[3 * e + b] += sb[0] * sp * u[b] + ub * sp * u[b] + (s / r) * (sb[1 + b] - ub * u[b]);
    }
    __syncthreads();
    layer<HID>(bA, RO, sm + L.wg1, [&](int e, int o) { return ts[ty[e] * HID + o] + tdt[ty[kTE + e] * HID + o]; },
               [&](int e, int o, int, float4 v) { at4(bD, o, e) = silu_grad4(v); });
    for (int idx = t; idx < EMB * kTE; idx += kNT) {  // g_bar = isd A_bar^T seed (times the gate)
      const int e = idx % kTE, i = idx / kTE, n = cen[e];
      float v = 0.0f;
      if (n >= 0) {
        const float* Ab = a.A_bar + (size_t)n * 4 * EMB + i;
        for (int k = 0; k < 4; ++k) v += Ab[k * EMB] * seed_e[k * kTE + e];
        v = isd_e[e] * v;
        if (a.gate) v *= gate_e[e];
      }
      bB[idx] = v;
    }
    __syncthreads();
    layer<HID>(bB, EMB, sm + L.wg2t, zero, [&](int e, int o, int, float4 v) { at4(bD, o, e) = mul4(v, at4(bD, o, e)); });
    __syncthreads();
    layer<RO>(bD, HID, sm + L.wg1t, zero, [&](int e, int o, int, float4 v) { at4(bA, o, e) = v; });
    __syncthreads();
    layer<RO>(bA, RO, sm + L.wp2t, zero, [&](int e, int o, int j, float4 v) { at4(bB, o, e) = mul4(v, sgp[j]); });
    __syncthreads();
    // rbf_bar = p1_bar W_p1^T, staged [edge][nr + 1]: a tile layer at nr = 16 (the shipped
    // configurations but water's), else a thread per (edge, m); the same FMA chain either way.
    if (nr == 16) {
      layer<16>(bB, RO, sm + L.wp1t, zero, [&](int e, int m, int, float4 v) {
        bA[e * 17 + m] = v.x;
        bA[(e + 1) * 17 + m] = v.y;
        bA[(e + 2) * 17 + m] = v.z;
        bA[(e + 3) * 17 + m] = v.w;
      });
    } else {
      for (int idx = t; idx < nr * kTE; idx += kNT) {
        const int e = idx % kTE, m = idx / kTE;
        const float* wm = sm + L.wp1 + m * RO;
        float v = 0.0f;
        for (int i = 0; i < RO; ++i) v += bB[i * kTE + e] * wm[i];
        bA[e * (nr + 1) + m] = v;
      }
    }
    __syncthreads();
    for (int j = t; j < ne * nr; j += kNT) a.rbf_bar[(size_t)e0 * nr + j] += bA[(j / nr) * (nr + 1) + j % nr];
    __syncthreads();  // the next tile restages bA, bD and the edge data
  }
}

// The fast path's shapes: (es_ro, es_hid, es_emb) of the C = 16, 32 (also mini) and 64 rows.
template <int RO, int HID, int EMB>
bool launch_shape(const Dims& d, const ModelWDev& w, const EnvSeedArgs& a, bool bwd, cudaStream_t s) {
  if (d.es_ro != RO || d.es_hid != HID || d.es_emb != EMB) return false;
  const Layout L(bwd, d.nr, d.ntypes, RO, HID, EMB);
  const size_t bytes = (size_t)L.total * sizeof(float);
  const void* fn = bwd ? (const void*)edge_backward_k<RO, HID, EMB> : (const void*)edge_forward_k<RO, HID, EMB>;
  const int grid = resident_grid(fn, kNT, bytes, div_up(a.g.E, kTE));
  if (grid == 0) return false;  // too large for this device: the per-thread kernels
  if (bwd) {
    edge_backward_k<RO, HID, EMB><<<grid, kNT, bytes, s>>>(d, w, a);
    SEZM_LAUNCH("env_seed_edge_backward (tiled)");
  } else {
    edge_forward_k<RO, HID, EMB><<<grid, kNT, bytes, s>>>(d, w, a);
    SEZM_LAUNCH("env_seed_edge_forward (tiled)");
  }
  return true;
}

// True when a tiled kernel ran; false leaves the edge MLP to the per-thread kernels.
inline bool launch(const Dims& d, const ModelWDev& w, const EnvSeedArgs& a, bool bwd, cudaStream_t s) {
  if (d.ntypes > kMaxTypes || d.nr < 1 || d.es_gin != d.es_ro + 2 * d.es_td) return false;
  return launch_shape<32, 64, 32>(d, w, a, bwd, s) || launch_shape<32, 48, 16>(d, w, a, bwd, s) ||
         launch_shape<32, 128, 64>(d, w, a, bwd, s);
}

}  // namespace es_tiled
}  // namespace sezm::cuda
