// The per-degree linear of the node steps ("SO3Linear", docs/model.md; CPU twins: the per-degree
// products of engine/interaction_block.h and ffn.h):
//   Y[n, p, o] (+)= sum_i X[n, p, i] W[l(p)][i][o]   (transpose: W[l(p)][o][i]),
// products of fp32 values accumulated in double over i = 0, 1, ... in that order (the node-level
// sums stay double), so every output has the bits of the one-thread-per-output kernel it replaced.
//
// Why tiled: the old kernel (16 x 16 outputs per CTA, one per thread) converted both operands of
// every product to double (the conversion unit, 16 per clock per SM, was its limit) and launched
// ~9k CTAs of tiny work per call; per chunk of ~200 destinations it was launch- and latency-bound
// (130 launches, 2.6 ms per 4,096-atom call). Here a CTA takes TN nodes x every row p x 32
// output columns; each thread a 4 nodes x 4 columns register tile of one row p, so 4 shared
// loads of double pairs feed 16 DFMA. The k tile (16 inputs) is converted to double once, when it
// is written to shared memory, and the next k tile's global loads are in flight (in registers)
// while the current one is multiplied.
#include <algorithm>
#include <cstdint>

#include "attention.cuh"
#include "gate_warp.cuh"
#include "node_norms.cuh"
#include "node_steps.cuh"

namespace sezm::cuda {
namespace {

constexpr int kTC = 32;        // output columns per CTA
constexpr int kCG = kTC / 4;   // column quads per CTA
constexpr int kKT = 16;        // inputs per k tile
constexpr int kTCp = kTC + 2;  // padded W tile row (doubles): conflict-light transposed stores, 16-byte pairs
constexpr int kX4 = 2;         // X tile quads per thread: at most TN D kKT / 4 / (D NG kCG) = 16 NG D / (8 NG D)
constexpr int kW4 = 4;         // at most this many W tile quads per thread (checked by the launcher)
// Column o of a W tile row sits at wpos(o): the pairs (o, o + 1) of the column quads' first halves
// side by side, then their second halves (16 doubles on), so the eight column quads of a quarter
// warp read 128 contiguous bytes per 16-byte load. (At 4 o the quads' loads fell 32 bytes apart,
// quads c and c + 4 in one bank: every W load a two-way conflict, ncu 2026-12-03.)
__device__ __forceinline__ constexpr int wpos(int o) { return (o & 2) * 8 + (o >> 2) * 2 + (o & 1); }

struct LinArgs {
  int N, L, D, Cin, Cout, NG;  // NG node groups per CTA: TN = kNT NG nodes
  const float* X;
  const float* W;
  float* Y;
  const float* R;  // residual added in fp32 after the rounding (launch_add's bits), or null
  int transpose, accumulate;
  // The output gate folded into the input (launch_gated_post_linear): X[n, p, k] gamma[n, k / Cf]
  // (gamma (N, F), the fp32 product gate_post_k forms), or null.
  const float* gamma;
  int F, Cf;
  // A per-node step right behind the linear, on the CTA's outputs (tail; 0 none): 1 the block's
  // two norms (Y = nf.O) and 2 their backward (Y = nb.t), where the CTA holds all its nodes'
  // columns (Cout <= kTC); 3 the output gate's backward (A_bar = Y), where its column tile holds
  // whole foci.
  int norms;
  EqNormPairArgs nf;
  EqNormPairBackwardArgs nb;
  Dims gd;
  OutputGateArgs ga;
};

// blockDim.x = D NG kCG: thread (p, ng, cg) owns the kNT nodes kNT ng .. kNT ng + kNT - 1 and the
// columns 4 cg .. 4 cg + 3 of row p. kNT = 1 (a node per thread) where the grid of kNT = 4 would
// leave most SMs idle (a chunk's ~200 destinations, Cout <= 32: 52 CTAs of 4 warps on 132 SMs):
// four times the CTAs, each thread a quarter of the products per k step; every output's sum is
// the same either way (the same bits). Shared memory (doubles): xs (D, kKT, TNp), TNp = TN + 2
// (16-byte pairs, fewer bank conflicts on the transposing stores), then ws (L + 1, kKT, kTCp). Global loads are 16-byte
// quads (the launcher checks Cin, Cout % 4 and the bases' alignment). One k step at a time (no
// unrolling): 128 registers hold the accumulators and the next tile without spilling.
template <bool kTrans, bool kGate, int kNorms, int kNT>
__global__ void __launch_bounds__(512) per_degree_linear_tiled_k(LinArgs a) {
  extern __shared__ __align__(16) double lsm[];
  const int D = a.D, TN = kNT * a.NG, TNp = TN + 2, Cin = a.Cin, Cout = a.Cout;
  double* xs = lsm;
  double* ws = lsm + (size_t)D * kKT * TNp;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int cg = tid % kCG, ng = (tid / kCG) % a.NG, p = tid / (kCG * a.NG), l = degree_of_packed(p);
  const int n0 = blockIdx.x * TN, o0 = blockIdx.y * kTC;
  // X quads: t = tid + j nt < 4 TN D (2 nt with kNT = 4, nt / 2 with kNT = 1); quad q of row
  // (node i, p') of the tile, the nodes before the rows: a warp's four stores of a quad's values
  // (rows 4 q + c, one node each) then land in 16 distinct banks, where with the rows first all
  // fell TNp kKT doubles apart, in two (ncu 2026-12-03: 80 % of the kernel's store wavefronts).
  long xg[kX4];  // global float offset at k0 = 0, or -1 (a node past N, or no quad: zeros)
  int xsi[kX4];  // shared index of its first double (then + TNp per k), or -1: no quad of the tile
#pragma unroll
  for (int j = 0; j < kX4; ++j) {
    const int t = tid + j * nt, q = t % 4, r = t / 4, i = r % TN, pp = r / TN;
    const bool quad = kNT == 4 || t < 4 * TN * D;  // 4 TN D = 2 nt with kNT = 4
    xg[j] = quad && n0 + i < a.N ? ((long)(n0 + i) * D + pp) * Cin + 4 * q : -1;
    xsi[j] = quad ? (pp * kKT + 4 * q) * TNp + i : -1;
  }
  // W quads: (L + 1) kKT kTC / 4 of them; transposed, quad q of row (l', o) holds 4 k; else
  // quad q of row (l', k) holds 4 o. Their places follow from t by shifts (kKT, kTC powers of
  // two), so they are recomputed per tile rather than held in registers.
  const int nw = (a.L + 1) * kKT * kTC / 4;
  const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float4 xr[kX4], wr[kW4];
  // The k tile at k0 (Cin % 4 == 0: a quad is wholly inside or outside).
  auto load = [&](int k0) __attribute__((always_inline)) {
#pragma unroll
    for (int j = 0; j < kX4; ++j) {
      const int k = k0 + 4 * ((tid + j * nt) % 4);
      xr[j] = xg[j] >= 0 && k < Cin ? *reinterpret_cast<const float4*>(a.X + xg[j] + k0) : zero4;
      if (kGate && xg[j] >= 0 && k < Cin) {  // Cf % 4 == 0: the quad is in one focus
        const float g = a.gamma[(size_t)(xg[j] / ((long)D * Cin)) * a.F + k / a.Cf];  // xg's node
        xr[j] = make_float4(g * xr[j].x, g * xr[j].y, g * xr[j].z, g * xr[j].w);
      }
    }
#pragma unroll
    for (int j = 0; j < kW4; ++j) {
      const int t = tid + j * nt;
      float4 v = zero4;
      if (t < nw) {
        if (kTrans) {
          const int q = t % 4, r = t / 4, oo = r % kTC, ll = r / kTC, o = o0 + oo, k = k0 + 4 * q;
          if (o < Cout && k < Cin) v = *reinterpret_cast<const float4*>(a.W + ((size_t)ll * Cout + o) * Cin + k);
        } else {
          const int q = t % kCG, r = t / kCG, kk = r % kKT, ll = r / kKT, o = o0 + 4 * q, k = k0 + kk;
          if (o < Cout && k < Cin) v = *reinterpret_cast<const float4*>(a.W + ((size_t)ll * Cin + k) * Cout + o);
        }
      }
      wr[j] = v;
    }
  };
  // Registers -> shared memory, converted to double once.
  auto store = [&]() __attribute__((always_inline)) {
#pragma unroll
    for (int j = 0; j < kX4; ++j) {
      if (kNT != 4 && xsi[j] < 0) continue;
      double* x = xs + xsi[j];
      x[0] = xr[j].x;
      x[TNp] = xr[j].y;
      x[2 * TNp] = xr[j].z;
      x[3 * TNp] = xr[j].w;
    }
#pragma unroll
    for (int j = 0; j < kW4; ++j) {
      const int t = tid + j * nt;
      if (t >= nw) continue;
      if (kTrans) {
        const int q = t % 4, r = t / 4, oo = r % kTC, ll = r / kTC;
        double* w = ws + (ll * kKT + 4 * q) * kTCp + wpos(oo);
        w[0] = wr[j].x;
        w[kTCp] = wr[j].y;
        w[2 * kTCp] = wr[j].z;
        w[3 * kTCp] = wr[j].w;
      } else {
        const int q = t % kCG, r = t / kCG, kk = r % kKT, ll = r / kKT;
        double* w = ws + (ll * kKT + kk) * kTCp;
        *reinterpret_cast<double2*>(w + wpos(4 * q)) = make_double2(wr[j].x, wr[j].y);
        *reinterpret_cast<double2*>(w + wpos(4 * q + 2)) = make_double2(wr[j].z, wr[j].w);
      }
    }
  };
  double acc[kNT][4];
#pragma unroll
  for (int i = 0; i < kNT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;
  const double* xp = xs + (size_t)p * kKT * TNp + kNT * ng;
  const double* wp = ws + (size_t)l * kKT * kTCp + wpos(4 * cg);
  load(0);
  for (int k0 = 0; k0 < Cin; k0 += kKT) {
    store();
    __syncthreads();
    if (k0 + kKT < Cin) load(k0 + kKT);  // in flight during the products below
    // One k step: kNT x values and four W columns from shared memory, 4 kNT DFMA.
    auto step = [&](int kk) __attribute__((always_inline)) {
      double xv[kNT];
      if constexpr (kNT == 4) {
        const double2 x01 = *reinterpret_cast<const double2*>(xp + kk * TNp);
        const double2 x23 = *reinterpret_cast<const double2*>(xp + kk * TNp + 2);
        xv[0] = x01.x; xv[1] = x01.y; xv[2] = x23.x; xv[3] = x23.y;
      } else {
        xv[0] = xp[kk * TNp];
      }
      const double2 w01 = *reinterpret_cast<const double2*>(wp + kk * kTCp);
      const double2 w23 = *reinterpret_cast<const double2*>(wp + kk * kTCp + (wpos(2) - wpos(0)));
      const double wv[4] = {w01.x, w01.y, w23.x, w23.y};
#pragma unroll
      for (int i = 0; i < kNT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(xv[i], wv[j], acc[i][j]);
    };
    if constexpr (kNT == 1) {
      // Four steps' shared loads in flight at once: a node per thread leaves a CTA of the
      // per-chunk launches four warps per SM slot, too few to hide one load's latency behind
      // another warp's products (ncu 2026-12-03: 34 % short-scoreboard stalls on the DFMA).
      // The same products in the same order.
#pragma unroll 4
      for (int kk = 0; kk < kKT; ++kk) step(kk);
    } else {
#pragma unroll 1
      for (int kk = 0; kk < kKT; ++kk) step(kk);
    }
    __syncthreads();  // the next store overwrites the tiles
  }
  // The residual and accumulated values are all read before the first store: Y may alias R for
  // all the compiler knows, so loads behind stores would go out one round trip at a time.
  float prev[kNT][4], res[kNT][4];
#pragma unroll
  for (int i = 0; i < kNT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + kNT * ng + i, o = o0 + 4 * cg + j;
      const size_t idx = ((size_t)n * D + p) * Cout + o;
      const bool in = n < a.N && o < Cout;
      prev[i][j] = in && a.accumulate ? a.Y[idx] : 0.0f;
      res[i][j] = in && a.R ? a.R[idx] : 0.0f;
    }
#pragma unroll
  for (int i = 0; i < kNT; ++i) {
    const int n = n0 + kNT * ng + i;
    if (n >= a.N) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int o = o0 + 4 * cg + j;
      if (o >= Cout) continue;
      const size_t idx = ((size_t)n * D + p) * Cout + o;
      float v = a.accumulate ? (float)(prev[i][j] + acc[i][j]) : (float)acc[i][j];
      if (a.R) v += res[i][j];
      a.Y[idx] = v;
    }
  }
  if (kNorms != 0) {
    // Every row and column of the CTA's nodes is written (one column tile): after the barrier
    // (which orders the CTA's global writes) a warp, or a team of four (below), per node runs the
    // norms on them.
    __syncthreads();
    const int nwarps = nt / 32;  // nt % 32 == 0 (launcher)
    if (kNorms == 3) {  // a warp per (node, focus) of the column tile
      const int per = kTC / a.gd.Cf;
      for (int pr = tid / 32; pr < TN * per; pr += nwarps) {
        const int n = n0 + pr / per, f = blockIdx.y * per + pr % per;
        if (n < a.N && f < a.gd.F) gate_backward_warp(a.gd, n, f, a.ga.gamma, a.ga.P, a.Y, a.ga.P_bar, a.ga.gamma_bar);
      }
      return;
    }
    if (kNT == 1 && nwarps == kVirt * TN) {
      // A node per thread and D = 16: four warps per node, a team each (node_norms.cuh), its
      // totals in the tiles' shared memory (free after the barrier above). A team past the end
      // takes part in the barriers on the last node's values.
      const int i = tid / (32 * kVirt);
      NormTeam<kVirt> tm;
      tm.w = (tid / 32) % kVirt;
      tm.slots = lsm + 2 * kVirt * i;
      const bool live = n0 + i < a.N;
      const int n = live ? n0 + i : a.N - 1;
      if (kNorms == 1)
        eq_norm_pair_forward_node_reg<kVirt>(a.nf, n, tm, live);
      else
        eq_norm_pair_backward_node_reg<kVirt>(a.nb, n, tm, live);
      return;
    }
    for (int i = tid / 32; i < TN && n0 + i < a.N; i += nwarps) {
      if (kNorms == 1)
        eq_norm_pair_forward_node_reg(a.nf, n0 + i);
      else
        eq_norm_pair_backward_node_reg(a.nb, n0 + i);
    }
  }
}

// Generic path, a thread per output, the same sums in the same order: the shapes the tile does not
// cover (Cin or Cout not a multiple of 4, unaligned bases, a gate splitting a quad, D > 64, a W
// tile over kW4 quads per thread).
__global__ void per_degree_linear_k(LinArgs a) {
  __shared__ float xs[16][17], ws[16][17];
  const int D = a.D, Cin = a.Cin, Cout = a.Cout;
  const int p = blockIdx.z, l = degree_of_packed(p);
  const int n = blockIdx.x * 16 + threadIdx.y, o = blockIdx.y * 16 + threadIdx.x;
  const float* Wl = a.W + (size_t)l * Cin * Cout;
  double acc = 0.0;
  for (int k0 = 0; k0 < Cin; k0 += 16) {
    const int kx = k0 + threadIdx.x, ky = k0 + threadIdx.y;
    float xv = (n < a.N && kx < Cin) ? a.X[((size_t)n * D + p) * Cin + kx] : 0.0f;
    if (a.gamma && n < a.N && kx < Cin) xv = a.gamma[(size_t)n * a.F + kx / a.Cf] * xv;
    xs[threadIdx.y][threadIdx.x] = xv;
    ws[threadIdx.y][threadIdx.x] =
        (ky < Cin && o < Cout) ? (a.transpose ? Wl[(size_t)o * Cin + ky] : Wl[(size_t)ky * Cout + o]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k) acc += (double)xs[threadIdx.y][k] * ws[k][threadIdx.x];
    __syncthreads();
  }
  if (n < a.N && o < Cout) {
    const size_t idx = ((size_t)n * D + p) * Cout + o;
    float v = a.accumulate ? (float)(a.Y[idx] + acc) : (float)acc;
    if (a.R) v += a.R[idx];
    a.Y[idx] = v;
  }
}

template <bool kTrans, bool kGate, int kNorms>
void launch_tiled(const LinArgs& a, int nodes, int nt, size_t bytes, cudaStream_t s) {
  void (*kern)(LinArgs) = nodes == 1 ? per_degree_linear_tiled_k<kTrans, kGate, kNorms, 1>
                                     : per_degree_linear_tiled_k<kTrans, kGate, kNorms, 4>;
  if (bytes > 48 * 1024)  // L >= 5 only (L = 3: 37 KiB)
    SEZM_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  const dim3 grid(div_up(a.N, nodes * a.NG), div_up(a.Cout, kTC));
  kern<<<grid, nt, bytes, s>>>(a);
}

void launch_linear(LinArgs a, cudaStream_t s) {
  const int N = a.N, L = a.L, D = a.D, Cin = a.Cin, Cout = a.Cout;
  const bool transpose = a.transpose != 0;
  // About 256 threads: D = 16 (L = 3) takes 8 nodes per CTA, D = 9 twelve, D = 4 thirty-two.
  // Fewer nodes per CTA where the grid would not cover the GPU twice (a chunk's ~200 destinations):
  // more CTAs, each with a shorter chain of k tiles' products.
  // Still under two CTAs per SM at one node quad per CTA: a node per thread (kNT = 1), the same
  // search for NG.
  int nodes = 4;
  for (;;) {
    a.NG = std::max(1, 256 / (D * kCG));
    while (a.NG > 1 && (long)div_up(N, nodes * a.NG) * div_up(Cout, kTC) < 264 &&
           (L + 1) * kKT * kTC / 4 <= kW4 * D * (a.NG / 2) * kCG)  // the W tile still fits kW4 quads a thread
      a.NG /= 2;
    if (nodes == 1 || (long)div_up(N, nodes * a.NG) * div_up(Cout, kTC) >= 264) break;
    nodes = 1;
  }
  const int nt = D * a.NG * kCG;
  const bool quads = Cin % 4 == 0 && Cout % 4 == 0 && (!a.gamma || (a.Cf % 4 == 0 && !transpose)) &&
                     ((reinterpret_cast<uintptr_t>(a.X) | reinterpret_cast<uintptr_t>(a.W)) & 15) == 0;
  const bool tiled = quads && D <= 64 && (L + 1) * kKT * kTC / 4 <= kW4 * nt;
  const int norms = a.norms;
  // The norms ride along where one CTA holds whole nodes in whole warps and a node's row fits
  // the register form (node_norms.cuh); else their own launch.
  const bool fused = tiled && nt % 32 == 0 && !a.accumulate && !a.R &&
                     (norms == 3 ? transpose && Cout == a.gd.Cw && a.gd.Cf <= kTC && kTC % a.gd.Cf == 0
                                 : norms != 0 && Cout <= kTC && D * Cout <= 32 * kRegPer &&
                                       ((norms == 1 && !transpose) || (norms == 2 && transpose && !a.gamma)));
  if (!fused) a.norms = 0;
  if (!tiled) {
    const dim3 grid(div_up(N, 16), div_up(Cout, 16), D), block(16, 16);
    per_degree_linear_k<<<grid, block, 0, s>>>(a);
    SEZM_LAUNCH("per_degree_linear");
  } else {
    const size_t bytes = ((size_t)D * kKT * (nodes * a.NG + 2) + (size_t)(L + 1) * kKT * kTCp) * sizeof(double);
    // The gate only ever multiplies the forward's input (launch_post_mix_norms).
    if (transpose && fused && norms == 3)
      launch_tiled<true, false, 3>(a, nodes, nt, bytes, s);
    else if (transpose)
      fused ? launch_tiled<true, false, 2>(a, nodes, nt, bytes, s)
            : launch_tiled<true, false, 0>(a, nodes, nt, bytes, s);
    else if (a.gamma)
      fused ? launch_tiled<false, true, 1>(a, nodes, nt, bytes, s)
            : launch_tiled<false, true, 0>(a, nodes, nt, bytes, s);
    else
      fused ? launch_tiled<false, false, 1>(a, nodes, nt, bytes, s)
            : launch_tiled<false, false, 0>(a, nodes, nt, bytes, s);
    SEZM_LAUNCH("per_degree_linear");
  }
  if (norms == 1 && !fused) launch_eq_norm_pair_forward(a.nf, s);
  if (norms == 2 && !fused) launch_eq_norm_pair_backward(a.nb, s);
  if (norms == 3 && !fused) {
    OutputGateArgs ga = a.ga;
    ga.A_bar = a.Y;
    launch_gate_backward(a.gd, ga, s);
  }
}

}  // namespace

void launch_per_degree_linear(int N, int L, int Cin, int Cout, const float* X, const float* W, float* Y,
                              bool transpose, bool accumulate, cudaStream_t s, const float* residual,
                              const EqNormPairBackwardArgs* norms) {
  if (N == 0 || Cout == 0) return;
  LinArgs a{};
  a.N = N; a.L = L; a.D = (L + 1) * (L + 1); a.Cin = Cin; a.Cout = Cout; a.NG = 1;
  a.X = X; a.W = W; a.Y = Y; a.R = residual; a.transpose = transpose ? 1 : 0; a.accumulate = accumulate ? 1 : 0;
  a.F = a.Cf = 1;
  if (norms) {  // Y is the norms' t (Xt_bar)
    if (norms->t != Y || !transpose) throw Error("launch_per_degree_linear: the backward norms need Y = t, transposed");
    a.norms = 2;
    a.nb = *norms;
  }
  launch_linear(a, s);
}

void launch_post_mix_norms(const Dims& d, int N, const float* gamma, const float* A, const float* W, float* O,
                           const EqNormPairArgs& nf, cudaStream_t s) {
  if (N == 0) return;
  LinArgs a{};
  a.N = N; a.L = d.L; a.D = d.D; a.Cin = d.Cw; a.Cout = d.C; a.NG = 1;
  a.X = A; a.W = W; a.Y = O; a.gamma = gamma; a.F = d.F; a.Cf = d.Cf;
  a.norms = 1;
  a.nf = nf;
  a.nf.O = O;
  launch_linear(a, s);
}

void launch_post_mix_backward(const Dims& d, int N, const float* O_bar, const float* W, float* A_bar,
                               const OutputGateArgs& ga, cudaStream_t s) {
  if (N == 0) return;
  LinArgs a{};
  a.N = N; a.L = d.L; a.D = d.D; a.Cin = d.C; a.Cout = d.Cw; a.NG = 1;
  a.X = O_bar; a.W = W; a.Y = A_bar; a.transpose = 1; a.F = a.Cf = 1;
  a.norms = 3;
  a.gd = d;
  a.ga = ga;
  launch_linear(a, s);
}

}  // namespace sezm::cuda
