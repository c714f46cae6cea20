// A gated layer's backward (docs/model.md §7.10; stack_backward_k's maths, stack.cu) on the
// warp-specialised persistent tile (wgmma_ws.cuh; stack_ws.cu has the other layer kinds and the
// layout: one item = a focus's 128-row tile, both |m| groups):
//   s_bar = sum over the three orders of each degree of g z, S = sigmoid(z00 G), eta = s_bar S (1 - S),
//   z_bar00 = g00 silu'(z00) + eta G^T, G0' = g0 + z_bar0 A^T, G1' = g1 + (g1 S) W1^T,
// z_bar0's other columns g0 S, the products' A formed in registers from the landed g (ws_product's ax).
//
// Why this shape (docs/performance.md, 2026-12-02: 28.8 ms here against 20.5 on wg_tile before): the
// gate work runs on the consumer warps before each item's products, with the producer's prefetch the
// only overlap, so its latency is the layer's cost. Here
//  - the gate weights G (12 KiB per focus) live in shared memory, loaded when the focus changes (items
//    are focus-major: about once per CTA), and eta G^T reads G's rows there (no G^T): the S and eta
//    loops read G and G^T by global loads, the S loop in 32 dependent rounds, most likely missing L1
//    (the s_bar stream, 295 KiB per item through L1, evicts them; not yet measured);
//  - every global load of the gate (z00, g00 and s_bar's 18 vector pairs per thread) is issued at the
//    item's start, one latency; and the next item's g and z tiles are prefetched into L2 (bulk
//    prefetch, no registers) while this item's |m| = 1 product runs, so that latency is an L2 hit
//    (SEZM_CUDA_GBWD_NOPREFETCH=1 leaves it out: 328 KiB per CTA, up to ~43 of the L2's 50 MB over
//    132 CTAs, which could evict the current items' lines before their last reads).
// Numerics: IEEE fp32 FFMA, every sum in the old WS kernel's order (S over a in order; eta G^T over
// each half's 48 k in order, half 0's share + half 1's): its bits; the 3xTF32 products as the tile's.
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

// Ring, Zs (z00, then z_bar00), S, and the focus's gate weights G (Cf x L Cf, row-major):
// 4 x 32 + 16.5 + 50 + 12 KiB.
constexpr int kGateFloats = kCf * kLC;
constexpr int kBwdSmemBytes =
    (kGStages * kGStage + kWsRows * kZst + kWsRows * kSst + kGateFloats) * static_cast<int>(sizeof(float));
static_assert(kBwdSmemBytes + 1024 <= 227 * 1024, "the gated backward's ring, Zs, S and G fit an SM");
static_assert((kGStages * kGStage + kWsRows * kZst) % 4 == 0 && kWsRows * kSst % 4 == 0, "S and G 16-byte aligned");
static_assert(kGateFloats % (4 * 256) == 0, "G copied as whole float4 per consumer thread");

// `bytes` (a multiple of 16) of global memory from p (16-byte aligned) into L2: a hint, no completion.
__device__ __forceinline__ void ws_prefetch_l2(const float* p, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

struct WsGatedBwd {
  const float* in;  // (F, Ec, ROW): the layer's output adjoint g (A of the products) and the residual
  float* out;       // (F, Ec, ROW)
  const float* z;   // (F, Ec, ROW): the forward's saved pre-activations
  const float* B0;  // this layer's A^T images (kS 2), focus f's at B0 + f 2 M0 M0
  const float* B1;  // its W1^T images (kS 2), focus f's at B1 + f 2 (2 M1)^2
  const float* G;   // its gate weights (Cf, L Cf) row-major, focus f's at G + f Cf L Cf
  int Ec, ROW, ntiles, nitems;
  int prefetch;     // the next item's L2 prefetch (SEZM_CUDA_GBWD_NOPREFETCH=1: off, an A/B switch)
};

// Per item, consumer thread ct owns the gate's row r = ct / 2 and columns 48 (ct % 2) .. + 47 (s_bar,
// S, eta), and z00 / z_bar00's columns 16 (ct % 2) .. + 15. Barriers: named barrier 1 (the 256
// consumers) twice per item: (1) z00 in Zs and G in Gs complete; (2) S and z_bar00 complete. Write
// hazards: Gs is written (before the item's barrier (1)) by threads that passed the previous item's
// barrier (2), after which nobody reads Gs; S is written after barrier (1), which its readers (the
// previous item's products) all passed. Zs row r is written by threads 2r, 2r + 1, of the
// warpgroup whose products read row r: they passed that warpgroup's last wgmma of the previous
// item, after its reads of Zs; the pair's own reads of Zs (the S loop) end before the shuffle that
// precedes its write of z_bar00.
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_backward_k(const __grid_constant__ WsGatedBwd p,
                                                                           const __grid_constant__ CUtensorMap tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[kGStages], empty[kGStages];
  float* const Zs = ws_dsmem + kGStages * kGStage;
  float* const S = Zs + kWsRows * kZst;
  float* const Gs = S + kWsRows * kSst;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_gated_producer<kGStages, kGStage, false>(p, ws_dsmem, full, empty, pp, &tmA);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  const int r = ct >> 1, half = ct & 1, c0 = (kLC / 2) * half, cb = (kCf / 2) * half;
  int gate_f = -1;  // the focus whose G is in Gs (the same on every consumer thread)
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool live = row0 + r < p.Ec;
    const float* g = p.in + fo + static_cast<size_t>(row0 + r) * p.ROW;
    const float* Z = p.z + fo + static_cast<size_t>(row0 + r) * p.ROW;
    // The item's global loads together: z00 and g00 (this thread's 16 columns), s_bar's g and z.
    float4 z00[kCf / 8], g00[kCf / 8];
#pragma unroll
    for (int j = 0; j < kCf / 8; ++j) {
      const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
      z00[j] = live ? __ldg(reinterpret_cast<const float4*>(Z + cb + 4 * j)) : zero;
      g00[j] = live ? __ldg(reinterpret_cast<const float4*>(g + cb + 4 * j)) : zero;
    }
    // s_bar[gg Cf + b] = sum over the orders of degree gg + 1 of g z (zero past Ec).
    float sb[kLC / 2];
#pragma unroll  // whole: sb stays in registers
    for (int j = 0; j < kLC / 8; ++j) {
      const int cq = c0 + 4 * j, gg = cq / kCf, b = cq % kCf;
      float4 acc4 = make_float4(0.f, 0.f, 0.f, 0.f);
      if (live) {
        const int rows[3] = {gg + 1, 3 + gg + 1, 6 + gg + 1};  // L = 3
#pragma unroll
        for (int t = 0; t < 3; ++t) {
          const float4 gv = __ldg(reinterpret_cast<const float4*>(g + rows[t] * kCf + b));
          const float4 zv = __ldg(reinterpret_cast<const float4*>(Z + rows[t] * kCf + b));
          acc4.x = fmaf(gv.x, zv.x, acc4.x); acc4.y = fmaf(gv.y, zv.y, acc4.y);
          acc4.z = fmaf(gv.z, zv.z, acc4.z); acc4.w = fmaf(gv.w, zv.w, acc4.w);
        }
      }
      sb[4 * j] = acc4.x; sb[4 * j + 1] = acc4.y; sb[4 * j + 2] = acc4.z; sb[4 * j + 3] = acc4.w;
    }
    if (f != gate_f) {  // a new focus: its G into Gs (everyone passed the last reads of the old one)
      gate_f = f;
      const float4* src = reinterpret_cast<const float4*>(p.G + static_cast<size_t>(f) * kGateFloats);
#pragma unroll
      for (int j = 0; j < kGateFloats / (4 * 256); ++j)
        reinterpret_cast<float4*>(Gs)[ct + 256 * j] = __ldg(src + ct + 256 * j);
    }
#pragma unroll
    for (int j = 0; j < kCf / 8; ++j) {
      float* zs = Zs + r * kZst + cb + 4 * j;
      zs[0] = z00[j].x; zs[1] = z00[j].y; zs[2] = z00[j].z; zs[3] = z00[j].w;
    }
    ws_consumers_sync();  // (1) Zs (z00) and Gs complete
    {
      // S = sigmoid(Zs G) as in the forward (a in order), into shared memory; eta = s_bar S (1 - S)
      // into sb. G's reads: two addresses per warp (the halves), 16 banks apart.
      float sa[kLC / 2];
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) sa[j] = 0.0f;
#pragma unroll 4
      for (int a = 0; a < kCf; ++a) {
        const float z = Zs[r * kZst + a];
#pragma unroll
        for (int j = 0; j < kLC / 8; ++j) {
          const float4 gw = *reinterpret_cast<const float4*>(Gs + a * kLC + c0 + 4 * j);
          sa[4 * j] = fmaf(z, gw.x, sa[4 * j]);
          sa[4 * j + 1] = fmaf(z, gw.y, sa[4 * j + 1]);
          sa[4 * j + 2] = fmaf(z, gw.z, sa[4 * j + 2]);
          sa[4 * j + 3] = fmaf(z, gw.w, sa[4 * j + 3]);
        }
      }
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) {
        const float sg = sigmoidf_(sa[j]);
        sa[j] = sg;
        sb[j] = sb[j] * sg * (1.0f - sg);
      }
#pragma unroll
      for (int j = 0; j < kLC / 8; ++j)
        *reinterpret_cast<float4*>(S + r * kSst + c0 + 4 * j) = make_float4(sa[4 * j], sa[4 * j + 1], sa[4 * j + 2], sa[4 * j + 3]);
    }
    {
      // eta G^T over this thread's 48 k: e[c] = sum over k in order of eta[k] G[c][c0 + k] (G's row c
      // in Gs; the 32 chains interleaved), the lane pair's halves summed (half 0's + half 1's), then
      // this thread's 16 columns of z_bar00 = g00 silu'(z00) + eta G^T into Zs.
      float e[kCf];
#pragma unroll
      for (int c = 0; c < kCf; ++c) e[c] = 0.0f;
#pragma unroll
      for (int c8 = 0; c8 < kCf; c8 += 8)  // eight chains at a time (the G reads in flight: 32 registers)
#pragma unroll
        for (int j = 0; j < kLC / 8; ++j)
#pragma unroll
          for (int c = c8; c < c8 + 8; ++c) {
            const float4 gw = *reinterpret_cast<const float4*>(Gs + c * kLC + c0 + 4 * j);
            e[c] = fmaf(sb[4 * j], gw.x, e[c]);
            e[c] = fmaf(sb[4 * j + 1], gw.y, e[c]);
            e[c] = fmaf(sb[4 * j + 2], gw.z, e[c]);
            e[c] = fmaf(sb[4 * j + 3], gw.w, e[c]);
          }
      float zb[kCf / 2];
#pragma unroll
      for (int c = 0; c < kCf; ++c) {
        const float o = __shfl_xor_sync(0xffffffffu, e[c], 1);
        const float tot = half ? o + e[c] : e[c] + o;  // half 0's share first, on both lanes
        if ((c < kCf / 2) == (half == 0)) zb[c % (kCf / 2)] = tot;
      }
#pragma unroll
      for (int j = 0; j < kCf / 8; ++j) {
        float* zs = Zs + r * kZst + cb + 4 * j;  // z00 read back (its registers freed for the loops)
        const float4 gg = g00[j];
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (live)
          v = make_float4(fmaf(gg.x, silu_gradf_(zs[0]), zb[4 * j]), fmaf(gg.y, silu_gradf_(zs[1]), zb[4 * j + 1]),
                          fmaf(gg.z, silu_gradf_(zs[2]), zb[4 * j + 2]), fmaf(gg.w, silu_gradf_(zs[3]), zb[4 * j + 3]));
        zs[0] = v.x; zs[1] = v.y; zs[2] = v.z; zs[3] = v.w;
      }
    }
    ws_consumers_sync();  // (2) z_bar00 in Zs and S complete
    {  // ---- m = 0 group: G0' = g0 + z_bar0 A^T ----
      float acc[N0 / 2];
      ws_product<N0, N0, kGStages, kGStage>(ws_dsmem, full, empty, pp, ct, acc, [&](int row, int k, float4 x) {
        if (k < kCf) {
          const float* zs = Zs + row * kZst + k;
          return make_float4(zs[0], zs[1], zs[2], zs[3]);
        }
        const float4 sg = *reinterpret_cast<const float4*>(S + row * kSst + k - kCf);
        return make_float4(x.x * sg.x, x.y * sg.y, x.z * sg.z, x.w * sg.w);
      });
      residual_epilogue<N0>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
    {  // The next item's g and z tiles into L2, warp w's 16 rows each: its gate loads then hit L2.
      const int in_ = i + static_cast<int>(gridDim.x);
      if (p.prefetch && in_ < p.nitems && (ct & 31) == 0) {
        const int fn = in_ / p.ntiles, rn = (in_ - fn * p.ntiles) * kWsRows + 16 * (ct >> 5);
        const int rows = min(16, p.Ec - rn);
        if (rows > 0) {
          const size_t o = static_cast<size_t>(fn) * p.Ec * p.ROW + static_cast<size_t>(rn) * p.ROW;
          const uint32_t bytes = static_cast<uint32_t>(rows) * static_cast<uint32_t>(p.ROW) * sizeof(float);
          ws_prefetch_l2(p.in + o, bytes);
          ws_prefetch_l2(p.z + o, bytes);
        }
      }
    }
    {  // ---- |m| = 1 group: G1' = g1 + (g1 S) W1^T ----
      float acc[N1 / 2];
      ws_product<N1, N1, kGStages, kGStage>(ws_dsmem, full, empty, pp, ct, acc, [&](int row, int k, float4 x) {
        const float4 sg = *reinterpret_cast<const float4*>(S + row * kSst + (red_l(3 + 1 + k / kCf, 3) - 1) * kCf + k % kCf);
        return make_float4(x.x * sg.x, x.y * sg.y, x.z * sg.z, x.w * sg.w);
      });
      residual_epilogue<N1>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}

}  // namespace

void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                           const float* z, cudaStream_t s) {
  if (reinterpret_cast<uintptr_t>(z) % 16 != 0)  // the L2 prefetch's and the vector loads' alignment
    throw Error("launch_gated_backward: the saved pre-activations must be 16-byte aligned");
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const auto k = stack_ws_gated_backward_k;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), kBwdSmemBytes, "stack_ws_gated_backward_k");
  const CUtensorMap tm = activations_map(d, Ec, in);
  WsGatedBwd p;
  p.in = in;
  p.out = out;
  p.z = z;
  p.B0 = w.AT_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1T_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  p.G = w.G + lf * d.Cf * d.L * d.Cf;
  p.Ec = Ec;
  p.ROW = d.ROW;
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
  static const bool no_prefetch = env_on("SEZM_CUDA_GBWD_NOPREFETCH");
  p.prefetch = no_prefetch ? 0 : 1;
  k<<<std::min(p.nitems, sms), kWsThreads, kBwdSmemBytes, s>>>(p, tm);
}

}  // namespace sezm::cuda
