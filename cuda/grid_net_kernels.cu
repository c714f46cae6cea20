// Building blocks of the SO(3) grid nets (grid_net.cu; CPU twin: engine/grid_net.h,
// docs/model.md §5.10.3 and §7.12): the per-row channel maps as an fp32 tiled GEMM, and the grid
// product B(A u (.) A v) with its adjoints through the sparse coupling tensor T of SO3GridDev
// (model_dev.cuh; built once per model in device_weights.cpp), so the G x channels grid field is
// never formed: per channel |T| multiply-adds (803 for L = 2, kmax = 1) instead of 3 G J.
#include "grid_net.cuh"

namespace sezm::cuda {
namespace {

// Y[n, p, :] (+)= X[n, p, :] W[l(p)] for the packed rows p < D = (L + 1)^2 of degree l(p), W
// (L + 1, Cin, Cout) or, transposed, (L + 1, Cout, Cin); L = 0 is a plain row map (D = 1). The
// per-row and per-degree channel maps in fp32: one degree per blockIdx.z, whose N (2l + 1) rows
// (n, p = l^2 + r % (2l + 1)) form 64 x 64 output tiles (256 threads of 4 x 4), k-slabs of 16
// in shared memory.
constexpr int kLinBM = 64, kLinBN = 64, kLinBK = 16, kLinThreads = 256;
__global__ void __launch_bounds__(kLinThreads)
    row_linear_k(int N, int L, int Cin, int Cout, const float* __restrict__ X, const float* __restrict__ W,
                 float* Y, int transpose, int accumulate) {
  __shared__ __align__(16) float xs[kLinBK][kLinBM + 4];  // rows of 68 floats: float4-aligned
  __shared__ __align__(16) float ws[kLinBK][kLinBN + 4];
  const int l = blockIdx.z, m = 2 * l + 1, D = (L + 1) * (L + 1);
  const long rows = (long)N * m;
  const long r0 = (long)blockIdx.x * kLinBM;
  if (r0 >= rows) return;  // the whole CTA: degree l has fewer rows than the grid covers
  W += (size_t)l * Cin * Cout;
  // Global row of degree-l row r: node r / m, packed row l^2 + r % m.
  auto grow = [&](long r) { return (r / m) * D + l * l + r % m; };
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int o0 = blockIdx.y * kLinBN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < Cin; k0 += kLinBK) {
    for (int e = tid; e < kLinBM * kLinBK; e += kLinThreads) {
      const int r = e / kLinBK, kk = e % kLinBK, k = k0 + kk;
      const long rr = r0 + r;
      xs[kk][r] = (rr < rows && k < Cin) ? X[grow(rr) * Cin + k] : 0.0f;
    }
    for (int e = tid; e < kLinBN * kLinBK; e += kLinThreads) {
      const int o = transpose ? e / kLinBK : e % kLinBN, kk = transpose ? e % kLinBK : e / kLinBN;
      const int oo = o0 + o, k = k0 + kk;
      ws[kk][o] = (oo < Cout && k < Cin) ? (transpose ? W[(size_t)oo * Cin + k] : W[(size_t)k * Cout + oo]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kLinBK; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(&xs[kk][ty * 4]);
      const float4 b = *reinterpret_cast<const float4*>(&ws[kk][tx * 4]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long rr = r0 + ty * 4 + i;
    if (rr >= rows) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int oo = o0 + tx * 4 + j;
      if (oo >= Cout) continue;
      float* y = Y + grow(rr) * Cout + oo;
      *y = accumulate ? *y + acc[i][j] : acc[i][j];
    }
  }
}

// The grid product through the coupling tensor (SO3GridDev): per node and channel c < Cp,
// Pc[n, k, c] = sum_h pi_h sum_{i, j} T[k, i, j] U[n, i, h Cp + c] V[n, j, h Cp + c] (one
// branch without a router: pi = 1), i.e. B(sum_h pi_h (A U (.) A V)_h) of docs/model.md
// §5.10.3 re-associated. One thread per (node, channel); its operand columns live in shared
// memory, slot-major (slot i of thread t at [i nt + t]: conflict-free), private to the thread,
// so there is no barrier and finished threads may leave. Every thread walks the same entry
// list, so the entry loads are uniform across the warp.
__global__ void coupling_forward_k(int nb, int J, int Wm, int Cp, int nbr, const int* __restrict__ off,
                                   const int2* __restrict__ ent, const float* __restrict__ U,
                                   const float* __restrict__ V, const float* __restrict__ pi, float* Pc) {
  extern __shared__ float sm[];
  const int nt = blockDim.x, t = threadIdx.x;
  const long w = (long)blockIdx.x * nt + t;
  if (w >= (long)nb * Cp) return;
  const int c = w % Cp;
  const long n = w / Cp;
  float* su = sm + t;
  float* sv = sm + (size_t)J * nt + t;
  float* out = Pc + n * J * Cp + c;
  for (int h = 0; h < nbr; ++h) {
    const float* u = U + n * J * Wm + h * Cp + c;
    const float* v = V + n * J * Wm + h * Cp + c;
    for (int i = 0; i < J; ++i) {
      su[i * nt] = u[(size_t)i * Wm];
      sv[i * nt] = v[(size_t)i * Wm];
    }
    const float wh = pi ? pi[n * nbr + h] : 1.0f;
    int e = __ldg(off);
    for (int k = 0; k < J; ++k) {
      const int e1 = __ldg(off + k + 1);
      float acc = 0.0f;
      for (; e < e1; ++e) {
        const int2 q = __ldg(ent + e);
        acc = fmaf(__int_as_float(q.y) * su[(q.x & 0xffff) * nt], sv[(q.x >> 16) * nt], acc);
      }
      out[(size_t)k * Cp] = h == 0 ? wh * acc : out[(size_t)k * Cp] + wh * acc;
    }
  }
}

// Its backward (docs/model.md §7.12 through T): with p = Pc_bar[n, :, c] and per branch h,
// U_bar[a] = pi_h sum_{k, b} T[k, a, b] p[k] V[b] and V_bar[a] = pi_h sum_{k, b} T[k, a, b] p[k] U[b]
// (T is symmetric in its operands, so one list grouped by a serves both), and the router's
// partial pipart[n, h, c] = sum_a U[a] U_bar[a] / pi_h = sum_k p[k] (B(A U_h (.) A V_h))[k, c].
// U_bar, V_bar are laid out as U, V (n, J, Wm), overwritten.
__global__ void coupling_backward_k(int nb, int J, int Wm, int Cp, int nbr, const int* __restrict__ off,
                                    const int2* __restrict__ ent, const float* __restrict__ U,
                                    const float* __restrict__ V, const float* __restrict__ pi,
                                    const float* __restrict__ Pcbar, float* Ubar, float* Vbar, float* pipart) {
  extern __shared__ float sm[];
  const int nt = blockDim.x, t = threadIdx.x;
  const long w = (long)blockIdx.x * nt + t;
  if (w >= (long)nb * Cp) return;
  const int c = w % Cp;
  const long n = w / Cp;
  float* sp = sm + t;
  float* su = sm + (size_t)J * nt + t;
  float* sv = sm + (size_t)2 * J * nt + t;
  for (int k = 0; k < J; ++k) sp[k * nt] = Pcbar[(n * J + k) * Cp + c];
  for (int h = 0; h < nbr; ++h) {
    const float* u = U + n * J * Wm + h * Cp + c;
    const float* v = V + n * J * Wm + h * Cp + c;
    for (int i = 0; i < J; ++i) {
      su[i * nt] = u[(size_t)i * Wm];
      sv[i * nt] = v[(size_t)i * Wm];
    }
    const float wh = pi ? pi[n * nbr + h] : 1.0f;
    float pacc = 0.0f;
    int e = __ldg(off);
    for (int a = 0; a < J; ++a) {
      const int e1 = __ldg(off + a + 1);
      float ub = 0.0f, vb = 0.0f;
      for (; e < e1; ++e) {
        const int2 q = __ldg(ent + e);
        const float tp = __int_as_float(q.y) * sp[(q.x & 0xffff) * nt];
        const int b = q.x >> 16;
        ub = fmaf(tp, sv[b * nt], ub);
        vb = fmaf(tp, su[b * nt], vb);
      }
      const size_t o = (size_t)(n * J + a) * Wm + h * Cp + c;
      Ubar[o] = wh * ub;
      Vbar[o] = wh * vb;
      pacc = fmaf(su[a * nt], ub, pacc);
    }
    if (pipart) pipart[(n * nbr + h) * Cp + c] = pacc;
  }
}

// Threads per CTA of the coupling kernels: `slots` shared columns of J floats per thread within
// the 48 KB of static-launch shared memory (J <= 112 for L <= 3: 32 threads x 3 x 112 floats fit).
int coupling_threads(int J, int slots) {
  int nt = 128;
  while (nt > 32 && (size_t)nt * slots * J * sizeof(float) > 48 * 1024) nt /= 2;
  return nt;
}

}  // namespace

void grid_linear(int N, int L, int Cin, int Cout, const float* X, const float* W, float* Y, bool transpose,
                 bool accumulate, cudaStream_t s) {
  if (N == 0 || Cout == 0) return;
  const dim3 grid(div_up((long)N * (2 * L + 1), kLinBM), div_up(Cout, kLinBN), L + 1);
  row_linear_k<<<grid, kLinThreads, 0, s>>>(N, L, Cin, Cout, X, W, Y, transpose ? 1 : 0, accumulate ? 1 : 0);
  SEZM_LAUNCH("grid linear");
}

void launch_coupling_forward(const SO3GridDev& so3, int nb, int Wm, int Cp, int nbr, const float* U, const float* V,
                             const float* pi, float* Pc, cudaStream_t s) {
  const int nt = coupling_threads(so3.J, 2);
  const size_t bytes = (size_t)nt * 2 * so3.J * sizeof(float);
  coupling_forward_k<<<div_up((long)nb * Cp, nt), nt, bytes, s>>>(
      nb, so3.J, Wm, Cp, nbr, so3.t_fwd_off, reinterpret_cast<const int2*>(so3.t_fwd), U, V, pi, Pc);
  SEZM_LAUNCH("grid product (coupling)");
}

void launch_coupling_backward(const SO3GridDev& so3, int nb, int Wm, int Cp, int nbr, const float* U, const float* V,
                              const float* pi, const float* Pcbar, float* Ubar, float* Vbar, float* pipart,
                              cudaStream_t s) {
  const int nt = coupling_threads(so3.J, 3);
  const size_t bytes = (size_t)nt * 3 * so3.J * sizeof(float);
  coupling_backward_k<<<div_up((long)nb * Cp, nt), nt, bytes, s>>>(
      nb, so3.J, Wm, Cp, nbr, so3.t_bwd_off, reinterpret_cast<const int2*>(so3.t_bwd), U, V, pi, Pcbar, Ubar, Vbar,
      pipart);
  SEZM_LAUNCH("grid product backward (coupling)");
}

}  // namespace sezm::cuda
