// The gated SO(2) mixing stack (docs/sezm/02 §3.4, backward §9.9), one fused kernel per layer.
//
// Layout: activations focus-major (F, Ec, ROW), ROW = Dm*Cf; the m = 0 group is the first
// M0 = (L+1)Cf columns, the |m| = 1 group the last 2*M1 = 2*L*Cf columns, whose weight is the
// assembled [[Wu, Wv], [-Wv, Wu]]. A CTA owns BM whole rows (edges) of one focus, so the gate
// sigmoids of its rows, computed from the m = 0 scalar pre-activation, stay in shared memory:
//  forward (gated layer):  z0 = U0 A; S = sigmoid(z0[:, :Cf] G); U0' = U0 + [silu(z00), z0 * S];
//                          z1 = U1 W1; U1' = U1 + z1 * S;  z = [z0, z1] saved (fast/lean chunk);
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

// CTA tile: kBM edges x all N columns of one group. Thread (warp w, lane t) owns rows
// 8w..8w+7 and columns t + 32 i (i < NC): A is read as two 16-byte broadcasts per k, B as one
// conflict-free word per column, so each k step is 8*NC FFMA per 2 + NC shared loads.
constexpr int kBM = 64, kBK = 16, kThreads = 256, kRows = 8;

struct StackSmem {
  float* As;  // kBK x (kBM + 4), k-major (a thread's 8 rows are contiguous)
  float* Bs;  // kBK x N
  float* Zs;  // kBM x Cf   (scalar pre-activation, forward; z_bar scalar row, backward)
  float* S;   // kBM x L*Cf (gate sigmoids)
  float* T;   // kBM x L*Cf (eta, backward)
};

constexpr int kAsStride = kBM + 4;

size_t stack_smem_floats(const Dims& d) {
  const int nmax = d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1;
  return (size_t)kBK * kAsStride + (size_t)kBK * nmax + (size_t)kBM * d.Cf + 2 * (size_t)kBM * d.L * d.Cf;
}

__device__ StackSmem carve(const Dims& d, float* base) {
  const int nmax = d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1;
  StackSmem s;
  s.As = base;
  s.Bs = s.As + kBK * kAsStride;
  s.Zs = s.Bs + kBK * nmax;
  s.S = s.Zs + kBM * d.Cf;
  s.T = s.S + kBM * d.L * d.Cf;
  return s;
}

// acc[r][i] += sum_k A(row0 + 8w + r, k) B(k, t + 32 i). `loadA4(row, k)` returns A(row, k..k+3)
// (the prologue: the raw activation, or the gradient with the gates applied). K % 4 == 0 and
// N % 4 == 0 for every supported model (widths are multiples of 16). The next k-tile is fetched
// into registers while the current one is multiplied, so global latency hides behind the FFMAs.

template <int NC, class LoadA4>
__device__ __forceinline__ void tile_mma(const StackSmem& sm, int K, int N, const float* __restrict__ B, LoadA4 loadA4,
                                         float (&acc)[kRows][NC]) {
  const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
  constexpr int kAPer = kBM * kBK / 4 / kThreads;
  constexpr int kMaxBPer = (kBK * 32 * NC / 4 + kThreads - 1) / kThreads;  // float4 of B per thread, N <= 32 NC
  const int nb4 = kBK * (N / 4);
  float4 ra[kAPer], rb[kMaxBPer];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      ra[i] = (k0 + k4 < K) ? loadA4(r, k0 + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kMaxBPer; ++j) {
      const int idx = tid + j * kThreads;
      if (idx < nb4) {
        const int k = idx / (N / 4), n4 = (idx % (N / 4)) * 4;
        rb[j] = (k0 + k < K) ? __ldg(reinterpret_cast<const float4*>(B + (size_t)(k0 + k) * N + n4))
                             : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  };
  auto stash = [&]() {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      sm.As[(k4 + 0) * kAsStride + r] = ra[i].x;
      sm.As[(k4 + 1) * kAsStride + r] = ra[i].y;
      sm.As[(k4 + 2) * kAsStride + r] = ra[i].z;
      sm.As[(k4 + 3) * kAsStride + r] = ra[i].w;
    }
#pragma unroll
    for (int j = 0; j < kMaxBPer; ++j) {
      const int idx = tid + j * kThreads;
      if (idx < nb4) {
        const int k = idx / (N / 4), n4 = (idx % (N / 4)) * 4;
        *reinterpret_cast<float4*>(sm.Bs + k * N + n4) = rb[j];
      }
    }
  };
  fetch(0);
  for (int k0 = 0; k0 < K; k0 += kBK) {
    stash();
    __syncthreads();
    if (k0 + kBK < K) fetch(k0 + kBK);
#pragma unroll 4
    for (int k = 0; k < kBK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(sm.As + k * kAsStride + ty * kRows);
      const float4 a1 = *reinterpret_cast<const float4*>(sm.As + k * kAsStride + ty * kRows + 4);
      const float a[kRows] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = tx + 32 * i;
        const float b = c < N ? sm.Bs[k * N + c] : 0.0f;
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][i] = fmaf(a[r], b, acc[r][i]);
      }
    }
    __syncthreads();
  }
}

template <int NC>
__device__ __forceinline__ void zero(float (&acc)[kRows][NC]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int i = 0; i < NC; ++i) acc[r][i] = 0.0f;
}

// Calls f(r, i, row, c) for each of the thread's outputs inside the tile (row < Ec, c < N):
// accumulator acc[r][i] belongs to edge `row` and column `c`.
template <int NC, class F>
__device__ __forceinline__ void for_each_output(int row0, int Ec, int N, F f) {
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + ty * kRows + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int i = 0; i < NC; ++i) {
      const int c = tx + 32 * i;
      if (c < N) f(r, i, row, c);
    }
  }
}

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// S[r][g*Cf + b] = sigmoid(sum_a Zs[r][a] G[a][g*Cf + b]) for the CTA's rows.
__device__ void gate_sigmoids(const Dims& d, const StackSmem& sm, const float* __restrict__ G) {
  const int LC = d.L * d.Cf;
  for (int i = threadIdx.x; i < kBM * LC; i += kThreads) {
    const int r = i / LC, o = i % LC;
    float t = 0.0f;
    for (int a = 0; a < d.Cf; ++a) t = fmaf(sm.Zs[r * d.Cf + a], __ldg(G + a * LC + o), t);
    sm.S[i] = sigmoidf_(t);
  }
}

template <int NC0, int NC1>
__global__ void __launch_bounds__(kThreads) stack_forward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                            const float* __restrict__ Uin, float* Uout, float* Zsave) {
  extern __shared__ float4 smem4[];
  const StackSmem sm = carve(d, reinterpret_cast<float*>(smem4));
  const int f = blockIdx.y, row0 = blockIdx.x * kBM;
  const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* U = Uin + fo;
  const float* A = w.A + ((size_t)layer * d.F + f) * d.M0 * d.M0;
  const float* W1 = w.W1 + ((size_t)layer * d.F + f) * 4 * d.M1 * d.M1;
  const int LC = d.L * d.Cf;

  // ---- m = 0 group ----
  {
    float acc[kRows][NC0];
    zero(acc);
    tile_mma<NC0>(sm, d.M0, d.M0, A,
                  [&](int r, int k) {
                    return row0 + r < Ec ? ld4(U + (size_t)(row0 + r) * d.ROW + k) : make_float4(0.f, 0.f, 0.f, 0.f);
                  },
                  acc);
    if (gated) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int i = 0; i < NC0; ++i) {
          const int c = tx + 32 * i;
          if (c < d.Cf) sm.Zs[(ty * kRows + r) * d.Cf + c] = acc[r][i];
        }
      __syncthreads();
      gate_sigmoids(d, sm, w.G + ((size_t)layer * d.F + f) * d.Cf * LC);
      __syncthreads();
    }
    for_each_output<NC0>(row0, Ec, d.M0, [&](int r, int i, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + c;
      const float z = acc[r][i];
      float v;
      if (!gated) v = z;
      else if (c < d.Cf) v = siluf_(z);
      else v = z * sm.S[(ty * kRows + r) * LC + (c / d.Cf - 1) * d.Cf + c % d.Cf];
      if (gated && Zsave) Zsave[o] = z;
      Uout[o] = Uin[o] + v;
    });
  }
  // ---- |m| = 1 group ----
  {
    float acc[kRows][NC1];
    zero(acc);
    const int N1 = 2 * d.M1;
    tile_mma<NC1>(sm, N1, N1, W1,
                  [&](int r, int k) {
                    return row0 + r < Ec ? ld4(U + (size_t)(row0 + r) * d.ROW + d.M0 + k)
                                         : make_float4(0.f, 0.f, 0.f, 0.f);
                  },
                  acc);
    for_each_output<NC1>(row0, Ec, N1, [&](int r, int i, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + d.M0 + c;
      const float z = acc[r][i];
      float v = z;
      if (gated) {
        const int j = d.L + 1 + c / d.Cf;
        v = z * sm.S[(ty * kRows + r) * LC + (red_l(j, d.L) - 1) * d.Cf + c % d.Cf];
        if (Zsave) Zsave[o] = z;
      }
      Uout[o] = Uin[o] + v;
    });
  }
}

template <int NC0, int NC1>
__global__ void __launch_bounds__(kThreads) stack_backward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                             const float* __restrict__ Gin, float* Gout,
                                                             const float* __restrict__ Zin) {
  extern __shared__ float4 smem4[];
  const StackSmem sm = carve(d, reinterpret_cast<float*>(smem4));
  const int f = blockIdx.y, row0 = blockIdx.x * kBM;
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
    for (int i = tid; i < kBM * Cf; i += kThreads) {
      const int r = i / Cf, a = i % Cf;
      sm.Zs[i] = row0 + r < Ec ? Z[(size_t)(row0 + r) * d.ROW + a] : 0.0f;
    }
    __syncthreads();
    gate_sigmoids(d, sm, Gw);
    __syncthreads();
    // eta = s_bar * S (1 - S), s_bar[g][b] = sum over the three orders of degree g+1 of g * z.
    for (int i = tid; i < kBM * LC; i += kThreads) {
      const int r = i / LC, gg = (i % LC) / Cf, b = i % Cf;
      float sb = 0.0f;
      if (row0 + r < Ec) {
        const size_t base = (size_t)(row0 + r) * d.ROW;
        const int rows[3] = {gg + 1, d.L + gg + 1, 2 * d.L + gg + 1};
        for (int t = 0; t < 3; ++t) sb += g[base + rows[t] * Cf + b] * Z[base + rows[t] * Cf + b];
      }
      const float s = sm.S[i];
      sm.T[i] = sb * s * (1.0f - s);
    }
    __syncthreads();
    // Scalar row of z_bar: g00 silu'(z00) + eta G^T; written over Zs once every read of z00 is done.
    constexpr int kMaxPer = 64 * 64 / kThreads;  // kBM * Cf / threads for Cf <= 64
    float zb[kMaxPer];
    int cnt = 0;
    for (int i = tid; i < kBM * Cf; i += kThreads, ++cnt) {
      const int r = i / Cf, a = i % Cf;
      float v = 0.0f;
      if (row0 + r < Ec) {
        v = g[(size_t)(row0 + r) * d.ROW + a] * silu_gradf_(sm.Zs[i]);
        for (int o = 0; o < LC; ++o) v = fmaf(sm.T[r * LC + o], __ldg(GwT + o * Cf + a), v);
      }
      zb[cnt] = v;
    }
    __syncthreads();
    cnt = 0;
    for (int i = tid; i < kBM * Cf; i += kThreads, ++cnt) sm.Zs[i] = zb[cnt];
    __syncthreads();
  }

  // ---- m = 0 group: G0' = g0 + z_bar0 A^T ----
  {
    float acc[kRows][NC0];
    zero(acc);
    tile_mma<NC0>(sm, d.M0, d.M0, AT,
                  [&](int r, int k) {
                    if (row0 + r >= Ec) return make_float4(0.f, 0.f, 0.f, 0.f);
                    float4 v = ld4(g + (size_t)(row0 + r) * d.ROW + k);
                    if (!gated) return v;
                    if (k < Cf) return ld4(sm.Zs + r * Cf + k);
                    const float* s = sm.S + r * LC + (k / Cf - 1) * Cf + k % Cf;
                    v.x *= s[0]; v.y *= s[1]; v.z *= s[2]; v.w *= s[3];
                    return v;
                  },
                  acc);
    for_each_output<NC0>(row0, Ec, d.M0, [&](int r, int i, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + c;
      Gout[o] = Gin[o] + acc[r][i];
    });
  }
  // ---- |m| = 1 group: G1' = g1 + (g1 * S) W1^T ----
  {
    float acc[kRows][NC1];
    zero(acc);
    const int N1 = 2 * d.M1;
    tile_mma<NC1>(sm, N1, N1, W1T,
                  [&](int r, int k) {
                    if (row0 + r >= Ec) return make_float4(0.f, 0.f, 0.f, 0.f);
                    float4 v = ld4(g + (size_t)(row0 + r) * d.ROW + d.M0 + k);
                    if (!gated) return v;
                    const int j = d.L + 1 + k / Cf;
                    const float* s = sm.S + r * LC + (red_l(j, d.L) - 1) * Cf + k % Cf;
                    v.x *= s[0]; v.y *= s[1]; v.z *= s[2]; v.w *= s[3];
                    return v;
                  },
                  acc);
    for_each_output<NC1>(row0, Ec, N1, [&](int r, int i, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + d.M0 + c;
      Gout[o] = Gin[o] + acc[r][i];
    });
  }
}

void set_smem(const void* fn, size_t bytes) {
  if (bytes > 48 * 1024) SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// Column counts per thread (N / 32 rounded up) compiled for the supported widths.
template <int NC0, int NC1>
void launch_pair(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z, bool fwd,
                 cudaStream_t s) {
  const size_t bytes = stack_smem_floats(d) * sizeof(float);
  const dim3 grid(div_up(Ec, kBM), d.F);
  if (fwd) {
    set_smem((const void*)stack_forward_k<NC0, NC1>, bytes);
    stack_forward_k<NC0, NC1><<<grid, kThreads, bytes, s>>>(d, w, layer, Ec, in, out, z);
  } else {
    set_smem((const void*)stack_backward_k<NC0, NC1>, bytes);
    stack_backward_k<NC0, NC1><<<grid, kThreads, bytes, s>>>(d, w, layer, Ec, in, out, z);
  }
}

void launch_stack(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z, bool fwd,
                  cudaStream_t s) {
  if (Ec == 0) return;
  const int n0 = (d.M0 + 31) / 32, n1 = (2 * d.M1 + 31) / 32;
  if (n0 <= 1 && n1 <= 1) launch_pair<1, 1>(d, w, layer, Ec, in, out, z, fwd, s);
  else if (n0 <= 3 && n1 <= 4) launch_pair<3, 4>(d, w, layer, Ec, in, out, z, fwd, s);
  else if (n0 <= 4 && n1 <= 6) launch_pair<4, 6>(d, w, layer, Ec, in, out, z, fwd, s);
  else if (n0 <= 6 && n1 <= 8) launch_pair<6, 8>(d, w, layer, Ec, in, out, z, fwd, s);
  else launch_pair<8, 12>(d, w, layer, Ec, in, out, z, fwd, s);
  SEZM_LAUNCH(fwd ? "stack_forward" : "stack_backward");
}

}  // namespace

size_t stack_smem_bytes(const Dims& d) { return stack_smem_floats(d) * sizeof(float); }

void launch_stack_layer_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                                float* Zsave, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Uin, Uout, Zsave, true, s);
}

void launch_stack_layer_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Gin, float* Gout,
                                 const float* Z, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Gin, Gout, const_cast<float*>(Z), false, s);
}

}  // namespace sezm::cuda
