// Node-level steps on the device (O(N) work): equivariant RMS norms, the S2 grid FFN (the
// SO(3)-grid FFN through grid_net.cu), read-out and fitting, forward and backward (CPU twins:
// engine/norms.h, ffn.h, readout.h, fitting.h). The per-degree linears, and the steps that ride
// on them (output gate, the block's norms, the FFN residual), are in node_linear.cu; the norms'
// per-node warp code in node_norms.cuh. FFN grid activation: eight lanes per (node, channel);
// norms: a warp per node; read-out: a CTA per node (they also run on one chunk's few hundred
// destinations at a time).
#include "node_steps.cuh"

#include <type_traits>

#include "grid_net.cuh"
#include "node_norms.cuh"

namespace sezm::cuda {
namespace {

// Sum over the CTA (blockDim.x a multiple of 32, at most 1024), the same for every thread and
// in a fixed order (repeated runs are bit-identical). `red` holds one double per warp.
__device__ double cta_total(double v, double* red) {
  v = warp_sum(v);
  __syncthreads();  // red may still be read from the previous call
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double t = 0.0;
  for (int w = 0; w < (int)blockDim.x / 32; ++w) t += red[w];
  return t;
}

// One CTA per node for the read-out: the node steps run per chunk of destinations in the last
// block (engine.cu), where a thread per node would leave the GPU nearly idle for a few hundred nodes.
// 256 threads: a layer's 2H = 192 outputs (C.pt) in one round, eight warps for the backward's rows.
constexpr int kNodeThreads = 256;

constexpr int kNormWarps = 4;  // the norms: a warp per node (node_norms.cuh), four per CTA

__global__ void __launch_bounds__(32 * kNormWarps) eq_norm_forward_k(int N, int L, int C, const float* X,
                                                                      const float* scale, const float* bias, float eps,
                                                                      float* Y, float* rho, const float* residual) {
  const int n = blockIdx.x * kNormWarps + threadIdx.x / 32;
  if (n >= N) return;  // whole warps leave
  const size_t o = (size_t)n * (L + 1) * (L + 1) * C;
  eq_norm_forward_warp(L, C, X + o, scale, bias, eps, Y + o, rho + n, residual ? residual + o : nullptr);
}

__global__ void __launch_bounds__(32 * kNormWarps) eq_norm_backward_k(int N, int L, int C, const float* X,
                                                                       const float* scale, const float* rho,
                                                                       const float* Y_bar, float* X_bar) {
  const int n = blockIdx.x * kNormWarps + threadIdx.x / 32;
  if (n >= N) return;
  const size_t o = (size_t)n * (L + 1) * (L + 1) * C;
  eq_norm_backward_warp(L, C, X + o, scale, rho[n], Y_bar + o, X_bar + o);
}

// The block's two norms in one pass, and their backward (node_norms.cuh).
__global__ void __launch_bounds__(32 * kNormWarps) eq_norm_pair_forward_k(EqNormPairArgs a) {
  const int n = blockIdx.x * kNormWarps + threadIdx.x / 32;
  if (n < a.N) eq_norm_pair_forward_node(a, n);
}
__global__ void __launch_bounds__(32 * kNormWarps) eq_norm_pair_backward_k(EqNormPairBackwardArgs a) {
  const int n = blockIdx.x * kNormWarps + threadIdx.x / 32;
  if (n < a.N) eq_norm_pair_backward_node(a, n);
}

// FFN grid activation per (node, hidden channel): y = kappa * P((T a)(T b)) + [l=0] silu(a0) b0.
// kSlices consecutive lanes share one (node, channel): lane s takes the grid points g = s + kSlices k
// and the gate inputs i = s + kSlices k, and the lanes' partial sums are added by an xor butterfly
// (every lane ends with the same bits: each step adds the same two values). The last block runs
// these per chunk of ~200 destinations (engine.cu), where one thread per (node, channel) filled a
// tenth of one wave and waited on its serial sums (docs/performance.md, per-kernel table).
// The lane's column of h (and of y_bar) is read once into registers (D known at compile time:
// the S2 grid exists for L <= 3 only, lebedev.cpp), and the grid matrices T and P are staged per
// CTA in shared memory (in double for the forward, which converted both operands of every product
// at the conversion unit's 16 per clock per SM before); the sums, their order and bits are the
// same as when every operand came from global memory.
constexpr int kSlices = 8, kMaxGrid = 40, kPerSlice = kMaxGrid / kSlices;  // Lebedev 9: 38 points
constexpr int kActThreads = 256;

template <class T>
__device__ __forceinline__ T slice_sum(T v) {
#pragma unroll
  for (int o = 1; o < kSlices; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The lane's slice, (node, channel) and whether it is real: a dead group shadows the last pair and
// writes nothing, so that every lane of a warp reaches the shuffles.
struct ActLane {
  int s, n, c;
  bool live;
  __device__ ActLane(int N, int H) {
    const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    s = static_cast<int>(idx % kSlices);
    long pair = idx / kSlices;
    live = pair < (long)N * H;
    if (!live) pair = (long)N * H - 1;
    c = static_cast<int>(pair % H);
    n = static_cast<int>(pair / H);
  }
};

// T (G, D) and P (D, G) into shared memory as TS.
template <class TS, int kD>
__device__ __forceinline__ void stage_grid(const ModelWDev& mw, TS* sT, TS* sP) {
  for (int i = threadIdx.x; i < mw.G * kD; i += blockDim.x) {
    sT[i] = mw.gridT[i];
    sP[i] = mw.gridP[i];
  }
  __syncthreads();
}

// The forward takes NCH adjacent channels per lane (NCH = 2 when H is even): the grid matrices'
// shared-memory loads serve both, and the products T h run with p outermost, so that h's column
// is converted once per element and a lane holds 2 NCH kPerSlice accumulators instead of h's
// 2 kD doubles per channel (99 registers, 25 % occupancy, 61 % short-scoreboard stalls at
// 4e983c2; 58 -> 39 us per 512-atom launch, docs/performance.md 2026-12-03). Each sum keeps its
// order (p ascending, then k, then the butterfly): the same bits.
template <int kD, int NCH>
__global__ void __launch_bounds__(kActThreads) ffn_act_forward_k(Dims d, ModelWDev mw, const float* __restrict__ sg,
                                                                 int N, const float* __restrict__ h, float* y) {
  __shared__ double sT[kMaxGrid * kD], sP[kD * kMaxGrid];
  stage_grid<double, kD>(mw, sT, sP);
  const int H = d.H, G = mw.G;
  const ActLane ln(N, H / NCH);
  const int c = NCH * ln.c, n = ln.n;
  const float* hn = h + (size_t)n * kD * 2 * H;
  double a[NCH][kPerSlice], b[NCH][kPerSlice];
#pragma unroll
  for (int t = 0; t < NCH; ++t)
#pragma unroll
    for (int k = 0; k < kPerSlice; ++k) a[t][k] = b[t][k] = 0.0;
#pragma unroll
  for (int p = 0; p < kD; ++p) {
    double ha[NCH], hb[NCH];
#pragma unroll
    for (int t = 0; t < NCH; ++t) {
      ha[t] = hn[p * 2 * H + c + t];
      hb[t] = hn[p * 2 * H + H + c + t];
    }
#pragma unroll
    for (int k = 0; k < kPerSlice; ++k) {
      const int g = ln.s + kSlices * k;
      if (g >= G) continue;
      const double tv = sT[g * kD + p];
#pragma unroll
      for (int t = 0; t < NCH; ++t) {
        a[t][k] += tv * ha[t];
        b[t][k] += tv * hb[t];
      }
    }
  }
  double kap[NCH];
#pragma unroll
  for (int t = 0; t < NCH; ++t) {
    double u = 0.0;
#pragma unroll 4
    for (int i = ln.s; i < H; i += kSlices)
      u += (double)hn[i] * sg[i * H + c + t] + (double)hn[H + i] * sg[(H + i) * H + c + t];
    kap[t] = 1.0 / (1.0 + exp(-slice_sum(u)));
  }
#pragma unroll
  for (int t = 0; t < NCH; ++t)
#pragma unroll
    for (int k = 0; k < kPerSlice; ++k) a[t][k] *= b[t][k];  // the grid product, a * b
#pragma unroll
  for (int p = 0; p < kD; ++p) {
    double q[NCH];
#pragma unroll
    for (int t = 0; t < NCH; ++t) q[t] = 0.0;
#pragma unroll
    for (int k = 0; k < kPerSlice; ++k) {
      const int g = ln.s + kSlices * k;
      if (g >= G) continue;
      const double pv = sP[p * G + g];
#pragma unroll
      for (int t = 0; t < NCH; ++t) q[t] += pv * a[t][k];
    }
#pragma unroll
    for (int t = 0; t < NCH; ++t) {
      q[t] = slice_sum(q[t]);
      if (ln.live && p % kSlices == ln.s)
        y[((size_t)n * kD + p) * H + c + t] =
            (float)(kap[t] * q[t] + (p == 0 ? siluf_(hn[c + t]) * hn[H + c + t] : 0.0f));
    }
  }
}

// The backward's first products also run with p outermost (the same sums in the same order, the
// same bits), one channel per lane: two (156 registers) measured slower (docs/performance.md,
// 2026-12-03, "ffn_act").
template <int kD>
__global__ void __launch_bounds__(kActThreads) ffn_act_backward_k(Dims d, ModelWDev mw, const float* __restrict__ sg,
                                                                  int N, const float* __restrict__ h,
                                                                  const float* __restrict__ ybar, float* hbar,
                                                                  float* tbar) {
  __shared__ float sT[kMaxGrid * kD], sP[kD * kMaxGrid];
  stage_grid<float, kD>(mw, sT, sP);
  const int H = d.H, G = mw.G;
  const ActLane ln(N, H);
  const int c = ln.c, n = ln.n;
  const float* hn = h + (size_t)n * kD * 2 * H;
  const float* yb = ybar + (size_t)n * kD * H;
  float ah[kPerSlice], bh[kPerSlice], wy[kPerSlice];  // wy[k] = sum_p P[p, g] ybar[p]
#pragma unroll
  for (int k = 0; k < kPerSlice; ++k) ah[k] = bh[k] = wy[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < kD; ++p) {
    const float ha = hn[p * 2 * H + c], hb = hn[p * 2 * H + H + c], yv = yb[p * H + c];
#pragma unroll
    for (int k = 0; k < kPerSlice; ++k) {
      const int g = ln.s + kSlices * k;
      if (g >= G) continue;
      ah[k] += sT[g * kD + p] * ha;
      bh[k] += sT[g * kD + p] * hb;
      wy[k] += sP[p * G + g] * yv;
    }
  }
  float t = 0.0f;
#pragma unroll 4
  for (int i = ln.s; i < H; i += kSlices) t += hn[i] * sg[i * H + c] + hn[H + i] * sg[(H + i) * H + c];
  const float kap = sigmoidf_(slice_sum(t));
  // kbar = sum_p ybar_p sum_g P[p, g] a_g b_g = sum_g a_g b_g wy_g; P_bar_g = kap wy_g.
  float kb = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerSlice; ++k) kb += ah[k] * bh[k] * wy[k];
  kb = slice_sum(kb);
  if (ln.live && ln.s == 0) tbar[(size_t)n * H + c] = kb * kap * (1.0f - kap);
  float* hbn = hbar + (size_t)n * kD * 2 * H;
#pragma unroll
  for (int p = 0; p < kD; ++p) {
    float a = 0.0f, b = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerSlice; ++k) {
      const int g = ln.s + kSlices * k;
      if (g >= G) continue;
      const float tp = sT[g * kD + p] * kap * wy[k];
      a += tp * bh[k];
      b += tp * ah[k];
    }
    a = slice_sum(a);
    b = slice_sum(b);
    if (p == 0) {
      const float ha0 = hn[c], hb0 = hn[H + c], yv0 = yb[c];
      a += yv0 * hb0 * silu_gradf_(ha0);
      b += yv0 * siluf_(ha0);
    }
    if (ln.live && p % kSlices == ln.s) {
      hbn[p * 2 * H + c] = a;
      hbn[p * 2 * H + H + c] = b;
    }
  }
}

// h_bar[n, 0, i] += sum_c t_bar[n, c] W_sg[i, c]  (the scalar-gate input [a0, b0]): a warp per
// (n, i), lane partials over c = lane + 32 j in order, then the xor butterfly. (A thread per
// (n, i) walked the H terms alone, with W_sg's row strided across the warp.)
__global__ void ffn_gate_input_backward_k(Dims d, const float* __restrict__ sg, int N, const float* __restrict__ tbar,
                                          float* hbar) {
  const long wid = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32, H = d.H;
  if (wid >= (long)N * 2 * H) return;  // whole warps (blockDim a multiple of 32)
  const int i = wid % (2 * H), n = wid / (2 * H);
  float s = 0.0f;
#pragma unroll 4
  for (int c = lane; c < H; c += 32) s += tbar[(size_t)n * H + c] * sg[i * H + c];
  s = warp_sum(s);
  if (lane == 0) hbar[(size_t)n * d.D * 2 * H + i] += s;
}

constexpr int kMaxW = 512;

__device__ inline double silu_gate(double a, double b) { return a * (b / (1.0 + exp(-b))); }
__device__ inline float silu_gate(float a, float b) { return a * siluf_(b); }

// Read-out and fitting, one CTA per node: each layer's outputs over the threads, its input vector
// in shared memory. The forward runs in T = double (the per-atom energy path), the backward's
// recompute in float. The per-chunk launches of the fused last block (a few hundred CTAs, a few
// warps per SM) wait on each weight load in turn: the forward's serial sums are unrolled so that
// their loads go out together (the same order and bits), and the backward's transposed products
// run a warp per output row (rows_dot_warp) instead of one thread walking a strided row.
// The read-out MLP: zr = y W1 (2H), ar = zr[:H] silu(zr[H:]), desc = y + ar W2 (C); desc may
// alias zr. Ends with a barrier.
template <class T>
__device__ void readout_cta(const Dims& d, const ModelWDev& w, const float* y, T* zr, T* ar, T* desc) {
  const int tid = threadIdx.x, nt = blockDim.x, C = d.C, H = d.H;
  for (int o = tid; o < 2 * H; o += nt) {
    T s = 0;
#pragma unroll 8
    for (int i = 0; i < C; ++i) s += (T)y[i] * w.ro_w1[i * 2 * H + o];
    zr[o] = s;
  }
  __syncthreads();
  for (int o = tid; o < H; o += nt) ar[o] = silu_gate(zr[o], zr[H + o]);
  __syncthreads();
  for (int c = tid; c < C; c += nt) {
    T s = y[c];
#pragma unroll 8
    for (int i = 0; i < H; ++i) s += ar[i] * w.ro_w2[i * C + c];
    desc[c] = s;
  }
  __syncthreads();
}

// out[r] = base(r) + sum_k v[k] M[r K + k] for r < R (M row-major in global memory, v in shared
// memory): a warp per row, the CTA's warps taking the rows in turn; lane partials over
// k = lane + 32 j in order, then the xor butterfly (every lane the same bits), lane 0 writes.
template <class Base>
__device__ void rows_dot_warp(int R, int K, const float* M, const float* v, float* out, Base base) {
  const int lane = threadIdx.x % 32, nw = blockDim.x / 32;
  for (int r = threadIdx.x / 32; r < R; r += nw) {
    const float* m = M + (size_t)r * K;
    float s = 0.0f;
#pragma unroll 4
    for (int k = lane; k < K; k += 32) s += v[k] * m[k];
    s = warp_sum(s);
    if (lane == 0) out[r] = base(r) + s;
  }
}

// One gated fitting layer: pre = B + z W (2 hk), then z = pre[:hk] silu(pre[hk:]) in place.
template <class T>
__device__ void fit_layer_cta(T* z, int din, const float* W, const float* B, int hk, T* pre) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int o = tid; o < 2 * hk; o += nt) {
    T s = B[o];
#pragma unroll 8
    for (int i = 0; i < din; ++i) s += z[i] * W[i * 2 * hk + o];
    pre[o] = s;
  }
  __syncthreads();
  for (int o = tid; o < hk; o += nt) z[o] = silu_gate(pre[o], pre[hk + o]);
  __syncthreads();
}

__global__ void __launch_bounds__(kNodeThreads) readout_fitting_forward_k(
    Dims d, ModelWDev w, const float* __restrict__ X, const int* __restrict__ types, const float* __restrict__ fit_w,
    const float* __restrict__ fit_b, const int* __restrict__ fit_dims, int n_fit, const float* __restrict__ fit_out,
    const double* __restrict__ atom_bias, double* atom_energy, const float* __restrict__ desc_in) {
  __shared__ double z[kMaxW], a[kMaxW], red[kNodeThreads / 32];
  const int n = blockIdx.x, tid = threadIdx.x;
  if (desc_in) {  // so3_readout mlp: the descriptor comes from the grid read-out (grid_net.cu)
    for (int c = tid; c < d.C; c += blockDim.x) z[c] = desc_in[(size_t)n * d.C + c];
    __syncthreads();
  } else {
    readout_cta<double>(d, w, X + (size_t)n * d.D * d.C, z, a, z);
  }
  int din = d.C;
  const float* W = fit_w;
  const float* B = fit_b;
  for (int k = 0; k < n_fit; ++k) {
    const int hk = fit_dims[k];
    fit_layer_cta<double>(z, din, W, B, hk, a);
    W += (size_t)din * 2 * hk;
    B += 2 * hk;
    din = hk;
  }
  double o = 0.0;
  for (int i = tid; i < din; i += blockDim.x) o += z[i] * fit_out[i];
  o = cta_total(o, red);
  if (tid == 0) atom_energy[n] = o + atom_bias[types[n]];
}

// dE/dX[n, 0, :] with dE/dAE = 1 (other rows untouched; the caller zeroes them): the forward
// again keeping each fitting layer's pre-activation, then its transpose, in float.
__global__ void __launch_bounds__(kNodeThreads) readout_fitting_backward_k(
    Dims d, ModelWDev w, const float* __restrict__ X, const float* __restrict__ fit_w, const float* __restrict__ fit_b,
    const int* __restrict__ fit_dims, int n_fit, const float* __restrict__ fit_out, float* X_bar,
    const float* __restrict__ desc_in, float* desc_bar) {
  __shared__ float zr[kMaxW], ar[kMaxW], z[kMaxW], pre[4][kMaxW], zb[kMaxW], yb2[kMaxW];
  const int n = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, C = d.C, H = d.H;
  if (desc_in) {
    for (int c = tid; c < C; c += nt) z[c] = desc_in[(size_t)n * C + c];
    __syncthreads();
  } else {
    readout_cta<float>(d, w, X + (size_t)n * d.D * C, zr, ar, z);
  }
  // Layer k's input width: C, then the previous layer's (no local-memory array of them).
  auto din_k = [&](int k) { return k == 0 ? C : fit_dims[k - 1]; };
  int din = C;
  {
    const float* W = fit_w;
    const float* B = fit_b;
    for (int k = 0; k < n_fit; ++k) {
      const int hk = fit_dims[k];
      fit_layer_cta<float>(z, din, W, B, hk, pre[k]);
      W += (size_t)din * 2 * hk;
      B += 2 * hk;
      din = hk;
    }
  }
  for (int i = tid; i < din; i += nt) zb[i] = fit_out[i];
  __syncthreads();
  size_t woff = 0;
  for (int k = 0; k < n_fit; ++k) woff += (size_t)din_k(k) * 2 * fit_dims[k];
  for (int k = n_fit - 1; k >= 0; --k) {
    const int hk = fit_dims[k], dk = din_k(k);
    woff -= (size_t)dk * 2 * hk;
    const float* W = fit_w + woff;
    for (int o = tid; o < hk; o += nt) {
      yb2[o] = zb[o] * siluf_(pre[k][hk + o]);
      yb2[hk + o] = zb[o] * pre[k][o] * silu_gradf_(pre[k][hk + o]);
    }
    __syncthreads();
    rows_dot_warp(dk, 2 * hk, W, yb2, zb, [](int) { return 0.0f; });
    __syncthreads();
  }
  // zb = desc_bar; with the grid read-out it is handed to grid_net.cu's backward.
  if (desc_bar) {
    for (int c = tid; c < C; c += nt) desc_bar[(size_t)n * C + c] = zb[c];
    return;
  }
  // Read-out backward (ar takes a_bar).
  rows_dot_warp(H, C, w.ro_w2, zb, ar, [](int) { return 0.0f; });
  __syncthreads();
  for (int i = tid; i < H; i += nt) {
    yb2[i] = ar[i] * siluf_(zr[H + i]);
    yb2[H + i] = ar[i] * zr[i] * silu_gradf_(zr[H + i]);
  }
  __syncthreads();
  rows_dot_warp(C, 2 * H, w.ro_w1, yb2, X_bar + (size_t)n * d.D * C, [&](int c) { return zb[c]; });
}

}  // namespace

void launch_eq_norm_forward(int N, int L, int C, const float* X, const float* scale, const float* bias, float eps,
                            float* Y, float* rho, const float* residual, cudaStream_t s) {
  if (N == 0) return;
  eq_norm_forward_k<<<div_up(N, kNormWarps), 32 * kNormWarps, 0, s>>>(N, L, C, X, scale, bias, eps, Y, rho, residual);
  SEZM_LAUNCH("eq_norm_forward");
}
void launch_eq_norm_backward(int N, int L, int C, const float* X, const float* scale, const float* rho,
                             const float* Y_bar, float* X_bar, cudaStream_t s) {
  if (N == 0) return;
  eq_norm_backward_k<<<div_up(N, kNormWarps), 32 * kNormWarps, 0, s>>>(N, L, C, X, scale, rho, Y_bar, X_bar);
  SEZM_LAUNCH("eq_norm_backward");
}
void launch_eq_norm_pair_forward(const EqNormPairArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  eq_norm_pair_forward_k<<<div_up(a.N, kNormWarps), 32 * kNormWarps, 0, s>>>(a);
  SEZM_LAUNCH("eq_norm_pair_forward");
}
void launch_eq_norm_pair_backward(const EqNormPairBackwardArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  eq_norm_pair_backward_k<<<div_up(a.N, kNormWarps), 32 * kNormWarps, 0, s>>>(a);
  SEZM_LAUNCH("eq_norm_pair_backward");
}
// The FFN activation kernels' instantiations: fn(kD, NCH) as integral constants, D in {1, 4, 9, 16}
// (the S2 grid exists for L <= 3, lebedev.cpp); NCH = 2 adjacent channels per lane where pairs is
// asked for and H is even, else 1.
template <class Fn>
void act_dispatch(const Dims& d, bool pairs, Fn&& fn) {
  auto on_d = [&](auto nch) {
    switch (d.D) {
      case 1: fn(std::integral_constant<int, 1>{}, nch); break;
      case 4: fn(std::integral_constant<int, 4>{}, nch); break;
      case 9: fn(std::integral_constant<int, 9>{}, nch); break;
      case 16: fn(std::integral_constant<int, 16>{}, nch); break;
      default: throw Error("device cuda: the FFN's S2 grid needs lmax <= 3");
    }
  };
  if (pairs && d.H % 2 == 0) on_d(std::integral_constant<int, 2>{});
  else on_d(std::integral_constant<int, 1>{});
}
inline int act_grid(int N, int pairs) { return div_up((long)N * pairs * kSlices, kActThreads); }

void launch_ffn_forward(const Dims& d, const ModelWDev& mw, const BlockWDev& w, int N, const float* Xt, float* hbuf,
                        float* ybuf, float* out, float* grid_scratch, cudaStream_t s, const float* residual) {
  if (N == 0) return;
  if (w.ffn_so3) {  // docs/model.md §5.12
    const int KH = d.KF * d.H;
    launch_per_degree_linear(N, d.L, d.C, 2 * KH, Xt, w.ffn_w1, hbuf, false, false, s);
    launch_grid_self_forward(d, mw.so3, w.ffn_grid, N, hbuf, ybuf, grid_scratch, s);
    launch_per_degree_linear(N, d.L, KH, d.C, ybuf, w.ffn_w2, out, false, false, s, residual);
    return;
  }
  launch_per_degree_linear(N, d.L, d.C, 2 * d.H, Xt, w.ffn_w1, hbuf, false, false, s);
  if (mw.G > kMaxGrid) throw Error("device cuda: the FFN's S2 grid has more than 40 points");
  act_dispatch(d, true, [&](auto kd, auto nch) {
    constexpr int kD = decltype(kd)::value, NCH = decltype(nch)::value;
    ffn_act_forward_k<kD, NCH><<<act_grid(N, d.H / NCH), kActThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybuf);
  });
  SEZM_LAUNCH("ffn_act_forward");
  launch_per_degree_linear(N, d.L, d.H, d.C, ybuf, w.ffn_w2, out, false, false, s, residual);
}
void launch_ffn_backward(const Dims& d, const ModelWDev& mw, const BlockWDev& w, int N, const float* hbuf,
                         const float* out_bar, float* ybar_buf, float* hbar_buf, float* Xt_bar, float* grid_scratch,
                         cudaStream_t s, const EqNormPairBackwardArgs* norms) {
  if (N == 0) return;
  if (w.ffn_so3) {  // docs/model.md §7.12
    const int KH = d.KF * d.H;
    launch_per_degree_linear(N, d.L, d.C, KH, out_bar, w.ffn_w2, ybar_buf, true, false, s);
    launch_grid_self_backward(d, mw.so3, w.ffn_grid, N, hbuf, ybar_buf, hbar_buf, grid_scratch, s);
    launch_per_degree_linear(N, d.L, 2 * KH, d.C, hbar_buf, w.ffn_w1, Xt_bar, true, false, s, nullptr, norms);
    return;
  }
  launch_per_degree_linear(N, d.L, d.C, d.H, out_bar, w.ffn_w2, ybar_buf, true, false, s);
  // t_bar (N, H) lives in Xt_bar until the final linear overwrites it (D*C >= H holds for every
  // supported model; the engine checks it at construction).
  float* tbar = Xt_bar;
  act_dispatch(d, false, [&](auto kd, auto) {
    constexpr int kD = decltype(kd)::value;
    ffn_act_backward_k<kD><<<act_grid(N, d.H), kActThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybar_buf, hbar_buf, tbar);
  });
  SEZM_LAUNCH("ffn_act_backward");
  ffn_gate_input_backward_k<<<div_up((long)N * 2 * d.H * 32, 128), 128, 0, s>>>(d, w.ffn_sg, N, tbar, hbar_buf);
  SEZM_LAUNCH("ffn_gate_input_backward");
  launch_per_degree_linear(N, d.L, 2 * d.H, d.C, hbar_buf, w.ffn_w1, Xt_bar, true, false, s, nullptr, norms);
}
void launch_readout_fitting_forward(const Dims& d, const ModelWDev& w, const FittingDev& fit, int N, const float* X,
                                    const int* types, double* atom_energy, const float* desc_in, cudaStream_t s) {
  if (N == 0) return;
  readout_fitting_forward_k<<<N, kNodeThreads, 0, s>>>(d, w, X, types, fit.w, fit.b, fit.dims, fit.n, fit.out,
                                                      fit.atom_bias, atom_energy, desc_in);
  SEZM_LAUNCH("readout_fitting_forward");
}
void launch_readout_fitting_backward(const Dims& d, const ModelWDev& w, const FittingDev& fit, int N, const float* X,
                                     float* X_bar, const float* desc_in, float* desc_bar, cudaStream_t s) {
  if (N == 0) return;
  readout_fitting_backward_k<<<N, kNodeThreads, 0, s>>>(d, w, X, fit.w, fit.b, fit.dims, fit.n, fit.out, X_bar,
                                                       desc_in, desc_bar);
  SEZM_LAUNCH("readout_fitting_backward");
}

}  // namespace sezm::cuda
