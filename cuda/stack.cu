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
// a tensor-core split later: operands are staged in shared memory in (k, n) order.
#include "kernels.cuh"

namespace sezm::cuda {
namespace {

constexpr int kBM = 32, kBK = 16, kThreads = 256, kRows = 4, kMaxCols = 12;  // N <= 384

struct StackSmem {
  float* As;  // kBM x (kBK + 1)
  float* Bs;  // kBK x N
  float* Zs;  // kBM x Cf   (scalar pre-activation, forward; z_bar scalar row, backward)
  float* S;   // kBM x L*Cf (gate sigmoids)
  float* T;   // kBM x L*Cf (eta, backward)
};

__host__ __device__ inline size_t stack_smem_floats(const Dims& d) {
  const int nmax = d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1;
  return (size_t)kBM * (kBK + 1) + (size_t)kBK * nmax + (size_t)kBM * d.Cf + 2 * (size_t)kBM * d.L * d.Cf;
}

__device__ StackSmem carve(const Dims& d, float* base) {
  const int nmax = d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1;
  StackSmem s;
  s.As = base;
  s.Bs = s.As + kBM * (kBK + 1);
  s.Zs = s.Bs + kBK * nmax;
  s.S = s.Zs + kBM * d.Cf;
  s.T = s.S + kBM * d.L * d.Cf;
  return s;
}

// acc[r][i] += sum_k A(row0 + r, k) B(k, col_i) over K, for the thread's 4 rows and the columns
// tx + 32 i. `loadA(row, k)` supplies A elements (prologue fusion); B is row-major (K x N).
template <class LoadA>
__device__ void tile_mma(const StackSmem& sm, int K, int N, const float* __restrict__ B, LoadA loadA,
                         float (&acc)[kRows][kMaxCols]) {
  const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
  const int ncol = (N + 31) / 32;
  for (int k0 = 0; k0 < K; k0 += kBK) {
    for (int i = tid; i < kBM * kBK; i += kThreads) {
      const int r = i / kBK, k = i % kBK;
      sm.As[r * (kBK + 1) + k] = (k0 + k < K) ? loadA(r, k0 + k) : 0.0f;
    }
    for (int i = tid; i < kBK * N; i += kThreads) {
      const int k = i / N, n = i % N;
      sm.Bs[k * N + n] = (k0 + k < K) ? B[(size_t)(k0 + k) * N + n] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      float a[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) a[r] = sm.As[(ty * kRows + r) * (kBK + 1) + k];
#pragma unroll
      for (int i = 0; i < kMaxCols; ++i) {
        if (i < ncol && tx + 32 * i < N) {
          const float b = sm.Bs[k * N + tx + 32 * i];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][i] += a[r] * b;
        }
      }
    }
    __syncthreads();
  }
}

__device__ inline void zero(float (&acc)[kRows][kMaxCols]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) acc[r][i] = 0.0f;
}

// S[r][g*Cf + b] = sigmoid(sum_a Zs[r][a] G[a][g*Cf + b]) for the CTA's rows.
__device__ void gate_sigmoids(const Dims& d, const StackSmem& sm, const float* __restrict__ G) {
  const int LC = d.L * d.Cf;
  for (int i = threadIdx.x; i < kBM * LC; i += kThreads) {
    const int r = i / LC, o = i % LC;
    float t = 0.0f;
    for (int a = 0; a < d.Cf; ++a) t += sm.Zs[r * d.Cf + a] * G[a * LC + o];
    sm.S[i] = sigmoidf_(t);
  }
}

__global__ void __launch_bounds__(kThreads) stack_forward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                            const float* __restrict__ Uin, float* Uout, float* Zsave) {
  extern __shared__ float smem[];
  const StackSmem sm = carve(d, smem);
  const int f = blockIdx.y, row0 = blockIdx.x * kBM;
  const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* U = Uin + fo;
  const float* A = w.A + ((size_t)layer * d.F + f) * d.M0 * d.M0;
  const float* W1 = w.W1 + ((size_t)layer * d.F + f) * 4 * d.M1 * d.M1;
  const int LC = d.L * d.Cf;
  float acc[kRows][kMaxCols];

  // ---- m = 0 group ----
  zero(acc);
  tile_mma(sm, d.M0, d.M0, A,
           [&](int r, int k) { return row0 + r < Ec ? U[(size_t)(row0 + r) * d.ROW + k] : 0.0f; }, acc);
  if (gated) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < kMaxCols; ++i) {
        const int c = tx + 32 * i;
        if (c < d.Cf) sm.Zs[(ty * kRows + r) * d.Cf + c] = acc[r][i];
      }
    __syncthreads();
    gate_sigmoids(d, sm, w.G + ((size_t)layer * d.F + f) * d.Cf * LC);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + ty * kRows + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) {
      const int c = tx + 32 * i;
      if (c >= d.M0) continue;
      const size_t o = fo + (size_t)row * d.ROW + c;
      const float z = acc[r][i];
      float v;
      if (!gated) v = z;
      else if (c < d.Cf) v = siluf_(z);
      else v = z * sm.S[(ty * kRows + r) * LC + (c / d.Cf - 1) * d.Cf + c % d.Cf];
      if (gated && Zsave) Zsave[o] = z;
      Uout[o] = Uin[o] + v;
    }
  }

  // ---- |m| = 1 group ----
  zero(acc);
  const int N1 = 2 * d.M1;
  tile_mma(sm, N1, N1, W1,
           [&](int r, int k) { return row0 + r < Ec ? U[(size_t)(row0 + r) * d.ROW + d.M0 + k] : 0.0f; }, acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + ty * kRows + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) {
      const int c = tx + 32 * i;
      if (c >= N1) continue;
      const size_t o = fo + (size_t)row * d.ROW + d.M0 + c;
      const float z = acc[r][i];
      float v = z;
      if (gated) {
        const int j = d.L + 1 + c / d.Cf;
        v = z * sm.S[(ty * kRows + r) * LC + (red_l(j, d.L) - 1) * d.Cf + c % d.Cf];
        if (Zsave) Zsave[o] = z;
      }
      Uout[o] = Uin[o] + v;
    }
  }
}

__global__ void __launch_bounds__(kThreads) stack_backward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                             const float* __restrict__ Gin, float* Gout,
                                                             const float* __restrict__ Zin) {
  extern __shared__ float smem[];
  const StackSmem sm = carve(d, smem);
  const int f = blockIdx.y, row0 = blockIdx.x * kBM;
  const int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* g = Gin + fo;
  const float* Z = gated ? Zin + fo : nullptr;
  const float* AT = w.AT + ((size_t)layer * d.F + f) * d.M0 * d.M0;
  const float* W1T = w.W1T + ((size_t)layer * d.F + f) * 4 * d.M1 * d.M1;
  const int LC = d.L * d.Cf, Cf = d.Cf;

  if (gated) {
    const float* Gw = w.G + ((size_t)layer * d.F + f) * Cf * LC;
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
    // scalar row of z_bar: g00 silu'(z00) + eta G^T  (overwrites Zs after all reads of z00 are done)
    float zb[8];
    int cnt = 0;
    for (int i = tid; i < kBM * Cf; i += kThreads, ++cnt) {
      const int r = i / Cf, a = i % Cf;
      float v = 0.0f;
      if (row0 + r < Ec) {
        v = g[(size_t)(row0 + r) * d.ROW + a] * silu_gradf_(sm.Zs[i]);
        for (int o = 0; o < LC; ++o) v += sm.T[r * LC + o] * Gw[a * LC + o];
      }
      zb[cnt] = v;
    }
    __syncthreads();
    cnt = 0;
    for (int i = tid; i < kBM * Cf; i += kThreads, ++cnt) sm.Zs[i] = zb[cnt];
    __syncthreads();
  }

  float acc[kRows][kMaxCols];
  // ---- m = 0 group: G0' = g0 + z_bar0 A^T ----
  zero(acc);
  tile_mma(sm, d.M0, d.M0, AT,
           [&](int r, int k) {
             if (row0 + r >= Ec) return 0.0f;
             const float gv = g[(size_t)(row0 + r) * d.ROW + k];
             if (!gated) return gv;
             if (k < Cf) return sm.Zs[r * Cf + k];
             return gv * sm.S[r * LC + (k / Cf - 1) * Cf + k % Cf];
           },
           acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + ty * kRows + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) {
      const int c = tx + 32 * i;
      if (c >= d.M0) continue;
      const size_t o = fo + (size_t)row * d.ROW + c;
      Gout[o] = Gin[o] + acc[r][i];
    }
  }
  // ---- |m| = 1 group: G1' = g1 + (g1 * S) W1^T ----
  zero(acc);
  const int N1 = 2 * d.M1;
  tile_mma(sm, N1, N1, W1T,
           [&](int r, int k) {
             if (row0 + r >= Ec) return 0.0f;
             const float gv = g[(size_t)(row0 + r) * d.ROW + d.M0 + k];
             if (!gated) return gv;
             const int j = d.L + 1 + k / Cf;
             return gv * sm.S[r * LC + (red_l(j, d.L) - 1) * Cf + k % Cf];
           },
           acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + ty * kRows + r;
    if (row >= Ec) continue;
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) {
      const int c = tx + 32 * i;
      if (c >= N1) continue;
      const size_t o = fo + (size_t)row * d.ROW + d.M0 + c;
      Gout[o] = Gin[o] + acc[r][i];
    }
  }
}

void set_smem(const void* fn, size_t bytes) {
  if (bytes > 48 * 1024) SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

}  // namespace

void launch_stack_layer_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                                float* Zsave, cudaStream_t s) {
  if (Ec == 0) return;
  const size_t bytes = stack_smem_floats(d) * sizeof(float);
  set_smem((const void*)stack_forward_k, bytes);
  stack_forward_k<<<dim3(div_up(Ec, kBM), d.F), kThreads, bytes, s>>>(d, w, layer, Ec, Uin, Uout, Zsave);
  SEZM_LAUNCH("stack_forward");
}

void launch_stack_layer_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Gin, float* Gout,
                                 const float* Z, cudaStream_t s) {
  if (Ec == 0) return;
  const size_t bytes = stack_smem_floats(d) * sizeof(float);
  set_smem((const void*)stack_backward_k, bytes);
  stack_backward_k<<<dim3(div_up(Ec, kBM), d.F), kThreads, bytes, s>>>(d, w, layer, Ec, Gin, Gout, Z);
  SEZM_LAUNCH("stack_backward");
}

}  // namespace sezm::cuda
