// The gated SO(2) mixing stack (docs/sezm/02 §3.4, backward §9.9), one fused kernel per layer.
//
// Layout: activations focus-major (F, Ec, ROW), ROW = Dm*Cf; the m = 0 group is the first
// M0 = (L+1)Cf columns, the |m| = 1 group the last 2*M1 = 2*L*Cf columns, whose weight is the
// assembled [[Wu, Wv], [-Wv, Wu]]. A CTA owns BM whole rows (edges) of one focus, so the gate
// sigmoids of its rows, computed from the m = 0 scalar pre-activation, stay in shared memory:
//  forward (gated layer):  z0 = U0 A; S = sigmoid(z0[:, :Cf] G); U0' = U0 + [silu(z00), z0 * S];
//                          z1 = U1 W1; U1' = U1 + z1 * S;  z = [z0, z1] saved (fast mode, lean recompute);
//  replay (fast backward): the same epilogue from the kept z, no GEMM;
//  forward (identity):     U' = U + U W;
//  backward (gated):       S recomputed from the saved z00; z_bar built on the fly while loading
//                          the GEMM's A operand (g * S on value rows, g silu'(z00) + eta G^T on
//                          the scalar row); G' = g + z_bar W^T. Neither S nor z_bar reaches HBM.
//  backward (identity):    G' = g + g W^T.
// Numerics: IEEE fp32 FFMA (no TF32). The inner product `tile_mma` is the one place to swap for
// a tensor-core split later: operands are staged in shared memory, A k-major and B (k, n).
#include "kernels.cuh"

namespace sezm::cuda {
namespace {

// CTA: 256 threads as 16 thread-rows x 16 thread-columns. Thread (ty, tx) owns the TR rows
// ty*TR.. and the NC4 column quads 64 j + 4 tx (j < NC4): per k step TR/4 + NC4 16-byte shared
// loads feed 4 * TR * NC4 FFMA. TR = 4 (64-row tiles): measured on the H200 at 4096 atoms, two
// such CTAs per SM (<= 128 registers) beat one 128-row CTA (TR = 8, ~220 registers) by 11 ms per
// call, and the 64-row tile fits every supported GPU's shared memory.
// A warp is 4 thread-rows x 8 thread-columns (not 2 x 16): its B reads per column quad are then
// 128 contiguous bytes (one shared-memory wavefront instead of two) and its A reads 64 bytes, so
// a k step costs 1 + NC4 wavefronts instead of 1 + 2 NC4 against the same FFMA count. Measured:
// no change in time; the product runs at the rate of cuBLAS's fp32 SGEMM at these shapes
// (bench/stack_probe.cu, docs/performance.md), not at a shared-memory bound.
constexpr int kBK = 16, kThreads = 256, kTC = 16, kTRw = kThreads / kTC;
static_assert(kThreads == 256 && kTC == 16, "tile_tx/tile_ty assume 8 warps as 4 x 8 thread blocks");
__device__ __forceinline__ int tile_tx() { return (threadIdx.x & 7) | (((threadIdx.x >> 5) & 1) << 3); }
__device__ __forceinline__ int tile_ty() { return ((threadIdx.x >> 3) & 3) | ((threadIdx.x >> 6) << 2); }

template <int TR>
struct Tile {
  static constexpr int BM = TR * kTRw;
  static constexpr int AS = BM + 4;  // As row stride (k-major)
};

// Row strides of the per-edge tables Zs, S and T: = 16 (mod 32) floats, so the eight threads of
// a 16-byte access phase (two rows x four column quads, as tile_mma's operand load reads them)
// fall in distinct banks; an unpadded stride of a multiple of 32 made that a 2-way conflict, and
// the backward's former scalar reads of S an 8-way one.
__host__ __device__ inline int bank_stride(int n) { return n + ((16 - n % 32) + 32) % 32; }

struct StackSmem {
  float* As;  // kBK x AS, k-major (a thread's rows are contiguous)
  float* Bs;  // kBK x NP (N padded to a multiple of 64 with zeros)
  float* Zs;  // BM x zst  (Cf used: scalar pre-activation, forward; z_bar scalar row, backward)
  float* S;   // BM x sst  (L*Cf used: gate sigmoids)
  float* T;   // BM x sst  (eta, backward only)
  int zst, sst;
};

inline int pad64(int n) { return (n + 63) / 64 * 64; }

size_t smem_floats(const Dims& d, int BM, bool bwd) {
  const int np = pad64(d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1);
  return (size_t)kBK * (BM + 4) + (size_t)kBK * np + (size_t)BM * bank_stride(d.Cf) +
         (bwd ? 2 : 1) * (size_t)BM * bank_stride(d.L * d.Cf);
}

template <int TR>
__device__ StackSmem carve(const Dims& d, float* base) {
  const int np = (((d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1) + 63) / 64) * 64;
  StackSmem s;
  s.As = base;
  s.Bs = s.As + kBK * Tile<TR>::AS;
  s.zst = bank_stride(d.Cf);
  s.sst = bank_stride(d.L * d.Cf);
  s.Zs = s.Bs + kBK * np;
  s.S = s.Zs + Tile<TR>::BM * s.zst;
  s.T = s.S + Tile<TR>::BM * s.sst;
  return s;
}

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float4 zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }

// acc[r][4j+q] += sum_k A(row0 + TR*ty + r, k) B(k, 64j + 4tx + q). `loadA4(row, k)` returns
// A(row, k..k+3) (the prologue: the raw activation, or the gradient with the gates applied).
// K % 4 == 0 and N % 4 == 0 for every supported model. The next k-tile is fetched into registers
// while the current one is multiplied, so global latency hides behind the FFMAs.
template <int TR, int NC4, int kUnroll = 4, class LoadA4>
__device__ __forceinline__ void tile_mma(const StackSmem& sm, int K, int N, const float* __restrict__ B, LoadA4 loadA4,
                                         float (&acc)[TR][4 * NC4]) {
  constexpr int BM = Tile<TR>::BM, AS = Tile<TR>::AS, NP = 64 * NC4;
  constexpr int kAPer = BM * kBK / 4 / kThreads;
  constexpr int kBPer = (kBK * NP / 4 + kThreads - 1) / kThreads;
  const int tid = threadIdx.x, tx = tile_tx(), ty = tile_ty();
  float4 ra[kAPer], rb[kBPer];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      ra[i] = (k0 + k4 < K) ? loadA4(r, k0 + k4) : zero4();
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads, k = idx / (NP / 4), n4 = (idx % (NP / 4)) * 4;
      rb[j] = (idx < kBK * NP / 4 && k0 + k < K && n4 < N)
                  ? __ldg(reinterpret_cast<const float4*>(B + (size_t)(k0 + k) * N + n4))
                  : zero4();
    }
  };
  auto stash = [&]() {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      sm.As[(k4 + 0) * AS + r] = ra[i].x;
      sm.As[(k4 + 1) * AS + r] = ra[i].y;
      sm.As[(k4 + 2) * AS + r] = ra[i].z;
      sm.As[(k4 + 3) * AS + r] = ra[i].w;
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads;
      if (idx < kBK * NP / 4) st4(sm.Bs + idx * 4, rb[j]);  // row k = idx / (NP/4): stride NP
    }
  };
  fetch(0);
  for (int k0 = 0; k0 < K; k0 += kBK) {
    stash();
    __syncthreads();
    if (k0 + kBK < K) fetch(k0 + kBK);
#pragma unroll kUnroll
    for (int k = 0; k < kBK; ++k) {
      float a[TR], b[4 * NC4];
#pragma unroll
      for (int q = 0; q < TR / 4; ++q) {
        const float4 v = ld4(sm.As + k * AS + ty * TR + 4 * q);
        a[4 * q] = v.x; a[4 * q + 1] = v.y; a[4 * q + 2] = v.z; a[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < NC4; ++j) {
        const float4 v = ld4(sm.Bs + k * NP + 64 * j + 4 * tx);
        b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < TR; ++r)
#pragma unroll
        for (int c = 0; c < 4 * NC4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
}

template <int TR, int NC4>
__device__ __forceinline__ void zero(float (&acc)[TR][4 * NC4]) {
#pragma unroll
  for (int r = 0; r < TR; ++r)
#pragma unroll
    for (int i = 0; i < 4 * NC4; ++i) acc[r][i] = 0.0f;
}

// Calls f(r, j, row, c) for each of the thread's column quads inside the tile (row < Ec,
// c + 3 < N): accumulators acc[r][4j..4j+3] belong to edge `row`, columns c..c+3.
template <int TR, int NC4, class F>
__device__ __forceinline__ void for_each_quad(int row0, int Ec, int N, F f) {
  const int tx = tile_tx(), ty = tile_ty();
#pragma unroll
  for (int r = 0; r < TR; ++r) {
    const int row = row0 + ty * TR + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = 64 * j + 4 * tx;
      if (c < N) f(r, j, row, c);
    }
  }
}

// The thread's quads of a row-major table (row stride ld) at `base`, as for_each_quad visits them,
// with every load issued before any is used: an epilogue that loads, adds and stores one quad at a
// time waits a memory round trip per quad (its stores may alias the later loads).
template <int TR, int NC4>
__device__ __forceinline__ void load_quads(int row0, int Ec, int N, const float* base, size_t ld,
                                           float4 (&v)[TR][NC4]) {
  const int tx = tile_tx(), ty = tile_ty();
#pragma unroll
  for (int r = 0; r < TR; ++r) {
    const int row = row0 + ty * TR + r;
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = 64 * j + 4 * tx;
      v[r][j] = (row < Ec && c < N) ? ld4(base + (size_t)row * ld + c) : zero4();
    }
  }
}

template <int TR, int NC4>
__device__ __forceinline__ float4 quad(const float (&acc)[TR][4 * NC4], int r, int j) {
  return make_float4(acc[r][4 * j], acc[r][4 * j + 1], acc[r][4 * j + 2], acc[r][4 * j + 3]);
}

// S[r][g*Cf + b] = sigmoid(sum_a Zs[r][a] G[a][g*Cf + b]) for the CTA's rows: a (BM x Cf) x
// (Cf x L*Cf) product on the same tiled inner product as the layer (NCG = L*Cf / 64 rounded up).
// Zs must be complete (a barrier) before the call; S is complete after the caller's next barrier.
template <int TR, int NCG>
__device__ __forceinline__ void gate_sigmoids(const Dims& d, const StackSmem& sm, const float* __restrict__ G) {
  const int LC = d.L * d.Cf, Cf = d.Cf;
  float acc[TR][4 * NCG];
  zero<TR, NCG>(acc);
  tile_mma<TR, NCG>(sm, Cf, LC, G, [&](int r, int k) { return ld4(sm.Zs + r * sm.zst + k); }, acc);
  for_each_quad<TR, NCG>(0, Tile<TR>::BM, LC, [&](int r, int j, int row, int c) {
    st4(sm.S + row * sm.sst + c, make_float4(sigmoidf_(acc[r][4 * j]), sigmoidf_(acc[r][4 * j + 1]),
                                         sigmoidf_(acc[r][4 * j + 2]), sigmoidf_(acc[r][4 * j + 3])));
  });
}

// Forward of one layer; with Zin (fast mode's backward) the gated layer's pre-activations are
// read instead of multiplied.
template <int TR, int NC0, int NC1>
__global__ void __launch_bounds__(kThreads, (TR == 4 && NC1 <= 3) ? 2 : 1) stack_forward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                            const float* __restrict__ Uin, float* Uout, float* Zsave,
                                                            const float* __restrict__ Zin) {
  constexpr int BM = Tile<TR>::BM;
  extern __shared__ float4 smem4[];
  const StackSmem sm = carve<TR>(d, reinterpret_cast<float*>(smem4));
  const int f = blockIdx.y, row0 = blockIdx.x * BM;
  const int ty = tile_ty();
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* U = Uin + fo;
  const float* A = w.A + ((size_t)layer * d.F + f) * d.M0 * d.M0;
  const float* W1 = w.W1 + ((size_t)layer * d.F + f) * 4 * d.M1 * d.M1;
  const int LC = d.L * d.Cf, Cf = d.Cf;
  const bool replay = gated && Zin != nullptr;

  // ---- m = 0 group ----
  {
    float acc[TR][4 * NC0];
    zero<TR, NC0>(acc);
    if (replay) {
      for_each_quad<TR, NC0>(row0, Ec, d.M0, [&](int r, int j, int row, int c) {
        const float4 z = ld4(Zin + fo + (size_t)row * d.ROW + c);
        acc[r][4 * j] = z.x; acc[r][4 * j + 1] = z.y; acc[r][4 * j + 2] = z.z; acc[r][4 * j + 3] = z.w;
      });
    } else {
      tile_mma<TR, NC0>(sm, d.M0, d.M0, A,
                        [&](int r, int k) { return row0 + r < Ec ? ld4(U + (size_t)(row0 + r) * d.ROW + k) : zero4(); },
                        acc);
    }
    if (gated) {
      const int tx = tile_tx();
#pragma unroll
      for (int r = 0; r < TR; ++r)
#pragma unroll
        for (int j = 0; j < NC0; ++j) {
          const int c = 64 * j + 4 * tx;
          if (c < Cf) st4(sm.Zs + (ty * TR + r) * sm.zst + c, quad<TR, NC0>(acc, r, j));
        }
      __syncthreads();
      gate_sigmoids<TR, (NC1 + 1) / 2>(d, sm, w.G + ((size_t)layer * d.F + f) * Cf * LC);
      __syncthreads();
    }
    float4 res[TR][NC0];
    load_quads<TR, NC0>(row0, Ec, d.M0, Uin + fo, d.ROW, res);
    for_each_quad<TR, NC0>(row0, Ec, d.M0, [&](int r, int j, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + c;
      const float4 z = quad<TR, NC0>(acc, r, j);
      float4 v = z;
      if (gated) {
        if (c < Cf) {  // Cf % 4 == 0: a quad never straddles the scalar row
          v = make_float4(siluf_(z.x), siluf_(z.y), siluf_(z.z), siluf_(z.w));
        } else {
          const float4 s = ld4(sm.S + (ty * TR + r) * sm.sst + (c / Cf - 1) * Cf + c % Cf);
          v = make_float4(z.x * s.x, z.y * s.y, z.z * s.z, z.w * s.w);
        }
        if (Zsave) st4(Zsave + o, z);
      }
      const float4 u = res[r][j];
      st4(Uout + o, make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
    });
  }
  // ---- |m| = 1 group ----
  {
    float acc[TR][4 * NC1];
    zero<TR, NC1>(acc);
    const int N1 = 2 * d.M1;
    if (replay) {
      for_each_quad<TR, NC1>(row0, Ec, N1, [&](int r, int j, int row, int c) {
        const float4 z = ld4(Zin + fo + (size_t)row * d.ROW + d.M0 + c);
        acc[r][4 * j] = z.x; acc[r][4 * j + 1] = z.y; acc[r][4 * j + 2] = z.z; acc[r][4 * j + 3] = z.w;
      });
    } else {
      tile_mma<TR, NC1>(sm, N1, N1, W1,
                        [&](int r, int k) {
                          return row0 + r < Ec ? ld4(U + (size_t)(row0 + r) * d.ROW + d.M0 + k) : zero4();
                        },
                        acc);
    }
    float4 res[TR][NC1];
    load_quads<TR, NC1>(row0, Ec, N1, Uin + fo + d.M0, d.ROW, res);
    for_each_quad<TR, NC1>(row0, Ec, N1, [&](int r, int j, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + d.M0 + c;
      const float4 z = quad<TR, NC1>(acc, r, j);
      float4 v = z;
      if (gated) {
        const int jj = d.L + 1 + c / Cf;
        const float4 s = ld4(sm.S + (ty * TR + r) * sm.sst + (red_l(jj, d.L) - 1) * Cf + c % Cf);
        v = make_float4(z.x * s.x, z.y * s.y, z.z * s.z, z.w * s.w);
        if (Zsave) st4(Zsave + o, z);
      }
      const float4 u = res[r][j];
      st4(Uout + o, make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
    });
  }
}

template <int TR, int NC0, int NC1>
__global__ void __launch_bounds__(kThreads, (TR == 4 && NC1 <= 3) ? 2 : 1) stack_backward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                             const float* __restrict__ Gin, float* Gout,
                                                             const float* __restrict__ Zin) {
  constexpr int BM = Tile<TR>::BM;
  extern __shared__ float4 smem4[];
  const StackSmem sm = carve<TR>(d, reinterpret_cast<float*>(smem4));
  const int f = blockIdx.y, row0 = blockIdx.x * BM;
  const int tid = threadIdx.x;
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* g = Gin + fo;
  const float* Z = gated ? Zin + fo : nullptr;
  const float* AT = w.AT + ((size_t)layer * d.F + f) * d.M0 * d.M0;
  const float* W1T = w.W1T + ((size_t)layer * d.F + f) * 4 * d.M1 * d.M1;
  const int LC = d.L * d.Cf, Cf = d.Cf;

  if (gated) {
    const float* Gw = w.G + ((size_t)layer * d.F + f) * Cf * LC;
    const float* GwT = w.GT + ((size_t)layer * d.F + f) * Cf * LC;  // (LC, Cf): coalesced over a
    for (int i = tid; i < BM * Cf / 4; i += kThreads) {  // Cf % 4 == 0
      const int r = i / (Cf / 4), a = (i % (Cf / 4)) * 4;
      const float4 z =
          row0 + r < Ec ? __ldg(reinterpret_cast<const float4*>(Z + (size_t)(row0 + r) * d.ROW + a)) : zero4();
      st4(sm.Zs + r * sm.zst + a, z);
    }
    __syncthreads();
    gate_sigmoids<TR, (NC1 + 1) / 2>(d, sm, Gw);
    __syncthreads();
    // eta = s_bar * S (1 - S), s_bar[g][b] = sum over the three orders of degree g+1 of g * z.
    // Column quads (Cf % 4 == 0), unrolled so each thread has its 24 loads in flight at once.
#pragma unroll 4
    for (int i = tid; i < BM * LC / 4; i += kThreads) {
      const int r = i / (LC / 4), cq = (i % (LC / 4)) * 4, gg = cq / Cf, b = cq % Cf;
      float4 sb = zero4();
      if (row0 + r < Ec) {
        const size_t base = (size_t)(row0 + r) * d.ROW + b;
        const int rows[3] = {gg + 1, d.L + gg + 1, 2 * d.L + gg + 1};
#pragma unroll
        for (int t = 0; t < 3; ++t) {
          const float4 gv = __ldg(reinterpret_cast<const float4*>(g + base + rows[t] * Cf));
          const float4 zv = __ldg(reinterpret_cast<const float4*>(Z + base + rows[t] * Cf));
          sb.x = fmaf(gv.x, zv.x, sb.x); sb.y = fmaf(gv.y, zv.y, sb.y);
          sb.z = fmaf(gv.z, zv.z, sb.z); sb.w = fmaf(gv.w, zv.w, sb.w);
        }
      }
      const float4 s = ld4(sm.S + r * sm.sst + cq);
      st4(sm.T + r * sm.sst + cq, make_float4(sb.x * s.x * (1.0f - s.x), sb.y * s.y * (1.0f - s.y),
                                              sb.z * s.z * (1.0f - s.z), sb.w * s.w * (1.0f - s.w)));
    }
    __syncthreads();
    // Scalar row of z_bar: g00 silu'(z00) + eta G^T, a (BM x L*Cf) x (L*Cf x Cf) tile product; each
    // thread overwrites only the z00 entries it alone reads, so Zs takes z_bar in place.
    {
      float acc[TR][4];
      zero<TR, 1>(acc);
      tile_mma<TR, 1>(sm, LC, Cf, GwT, [&](int r, int k) { return ld4(sm.T + r * sm.sst + k); }, acc);
      for_each_quad<TR, 1>(0, BM, Cf, [&](int r, int j, int row, int c) {
        float* zs = sm.Zs + row * sm.zst + c;
        float4 v = zero4();
        if (row0 + row < Ec) {
          const float4 gg = ld4(g + (size_t)(row0 + row) * d.ROW + c);
          v = make_float4(fmaf(gg.x, silu_gradf_(zs[0]), acc[r][0]), fmaf(gg.y, silu_gradf_(zs[1]), acc[r][1]),
                          fmaf(gg.z, silu_gradf_(zs[2]), acc[r][2]), fmaf(gg.w, silu_gradf_(zs[3]), acc[r][3]));
        }
        st4(zs, v);
      });
    }
    __syncthreads();
  }

  // ---- m = 0 group: G0' = g0 + z_bar0 A^T ----
  {
    float acc[TR][4 * NC0];
    zero<TR, NC0>(acc);
    tile_mma<TR, NC0>(sm, d.M0, d.M0, AT,
                      [&](int r, int k) {
                        if (row0 + r >= Ec) return zero4();
                        float4 v = ld4(g + (size_t)(row0 + r) * d.ROW + k);
                        if (!gated) return v;
                        if (k < Cf) return ld4(sm.Zs + r * sm.zst + k);
                        const float4 s = ld4(sm.S + r * sm.sst + (k / Cf - 1) * Cf + k % Cf);
                        return make_float4(v.x * s.x, v.y * s.y, v.z * s.z, v.w * s.w);
                      },
                      acc);
    float4 res[TR][NC0];
    load_quads<TR, NC0>(row0, Ec, d.M0, Gin + fo, d.ROW, res);
    for_each_quad<TR, NC0>(row0, Ec, d.M0, [&](int r, int j, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + c;
      const float4 a = quad<TR, NC0>(acc, r, j), u = res[r][j];
      st4(Gout + o, make_float4(u.x + a.x, u.y + a.y, u.z + a.z, u.w + a.w));
    });
  }
  // ---- |m| = 1 group: G1' = g1 + (g1 * S) W1^T ----
  {
    float acc[TR][4 * NC1];
    zero<TR, NC1>(acc);
    const int N1 = 2 * d.M1;
    tile_mma<TR, NC1>(sm, N1, N1, W1T,
                      [&](int r, int k) {
                        if (row0 + r >= Ec) return zero4();
                        float4 v = ld4(g + (size_t)(row0 + r) * d.ROW + d.M0 + k);
                        if (!gated) return v;
                        const int j = d.L + 1 + k / Cf;
                        const float4 s = ld4(sm.S + r * sm.sst + (red_l(j, d.L) - 1) * Cf + k % Cf);
                        return make_float4(v.x * s.x, v.y * s.y, v.z * s.z, v.w * s.w);
                      },
                      acc);
    // Residual loads a row at a time here: the whole tile's would spill beside the gate tables.
    const int tx = tile_tx(), ty = tile_ty();
#pragma unroll
    for (int r = 0; r < TR; ++r) {
      const int row = row0 + ty * TR + r;
      if (row >= Ec) continue;
      float4 u[NC1];
#pragma unroll
      for (int j = 0; j < NC1; ++j) {
        const int c = 64 * j + 4 * tx;
        u[j] = c < N1 ? ld4(Gin + fo + (size_t)row * d.ROW + d.M0 + c) : zero4();
      }
#pragma unroll
      for (int j = 0; j < NC1; ++j) {
        const int c = 64 * j + 4 * tx;
        if (c >= N1) continue;
        const float4 a = quad<TR, NC1>(acc, r, j);
        st4(Gout + fo + (size_t)row * d.ROW + d.M0 + c,
            make_float4(u[j].x + a.x, u[j].y + a.y, u[j].z + a.z, u[j].w + a.w));
      }
    }
  }
}

enum class Pass { kForward, kReplay, kBackward };

template <int TR, int NC0, int NC1>
void launch_tile(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                 Pass pass, cudaStream_t s) {
  const bool bwd = pass == Pass::kBackward;
  const size_t bytes = smem_floats(d, Tile<TR>::BM, bwd) * sizeof(float);
  const dim3 grid(div_up(Ec, Tile<TR>::BM), d.F);
  const void* fn = bwd ? (const void*)stack_backward_k<TR, NC0, NC1> : (const void*)stack_forward_k<TR, NC0, NC1>;
  if (bytes > 48 * 1024) SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  if (bwd)
    stack_backward_k<TR, NC0, NC1><<<grid, kThreads, bytes, s>>>(d, w, layer, Ec, in, out, z);
  else if (pass == Pass::kReplay)
    stack_forward_k<TR, NC0, NC1><<<grid, kThreads, bytes, s>>>(d, w, layer, Ec, in, out, nullptr, z);
  else
    stack_forward_k<TR, NC0, NC1><<<grid, kThreads, bytes, s>>>(d, w, layer, Ec, in, out, z, nullptr);
}

// Column quads per thread (N / 64 rounded up) compiled for the supported widths.
void launch_stack(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z, Pass pass,
                  cudaStream_t s) {
  if (Ec == 0) return;
  const int n0 = pad64(d.M0) / 64, n1 = pad64(2 * d.M1) / 64;
  if (n0 <= 1 && n1 <= 1) launch_tile<4, 1, 1>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 1 && n1 <= 2) launch_tile<4, 1, 2>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 2 && n1 <= 2) launch_tile<4, 2, 2>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 2 && n1 <= 3) launch_tile<4, 2, 3>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 3 && n1 <= 4) launch_tile<4, 3, 4>(d, w, layer, Ec, in, out, z, pass, s);
  else launch_tile<4, 6, 6>(d, w, layer, Ec, in, out, z, pass, s);
  SEZM_LAUNCH(pass == Pass::kBackward ? "stack_backward" : pass == Pass::kReplay ? "stack_replay" : "stack_forward");
}

// ---- per-chunk radial conditioning tables on the same tiled inner product ----
// Without the degree mixer, Rh[i, l, :] = R(e0 + i, l, :) W_rh (rows (i, l), K = C, N = Cw; R formed
// from rho + type rows in the operand load). With it only the kernel values are used, and W_rh
// folds into the mixer on the host (mixp = blockdiag(W_rh) W_mix, ((L+1)C, Kp)): kern[i, :] =
// R(e0 + i, :, :) mixp (rows i, K = (L+1) C). The backward's radial adjoint runs the transposed
// products on the same kernel, adding into R_bar (kAcc).
enum RadialA { kDenseA = 0, kRByDegree = 1, kRByEdge = 2 };
template <int NC4, int kFromR, bool kAcc = false>
__global__ void __launch_bounds__(kThreads, 2) radial_prep_k(Dims d, int rows, int K, int N, EdgeRadialIn R, int e0,
                                                             const float* __restrict__ A, const float* __restrict__ B,
                                                             float* out) {
  __shared__ float4 smem4[(kBK * Tile<4>::AS + kBK * 64 * NC4) / 4];
  StackSmem sm;
  sm.As = reinterpret_cast<float*>(smem4);
  sm.Bs = sm.As + kBK * Tile<4>::AS;
  const int row0 = blockIdx.x * Tile<4>::BM;
  float acc[4][4 * NC4];
  zero<4, NC4>(acc);
  tile_mma<4, NC4>(sm, K, N, B,
                   [&](int r, int k) {
                     const int rr = row0 + r;
                     if (rr >= rows) return zero4();
                     if (kFromR == kDenseA) return ld4(A + (size_t)rr * K + k);
                     const int e = kFromR == kRByEdge ? e0 + rr : e0 + rr / (d.L + 1);
                     const int l = kFromR == kRByEdge ? k / d.C : rr % (d.L + 1), a = kFromR == kRByEdge ? k % d.C : k;
                     return make_float4(R(d, e, l, a), R(d, e, l, a + 1), R(d, e, l, a + 2), R(d, e, l, a + 3));
                   },
                   acc);
  // A row's earlier values are all loaded before its first store (a round trip per row, not per
  // quad; a whole-tile prefetch would spill).
  const int tx = tile_tx(), ty = tile_ty();
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row0 + ty * 4 + r;
    if (row >= rows) continue;
    float4 o[NC4];
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = 64 * j + 4 * tx;
      o[j] = (kAcc && c < N) ? ld4(out + (size_t)row * N + c) : zero4();
    }
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = 64 * j + 4 * tx;
      if (c >= N) continue;
      const float4 v = quad<4, NC4>(acc, r, j);
      st4(out + (size_t)row * N + c, make_float4(o[j].x + v.x, o[j].y + v.y, o[j].z + v.z, o[j].w + v.w));
    }
  }
}

// Without a hidden projection (C == Cw) Rh is R itself.
__global__ void radial_copy_k(Dims d, int Ec, EdgeRadialIn R, int e0, float* Rh) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const long W = (long)(d.L + 1) * d.C;
  if (i >= (long)Ec * W) return;
  const int e = e0 + (int)(i / W), l = (int)((i % W) / d.C), a = (int)(i % d.C);
  Rh[i] = R(d, e, l, a);
}

template <int kFromR, bool kAcc = false>
void launch_prep_gemm(const Dims& d, int rows, int K, int N, const EdgeRadialIn& R, int e0, const float* A,
                      const float* B, float* out, cudaStream_t s) {
  const int grid = div_up(rows, Tile<4>::BM), nc4 = (N + 63) / 64;
  if (nc4 <= 1) radial_prep_k<1, kFromR, kAcc><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  else if (nc4 == 2) radial_prep_k<2, kFromR, kAcc><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  else if (nc4 == 3) radial_prep_k<3, kFromR, kAcc><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  else radial_prep_k<4, kFromR, kAcc><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  SEZM_LAUNCH(kAcc ? "radial_adjoint" : "radial_prep");
}

}  // namespace

void launch_radial_prep(const Dims& d, const BlockWDev& w, int e0, int Ec, const EdgeRadialIn& R, float* Rh,
                        float* kern, cudaStream_t s) {
  if (Ec == 0) return;
  if (d.degree_mixer) {
    launch_prep_gemm<kRByEdge>(d, Ec, (d.L + 1) * d.C, padded_kernel_size(d), R, e0, nullptr, w.mixp, kern, s);
  } else if (d.has_rh) {
    launch_prep_gemm<kRByDegree>(d, Ec * (d.L + 1), d.C, d.Cw, R, e0, nullptr, w.rh, Rh, s);
  } else {
    const long n = (long)Ec * (d.L + 1) * d.C;
    radial_copy_k<<<div_up(n, 256), 256, 0, s>>>(d, Ec, R, e0, Rh);
    SEZM_LAUNCH("radial_copy");
  }
}

void launch_radial_adjoint(const Dims& d, const BlockWDev& w, int e0, int Ec, float* Rh, const float* kb,
                           float* R_bar, cudaStream_t s) {
  if (Ec == 0) return;
  float* Rb = R_bar;  // the chunk's rows
  if (d.degree_mixer)  // R_bar += kb mixp^T (kb's pad columns are zero)
    launch_prep_gemm<kDenseA, true>(d, Ec, padded_kernel_size(d), (d.L + 1) * d.C, EdgeRadialIn{}, e0, kb, w.mixT,
                                    Rb, s);
  else if (d.has_rh)  // R_bar += Rh_bar W_rh^T, rows (i, l)
    launch_prep_gemm<kDenseA, true>(d, Ec * (d.L + 1), d.Cw, d.C, EdgeRadialIn{}, e0, Rh, w.rhT, Rb, s);
}

// ---- throughput probe of the tile product alone (bench/stack_probe.cu) ----
// C = A B over `rows` rows with the stack's tile and inner product, the result stored once: A
// streamed from HBM as the layer kernels stream it (hbm_a), or made in registers from (row, k)
// so that no operand leaves the chip. Separates the inner product's own ceiling from what the
// layer kernels add around it (residual epilogues, gate tables, HBM streaming).
template <int TR, int NC4, bool kHbmA, int kMinBlocks, int kUnroll>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    tile_probe_k(int rows, int K, int N, const float* __restrict__ A, int lda, const float* __restrict__ B, float* C) {
  extern __shared__ float4 smem4[];
  StackSmem sm;
  sm.As = reinterpret_cast<float*>(smem4);
  sm.Bs = sm.As + kBK * Tile<TR>::AS;
  const int row0 = blockIdx.x * Tile<TR>::BM;
  float acc[TR][4 * NC4];
  zero<TR, NC4>(acc);
  tile_mma<TR, NC4, kUnroll>(sm, K, N, B,
                             [&](int r, int k) {
                               const int rr = row0 + r;
                               if (kHbmA) return rr < rows ? ld4(A + (size_t)rr * lda + k) : zero4();
                               const float v = 1e-3f * (float)((rr * 7 + k) & 63);
                               return make_float4(v, v + 1e-3f, v - 1e-3f, v + 2e-3f);
                             },
                             acc);
  for_each_quad<TR, NC4>(row0, rows, N, [&](int r, int j, int row, int c) {
    st4(C + (size_t)row * N + c, quad<TR, NC4>(acc, r, j));
  });
}

template <int TR, int NC4, int kMinBlocks = (TR == 4 ? 2 : 1), int kUnroll = 4>
void launch_probe(bool hbm_a, int rows, int K, int N, const float* A, int lda, const float* B, float* C,
                  cudaStream_t s) {
  const size_t bytes = ((size_t)kBK * Tile<TR>::AS + (size_t)kBK * 64 * NC4) * sizeof(float);
  const dim3 grid(div_up(rows, Tile<TR>::BM));
  if (hbm_a) tile_probe_k<TR, NC4, true, kMinBlocks, kUnroll><<<grid, kThreads, bytes, s>>>(rows, K, N, A, lda, B, C);
  else tile_probe_k<TR, NC4, false, kMinBlocks, kUnroll><<<grid, kThreads, bytes, s>>>(rows, K, N, A, lda, B, C);
  SEZM_LAUNCH("tile_probe");
}

void launch_tile_probe(int variant, bool hbm_a, int rows, int K, int N, const float* A, int lda, const float* B,
                       float* C, cudaStream_t s) {
  const bool wide = pad64(N) / 64 > 2;
  switch (variant) {
    case 0:  // the layers' tile: 64 rows, 4 x 4NC per thread, 2 CTAs per SM, k loop unrolled by 4
      if (wide) launch_probe<4, 3>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<4, 2>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    case 1:  // 128 rows, 8 x 4NC per thread, 1 CTA per SM
      if (wide) launch_probe<8, 3>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<8, 2>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    case 2:  // the layers' tile with the k loop fully unrolled
      if (wide) launch_probe<4, 3, 2, kBK>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<4, 2, 2, kBK>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    default:  // 128 rows at 2 CTAs per SM (<= 128 registers: 8 x 8 per thread; N <= 128 only)
      if (wide) throw Error("tile probe variant 3 takes N <= 128");
      launch_probe<8, 2, 2>(hbm_a, rows, K, N, A, lda, B, C, s);
  }
}

size_t stack_smem_bytes(const Dims& d) { return smem_floats(d, Tile<4>::BM, true) * sizeof(float); }

void launch_stack_layer_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                                float* Zsave, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Uin, Uout, Zsave, Pass::kForward, s);
}

void launch_stack_layer_replay(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                               const float* Z, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Uin, Uout, const_cast<float*>(Z), Pass::kReplay, s);
}

void launch_stack_layer_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Gin, float* Gout,
                                 const float* Z, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Gin, Gout, const_cast<float*>(Z), Pass::kBackward, s);
}

}  // namespace sezm::cuda
