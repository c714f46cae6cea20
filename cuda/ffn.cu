// A block's FFN on the device, forward and backward (CPU twin: engine/ffn.h): on the S2 grid
// (docs/model.md §5.9, §7.7) Y = W2 act(W1 Xt) + residual, act the grid activation below, the
// per-degree linears in node_linear.cu; on the SO(3) grid (§5.12, §7.12) through grid_net.cu. The
// activation: a CTA per tile of 64 (node, channel) columns, four thread groups over the grid
// points and then the degrees (below), the grid matrices staged per CTA; it also runs on one
// chunk's few hundred destinations at a time (the fused last block). Split from node_steps.cu.
#include <type_traits>

#include "grid_net.cuh"
#include "node_steps.cuh"

namespace sezm::cuda {
namespace {

// FFN grid activation per (node, hidden channel): y = kappa * P((T a)(T b)) + [l=0] silu(a0) b0,
// a = T h_a, b = T h_b over the grid points g, kappa = sigmoid(u), u = [a0, b0] . W_sg[:, c].
constexpr int kMaxGrid = 40;  // Lebedev 9: 38 points

// T (G, D) into shared memory as TS, transposed: sT[p G + g] = T[g, p] (a warp's lanes, one g,
// read one word: a broadcast).
template <class TS, int kD>
__device__ __forceinline__ void stage_T(const float* gridT, int G, TS* sT) {
  for (int i = threadIdx.x; i < G * kD; i += blockDim.x) sT[(i % kD) * G + i / kD] = gridT[i];
}
// T as stage_T and P (D, G) as it is.
template <class TS, int kD>
__device__ __forceinline__ void stage_grid(const ModelWDev& mw, TS* sT, TS* sP) {
  stage_T<TS, kD>(mw.gridT, mw.G, sT);
  for (int i = threadIdx.x; i < mw.G * kD; i += blockDim.x) sP[i] = mw.gridP[i];
  __syncthreads();
}

// ---- the activation on column tiles ----
// A CTA takes 64 (node, channel) columns (flattened n H + c, so a tile may span nodes) and four
// groups of threads; group q takes the grid points g = q + 4 k of its column. Per column, the grid
// values a_g, b_g (sums over p ascending from zero) stay in the thread's registers, and what the
// products back to the degrees need of them (a b in the forward; kappa wy b, kappa wy a in the
// backward) goes to shared memory, where group q then takes the degrees p = 4 q .. 4 q + 3, each a
// sum over g ascending, one load of the column's value per g for the four (the grid matrix's four
// entries: 16-byte loads, rows padded). The gate input u (over the 2 H scalar inputs) is split
// over the groups, added in group order. Why: the kernels before `d2d26dc` split a column over
// eight lanes and added their partials by an xor butterfly for every degree (16 of them, doubles
// in the forward: ~190 shuffles per lane), at 25 % occupancy: 268 us per 4,096-node forward on an
// H200 (ncu), ~5x its FP64 floor. Measured (H200, 4,096 atoms, kernel times per call, fast):
// forward 546 -> 462 us, backward 684 -> 498 (with ffn_gate_input_backward_t_k: ~340 -> 83); the
// call, interleaved medians: fast 41.6-41.9 -> 41.2-41.6 ms, lean 48.4-49.2 -> 48.1-48.4
// (docs/performance.md, 2026-12-04 sixth session).
constexpr int kTileCols = 64, kTileGroups = 4, kTileThreads = kTileCols * kTileGroups;
constexpr int kTileGPer = kMaxGrid / kTileGroups;  // grid points per thread

// Column j of the CTA's tile: node n, channel c; a column past N H shadows the last one and
// writes nothing (every thread reaches the barriers).
struct TileCol {
  int n, c;
  bool live;
  __device__ TileCol(int N, int H, int j) {
    const long x = (long)blockIdx.x * kTileCols + j, last = (long)N * H - 1;
    live = x <= last;
    const long y = live ? x : last;
    n = static_cast<int>(y / H);
    c = static_cast<int>(y % H);
  }
};

// Rows of kD degrees padded to a multiple of 4 (16-byte aligned groups of 4 degrees).
template <int kD>
constexpr int kDq = (kD + 3) / 4 * 4;
// A grid matrix M as g-major rows padded to kDq, rows[g kDq + p] = M[p, g] (zeros past D), so
// that group q's four degrees of grid point g are 16-byte loads; M given as (D, G) (kDG: P) or as
// (G, D) (T).
template <class TS, int kD, bool kDG>
__device__ __forceinline__ void stage_padded_rows(const float* m, int G, TS* rows) {
  for (int i = threadIdx.x; i < G * kDq<kD>; i += blockDim.x) {
    const int g = i / kDq<kD>, p = i % kDq<kD>;
    rows[i] = p < kD ? TS(kDG ? m[p * G + g] : m[g * kD + p]) : TS(0);
  }
}

// T as stage_T and P as padded rows.
template <class TS, int kD>
__device__ __forceinline__ void stage_tile_grid(const float* gridT, const float* gridP, int G, TS* sT, TS* sPg) {
  stage_T<TS, kD>(gridT, G, sT);
  stage_padded_rows<TS, kD, true>(gridP, G, sPg);
  __syncthreads();
}

template <int kD>
__global__ void __launch_bounds__(kTileThreads) ffn_act_forward_tiled_k(Dims d, ModelWDev mw,
                                                                        const float* __restrict__ sg, int N,
                                                                        const float* __restrict__ h, float* y) {
  __shared__ double sT[kMaxGrid * kD];
  __shared__ __align__(16) double sPg[kMaxGrid * kDq<kD>];
  __shared__ double sAB[kMaxGrid][kTileCols], sU[kTileGroups][kTileCols];
  stage_tile_grid<double, kD>(mw.gridT, mw.gridP, mw.G, sT, sPg);
  const int H = d.H, G = mw.G, j = threadIdx.x % kTileCols, q = threadIdx.x / kTileCols;
  const TileCol col(N, H, j);
  const int c = col.c;
  const float* hn = h + (size_t)col.n * kD * 2 * H;
  double a[kTileGPer], b[kTileGPer];
#pragma unroll
  for (int k = 0; k < kTileGPer; ++k) a[k] = b[k] = 0.0;
#pragma unroll
  for (int p = 0; p < kD; ++p) {
    const double ha = hn[p * 2 * H + c], hb = hn[p * 2 * H + H + c];
#pragma unroll
    for (int k = 0; k < kTileGPer; ++k) {
      const int g = q + kTileGroups * k;
      if (g >= G) continue;
      const double tv = sT[p * G + g];
      a[k] += tv * ha;
      b[k] += tv * hb;
    }
  }
#pragma unroll
  for (int k = 0; k < kTileGPer; ++k) {
    const int g = q + kTileGroups * k;
    if (g < G) sAB[g][j] = a[k] * b[k];
  }
  double u = 0.0;
  for (int i = q; i < H; i += kTileGroups)
    u += (double)hn[i] * sg[i * H + c] + (double)hn[H + i] * sg[(H + i) * H + c];
  sU[q][j] = u;
  __syncthreads();
  const double kap = 1.0 / (1.0 + exp(-(((sU[0][j] + sU[1][j]) + sU[2][j]) + sU[3][j])));
  if (4 * q >= kD) return;  // (warp-uniform; no barrier follows)
  double v[4] = {0.0, 0.0, 0.0, 0.0};  // degrees p = 4 q + t
  for (int g = 0; g < G; ++g) {
    const double ab = sAB[g][j];
    const double2 x0 = *reinterpret_cast<const double2*>(sPg + g * kDq<kD> + 4 * q),
                  x1 = *reinterpret_cast<const double2*>(sPg + g * kDq<kD> + 4 * q + 2);
    v[0] += x0.x * ab;
    v[1] += x0.y * ab;
    v[2] += x1.x * ab;
    v[3] += x1.y * ab;
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int p = 4 * q + t;
    if (col.live && p < kD)
      y[((size_t)col.n * kD + p) * H + c] = (float)(kap * v[t] + (p == 0 ? siluf_(hn[c]) * hn[H + c] : 0.0f));
  }
}

template <int kD>
__global__ void __launch_bounds__(kTileThreads) ffn_act_backward_tiled_k(Dims d, ModelWDev mw,
                                                                         const float* __restrict__ sg, int N,
                                                                         const float* __restrict__ h,
                                                                         const float* __restrict__ ybar, float* hbar,
                                                                         float* tbar) {
  __shared__ float sT[kMaxGrid * kD], sP[kD * kMaxGrid];
  __shared__ __align__(16) float sTg[kMaxGrid * kDq<kD>];
  __shared__ float sUa[kMaxGrid][kTileCols], sUb[kMaxGrid][kTileCols], sR[2][kTileGroups][kTileCols];
  stage_padded_rows<float, kD, false>(mw.gridT, mw.G, sTg);
  stage_grid<float, kD>(mw, sT, sP);
  const int H = d.H, G = mw.G, j = threadIdx.x % kTileCols, q = threadIdx.x / kTileCols;
  const TileCol col(N, H, j);
  const int c = col.c;
  const float* hn = h + (size_t)col.n * kD * 2 * H;
  const float* yb = ybar + (size_t)col.n * kD * H;
  float ah[kTileGPer], bh[kTileGPer], wy[kTileGPer];  // wy_g = sum_p P[p, g] ybar_p
#pragma unroll
  for (int k = 0; k < kTileGPer; ++k) ah[k] = bh[k] = wy[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < kD; ++p) {
    const float ha = hn[p * 2 * H + c], hb = hn[p * 2 * H + H + c], yv = yb[p * H + c];
#pragma unroll
    for (int k = 0; k < kTileGPer; ++k) {
      const int g = q + kTileGroups * k;
      if (g >= G) continue;
      ah[k] += sT[p * G + g] * ha;
      bh[k] += sT[p * G + g] * hb;
      wy[k] += sP[p * G + g] * yv;
    }
  }
  float t = 0.0f, kb = 0.0f;  // the gate input; kbar = sum_g a_g b_g wy_g
  for (int i = q; i < H; i += kTileGroups) t += hn[i] * sg[i * H + c] + hn[H + i] * sg[(H + i) * H + c];
#pragma unroll
  for (int k = 0; k < kTileGPer; ++k)
    if (q + kTileGroups * k < G) kb += ah[k] * bh[k] * wy[k];
  sR[0][q][j] = t;
  sR[1][q][j] = kb;
  __syncthreads();
  const float kap = sigmoidf_(((sR[0][0][j] + sR[0][1][j]) + sR[0][2][j]) + sR[0][3][j]);
  if (q == 0 && col.live)
    tbar[(size_t)col.n * H + c] = (((sR[1][0][j] + sR[1][1][j]) + sR[1][2][j]) + sR[1][3][j]) * kap * (1.0f - kap);
#pragma unroll
  for (int k = 0; k < kTileGPer; ++k) {
    const int g = q + kTileGroups * k;
    if (g >= G) continue;
    const float w = kap * wy[k];  // P_bar_g = kappa wy_g
    sUa[g][j] = w * bh[k];
    sUb[g][j] = w * ah[k];
  }
  __syncthreads();
  if (4 * q >= kD) return;  // (warp-uniform; no barrier follows)
  float va[4] = {0.0f, 0.0f, 0.0f, 0.0f}, vb[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // degrees p = 4 q + t
  for (int g = 0; g < G; ++g) {
    const float ua = sUa[g][j], ub = sUb[g][j];
    const float4 tv = *reinterpret_cast<const float4*>(sTg + g * kDq<kD> + 4 * q);
    va[0] += tv.x * ua; vb[0] += tv.x * ub;
    va[1] += tv.y * ua; vb[1] += tv.y * ub;
    va[2] += tv.z * ua; vb[2] += tv.z * ub;
    va[3] += tv.w * ua; vb[3] += tv.w * ub;
  }
  if (q == 0) {
    const float ha0 = hn[c], hb0 = hn[H + c], yv0 = yb[c];
    va[0] += yv0 * hb0 * silu_gradf_(ha0);
    vb[0] += yv0 * siluf_(ha0);
  }
  float* hbn = hbar + (size_t)col.n * kD * 2 * H;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int p = 4 * q + t;
    if (col.live && p < kD) {
      hbn[p * 2 * H + c] = va[t];
      hbn[p * 2 * H + H + c] = vb[t];
    }
  }
}

// h_bar[n, 0, i] += sum_c t_bar[n, c] W_sg[i, c] (the scalar-gate input [a0, b0]): a thread per
// (n, i) over c ascending, from W_sg transposed (sgT (H, 2H)): a warp's 32 consecutive i read one
// 128-byte piece of a row of sgT per c, and t_bar[n, c] is one word for the warp (two where a warp
// spans two nodes). A warp per (n, i) (before `d2d26dc`) took 39 us per 819-node launch (H200,
// ncu): a butterfly for three products per lane.
__global__ void ffn_gate_input_backward_t_k(Dims d, const float* __restrict__ sgT, int N, const float* __restrict__ tbar,
                                            float* hbar) {
  const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int H = d.H;
  if (t >= (long)N * 2 * H) return;
  const int i = static_cast<int>(t % (2 * H)), n = static_cast<int>(t / (2 * H));
  const float* tb = tbar + (size_t)n * H;
  float s = 0.0f;
  for (int c = 0; c < H; ++c) s += tb[c] * sgT[(size_t)c * 2 * H + i];
  hbar[(size_t)n * d.D * 2 * H + i] += s;
}

// The FFN activation kernels' instantiations: fn(kD) as an integral constant, D in {1, 4, 9, 16}
// (the S2 grid exists for L <= 3, lebedev.cpp).
template <class Fn>
void act_dispatch(const Dims& d, Fn&& fn) {
  switch (d.D) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 9: fn(std::integral_constant<int, 9>{}); break;
    case 16: fn(std::integral_constant<int, 16>{}); break;
    default: throw Error("device cuda: the FFN's S2 grid needs lmax <= 3");
  }
}
inline int tile_grid(int N, int H) { return div_up((long)N * H, kTileCols); }

}  // namespace

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
  act_dispatch(d, [&](auto kd) {
    constexpr int kD = decltype(kd)::value;
    ffn_act_forward_tiled_k<kD><<<tile_grid(N, d.H), kTileThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybuf);
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
  act_dispatch(d, [&](auto kd) {
    constexpr int kD = decltype(kd)::value;
    ffn_act_backward_tiled_k<kD>
        <<<tile_grid(N, d.H), kTileThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybar_buf, hbar_buf, tbar);
  });
  SEZM_LAUNCH("ffn_act_backward");
  ffn_gate_input_backward_t_k<<<div_up((long)N * 2 * d.H, 128), 128, 0, s>>>(d, w.ffn_sgT, N, tbar, hbar_buf);
  SEZM_LAUNCH("ffn_gate_input_backward");
  launch_per_degree_linear(N, d.L, 2 * d.H, d.C, hbar_buf, w.ffn_w1, Xt_bar, true, false, s, nullptr, norms);
}

}  // namespace sezm::cuda
