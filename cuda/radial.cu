// The radial MLP per edge, forward and backward (CPU twin: engine/radial_mlp.h). Fast path (C =
// 16, 32, 64): a CTA of 256 threads per tile of edges, the weights staged once per CTA in shared
// memory (each CTA loops over tiles), the tile's hidden layer formed once per edge, the layer
// products register-tiled (IEEE FFMA). Generic fallback (any other C, or a shape whose tile does
// not fit the device's shared memory): the per-thread kernels, one thread per edge forward, four
// backward.
#include <cstdint>

#include "radial.cuh"

namespace sezm::cuda {
namespace {

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
  // 16-byte weight loads: C % 4 == 0 (model_dev.cuh limits), every tensor 128-byte aligned.
  const float4* w0 = reinterpret_cast<const float4*>(w.rad_w0);
  for (int n = 0; n < d.nr; ++n) {
    const float r = rbf[n];
#pragma unroll
    for (int c = 0; c < (KC > 0 ? KC : kMaxC); c += 4)
      if (c < C) {
        const float4 wv = __ldg(w0 + (n * C + c) / 4);
        h[c] += r * wv.x;
        h[c + 1] += r * wv.y;
        h[c + 2] += r * wv.z;
        h[c + 3] += r * wv.w;
      }
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

// The generic backward: kTpe = 4 threads per edge. With g = W1 rho_bar (C values), a_bar = env g
// and env_bar = sum_c a_c g_c, so the layer output m = a W1 is never formed. Lane t of an edge's
// group owns the output quads q = t, t + 4, ... (one 16-byte W1 load per four FMAs); the four
// partial g are added by a two-step xor butterfly (a fixed order giving every lane of the group
// the same bits), and the lanes share the rbf_bar rows n = t, t + 4, ... Each lane forms the
// hidden layer itself; h waits in shared memory through the loop.
constexpr int kTpe = 4, kBwdThreads = 128;

template <int KC>
__global__ void __launch_bounds__(kBwdThreads) radial_backward_k(Dims d, ModelWDev w, int E,
                                                                 const float* __restrict__ rbf,
                                                                 const float* __restrict__ env,
                                                                 const float* __restrict__ rho_bar, float* env_bar,
                                                                 float* rbf_bar) {
  constexpr int NC = KC > 0 ? KC : kMaxC;
  const int gi = blockIdx.x * blockDim.x + threadIdx.x, t = gi % kTpe;
  const bool live = gi / kTpe < E;
  const int e = live ? gi / kTpe : E - 1;  // a dead group shadows the last edge and writes nothing
  const int C = KC > 0 ? KC : d.C;
  float rho;
  __shared__ float hs[NC][kBwdThreads];  // one column per thread: no barrier
  {
    float h[NC], y[NC];
    radial_hidden<KC>(d, w, rbf + (size_t)e * d.nr, h, y, rho);
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) hs[c][threadIdx.x] = h[c];
  }
  float g[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) g[c] = 0.0f;
  const int nq = (d.L + 1) * C / 4;  // output quads per edge
  const float4* w1 = reinterpret_cast<const float4*>(w.rad_w1);  // row c: quads c nq .. c nq + nq - 1
  const float4* rb = reinterpret_cast<const float4*>(rho_bar) + (size_t)e * nq;
  for (int q = t; q < nq; q += kTpe) {
    const float4 r = rb[q];
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) {
        const float4 wv = __ldg(w1 + (size_t)c * nq + q);
        g[c] += r.x * wv.x;
        g[c] += r.y * wv.y;
        g[c] += r.z * wv.z;
        g[c] += r.w * wv.w;
      }
  }
  // The group's four lanes are consecutive lanes of one warp, and every lane of the warp is here.
#pragma unroll
  for (int o = 1; o < kTpe; o <<= 1) {
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) g[c] += __shfl_xor_sync(0xffffffffu, g[c], o);
  }
  // y from h as radial_hidden forms it (the same expression, so the same bits); a = SiLU(y).
  const float en = env[e];
  float eb = 0.0f, abar[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c)
    if (c < C) {
      const float y = d.edge_norm ? hs[c][threadIdx.x] * rho * w.rad_norm[c] : hs[c][threadIdx.x];
      eb += siluf_(y) * g[c];
      abar[c] = en * g[c] * silu_gradf_(y);  // y_bar
    }
  if (live && t == 0) env_bar[e] += eb;
  if (d.edge_norm) {
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) dot += abar[c] * w.rad_norm[c] * hs[c][threadIdx.x] * rho;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) abar[c] = rho * (abar[c] * w.rad_norm[c] - hs[c][threadIdx.x] * rho * dot / C);
  }
  for (int n = t; n < d.nr; n += kTpe) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < C) s += abar[c] * w.rad_w0[n * C + c];
    if (live) rbf_bar[(size_t)e * d.nr + n] += s;
  }
}

// ---- Fast path: a CTA per tile of edges ----
//
// 256 threads; the weights go to shared memory once per CTA and the CTA loops over tiles
// (grid-stride, as many CTAs as fit the device at once), so W1 crosses L2 once per CTA instead of
// once per edge group. Per tile: the rbf rows, env (and rho_bar) staged with coalesced loads; the
// hidden layer h = rbf W0 once per (edge, channel) pair, thread (edge tid % TE, channels
// tid / TE + (256 / TE) i); the per-edge norm factor by one thread per edge; then the layer
// product with each thread owning a register block of edges x column quads. Every sum runs in
// one fixed order, independent of the grid: repeated runs are bit-identical. The forward's sums
// are those of radial_forward_k (h over n, s over c, m over c, each from zero in index order), so
// its bits are the generic kernel's.
// Forward: tiles of 64 edges; thread (te, tn) = (tid / 16, tid % 16) owns edges 4te..4te+3 and
// the quads tn, tn + 16 of each 128-column block of the output (W padded to WP, a multiple of 128,
// with zero weight columns): 32 accumulators, per k one 16-byte load of a (k-major, 4 edges) and
// two of W1 for 32 FMAs. A warp's stores are two edges' 256 contiguous bytes each.
constexpr int kFwdTE = 64;
struct FwdSmem {  // floats, every region a multiple of 4
  int W, WP, w1, w0, nrm, as, rbs, hs, rs, es, total;
  __host__ __device__ FwdSmem(const Dims& d, int KC) {
    W = (d.L + 1) * KC; WP = (W + 127) / 128 * 128;
    w1 = 0; w0 = w1 + KC * WP; nrm = w0 + tile_round4(d.nr * (KC + 1)); as = nrm + tile_round4(KC);
    rbs = as + KC * kFwdTE; hs = rbs + tile_round4(kFwdTE * (d.nr + 1)); rs = hs + tile_round4(kFwdTE * (KC + 1));
    es = rs + kFwdTE; total = es + kFwdTE;
  }
};

template <int KC>
__global__ void __launch_bounds__(kTT) radial_forward_tile_k(Dims d, ModelWDev w, int E, const float* __restrict__ rbf,
                                                             const float* __restrict__ env, float* rho_o) {
  constexpr int TE = kFwdTE;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const FwdSmem L(d, KC);
  const int W = L.W, WP = L.WP, tid = threadIdx.x;
  float *w1s = sm + L.w1, *w0s = sm + L.w0, *nrm = sm + L.nrm, *as = sm + L.as, *rbs = sm + L.rbs, *hs = sm + L.hs,
        *rs = sm + L.rs, *es = sm + L.es;
  for (int i = tid; i < KC * WP / 4; i += kTT) {
    const int c = 4 * i / WP, o = 4 * i % WP;
    reinterpret_cast<float4*>(w1s)[i] =
        o < W ? __ldg(reinterpret_cast<const float4*>(w.rad_w1 + (size_t)c * W + o)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  stage_w0<KC>(d, w, w0s, nrm);
  const int tn = tid % 16, te = tid / 16, ntiles = (E + TE - 1) / TE;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int e0 = tile * TE, ne = min(TE, E - e0);
    stage_rows<TE>(d.nr, e0, ne, rbf, env, rbs, es);
    copy_async_wait();
    __syncthreads();
    tile_activations<KC, TE>(d, w0s, nrm, rbs, hs, rs, as);
    __syncthreads();
    for (int cb = 0; cb < W; cb += 128) {
      float acc[4][8];
      tile_4x8<8>(as, TE, w1s, WP, KC, te, tn, cb, acc);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int e = 4 * te + r;
        if (e >= ne) continue;
        const float en = es[e];
        float* out = rho_o + (size_t)(e0 + e) * W;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int o = cb + 64 * q + 4 * tn;
          if (o < W)
            *reinterpret_cast<float4*>(out + o) = make_float4(en * acc[r][4 * q], en * acc[r][4 * q + 1],
                                                              en * acc[r][4 * q + 2], en * acc[r][4 * q + 3]);
        }
      }
    }
    __syncthreads();  // the next tile overwrites rbs, es, as
  }
}

// Backward: tiles of TE = 2048 / C edges (128, 64, 32 for C = 16, 32, 64), so that the NQ = C/4
// channel quads x TE/4 edge quads make 128 threads (warps 0-3; all 256 stage and take rbf_bar).
// g = W1 rho_bar per edge (K = W, N = C): rho_bar rows staged row-major (stride RS, RS/4 odd: a
// warp's 16-byte loads of distinct rows fall in distinct bank quads), W1 transposed to (W, C);
// thread (te, tq) = (tid / NQ, tid % NQ) owns edges te + p TE/4 (p < 4) and channels
// 4tq..4tq+3, summing over the outputs o in order: per four o eight 16-byte shared loads feed 64
// FMAs (with two edges per thread six fed 32, and shared-load latency was the kernel's stall).
// The tail (SiLU and norm backward, a_bar = env g, env_bar = sum_c a_c g_c) runs on those
// registers; its sums over c are four channels in order per thread, then an xor butterfly over
// the NQ lanes of the edge (consecutive lanes of one warp; every lane gets the same bits). The
// hidden adjoint goes to shared memory (over the dead rho_bar rows) for rbf_bar = h_bar W0^T, one
// thread per (edge, n), sum over c in order.
// RSF = 0: the rho_bar tile (W1^T, W x KC; rb holds TE rows of RS floats). RSF > 0: the folded
// tile: fold (KF x KC) in W1^T's place, and two sets of the row buffers (rb: TE rows of RSF floats,
// or the hidden adjoint's TE x (KC + 1) overlaid on them; rbs; es), so that the next tile's rows
// are copied while this one is worked on (nb = 2; rbsz, rbssz the sizes of one set's).
struct BwdSmem {
  int W, TE, RS, nb, rbsz, rbssz, w1t, w0, nrm, rb, rbs, hs, rs, es, total;
  __host__ __device__ BwdSmem(const Dims& d, int KC, int KF = 0, int RSF = 0) {
    W = (d.L + 1) * KC; TE = 2048 / KC; RS = ((W / 4) | 1) * 4;
    nb = RSF > 0 ? 2 : 1;
    rbsz = RSF > 0 ? tile_round4(TE * RSF > TE * (KC + 1) ? TE * RSF : TE * (KC + 1)) : TE * RS;
    rbssz = tile_round4(TE * (d.nr + 1));
    w1t = 0; w0 = w1t + (RSF > 0 ? KF : W) * KC; nrm = w0 + tile_round4(d.nr * (KC + 1)); rb = nrm + tile_round4(KC);
    rbs = rb + nb * rbsz; hs = rbs + nb * rbssz; rs = hs + tile_round4(TE * (KC + 1)); es = rs + TE;
    total = es + nb * TE;
  }
};

//
// Folded (kFold, RadialFold): a block's adjoint arrives as its kernel and logit adjoints, kb (E, Kp)
// and lbar (E, F), and g = [kb | lbar] fold with fold = BlockWDev::rad_fold ((KF, C), KF =
// round4(Kp + F)): the same tile with those rows (stride RSF, RSF / 4 odd) in rb and fold in place
// of W1^T, K = KF instead of W (C.pt: 32 against 128), and no rho_bar formed or read.
struct RadialFold {
  const float *fold, *kb, *lbar;
  int Kp, F, KF, RSF;
};

template <int KC, bool kFold>
__global__ void __launch_bounds__(kTT) radial_backward_tile_k(Dims d, ModelWDev w, int E, const float* __restrict__ rbf,
                                                              const float* __restrict__ env,
                                                              const float* __restrict__ rho_bar, float* env_bar,
                                                              float* rbf_bar, RadialFold fo) {
  constexpr int TE = 2048 / KC, NQ = KC / 4, QT = TE / 4, HPT = TE * KC / kTT;
  static_assert(NQ * QT == kTT / 2 && 32 % NQ == 0, "128 threads, one per (edge quad, channel quad); whole warps");
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const BwdSmem L(d, KC, kFold ? fo.KF : 0, kFold ? fo.RSF : 0);
  const int W = L.W, RS = L.RS, tid = threadIdx.x, nr = d.nr;
  float *w1t = sm + L.w1t, *w0s = sm + L.w0, *nrm = sm + L.nrm, *rb0 = sm + L.rb, *rbs0 = sm + L.rbs,
        *hs = sm + L.hs, *rs = sm + L.rs, *es0 = sm + L.es;
  if (kFold) {  // fold (KF x KC) as it is, in W1^T's place
    for (int i = tid; i < fo.KF * KC / 4; i += kTT)
      reinterpret_cast<float4*>(w1t)[i] = __ldg(reinterpret_cast<const float4*>(fo.fold) + i);
  } else {
    // Lanes take consecutive channels of one output quad: conflict-free transposed stores (the
    // strided 16-byte loads hit L1 after each line's first touch).
    for (int i = tid; i < KC * W / 4; i += kTT) {
      const int c = i % KC, o = 4 * (i / KC);
      const float4 v = __ldg(reinterpret_cast<const float4*>(w.rad_w1 + (size_t)c * W + o));
      w1t[o * KC + c] = v.x; w1t[(o + 1) * KC + c] = v.y; w1t[(o + 2) * KC + c] = v.z; w1t[(o + 3) * KC + c] = v.w;
    }
  }
  stage_w0<KC>(d, w, w0s, nrm);
  const int tq = tid % NQ, te = tid / NQ, ntiles = (E + TE - 1) / TE;
  const bool mul = tid < NQ * QT;  // warps 0-3 take g and the tail
  // A tile's rows into row-buffer set `set` (asynchronous copies; rows past the last edge zeros).
  auto stage = [&](int tile, int set) {
    const int e0 = tile * TE, ne = min(TE, E - e0);
    float* rb = rb0 + set * L.rbsz;
    stage_rows<TE>(nr, e0, ne, rbf, env, rbs0 + set * L.rbssz, es0 + set * TE);
    if (kFold) {
      // Row e: kb's Kp values (quads), lbar's F, zeros to KF (rewritten per tile: hb overlays rb).
      const int Q = fo.KF / 4;
      for (int i = tid; i < TE * Q; i += kTT) {
        const int e = i / Q, x = 4 * (i % Q);
        float* p = rb + e * fo.RSF + x;
        if (e < ne && x + 4 <= fo.Kp) {
          copy_async16(p, fo.kb + (size_t)(e0 + e) * fo.Kp + x);
        } else {
          float v[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int f = x + j - fo.Kp;
            v[j] = e < ne && f >= 0 && f < fo.F ? __ldg(fo.lbar + (size_t)(e0 + e) * fo.F + f) : 0.0f;
          }
          *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
        }
      }
    } else {
      for (int i = tid; i < TE * W / 4; i += kTT) {
        const int e = 4 * i / W, o = 4 * i % W;
        if (e < ne) copy_async16(rb + e * RS + o, rho_bar + (size_t)(e0 + e) * W + o);
        else *reinterpret_cast<float4*>(rb + e * RS + o) = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  };
  // Folded, the next tile's rows are copied into the other set while a tile is worked on (its set
  // was last read by the tile before, behind that tile's last barrier); else one set, staged at
  // each tile's start.
  if (kFold && blockIdx.x < ntiles) stage(blockIdx.x, 0);
  int set = 0;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x, set ^= kFold ? 1 : 0) {
    const int e0 = tile * TE, ne = min(TE, E - e0);
    if (!kFold) stage(tile, 0);
    float* rb = rb0 + set * L.rbsz;
    float* rbs = rbs0 + set * L.rbssz;
    float* es = es0 + set * TE;
    float* hb = rb;  // the hidden adjoint, TE x (KC+1), once the tile's rows are dead
    copy_async_wait();
    __syncthreads();
    if (kFold && tile + (int)gridDim.x < ntiles) stage(tile + gridDim.x, set ^ 1);
    {
      float h[HPT];
      tile_hidden<KC, TE>(d, w0s, rbs, hs, rs, h);
    }
    float g[4][4];
#pragma unroll
    for (int p = 0; p < 4; ++p)
#pragma unroll
      for (int j = 0; j < 4; ++j) g[p][j] = 0.0f;
    if (mul) {
      if (kFold) rows_4x4(rb, fo.RSF, te, QT, w1t, KC, tq, fo.KF, g);
      else rows_4x4(rb, RS, te, QT, w1t, KC, tq, W, g);
    }
    __syncthreads();  // rb is dead: hb overwrites it
    if (mul) {
      float eb[4], dot[4], yb[4][4];
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int e = te + QT * p;
        const float en = es[e], rho = rs[e];
        eb[p] = 0.0f; dot[p] = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = 4 * tq + j;
          const float hv = hs[e * (KC + 1) + c];
          // y as tile_hidden's callers form it (the same expression as the forward: the same bits)
          const float y = d.edge_norm ? hv * rho * nrm[c] : hv;
          eb[p] += siluf_(y) * g[p][j];
          yb[p][j] = en * g[p][j] * silu_gradf_(y);
          if (d.edge_norm) dot[p] += yb[p][j] * nrm[c] * hv * rho;
        }
      }
#pragma unroll
      for (int m = 1; m < NQ; m <<= 1)
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          eb[p] += __shfl_xor_sync(0xffffffffu, eb[p], m);
          dot[p] += __shfl_xor_sync(0xffffffffu, dot[p], m);
        }
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int e = te + QT * p;
        if (tq == 0 && e < ne) env_bar[e0 + e] += eb[p];
        const float rho = rs[e];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = 4 * tq + j;
          const float hv = hs[e * (KC + 1) + c];
          hb[e * (KC + 1) + c] = d.edge_norm ? rho * (yb[p][j] * nrm[c] - hv * rho * dot[p] / KC) : yb[p][j];
        }
      }
    }
    __syncthreads();
    for (int i = tid; i < ne * nr; i += kTT) {
      const float* he = hb + (i / nr) * (KC + 1);
      const float* wn = w0s + (i % nr) * (KC + 1);
      // The old value is read before the dot product, not behind it: that read-modify-write was
      // the kernel's hottest line (7 % of its warp samples, ncu at 2fc6d83). Same sum, same bits.
      const float old = rbf_bar[(size_t)e0 * nr + i];
      float s = 0.0f;
#pragma unroll 8
      for (int c = 0; c < KC; ++c) s = fmaf(he[c], wn[c], s);
      rbf_bar[(size_t)e0 * nr + i] = old + s;
    }
    __syncthreads();  // the next tile overwrites rb (hb), rbs, hs, rs, es
  }
}

constexpr int kThreads = 128;

// The kernels read W0, W1 and rho_bar rows as 16-byte quads: C % 4 == 0 (model_dev.cuh limits)
// and 16-byte aligned bases (device_weights.cpp aligns every tensor to 128 bytes).
void check_quads(const Dims& d, const ModelWDev& w, const float* rows, const char* what) {
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (d.C % 4 != 0 || misaligned(w.rad_w0) || misaligned(w.rad_w1) || misaligned(rows))
    throw Error(std::string(what) + ": radial weights and rows need C % 4 == 0 and 16-byte alignment");
}

}  // namespace

void launch_radial_forward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const int E = a.E;
  if (E == 0) return;
  check_quads(d, w, nullptr, "radial_forward");
  const size_t bytes = FwdSmem(d, d.C).total * sizeof(float);
  const int tiles = div_up(E, kFwdTE);
  bool done = false;
  if (reinterpret_cast<uintptr_t>(a.rho) % 16 == 0) {  // the tile's 16-byte stores (engine buffers are aligned)
    if (d.C == 32) done = launch_tiles(radial_forward_tile_k<32>, kTT, bytes, tiles, s, d, w, E, a.rbf, a.env, a.rho);
    else if (d.C == 16) done = launch_tiles(radial_forward_tile_k<16>, kTT, bytes, tiles, s, d, w, E, a.rbf, a.env, a.rho);
    else if (d.C == 64) done = launch_tiles(radial_forward_tile_k<64>, kTT, bytes, tiles, s, d, w, E, a.rbf, a.env, a.rho);
  }
  if (!done) {
    if (d.C == 32) radial_forward_k<32><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
    else if (d.C == 16) radial_forward_k<16><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
    else radial_forward_k<0><<<div_up(E, kThreads), kThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho);
  }
  SEZM_LAUNCH("radial_forward");
}
namespace {
RadialFold radial_fold(const Dims& d, const RadialMlpArgs& a) {
  if (a.plain) return RadialFold{a.fold, a.kb, nullptr, d.C, 0, d.C, ((d.C / 4) | 1) * 4};
  const int Kp = padded_kernel_size(d), KF = (Kp + d.F + 3) / 4 * 4;
  return RadialFold{a.fold, a.kb, a.lbar, Kp, d.F, KF, ((KF / 4) | 1) * 4};
}
// Whether the folded tile (fold in W1^T's place, two sets of row buffers) is resident on this device.
bool fold_fits(const Dims& d, const RadialFold& f) {
  if (d.C != 16 && d.C != 32 && d.C != 64) return false;
  const BwdSmem L(d, d.C, f.KF, f.RSF);
  const void* fn = d.C == 32   ? reinterpret_cast<const void*>(radial_backward_tile_k<32, true>)
                   : d.C == 16 ? reinterpret_cast<const void*>(radial_backward_tile_k<16, true>)
                               : reinterpret_cast<const void*>(radial_backward_tile_k<64, true>);
  return resident_grid(fn, kTT, L.total * sizeof(float), 1) > 0;
}
// The tile kernel (C = 16, 32, 64) on as many CTAs as are resident; false where it does not apply
// or fit (launch_tiles).
template <bool kFold>
bool launch_backward_tiles(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const RadialFold fo = kFold ? radial_fold(d, a) : RadialFold{};
  const BwdSmem L(d, d.C, fo.KF, fo.RSF);
  const size_t bytes = L.total * sizeof(float);
  const int tiles = div_up(a.E, L.TE);
  const auto go = [&](auto fn) {
    return launch_tiles(fn, kTT, bytes, tiles, s, d, w, a.E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar, fo);
  };
  if (d.C == 32) return go(radial_backward_tile_k<32, kFold>);
  if (d.C == 16) return go(radial_backward_tile_k<16, kFold>);
  if (d.C == 64) return go(radial_backward_tile_k<64, kFold>);
  return false;
}
}  // namespace

bool radial_backward_folds(const Dims& d) {
  return d.degree_mixer && fold_fits(d, radial_fold(d, RadialMlpArgs{}));
}
bool radial_backward_plain(const Dims& d) {
  RadialMlpArgs a{};
  a.plain = true;
  return fold_fits(d, radial_fold(d, a));
}

void launch_radial_backward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s) {
  const int E = a.E;
  if (E == 0) return;
  check_quads(d, w, a.fold ? nullptr : a.rho_bar, "radial_backward");
  if (a.fold && (reinterpret_cast<uintptr_t>(a.kb) % 16 != 0 ||
                 !(a.plain ? radial_backward_plain(d) : radial_backward_folds(d))))
    throw Error("device cuda: launch_radial_backward: a fold outside its shapes (radial_backward_folds)");
  bool done = a.fold ? launch_backward_tiles<true>(d, w, a, s) : launch_backward_tiles<false>(d, w, a, s);
  if (a.fold && !done) throw Error("device cuda: launch_radial_backward: the folded tile did not launch");
  if (!done) {
    const int blocks = div_up(E, kBwdThreads / kTpe);
    if (d.C == 32)
      radial_backward_k<32><<<blocks, kBwdThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar);
    else if (d.C == 16)
      radial_backward_k<16><<<blocks, kBwdThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar);
    else
      radial_backward_k<0><<<blocks, kBwdThreads, 0, s>>>(d, w, E, a.rbf, a.env, a.rho_bar, a.env_bar, a.rbf_bar);
  }
  SEZM_LAUNCH("radial_backward");
}

}  // namespace sezm::cuda
