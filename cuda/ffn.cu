// A block's FFN on the device, forward and backward (CPU twin: engine/ffn.h): on the S2 grid
// (docs/model.md §5.9, §7.7) Y = W2 act(W1 Xt) + residual, act the grid activation below, the
// per-degree linears in node_linear.cu; on the SO(3) grid (§5.12, §7.12) through grid_net.cu. The
// activation: eight lanes per (node, channel), two adjacent channels per lane in the forward, the
// grid matrices staged per CTA; it also runs on one chunk's few hundred destinations at a time (the
// fused last block). Split from node_steps.cu.
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

}  // namespace sezm::cuda
