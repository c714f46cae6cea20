// The GIE of the initial node embedding (rows l >= 1 of X0), forward and backward (CPU twin:
// engine/embeddings.h; split from embeddings.cu). Forward a CTA per node, its in-edges split over
// four thread groups (from rho), or for C = 32 over four warps from the radial MLP's hidden layer
// (gie_forward_fold_k, no rho read); backward: the isd share a
// warp per node, the edge shares (Wigner-row and gate adjoints, rho_bar) one fused warp per edge
// per chunk (gie_edge_backward_k), or with SEZM_CUDA_GIE_LEGACY=1 the split kernels of the kept
// route (a warp per edge for the Wigner rows, a thread per (edge, channel) for rho_bar, the
// chunk's rho_bar table cleared first). Every sum runs in a fixed order: repeated runs are
// bit-identical.
#include <cstdlib>

#include "async_copy.cuh"
#include "embeddings.cuh"
#include "radial.cuh"

namespace sezm::cuda {
namespace {

// ---- GIE (config.cpp allows lmax 1..3: at most 2L + 1 = 7 rows per degree, D - 1 = 15 rows) ----
constexpr int kGieMaxL = 3;

// Rows l >= 1, one CTA per node: kGieSplit groups of threads each take a contiguous quarter of the
// node's in-edges; thread (l, c) of a group reads rho[e, l, c] once per edge (coalesced over c) and
// accumulates its 2l + 1 rows m in registers in edge order; the groups' partial sums are added in
// group order (a fixed order: repeated runs are bit-identical). One group per node left the GPU
// underfilled where the GIE runs per chunk (a few hundred centres per launch).
constexpr int kGieSplit = 4;
__global__ void gie_forward_k(Dims d, int N, const int* __restrict__ off, const float* __restrict__ Dc,
                              const float* __restrict__ isd, const float* __restrict__ rho,
                              const float* __restrict__ gate, float* X0) {
  extern __shared__ float gie_part[];  // [kGieSplit - 1][group threads][2 kGieMaxL + 1]
  const int n = blockIdx.x, C = d.C, G = blockDim.x / kGieSplit, grp = threadIdx.x / G;
  const int e0 = off[n], ne = off[n + 1] - e0;
  const int eb = e0 + (int)((long)ne * grp / kGieSplit), ee = e0 + (int)((long)ne * (grp + 1) / kGieSplit);
  for (int t0 = 0; t0 < d.L * C; t0 += G) {
    const int t = t0 + threadIdx.x % G;
    const bool on = t < d.L * C;
    const int l = on ? 1 + t / C : 1, c = t % C, nm = 2 * l + 1;
    const int zo = dc_off(l) + (2 * l + 1);  // the edge frame's m = 0 row of block l
    float acc[2 * kGieMaxL + 1];
#pragma unroll
    for (int j = 0; j < 2 * kGieMaxL + 1; ++j) acc[j] = 0.0f;
    if (on) {
#pragma unroll 4
      for (int e = eb; e < ee; ++e) {
        const float rv = rho[((size_t)e * (d.L + 1) + l) * C + c];
        const float* z = Dc + (size_t)e * d.dc_size + zo;
        const float ge = gate ? gate[e] : 1.0f;
#pragma unroll
        for (int j = 0; j < 2 * kGieMaxL + 1; ++j)
          if (j < nm) acc[j] += gate ? ge * (z[j] * rv) : z[j] * rv;  // bridging: times the source gate
      }
    }
    float* mine = gie_part + ((size_t)(grp - 1) * G + threadIdx.x % G) * (2 * kGieMaxL + 1);
    if (grp > 0) {
#pragma unroll
      for (int j = 0; j < 2 * kGieMaxL + 1; ++j) mine[j] = acc[j];
    }
    __syncthreads();
    if (grp == 0 && on) {
      for (int q = 1; q < kGieSplit; ++q) {
        const float* p = gie_part + ((size_t)(q - 1) * G + threadIdx.x) * (2 * kGieMaxL + 1);
#pragma unroll
        for (int j = 0; j < 2 * kGieMaxL + 1; ++j) acc[j] += p[j];
      }
#pragma unroll
      for (int j = 0; j < 2 * kGieMaxL + 1; ++j)
        if (j < nm) X0[((size_t)n * d.D + l * l + j) * C + c] = isd[n] * acc[j];
    }
    __syncthreads();  // the partials are read before the next pass writes them
  }
}

// The GIE forward from the radial MLP's hidden layer, without rho (C = 32; docs/sezm/01, the GIE
// and the radial MLP): rho[e, l, :] = env_e a_e W1[:, l] is linear in the edge's activations a_e
// (C values), so X0[n, p, :] = isd_n (sum_e g_e env_e D[e, p] a_e) W1[:, l(p)]: per node a table
// Z[p, k] over its in-edges (k = the lane), then one small product. The edges are split over the
// CTA's four warps (contiguous quarters); a warp stages 32 edges' basis and Wigner rows at a time
// (contiguous in memory: coalesced) in shared memory, then each lane forms its a_e[k] edge after
// edge from there. The warps' partial tables are added in warp order (deterministic). Why: the
// blocks read no rho with the degree mixer, so the embedding's forward needs none either (lean
// mode and the per-chunk edge state computed rho per chunk for it).
constexpr int kFoldWarps = 4, kFoldMaxP = 15, kFoldC = 32;
struct FoldSmem {  // floats: W0, the warps' partial tables, then per warp its staging
  int w0, zs, stage, rb, dc, eg, per_warp, total;
  explicit FoldSmem(const Dims& d) {
    w0 = 0;
    zs = w0 + d.nr * kFoldC;
    stage = zs + kFoldWarps * kFoldMaxP * kFoldC;
    rb = 0; dc = 32 * d.nr; eg = dc + 32 * d.dc_size;  // offsets within a warp's staging
    per_warp = eg + 32;
    total = stage + kFoldWarps * per_warp;
  }
};
// L, NR: lmax and n_radial at compile time (NR = 0: n_radial at run time, W0 read from shared
// memory; else its column k in registers); the same sums in the same order either way.
template <int L, int NR>
__global__ void __launch_bounds__(32 * kFoldWarps) gie_forward_fold_k(Dims d, ModelWDev w, FoldSmem S, int N,
                                                                     const int* __restrict__ off,
                                                                     const float* __restrict__ Dc,
                                                                     const float* __restrict__ isd,
                                                                     const float* __restrict__ rbf,
                                                                     const float* __restrict__ env,
                                                                     const float* __restrict__ gate, float* X0) {
  constexpr int C = kFoldC, P = (L + 1) * (L + 1) - 1;
  static_assert(P <= kFoldMaxP, "the partial tables hold kFoldMaxP rows");
  extern __shared__ __align__(16) float fsm[];
  const int n = blockIdx.x, warp = threadIdx.x / 32, k = threadIdx.x % 32, nr = NR > 0 ? NR : d.nr;
  const int dcs = d.dc_size;
  float* w0s = fsm + S.w0;
  float* zs = fsm + S.zs;
  float* st = fsm + S.stage + warp * S.per_warp;
  copy_async_span(w0s, w.rad_w0, nr * C, threadIdx.x, blockDim.x);
  copy_async_wait();
  __syncthreads();
  const FoldHidden<NR> hid(w0s, nr, C, k, d.edge_norm ? w.rad_norm[k] : 1.0f, d.edge_norm);
  float z[P];
#pragma unroll
  for (int p = 0; p < P; ++p) z[p] = 0.0f;
  const int e0 = off[n], ne = off[n + 1] - e0;
  const int eb = e0 + (int)((long)ne * warp / kFoldWarps), ee = e0 + (int)((long)ne * (warp + 1) / kFoldWarps);
  for (int b = eb; b < ee; b += 32) {
    const int cnt = min(32, ee - b);
    __syncwarp();  // the previous batch's rows are read
    // Every copy in flight before the warp waits (copy_async_span).
    copy_async_span(st + S.rb, rbf + (size_t)b * nr, cnt * nr, k, 32);
    copy_async_span(st + S.dc, Dc + (size_t)b * dcs, cnt * dcs, k, 32);
    if (k < cnt) st[S.eg + k] = gate ? env[b + k] * gate[b + k] : env[b + k];
    copy_async_wait();
    __syncwarp();
    for (int i = 0; i < cnt; ++i) {
      const float m = hid(st + S.rb + i * nr) * st[S.eg + i];
      const float* zr = st + S.dc + i * dcs;
#pragma unroll
      for (int p = 0; p < P; ++p) z[p] += zr[dc_m0(p + 1)] * m;
    }
  }
#pragma unroll
  for (int p = 0; p < P; ++p) zs[(warp * kFoldMaxP + p) * C + k] = z[p];
  __syncthreads();
  for (int t = threadIdx.x; t < P * C; t += blockDim.x) {  // Z: the warps' partials in warp order
    float v = zs[t];
    for (int ww = 1; ww < kFoldWarps; ++ww) v += zs[ww * kFoldMaxP * C + t];
    zs[t] = v;
  }
  __syncthreads();
  // X0[n, 1 + p, c] = isd Z[p, :] W1[:, l C + c].
  const int W = (d.L + 1) * C;
  for (int t = threadIdx.x; t < P * C; t += blockDim.x) {
    const int p = t / C, c = t % C, l = degree_of_packed(p + 1);
    float acc = 0.0f;
    for (int kk = 0; kk < C; ++kk) acc += zs[p * C + kk] * __ldg(w.rad_w1 + (size_t)kk * W + l * C + c);
    X0[((size_t)n * d.D + 1 + p) * C + c] = isd[n] * acc;
  }
}

// isd_bar += sum_{p >= 1, c} X0 X0_bar / isd: a warp per node, the lanes' strided partial sums
// added by a fixed butterfly.
__global__ void gie_isd_backward_k(Dims d, int N, const float* __restrict__ isd, const float* __restrict__ X0,
                                   const float* __restrict__ X0_bar, float* isd_bar) {
  const int n = (int)(((long)blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (n >= N) return;
  const size_t b = (size_t)n * d.D * d.C;
  float acc = 0.0f;
  for (int i = d.C + lane; i < d.D * d.C; i += 32) acc += X0[b + i] * X0_bar[b + i];
  acc = warp_sum(acc);
  if (lane == 0) isd_bar[n] += acc / isd[n];
}

// Sum over the warp of each of NV values (NV a power of two <= 32) by recursive halving: at
// offset s every lane keeps one half, adds its partner's copy of that half, and passes on the
// other; after log2(NV) halvings lane holds the full sum of value lane >> (5 - log2 NV) (a fixed
// tree: deterministic; lanes sharing a value hold the same bits).
template <int NV>
__device__ __forceinline__ float warp_sum_scatter(float (&v)[NV], int lane) {
  int h = NV;
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) {
    if (h > 1) {
      h >>= 1;
      const bool up = lane & s;
#pragma unroll
      for (int j = 0; j < NV / 2; ++j)
        if (j < h) {
          const float keep = up ? v[j + h] : v[j], send = up ? v[j] : v[j + h];
          v[j] = keep + __shfl_xor_sync(0xffffffffu, send, s);
        }
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], s);
    }
  }
  return v[0];
}

// Wigner-row adjoint Dc_bar[e, k(p)] += isd[n] g_e sum_c X0_bar[n, p, c] rho[e, l(p), c] and, with
// a gate, dE/dgate_e = isd[n] sum_p Dc[e, k(p)] sum_c (...): a warp per edge, lanes over
// channels (coalesced rows), the NV >= D - 1 row sums scattered over the lanes.
template <int NV>
__global__ void gie_dc_backward_k(Dims d, int E, const int* __restrict__ dst, const float* __restrict__ isd,
                                  const float* __restrict__ Dc, const float* __restrict__ rho,
                                  const float* __restrict__ X0_bar, const float* __restrict__ gate, float* Dc_bar,
                                  float* gate_bar) {
  const int e = (int)(((long)blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (e >= E) return;  // whole warps leave together
  const int n = dst[e], C = d.C, P = d.D - 1;
  const float* xb = X0_bar + (size_t)n * d.D * C;
  const float* re = rho + (size_t)e * (d.L + 1) * C;
  float v[NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) v[j] = 0.0f;
  for (int c = lane; c < C; c += 32) {
    float rl[kGieMaxL + 1];
#pragma unroll
    for (int l = 1; l <= kGieMaxL; ++l) rl[l] = l <= d.L ? re[l * C + c] : 0.0f;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int l = j < 3 ? 1 : j < 8 ? 2 : 3;  // degree of packed row p = j + 1
      if (j < P) v[j] = fmaf(xb[(size_t)(j + 1) * C + c], rl[l], v[j]);
    }
  }
  constexpr int kShift = NV == 4 ? 3 : NV == 8 ? 2 : NV == 16 ? 1 : 0;
  const float zb0 = warp_sum_scatter<NV>(v, lane);
  const int q = lane >> kShift;
  const bool writer = (lane & ((1 << kShift) - 1)) == 0 && q < P;
  float gpart = 0.0f;
  if (writer) {
    const int p = q + 1, l = degree_of_packed(p), m = p - l * l - l;
    const size_t k = (size_t)e * d.dc_size + dc_off(l) + (2 * l + 1) + m + l;
    float zb = zb0;
    gpart = zb * Dc[k];
    if (gate) zb *= gate[e];
    Dc_bar[k] += isd[n] * zb;
  }
  if (gate) {
    gpart = warp_sum(gpart);
    if (lane == 0) gate_bar[e] += isd[n] * gpart;
  }
}

// rho_bar[e, l, c] += isd[n] g_e sum_m X0_bar[n, p(l,m), c] Dc[e, k(l,m)]: a thread per (e, c) for
// every l >= 1 (the edge's centre, isd and gate read once), coalesced over c.
__global__ void gie_rho_backward_k(Dims d, int E, const int* __restrict__ dst, const float* __restrict__ Dc,
                                   const float* __restrict__ isd, const float* __restrict__ X0_bar,
                                   const float* __restrict__ gate, float* rho_bar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const int C = d.C;
  if (idx >= (long)E * C) return;
  const int c = idx % C, e = (int)(idx / C), n = dst[e];
  const float* xb = X0_bar + (size_t)n * d.D * C + c;
  const float sc = isd[n];
  float* rb_e = rho_bar + (size_t)e * (d.L + 1) * C + c;
  for (int l = 1; l <= d.L; ++l) {
    const float* z = Dc + (size_t)e * d.dc_size + dc_off(l) + (2 * l + 1) + l;
    float rb = 0.0f;
    for (int m = -l; m <= l; ++m) rb += xb[(size_t)packed(l, m) * C] * z[m];
    if (gate) rb *= gate[e];
    rb_e[(size_t)l * C] += sc * rb;
  }
}

// Both edge shares of the GIE backward for a run of edges (a chunk), a warp per edge, lanes over
// channels: rho_bar[e, l, c] = isd[n] g_e sum_m X0_bar[n, p(l,m), c] Dc[e, k(l,m)] (written, row
// l = 0 zero: the chunk table needs no clearing) and the Wigner-row (and gate) adjoints of
// gie_dc_backward_k. One pass reads X0_bar, rho and the m = 0 Wigner rows once for both (the
// split kernels read X0_bar twice, and rho_bar went memset + read + write). Per element the same
// arithmetic and order as gie_dc_backward_k and gie_rho_backward_k (the kept route,
// SEZM_CUDA_GIE_LEGACY=1); lmax L at compile time keeps the rows in registers.
template <int L>
__global__ void __launch_bounds__(128) gie_edge_backward_k(Dims d, int E, const int* __restrict__ dst,
                                                           const float* __restrict__ isd, const float* __restrict__ Dc,
                                                           const float* __restrict__ rho,
                                                           const float* __restrict__ X0_bar,
                                                           const float* __restrict__ gate, float* Dc_bar,
                                                           float* gate_bar, float* rho_bar) {
  constexpr int P = (L + 1) * (L + 1) - 1, NV = P <= 4 ? 4 : P <= 8 ? 8 : 16;
  constexpr int kShift = NV == 4 ? 3 : NV == 8 ? 2 : 1;
  const int e = (int)(((long)blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (e >= E) return;  // whole warps leave together
  const int n = __ldg(dst + e), C = d.C;
  const float* dce = Dc + (size_t)e * d.dc_size;
  // This lane's Wigner-row adjoint (packed row q + 1), its old value fetched up front.
  const int q = lane >> kShift;
  const bool writer = (lane & ((1 << kShift) - 1)) == 0 && q < P;
  size_t kq = 0;
  float bar_old = 0.0f, dc_q = 0.0f;
  if (writer) {
    const int p = q + 1, l = degree_of_packed(p), m = p - l * l - l;
    kq = (size_t)e * d.dc_size + dc_off(l) + (2 * l + 1) + m + l;
    bar_old = Dc_bar[kq];
    dc_q = __ldg(Dc + kq);
  }
  // The m = 0 rows of the edge frame (z[p - 1] for packed row p), read by every lane.
  float z[P];
#pragma unroll
  for (int l = 1; l <= L; ++l)
#pragma unroll
    for (int m = -l; m <= l; ++m) z[packed(l, m) - 1] = __ldg(dce + dc_off(l) + (2 * l + 1) + l + m);
  const float sc = __ldg(isd + n), ge = gate ? __ldg(gate + e) : 1.0f;
  const float* xb = X0_bar + (size_t)n * d.D * C;
  const float* re = rho + (size_t)e * (L + 1) * C;
  float* rbe = rho_bar + (size_t)e * (L + 1) * C;
  float v[NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) v[j] = 0.0f;
  for (int c = lane; c < C; c += 32) {
    float x[P];
#pragma unroll
    for (int p = 1; p <= P; ++p) x[p - 1] = __ldg(xb + (size_t)p * C + c);
    rbe[c] = 0.0f;
#pragma unroll
    for (int l = 1; l <= L; ++l) {
      const float rl = __ldg(re + l * C + c);
      float rb = 0.0f;
#pragma unroll
      for (int m = -l; m <= l; ++m) rb += x[packed(l, m) - 1] * z[packed(l, m) - 1];
      if (gate) rb *= ge;
      rbe[l * C + c] = 0.0f + sc * rb;  // as the cleared table's += (keeps a -0 at +0)
#pragma unroll
      for (int m = -l; m <= l; ++m) v[packed(l, m) - 1] = fmaf(x[packed(l, m) - 1], rl, v[packed(l, m) - 1]);
    }
  }
  const float zb0 = warp_sum_scatter<NV>(v, lane);
  float gpart = 0.0f;
  if (writer) {
    float zb = zb0;
    gpart = zb * dc_q;
    if (gate) zb *= ge;
    Dc_bar[kq] = bar_old + sc * zb;
  }
  if (gate) {
    gpart = warp_sum(gpart);
    if (lane == 0) gate_bar[e] += sc * gpart;
  }
}

bool gie_legacy() {
  static const bool on = env_on("SEZM_CUDA_GIE_LEGACY");
  return on;
}

constexpr int kThreads = 128;

}  // namespace

void launch_gie_forward(const Dims& d, const GieArgs& a, cudaStream_t s) {
  if (a.N == 0 || d.L == 0) return;
  if (d.L > kGieMaxL) throw Error("device cuda: the GIE kernels support lmax 1..3");
  const int G = std::min(256, div_up((long)d.L * d.C, 32) * 32);  // threads per group (a pass over the rows)
  const size_t part = (size_t)(kGieSplit - 1) * G * (2 * kGieMaxL + 1) * sizeof(float);
  gie_forward_k<<<a.N, kGieSplit * G, part, s>>>(d, a.N, a.off, a.Dc, a.isd, a.rho, a.gate, a.X0);
  SEZM_LAUNCH("gie_forward");
}
bool gie_forward_folds(const Dims& d) {
  return d.C == kFoldC && d.L >= 1 && d.D - 1 <= kFoldMaxP && d.nr >= 1 &&
         FoldSmem(d).total * sizeof(float) <= 48 * 1024;  // C.pt: 42 KiB
}
void launch_gie_forward_folded(const Dims& d, const ModelWDev& w, const GieArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  if (!gie_forward_folds(d) || a.rbf == nullptr || a.env == nullptr)
    throw Error("device cuda: launch_gie_forward_folded outside its shapes (gie_forward_folds)");
  const FoldSmem L(d);
  auto run = [&](auto kernel) {
    kernel<<<a.N, 32 * kFoldWarps, L.total * sizeof(float), s>>>(d, w, L, a.N, a.off, a.Dc, a.isd, a.rbf, a.env,
                                                                 a.gate, a.X0);
  };
  const bool nr16 = d.nr == 16;  // the shipped potentials' n_radial
  if (d.L == 1) nr16 ? run(gie_forward_fold_k<1, 16>) : run(gie_forward_fold_k<1, 0>);
  else if (d.L == 2) nr16 ? run(gie_forward_fold_k<2, 16>) : run(gie_forward_fold_k<2, 0>);
  else nr16 ? run(gie_forward_fold_k<3, 16>) : run(gie_forward_fold_k<3, 0>);
  SEZM_LAUNCH("gie_forward_fold");
}
void launch_gie_rho_backward(const Dims& d, const GieArgs& a, cudaStream_t s) {
  if (a.E == 0 || d.L == 0) return;
  gie_rho_backward_k<<<div_up((long)a.E * d.C, kThreads), kThreads, 0, s>>>(d, a.E, a.dst, a.Dc, a.isd,
                                                                                  a.X0_bar, a.gate, a.rho_bar);
  SEZM_LAUNCH("gie_rho_backward");
}
void launch_gie_edge_backward(const Dims& d, const GieArgs& a, cudaStream_t s) {
  if (a.E == 0 || d.L == 0) return;
  if (d.L > kGieMaxL) throw Error("device cuda: the GIE kernels support lmax 1..3");
  if (gie_legacy()) {  // the split kernels of the kept route, on the same edges
    GieArgs dc = a;
    dc.N = 0;
    launch_gie_backward(d, dc, s);
    SEZM_CUDA(cudaMemsetAsync(a.rho_bar, 0, (size_t)a.E * (d.L + 1) * d.C * sizeof(float), s));
    launch_gie_rho_backward(d, a, s);
    return;
  }
  auto run = [&](auto kernel) {
    kernel<<<div_up(32L * a.E, kThreads), kThreads, 0, s>>>(d, a.E, a.dst, a.isd, a.Dc, a.rho, a.X0_bar, a.gate,
                                                           a.Dc_bar, a.gate_bar, a.rho_bar);
  };
  if (d.L == 1) run(gie_edge_backward_k<1>);
  else if (d.L == 2) run(gie_edge_backward_k<2>);
  else run(gie_edge_backward_k<3>);
  SEZM_LAUNCH("gie_edge_backward");
}
void launch_gie_backward(const Dims& d, const GieArgs& a, cudaStream_t s) {
  if (a.N > 0) {
    gie_isd_backward_k<<<div_up(32L * a.N, kThreads), kThreads, 0, s>>>(d, a.N, a.isd, a.X0, a.X0_bar, a.isd_bar);
    SEZM_LAUNCH("gie_isd_backward");
  }
  if (a.E > 0 && d.L > 0) {
    const int P = d.D - 1;  // 3, 8 or 15 rows
    auto run = [&](auto kernel) {
      kernel<<<div_up(32L * a.E, kThreads), kThreads, 0, s>>>(d, a.E, a.dst, a.isd, a.Dc, a.rho, a.X0_bar, a.gate,
                                                             a.Dc_bar, a.gate_bar);
    };
    if (P <= 4) run(gie_dc_backward_k<4>);
    else if (P <= 8) run(gie_dc_backward_k<8>);
    else if (P <= 16) run(gie_dc_backward_k<16>);
    else throw Error("device cuda: the GIE kernels support lmax 1..3");
    SEZM_LAUNCH("gie_dc_backward");
  }
}


}  // namespace sezm::cuda
