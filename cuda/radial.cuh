#pragma once
// The radial MLP per edge on the device (CPU twin: engine/radial_mlp.h): rho = env * MLP(rbf),
// (E, L+1, C) l-major, and its backward into env_bar and rbf_bar (linear in rho_bar, so the
// engine runs it per (block, chunk) share of rho_bar).
#include <algorithm>

#include "model_dev.cuh"
#ifdef __CUDACC__
#include "async_copy.cuh"
#endif

namespace sezm::cuda {

struct RadialMlpArgs {
  int E;
  const float *rbf, *env;  // (E, nr), (E)
  float* rho;              // forward: (E, L+1, C) written
  const float* rho_bar;    // backward: (E, L+1, C)
  float *env_bar, *rbf_bar;  // backward: added into
  // Backward from a block's kernel and logit adjoints instead of rho_bar (fold != null): kb (E, Kp)
  // and lbar (E, F), with fold = BlockWDev::rad_fold, so g = W1 rho_bar = [kb | lbar] fold.
  const float *fold, *kb, *lbar;
  // plain: kb holds g = W1 rho_bar itself (E, C; the folded GIE backward's G), fold the C x C
  // identity (ModelWDev::rad_eye), lbar unused: the folded tile with Kp = C, F = 0.
  bool plain;
};
void launch_radial_forward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s);
void launch_radial_backward(const Dims& d, const ModelWDev& w, const RadialMlpArgs& a, cudaStream_t s);
// Whether launch_radial_backward takes a fold on this model and device (the tile kernel's channel
// counts, 16, 32 and 64, and its shared memory); the engine forms rho_bar otherwise.
bool radial_backward_folds(const Dims& d);
// Whether it takes a plain fold (RadialMlpArgs::plain) on this model and device.
bool radial_backward_plain(const Dims& d);

#ifdef __CUDACC__
// ---- The radial MLP's tile pieces (radial.cu's tile kernels; radial_tables.cu's folded kernel values) ----
constexpr int kTT = 256;  // threads per tile CTA

__host__ __device__ constexpr int tile_round4(int n) { return (n + 3) & ~3; }  // 16-byte aligned regions

// h for this thread's (edge, channel) pairs, hs (TE x (KC+1)) and rs[e] = the norm factor rho
// (1 without edge_norm). rbs: the tile's rbf rows, stride nr + 1; w0s: W0, stride KC + 1.
template <int KC, int TE>
__device__ __forceinline__ void tile_hidden(const Dims& d, const float* w0s, const float* rbs, float* hs, float* rs,
                                            float (&h)[TE * KC / kTT]) {
  constexpr int HPT = TE * KC / kTT, CS = kTT / TE;
  const int e = threadIdx.x % TE, c0 = threadIdx.x / TE, nr = d.nr;
#pragma unroll
  for (int i = 0; i < HPT; ++i) h[i] = 0.0f;
  for (int n = 0; n < nr; ++n) {
    const float r = rbs[e * (nr + 1) + n];
#pragma unroll
    for (int i = 0; i < HPT; ++i) h[i] = fmaf(r, w0s[n * (KC + 1) + c0 + CS * i], h[i]);
  }
#pragma unroll
  for (int i = 0; i < HPT; ++i) hs[e * (KC + 1) + c0 + CS * i] = h[i];
  __syncthreads();
  if (threadIdx.x < TE) {
    float rho = 1.0f;
    if (d.edge_norm) {
      const float* he = hs + threadIdx.x * (KC + 1);
      float s = 0.0f;
#pragma unroll 8
      for (int c = 0; c < KC; ++c) s = fmaf(he[c], he[c], s);
      rho = rsqrtf(s / KC + 1e-7f);
    }
    rs[threadIdx.x] = rho;
  }
  __syncthreads();
}

// The tile's activations a = SiLU(y), k-major (as[c][e], TE x KC), y formed as the radial
// forward forms it (radial.cu; the folded kernel values of radial_tables.cu read the same bits);
// hs and rs as tile_hidden leaves them. The caller's barrier follows.
template <int KC, int TE>
__device__ __forceinline__ void tile_activations(const Dims& d, const float* w0s, const float* nrm, const float* rbs,
                                                 float* hs, float* rs, float* as) {
  constexpr int HPT = TE * KC / kTT, CS = kTT / TE;
  float h[HPT];
  tile_hidden<KC, TE>(d, w0s, rbs, hs, rs, h);
  const int e = threadIdx.x % TE, c0 = threadIdx.x / TE;
#pragma unroll
  for (int i = 0; i < HPT; ++i) {
    const int c = c0 + CS * i;
    const float y = d.edge_norm ? h[i] * rs[e] * nrm[c] : h[i];
    as[c * TE + e] = siluf_(y);
  }
}

// Stages W0 (stride KC + 1) and the norm scale; one tile's rbf rows (stride nr + 1) and env.
template <int KC>
__device__ __forceinline__ void stage_w0(const Dims& d, const ModelWDev& w, float* w0s, float* nrm) {
  for (int i = threadIdx.x; i < d.nr * KC; i += kTT) w0s[(i / KC) * (KC + 1) + i % KC] = __ldg(w.rad_w0 + i);
  if (d.edge_norm)
    for (int c = threadIdx.x; c < KC; c += kTT) nrm[c] = __ldg(w.rad_norm + c);
}
// Asynchronous copies (async_copy.cuh: all of a thread's loads in flight at once, no registers
// held); rows past the tile's ne edges are zeros. The caller waits (copy_async_wait) before its
// barrier.
template <int TE>
__device__ __forceinline__ void stage_rows(int nr, int e0, int ne, const float* __restrict__ rbf,
                                           const float* __restrict__ env, float* rbs, float* es) {
  for (int i = threadIdx.x; i < TE * nr; i += kTT) {
    float* p = rbs + (i / nr) * (nr + 1) + i % nr;
    if (i < ne * nr) copy_async4(p, rbf + (size_t)e0 * nr + i);
    else *p = 0.0f;
  }
  for (int i = threadIdx.x; i < TE; i += kTT) {
    if (i < ne) copy_async4(es + i, env + e0 + i);
    else es[i] = 0.0f;
  }
}


// Launches a tile kernel (`threads` per CTA, `bytes` of dynamic shared memory) on as many CTAs as
// are resident on the device at once, at most `tiles`: the kernel loops over its tiles, so what it
// stages once per CTA (the weights) crosses L2 once per CTA, not once per tile. Returns false,
// launching nothing, where `bytes` exceeds the device's opt-in limit (the caller's fallback runs).
// Used by radial.cu and radial_tables.cu.
// The register tile of the tile kernels' products (radial.cu, radial_tables.cu): acc[r][4 q + i] =
// sum over k < K, in k order, of a[k][4 te + r] b[k][cb + 64 q + 4 tn + i] (q, i < 2, 4; rows of a
// and b `as` and `bs` floats apart, every quad 16-byte aligned, in shared memory).
template <int kUnroll>
__device__ __forceinline__ void tile_4x8(const float* a, int as, const float* b, int bs, int K, int te, int tn, int cb,
                                         float (&acc)[4][8]) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[r][j] = 0.0f;
#pragma unroll kUnroll
  for (int k = 0; k < K; ++k) {
    const float4 x = *reinterpret_cast<const float4*>(a + k * as + 4 * te);
    const float4 b0 = *reinterpret_cast<const float4*>(b + k * bs + cb + 4 * tn);
    const float4 b1 = *reinterpret_cast<const float4*>(b + k * bs + cb + 64 + 4 * tn);
    const float av[4] = {x.x, x.y, x.z, x.w}, bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r][j] = fmaf(av[r], bv[j], acc[r][j]);
  }
}

// The four-row register tile (mixer_prep_k, radial_backward_tile_k): acc[p][i] += sum over k < K,
// in k order, of a[(r0 + rs p) as + k] b[k bs + 4 q + i] (p, i < 4; K % 4 == 0; rows of a and b
// `as` and `bs` floats apart, every quad 16-byte aligned, in shared memory). Per four k, eight
// 16-byte loads feed 64 FMAs.
__device__ __forceinline__ void rows_4x4(const float* a, int as, int r0, int rs, const float* b, int bs, int q, int K,
                                         float (&acc)[4][4]) {
#pragma unroll 2
  for (int k = 0; k < K; k += 4) {
    float4 x[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) x[p] = *reinterpret_cast<const float4*>(a + (r0 + rs * p) * as + k);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const float4 y = *reinterpret_cast<const float4*>(b + (k + kk) * bs + 4 * q);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float v = kk == 0 ? x[p].x : kk == 1 ? x[p].y : kk == 2 ? x[p].z : x[p].w;
        acc[p][0] = fmaf(v, y.x, acc[p][0]);
        acc[p][1] = fmaf(v, y.y, acc[p][1]);
        acc[p][2] = fmaf(v, y.z, acc[p][2]);
        acc[p][3] = fmaf(v, y.w, acc[p][3]);
      }
    }
  }
}

template <class... P, class... A>
bool launch_tiles(void (*fn)(P...), int threads, size_t bytes, int tiles, cudaStream_t s, A... args) {
  const int grid = resident_grid(reinterpret_cast<const void*>(fn), threads, bytes, tiles);
  if (grid == 0) return false;
  fn<<<grid, threads, bytes, s>>>(args...);
  return true;
}
#endif

// The radial MLP's hidden activation silu(y) of channel k for one edge, as the radial tiles form
// it, where a warp's 32 lanes are the C = 32 channels (the folded GIE's forward and backward,
// gie.cu, gie_fold_backward.cu): h = r W0[:, k] summed over n in order, y = h, or with the edge
// norm h rsqrt(mean_c h^2 + 1e-7) nk over the warp. W0's column k sits in registers when the
// basis size NR is a compile-time constant, else it is read from w0s (nr x C, shared memory).
template <int NR>
struct FoldHidden {
  float w0r[NR > 0 ? NR : 1];
  const float* w0s;
  int nr, C, k;
  float nk;  // the edge norm's scale of channel k (edge_norm), else unused
  bool edge_norm;
  __device__ __forceinline__ FoldHidden(const float* w0s_, int nr_, int C_, int k_, float nk_, bool norm)
      : w0s(w0s_), nr(nr_), C(C_), k(k_), nk(nk_), edge_norm(norm) {
#pragma unroll
    for (int q = 0; q < NR; ++q) w0r[q] = w0s[q * C + k];
  }
  __device__ __forceinline__ float operator()(const float* r) const {
    float h = 0.0f;
    if constexpr (NR > 0) {
#pragma unroll
      for (int q = 0; q < NR; ++q) h += r[q] * w0r[q];
    } else {
      for (int q = 0; q < nr; ++q) h += r[q] * w0s[q * C + k];
    }
    float y = h;
    if (edge_norm) y = h * rsqrtf(warp_sum(h * h) / C + 1e-7f) * nk;
    return siluf_(y);
  }
};

}  // namespace sezm::cuda
