// Node-level steps on the device (O(N) work): equivariant RMS norms, read-out and fitting,
// forward and backward (CPU twins: engine/norms.h, readout.h, fitting.h). The per-degree linears,
// and the steps that ride on them (output gate, the block's norms, the FFN residual), are in
// node_linear.cu; the FFN in ffn.cu; the norms' per-node warp code in node_norms.cuh. Norms: a
// warp per node; read-out: a CTA per node (they also run on one chunk's few hundred destinations
// at a time).
#include "node_steps.cuh"

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
// w2s: shared memory for W2 (H C floats; readout_w2_bytes), or null to read it from global memory.
// Its C-wide outputs are H-long serial sums run by C threads: with W2 in global memory each step
// waited on a load while the CTA's other warps stood at the barrier (ncu, a chunk's 362 centres:
// 55 % barrier stalls). The CTA stages it while the first layer runs; the same sums, the same bits.
template <class T>
__device__ void readout_cta(const Dims& d, const ModelWDev& w, const float* y, T* zr, T* ar, T* desc,
                            float* w2s = nullptr) {
  const int tid = threadIdx.x, nt = blockDim.x, C = d.C, H = d.H;
  const float* w2 = w2s ? w2s : w.ro_w2;
  if (w2s)
    for (int i = tid; i < H * C; i += nt) w2s[i] = w.ro_w2[i];
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
    for (int i = 0; i < H; ++i) s += ar[i] * w2[i * C + c];
    desc[c] = s;
  }
  __syncthreads();
}
// The read-out kernels' dynamic shared memory: W2 where it fits beside their static arrays (C.pt:
// 12 KiB), else none (W2 read from global memory).
inline size_t readout_w2_bytes(const Dims& d) {
  const size_t b = (size_t)d.H * d.C * sizeof(float);
  return b <= 24 * 1024 ? b : 0;
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
    const double* __restrict__ atom_bias, double* atom_energy, const float* __restrict__ desc_in, bool w2_staged) {
  __shared__ double z[kMaxW], a[kMaxW], red[kNodeThreads / 32];
  const int n = blockIdx.x, tid = threadIdx.x;
  if (desc_in) {  // so3_readout mlp: the descriptor comes from the grid read-out (grid_net.cu)
    for (int c = tid; c < d.C; c += blockDim.x) z[c] = desc_in[(size_t)n * d.C + c];
    __syncthreads();
  } else {
    extern __shared__ float ro_w2s[];  // readout_w2_bytes
    readout_cta<double>(d, w, X + (size_t)n * d.D * d.C, z, a, z, w2_staged ? ro_w2s : nullptr);
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
    const float* __restrict__ desc_in, float* desc_bar, bool w2_staged) {
  __shared__ float zr[kMaxW], ar[kMaxW], z[kMaxW], pre[4][kMaxW], zb[kMaxW], yb2[kMaxW];
  extern __shared__ float ro_w2s[];  // readout_w2_bytes
  float* const w2s = w2_staged && !desc_in ? ro_w2s : nullptr;
  const int n = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, C = d.C, H = d.H;
  if (desc_in) {
    for (int c = tid; c < C; c += nt) z[c] = desc_in[(size_t)n * C + c];
    __syncthreads();
  } else {
    readout_cta<float>(d, w, X + (size_t)n * d.D * C, zr, ar, z, w2s);
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
  rows_dot_warp(H, C, w2s ? w2s : w.ro_w2, zb, ar, [](int) { return 0.0f; });
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
void launch_readout_fitting_forward(const Dims& d, const ModelWDev& w, const FittingDev& fit, int N, const float* X,
                                    const int* types, double* atom_energy, const float* desc_in, cudaStream_t s) {
  if (N == 0) return;
  const size_t w2b = desc_in ? 0 : readout_w2_bytes(d);
  readout_fitting_forward_k<<<N, kNodeThreads, w2b, s>>>(d, w, X, types, fit.w, fit.b, fit.dims, fit.n, fit.out,
                                                        fit.atom_bias, atom_energy, desc_in, w2b > 0);
  SEZM_LAUNCH("readout_fitting_forward");
}
void launch_readout_fitting_backward(const Dims& d, const ModelWDev& w, const FittingDev& fit, int N, const float* X,
                                     float* X_bar, const float* desc_in, float* desc_bar, cudaStream_t s) {
  if (N == 0) return;
  const size_t w2b = desc_in ? 0 : readout_w2_bytes(d);
  readout_fitting_backward_k<<<N, kNodeThreads, w2b, s>>>(d, w, X, fit.w, fit.b, fit.dims, fit.n, fit.out, X_bar,
                                                         desc_in, desc_bar, w2b > 0);
  SEZM_LAUNCH("readout_fitting_backward");
}

}  // namespace sezm::cuda
