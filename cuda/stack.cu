// The gated SO(2) mixing stack (docs/model.md §5.4, backward §7.10), one fused kernel per layer.
//
// Layout: activations focus-major (F, Ec, ROW), ROW = Dm*Cf; the m = 0 group is the first
// M0 = (L+1)Cf columns, the |m| = 1 group the last 2*M1 = 2*L*Cf columns, whose weight is the
// assembled [[Wu, Wv], [-Wv, Wu]]. A CTA owns BM whole rows (edges) of one focus, so the gate
// sigmoids of its rows, computed from the m = 0 scalar pre-activation, stay in shared memory:
//  forward (gated layer):  z0 = U0 A; S = sigmoid(z0[:, :Cf] G); U0' = U0 + [silu(z00), z0 * S];
//                          z1 = U1 W1; U1' = U1 + z1 * S;  z = [z0, z1] saved (fast mode, lean recompute);
//  forward (identity):     U' = U + U W;
//  backward (gated):       S recomputed from the saved z00; z_bar built on the fly while loading
//                          the GEMM's A operand (g * S on value rows, g silu'(z00) + eta G^T on
//                          the scalar row); G' = g + z_bar W^T. Neither S nor z_bar reaches HBM.
//  backward (identity):    G' = g + g W^T.
// Numerics: the tile products in IEEE fp32 FFMA, or in one TF32 pass on tensor cores with
// `precision tf32` (Dims::tf32_one_pass); the tile product and its geometry are stack_tile.cuh.
// With Dims::stack_ws (by default on Hopper at Cf = 32, L = 3) the layers (but, at stack_ws 2,
// the gated backward) run on the warp-specialised tile instead
// (stack_ws.cu, stack_ws_gated_bwd.cu), with `precision tf32` in one TF32 pass there too.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include "stack.cuh"

#include <algorithm>
#include <cstdint>

#include "stack_tile.cuh"

namespace sezm::cuda {
namespace {

// Shared memory of a layer kernel: the operand tiles, then Zs, S and (backward) T. On the
// warpgroup tile, Bs is the two stages of the layer's largest product stage (wg_ks, wg_kb: in
// the 3xTF32 split the 2M1-wide |m| = 1 product stages k blocks of 16, the rest 32), and T (dead
// once the scalar row of z_bar is formed) lies inside Bs above the stages of that product
// (K = L*Cf, N = Cf). C.pt on the warpgroup tile: 64 + 9 + 25 = 98 KiB, so two CTAs share an SM.
struct SmemPlan {
  int bs, zs, s, t_off, total;  // floats: Bs (with As on the SIMT tile), Zs, S; T's offset
};
__host__ __device__ constexpr int wg_stages(int N, bool x3) { return wg_smem_floats(N, wg_ks(N), x3, wg_kb(N, x3)); }
template <int TR, int kM>
__host__ __device__ SmemPlan smem_plan(const Dims& d, bool bwd) {
  constexpr int BM = tile_bm<TR, kM>();
  SmemPlan p;
  const int wmax = d.M0 > 2 * d.M1 ? d.M0 : 2 * d.M1;  // >= L*Cf
  const int np = (wmax + 63) / 64 * 64;
  const bool x3 = kM == kWg3;  // one pass stages only the hi plane
  const int wg_b = wg_stages(d.M0, x3) > wg_stages(2 * d.M1, x3) ? wg_stages(d.M0, x3) : wg_stages(2 * d.M1, x3);
  p.bs = is_wg(kM) ? wg_b : a_floats<TR, kM>() + b_floats<kM>(np);
  p.zs = BM * bank_stride(d.Cf);
  p.s = BM * bank_stride(d.L * d.Cf);
  // T (eta) is written before the gate product (stack_backward_k), so it lies above that
  // product's stage (one stage where its K = Cf is one k block) as well as above the stages of
  // the product that reads it (K = L*Cf, N = Cf).
  const int LC = d.L * d.Cf, gks = wg_ks(LC), gkb = wg_kb(LC, x3);
  const int gate_fp = d.Cf <= 8 * gks * gkb ? wg_stages(LC, x3) / 2 : wg_stages(LC, x3);
  const int t_in = wg_stages(d.Cf, x3) > gate_fp ? wg_stages(d.Cf, x3) : gate_fp;
  const bool t_inside = is_wg(kM) && t_in + p.s <= p.bs;
  p.t_off = t_inside ? t_in : p.bs + p.zs + p.s;
  p.total = p.bs + p.zs + p.s + (bwd && !t_inside ? p.s : 0);
  return p;
}

template <int TR, int kM>
size_t smem_floats(const Dims& d, bool bwd) {
  return static_cast<size_t>(smem_plan<TR, kM>(d, bwd).total);
}

template <int TR, int kM>
__device__ StackSmem carve(const Dims& d, float* base) {
  const SmemPlan p = smem_plan<TR, kM>(d, true);
  StackSmem s;
  s.As = base;
  s.Bs = is_wg(kM) ? base : s.As + a_floats<TR, kM>();
  s.zst = bank_stride(d.Cf);
  s.sst = bank_stride(d.L * d.Cf);
  s.Zs = base + p.bs;
  s.S = s.Zs + p.zs;
  s.T = base + p.t_off;
  return s;
}

// B of a product: the weights (SIMT / mma.sync tile) or their image (warpgroup tile).
template <int kM>
__device__ __forceinline__ const float* weights(const float* w, const float* img, size_t i, size_t kn) {
  return is_wg(kM) ? img + i * 2 * kn : w + i * kn;
}

// S[r][g*Cf + b] = sigmoid(sum_a Zs[r][a] G[a][g*Cf + b]) for the CTA's rows: a (BM x Cf) x
// (Cf x L*Cf) product on the same tiled inner product as the layer (NCG = L*Cf / 64 rounded up).
// Zs must be complete (a barrier) before the call; S is complete after the caller's next barrier.
template <int TR, int NCG, int kM>
__device__ __forceinline__ void gate_sigmoids(const Dims& d, const StackSmem& sm, const float* __restrict__ G) {
  const int LC = d.L * d.Cf, Cf = d.Cf;
  float acc[TR][4 * NCG];
  zero<TR, NCG>(acc);
  tile_mma<TR, NCG, kM>(sm, Cf, LC, G, [&](int r, int k) { return ld4(sm.Zs + r * sm.zst + k); }, acc);
  for_each_quad<TR, NCG, kM>(0, tile_bm<TR, kM>(), LC, [&](int r, int j, int row, int c) {
    st4(sm.S + row * sm.sst + c, make_float4(sigmoidf_(acc[r][4 * j]), sigmoidf_(acc[r][4 * j + 1]),
                                         sigmoidf_(acc[r][4 * j + 2]), sigmoidf_(acc[r][4 * j + 3])));
  });
}

// Forward of one layer.
template <int TR, int NC0, int NC1, int kM>
__global__ void __launch_bounds__(tile_threads<kM>(), (is_wg(kM) || (TR == 4 && NC1 <= 3)) ? 2 : 1) stack_forward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                            const float* __restrict__ Uin, float* Uout, float* Zsave) {
  constexpr int BM = tile_bm<TR, kM>();
  extern __shared__ float4 smem4[];
  const StackSmem sm = carve<TR, kM>(d, reinterpret_cast<float*>(smem4));
  const int f = blockIdx.y, row0 = blockIdx.x * BM;
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* U = Uin + fo;
  const size_t lf = (size_t)layer * d.F + f;
  const float* A = weights<kM>(w.A, w.A_wg, lf, (size_t)d.M0 * d.M0);
  const float* W1 = weights<kM>(w.W1, w.W1_wg, lf, 4 * (size_t)d.M1 * d.M1);
  const int LC = d.L * d.Cf, Cf = d.Cf;

  // ---- m = 0 group ----
  {
    float acc[TR][4 * NC0];
    zero<TR, NC0>(acc);
    tile_mma<TR, NC0, kM>(sm, d.M0, d.M0, A,
                          [&](int r, int k) { return row0 + r < Ec ? ld4(U + (size_t)(row0 + r) * d.ROW + k) : zero4(); },
                          acc);
    if (gated) {
#pragma unroll
      for (int r = 0; r < TR; ++r)
#pragma unroll
        for (int j = 0; j < NC0; ++j) {
          const int c = tile_col<kM>(j);
          if (c < Cf) st4(sm.Zs + tile_row<TR, kM>(r) * sm.zst + c, quad<TR, NC0>(acc, r, j));
        }
      __syncthreads();
      gate_sigmoids<TR, is_wg(kM) ? NC1 / 2 : (NC1 + 1) / 2, kM>(d, sm, weights<kM>(w.G, w.G_wg, lf, (size_t)Cf * LC));
      __syncthreads();
    }
    float4 res[TR][NC0];
    load_quads<TR, NC0, kM>(row0, Ec, d.M0, Uin + fo, d.ROW, res);
    for_each_quad<TR, NC0, kM>(row0, Ec, d.M0, [&](int r, int j, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + c;
      const float4 z = quad<TR, NC0>(acc, r, j);
      float4 v = z;
      if (gated) {
        if (c < Cf) {  // Cf % 4 == 0: a quad never straddles the scalar row
          v = make_float4(siluf_(z.x), siluf_(z.y), siluf_(z.z), siluf_(z.w));
        } else {
          const float4 s = ld4(sm.S + (row - row0) * sm.sst + (c / Cf - 1) * Cf + c % Cf);
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
    tile_mma<TR, NC1, kM>(sm, N1, N1, W1,
                          [&](int r, int k) {
                            return row0 + r < Ec ? ld4(U + (size_t)(row0 + r) * d.ROW + d.M0 + k) : zero4();
                          },
                          acc);
    float4 res[TR][NC1];
    load_quads<TR, NC1, kM>(row0, Ec, N1, Uin + fo + d.M0, d.ROW, res);
    for_each_quad<TR, NC1, kM>(row0, Ec, N1, [&](int r, int j, int row, int c) {
      const size_t o = fo + (size_t)row * d.ROW + d.M0 + c;
      const float4 z = quad<TR, NC1>(acc, r, j);
      float4 v = z;
      if (gated) {
        const int jj = d.L + 1 + c / Cf;
        const float4 s = ld4(sm.S + (row - row0) * sm.sst + (red_l(jj, d.L) - 1) * Cf + c % Cf);
        v = make_float4(z.x * s.x, z.y * s.y, z.z * s.z, z.w * s.w);
        if (Zsave) st4(Zsave + o, z);
      }
      const float4 u = res[r][j];
      st4(Uout + o, make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
    });
  }
}

template <int TR, int NC0, int NC1, int kM>
__global__ void __launch_bounds__(tile_threads<kM>(), (is_wg(kM) || (TR == 4 && NC1 <= 3)) ? 2 : 1) stack_backward_k(Dims d, BlockWDev w, int layer, int Ec,
                                                             const float* __restrict__ Gin, float* Gout,
                                                             const float* __restrict__ Zin) {
  constexpr int BM = tile_bm<TR, kM>();
  extern __shared__ float4 smem4[];
  const StackSmem sm = carve<TR, kM>(d, reinterpret_cast<float*>(smem4));
  const int f = blockIdx.y, row0 = blockIdx.x * BM;
  const int tid = threadIdx.x;
  const bool gated = layer < d.ngated;
  const size_t fo = (size_t)f * Ec * d.ROW;
  const float* g = Gin + fo;
  const float* Z = gated ? Zin + fo : nullptr;
  const size_t lf = (size_t)layer * d.F + f;
  const float* AT = weights<kM>(w.AT, w.AT_wg, lf, (size_t)d.M0 * d.M0);
  const float* W1T = weights<kM>(w.W1T, w.W1T_wg, lf, 4 * (size_t)d.M1 * d.M1);
  const int LC = d.L * d.Cf, Cf = d.Cf;

  if (gated) {
    const float* Gw = weights<kM>(w.G, w.G_wg, lf, (size_t)Cf * LC);
    const float* GwT = weights<kM>(w.GT, w.GT_wg, lf, (size_t)Cf * LC);  // (LC, Cf): coalesced over a
    for (int i = tid; i < BM * Cf / 4; i += tile_threads<kM>()) {  // Cf % 4 == 0
      const int r = i / (Cf / 4), a = (i % (Cf / 4)) * 4;
      const float4 z =
          row0 + r < Ec ? __ldg(reinterpret_cast<const float4*>(Z + (size_t)(row0 + r) * d.ROW + a)) : zero4();
      st4(sm.Zs + r * sm.zst + a, z);
    }
    // s_bar[g][b] = sum over the three orders of degree g+1 of g * z, into T. It needs no sigmoid,
    // so its loads are in flight beside the scalar rows' instead of in a pass after the gate
    // product (one dependent round trip fewer per tile; T lies clear of that product's stage,
    // SmemPlan). Column quads (Cf % 4 == 0), unrolled so each thread has its 24 loads in flight.
#pragma unroll 4
    for (int i = tid; i < BM * LC / 4; i += tile_threads<kM>()) {
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
      st4(sm.T + r * sm.sst + cq, sb);
    }
    __syncthreads();
    gate_sigmoids<TR, is_wg(kM) ? NC1 / 2 : (NC1 + 1) / 2, kM>(d, sm, Gw);
    __syncthreads();
    // eta = s_bar * S (1 - S), in place (each thread its own quads: no barrier between).
    for (int i = tid; i < BM * LC / 4; i += tile_threads<kM>()) {
      const int r = i / (LC / 4), cq = (i % (LC / 4)) * 4;
      const float4 sb = ld4(sm.T + r * sm.sst + cq), s = ld4(sm.S + r * sm.sst + cq);
      st4(sm.T + r * sm.sst + cq, make_float4(sb.x * s.x * (1.0f - s.x), sb.y * s.y * (1.0f - s.y),
                                              sb.z * s.z * (1.0f - s.z), sb.w * s.w * (1.0f - s.w)));
    }
    __syncthreads();
    // Scalar row of z_bar: g00 silu'(z00) + eta G^T, a (BM x L*Cf) x (L*Cf x Cf) tile product; each
    // thread overwrites only the z00 entries it alone reads, so Zs takes z_bar in place.
    {
      constexpr int NCS = is_wg(kM) ? 2 : 1;  // warpgroup tile: Cf = 32 (launch_stack)
      float acc[TR][4 * NCS];
      zero<TR, NCS>(acc);
      tile_mma<TR, NCS, kM>(sm, LC, Cf, GwT, [&](int r, int k) { return ld4(sm.T + r * sm.sst + k); }, acc);
      for_each_quad<TR, NCS, kM>(0, BM, Cf, [&](int r, int j, int row, int c) {
        float* zs = sm.Zs + row * sm.zst + c;
        float4 v = zero4();
        if (row0 + row < Ec) {
          const float4 gg = ld4(g + (size_t)(row0 + row) * d.ROW + c);
          const float* a = &acc[r][4 * j];
          v = make_float4(fmaf(gg.x, silu_gradf_(zs[0]), a[0]), fmaf(gg.y, silu_gradf_(zs[1]), a[1]),
                          fmaf(gg.z, silu_gradf_(zs[2]), a[2]), fmaf(gg.w, silu_gradf_(zs[3]), a[3]));
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
    tile_mma<TR, NC0, kM>(sm, d.M0, d.M0, AT,
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
    load_quads<TR, NC0, kM>(row0, Ec, d.M0, Gin + fo, d.ROW, res);
    for_each_quad<TR, NC0, kM>(row0, Ec, d.M0, [&](int r, int j, int row, int c) {
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
    tile_mma<TR, NC1, kM>(sm, N1, N1, W1T,
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
#pragma unroll
    for (int r = 0; r < TR; ++r) {
      const int row = row0 + tile_row<TR, kM>(r);
      if (row >= Ec) continue;
      float4 u[NC1];
#pragma unroll
      for (int j = 0; j < NC1; ++j) {
        const int c = tile_col<kM>(j);
        u[j] = c < N1 ? ld4(Gin + fo + (size_t)row * d.ROW + d.M0 + c) : zero4();
      }
#pragma unroll
      for (int j = 0; j < NC1; ++j) {
        const int c = tile_col<kM>(j);
        if (c >= N1) continue;
        const float4 a = quad<TR, NC1>(acc, r, j);
        st4(Gout + fo + (size_t)row * d.ROW + d.M0 + c,
            make_float4(u[j].x + a.x, u[j].y + a.y, u[j].z + a.z, u[j].w + a.w));
      }
    }
  }
}

enum class Pass { kForward, kBackward };

template <int TR, int NC0, int NC1, int kM>
void launch_tile(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                 Pass pass, cudaStream_t s) {
  const bool bwd = pass == Pass::kBackward;
  const size_t bytes = smem_floats<TR, kM>(d, bwd) * sizeof(float);
  const dim3 grid(div_up(Ec, tile_bm<TR, kM>()), d.F);
  const void* fn =
      bwd ? (const void*)stack_backward_k<TR, NC0, NC1, kM> : (const void*)stack_forward_k<TR, NC0, NC1, kM>;
  if (bytes > 48 * 1024) SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  if (bwd)
    stack_backward_k<TR, NC0, NC1, kM><<<grid, tile_threads<kM>(), bytes, s>>>(d, w, layer, Ec, in, out, z);
  else
    stack_forward_k<TR, NC0, NC1, kM><<<grid, tile_threads<kM>(), bytes, s>>>(d, w, layer, Ec, in, out, z);
}

// Column quads per thread (N / 64 rounded up) compiled for the supported widths.
template <int kM>
void launch_widths(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                   Pass pass, cudaStream_t s) {
  const int n0 = pad64(d.M0) / 64, n1 = pad64(2 * d.M1) / 64;
  if (n0 <= 1 && n1 <= 1) launch_tile<4, 1, 1, kM>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 1 && n1 <= 2) launch_tile<4, 1, 2, kM>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 2 && n1 <= 2) launch_tile<4, 2, 2, kM>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 2 && n1 <= 3) launch_tile<4, 2, 3, kM>(d, w, layer, Ec, in, out, z, pass, s);
  else if (n0 <= 3 && n1 <= 4) launch_tile<4, 3, 4, kM>(d, w, layer, Ec, in, out, z, pass, s);
  else launch_tile<4, 6, 6, kM>(d, w, layer, Ec, in, out, z, pass, s);
}

// The warpgroup tile's shapes: Cf = 32 and L = 3 (C.pt, the 128 / 192-wide groups) or L = 2 (96 /
// 128); every width and K is then a multiple of 32 and has a wgmma_ops.cuh instruction.
template <int kM>
void launch_wg(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z, Pass pass,
               cudaStream_t s) {
  if (d.L == 3) launch_tile<2, 8, 12, kM>(d, w, layer, Ec, in, out, z, pass, s);
  else launch_tile<2, 6, 8, kM>(d, w, layer, Ec, in, out, z, pass, s);
}

void launch_stack(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z, Pass pass,
                  cudaStream_t s) {
  if (Ec == 0) return;
  // Hopper (Dims::wgmma): the warpgroup tile, 3xTF32 by default (fp32-accurate). Elsewhere IEEE
  // fp32 FFMA by default: the mma.sync 3xTF32 tile is no faster there (docs/performance.md,
  // "Tensor cores"). `precision tf32`: one TF32 pass on either.
  if (d.wgmma && wgmma_shape(d)) {
    // Dims::stack_ws: the identity layers (forward, backward) on the warp-specialised tile
    // (stack_ws.cu), in the 3xTF32 split or one TF32 pass (the tile follows Dims::tf32_one_pass);
    // its tensor map needs a 16-byte aligned base. The gated layers' forward and backward too.
    if (d.stack_ws && reinterpret_cast<uintptr_t>(in) % 16 == 0) {
      if (layer >= d.ngated) {
        launch_stack_ws_linear(d, w, layer, Ec, in, out, pass == Pass::kBackward, s);
        SEZM_LAUNCH(pass == Pass::kBackward ? "stack_ws_backward" : "stack_ws_forward");
        return;
      }
      // Stack_ws 2: the gated backward stays on wg_tile.
      const bool ws_bwd = d.stack_ws != 2;
      if (pass != Pass::kBackward || ws_bwd) {
        launch_stack_ws_gated(d, w, layer, Ec, in, out, z, pass == Pass::kBackward, s);
        SEZM_LAUNCH(pass == Pass::kBackward ? "stack_ws_backward_gated" : "stack_ws_forward_gated");
        return;
      }
    }
    if (d.tf32_one_pass) launch_wg<kWg1>(d, w, layer, Ec, in, out, z, pass, s);
    else launch_wg<kWg3>(d, w, layer, Ec, in, out, z, pass, s);
  } else if (d.tf32_one_pass) {
    launch_widths<kTf32>(d, w, layer, Ec, in, out, z, pass, s);
  } else {
    launch_widths<kIeee>(d, w, layer, Ec, in, out, z, pass, s);
  }
  SEZM_LAUNCH(pass == Pass::kBackward ? "stack_backward" : "stack_forward");
}

}  // namespace

// The engine's arithmetics (kIeee, kTf32) stage the same operand tiles; the warpgroup tile's
// need is checked where Dims::wgmma is set.
size_t stack_smem_bytes(const Dims& d) { return smem_floats<4, kIeee>(d, true) * sizeof(float); }

bool wgmma_shape(const Dims& d) { return d.Cf == 32 && (d.L == 3 || d.L == 2); }

size_t stack_smem_bytes_wg(const Dims& d) {
  return std::max(smem_floats<2, kWg3>(d, true), smem_floats<2, kWg1>(d, true)) * sizeof(float);
}

void launch_stack_layer_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Uin, float* Uout,
                                float* Zsave, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Uin, Uout, Zsave, Pass::kForward, s);
}

void launch_stack_layer_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* Gin, float* Gout,
                                 float* Z, cudaStream_t s) {
  launch_stack(d, w, layer, Ec, Gin, Gout, Z, Pass::kBackward, s);
}

}  // namespace sezm::cuda
