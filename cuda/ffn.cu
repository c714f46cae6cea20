// A block's FFN on the device, forward and backward (CPU twin: engine/ffn.h): on the S2 grid
// (docs/model.md §5.9, §7.7) Y = W2 act(W1 Xt) + residual, act the grid activation below, the
// per-degree linears in node_linear.cu; on the SO(3) grid (§5.12, §7.12) through grid_net.cu. The
// activation: a CTA per tile of 64 (node, channel) columns, four thread groups over the grid
// points and then the degrees (below, "column tiles"); the older kernels, eight lanes per (node,
// channel), with SEZM_CUDA_FFN_LEGACY=1; the grid matrices staged per CTA. It also runs on one
// chunk's few hundred destinations at a time (the fused last block). Split from node_steps.cu.
#include <type_traits>

#include "grid_net.cuh"
#include "node_steps.cuh"

namespace sezm::cuda {
namespace {

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

// T (G, D) and P (D, G) into shared memory as TS, T transposed: sT[p G + g] = T[g, p]. The
// kSlices lanes of a (node, channel) read the grid points g = s + kSlices k of one p, which are
// then adjacent words; in T's own layout they sat kD apart (kD = 16: 64 or 128 bytes), in one
// bank, a 4- (float) or 8-way (double) conflict on every load of the grid products.
template <class TS, int kD>
__device__ __forceinline__ void stage_grid(const ModelWDev& mw, TS* sT, TS* sP) {
  for (int i = threadIdx.x; i < mw.G * kD; i += blockDim.x) {
    sT[(i % kD) * mw.G + i / kD] = mw.gridT[i];
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
      const double tv = sT[p * G + g];
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
      ah[k] += sT[p * G + g] * ha;
      bh[k] += sT[p * G + g] * hb;
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
      const float tp = sT[p * G + g] * kap * wy[k];
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

// ---- the activation on column tiles (the default; SEZM_CUDA_FFN_LEGACY=1: the kernels above) ----
// A CTA takes 64 (node, channel) columns (flattened n H + c, so a tile may span nodes) and four
// groups of threads; group q takes the grid points g = q + 4 k of its column. Per column, the grid
// values a_g, b_g (the same sums as above: p ascending from zero, the same bits) stay in the
// thread's registers, and what the products back to the degrees need of them (a b in the forward;
// kappa wy b, kappa wy a in the backward) goes to shared memory, where group q then takes the
// degrees p = 4 q .. 4 q + 3, each a sum over g ascending, one load of the column's value per g
// for the four (the grid matrix's four entries: 16-byte loads, rows padded). The gate input u (over the 2 H scalar inputs)
// is split over the groups, added in group order. Why: the kernels above split a column over
// eight lanes and added their partials by an xor butterfly for every degree (16 of them, doubles
// in the forward: ~190 shuffles per lane), at 25 % occupancy: 268 us per 4,096-node forward on an
// H200 (ncu), ~5x its FP64 floor. The sums over g and the gate input's run in another order than
// there: last bits may differ. Measured (H200, 4,096 atoms, kernel times per call, fast): forward
// 546 -> 462 us, backward 684 -> 498 (with ffn_gate_input_backward_t_k: ~340 -> 83); the call,
// interleaved medians: fast 41.6-41.9 -> 41.2-41.6 ms, lean 48.4-49.2 -> 48.1-48.4
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
// T (G, D) transposed as stage_grid does, sT[p G + g] = T[g, p], and P (D, G) transposed with rows
// padded, sPg[g kDq + p] = P[p, g] (zeros past D): group q's four degrees of grid point g are two
// 16-byte loads.
template <class TS, int kD>
__device__ __forceinline__ void stage_tile_grid(const float* gridT, const float* gridP, int G, TS* sT, TS* sPg) {
  for (int i = threadIdx.x; i < G * kD; i += blockDim.x) sT[(i % kD) * G + i / kD] = gridT[i];
  for (int i = threadIdx.x; i < G * kDq<kD>; i += blockDim.x) {
    const int g = i / kDq<kD>, p = i % kDq<kD>;
    sPg[i] = p < kD ? gridP[p * G + g] : TS(0);
  }
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
  for (int i = threadIdx.x; i < mw.G * kDq<kD>; i += blockDim.x) {  // T (G, D), rows padded to kDq
    const int g = i / kDq<kD>, p = i % kDq<kD>;
    sTg[i] = p < kD ? mw.gridT[g * kD + p] : 0.0f;
  }
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

// The same sum as ffn_gate_input_backward_k's, a thread per (n, i) over c ascending (another order:
// last bits may differ; the default, SEZM_CUDA_FFN_LEGACY=1 the kernel above), from W_sg transposed
// (sgT (H, 2H)): a warp's 32 consecutive i read one 128-byte piece of a row of sgT per c, and
// t_bar[n, c] is one word for the warp (two where a warp spans two nodes). The warp per (n, i) of
// the kernel above took 39 us per 819-node launch (H200, ncu): ~32 lanes of shuffles for three
// products each.
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
// CTAs for N nodes of `groups` channel groups each (H / NCH), kSlices lanes per group (ActLane).
inline int act_grid(int N, int groups) { return div_up((long)N * groups * kSlices, kActThreads); }
inline int tile_grid(int N, int H) { return div_up((long)N * H, kTileCols); }
inline bool ffn_act_legacy() {
  static const bool on = env_on("SEZM_CUDA_FFN_LEGACY");
  return on;
}

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
  act_dispatch(d, true, [&](auto kd, auto nch) {
    constexpr int kD = decltype(kd)::value, NCH = decltype(nch)::value;
    if (ffn_act_legacy())
      ffn_act_forward_k<kD, NCH><<<act_grid(N, d.H / NCH), kActThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybuf);
    else
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
  act_dispatch(d, false, [&](auto kd, auto) {
    constexpr int kD = decltype(kd)::value;
    if (ffn_act_legacy())
      ffn_act_backward_k<kD><<<act_grid(N, d.H), kActThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybar_buf, hbar_buf, tbar);
    else
      ffn_act_backward_tiled_k<kD>
          <<<tile_grid(N, d.H), kTileThreads, 0, s>>>(d, mw, w.ffn_sg, N, hbuf, ybar_buf, hbar_buf, tbar);
  });
  SEZM_LAUNCH("ffn_act_backward");
  if (ffn_act_legacy())
    ffn_gate_input_backward_k<<<div_up((long)N * 2 * d.H * 32, 128), 128, 0, s>>>(d, w.ffn_sg, N, tbar, hbar_buf);
  else
    ffn_gate_input_backward_t_k<<<div_up((long)N * 2 * d.H, 128), 128, 0, s>>>(d, w.ffn_sgT, N, tbar, hbar_buf);
  SEZM_LAUNCH("ffn_gate_input_backward");
  launch_per_degree_linear(N, d.L, 2 * d.H, d.C, hbar_buf, w.ffn_w1, Xt_bar, true, false, s, nullptr, norms);
}

}  // namespace sezm::cuda
