// A gated layer's backward (docs/model.md §7.10; stack_backward_k's maths, stack.cu) in two launches:
//  1. the gate pass (gate_backward_k), per edge row, a plain SIMT kernel at full occupancy:
//       s_bar = sum over the three orders of each degree of g z, S = sigmoid(z00 G),
//       eta = s_bar S (1 - S), z_bar00 = g00 silu'(z00) + eta G^T,
//     written over the row's first 128 saved pre-activations as T = [z_bar00 (Cf) | S (L Cf)] (z is
//     dead after this layer's backward: launch_stack_layer_backward, stack.cuh);
//  2. the products on the warp-specialised persistent tile (wgmma_ws.cuh; stack_ws.cu has the other
//     layer kinds and the layout: one item = a focus's 128-row tile, both |m| groups), the item's T
//     landed in shared memory by the producer (TMA, A's box format) beside the ring:
//       G0' = g0 + z_bar0 A^T (z_bar0 = [z_bar00, g0' S]), G1' = g1 + (g1 S) W1^T,
//     the products' A formed in registers from the landed g and T (ws_product's ax).
// Why (docs/performance.md, 2026-12-02): with the gate inside the persistent kernel its global loads
// of g and z sat on the consumers' critical path with no other warp to hide them (84 us per item
// against 24 for an identity layer, 84 % of cycles without an eligible warp). Split, the gate pass is
// a bandwidth-bound stream (g and z read once, 512 B per row written) and the product kernel an
// identity layer's with a scaled A.
// Numerics: IEEE fp32 FFMA in the gate, every sum in the order of the kernel this replaces (S over a
// in order; eta G^T over k < 48 and k >= 48 in order, the first half's sum + the second's), so T
// holds its values bit for bit; the products 3xTF32 as the tile's (or, kOne, one TF32 pass).
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

constexpr int kL3 = kLC / kCf;  // the degrees l = 1 .. L (L = 3)

// ---- 1. the gate pass ----
// Block: 4 warps x 16 rows of one focus; a warp takes 4 rows per step, lane c owning channel c
// (column c of each of the row's ten 32-wide blocks: coalesced 128-byte loads). The 4 rows share
// each read of G (shared memory, rows padded to kLC + 1 floats: lane c's reads of G[a][k + c] and of
// G[c][k] both hit 32 banks) and read z00 and eta of the others by shared-memory broadcast.
constexpr int kGateWarps = 4, kGateStep = 4, kGateBlockRows = 64;
constexpr int kGst = kLC + 1;

struct GateBwd {
  const float* g;  // (F, Ec, ROW): the layer's output adjoint
  float* z;        // (F, Ec, ROW): the saved pre-activations; T written over columns 0 .. 127
  const float* G;  // the gate weights (Cf, L Cf) row-major, focus f's at G + f Cf L Cf
  int Ec, ROW;
};

__global__ void __launch_bounds__(kGateWarps * 32) gate_backward_k(const GateBwd p) {
  __shared__ float Gs[kCf * kGst];
  __shared__ __align__(16) float Zb[kGateWarps][kGateStep][kCf];
  __shared__ __align__(16) float Eb[kGateWarps][kGateStep][kLC];
  const int f = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const float* Gf = p.G + static_cast<size_t>(f) * kCf * kLC;
  for (int i = threadIdx.x; i < kCf * kLC; i += kGateWarps * 32) Gs[(i / kLC) * kGst + i % kLC] = __ldg(Gf + i);
  __syncthreads();
  const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
  const int end = min(p.Ec, (blockIdx.x + 1) * kGateBlockRows);
  for (int rb = blockIdx.x * kGateBlockRows + w * kGateStep; rb < end; rb += kGateWarps * kGateStep) {
    float g00[kGateStep], z00[kGateStep], sb[kGateStep][kL3];
#pragma unroll
    for (int q = 0; q < kGateStep; ++q) {
      const bool live = rb + q < end;
      const float* g = p.g + fo + static_cast<size_t>(rb + q) * p.ROW + lane;
      const float* z = p.z + fo + static_cast<size_t>(rb + q) * p.ROW + lane;  // plain loads: written below
      float gv[10], zv[10];  // the row's ten 32-wide blocks at channel `lane`
#pragma unroll
      for (int k = 0; k < 10; ++k) {
        gv[k] = live ? __ldg(g + kCf * k) : 0.0f;
        zv[k] = live ? z[kCf * k] : 0.0f;
      }
      // s_bar of degree d + 1: its orders' blocks d + 1 (m = 0), 4 + d and 7 + d (|m| = 1).
#pragma unroll
      for (int d = 0; d < kL3; ++d) {
        float acc = 0.0f;
#pragma unroll
        for (int t = 0; t < 3; ++t) acc = fmaf(gv[d + 1 + 3 * t], zv[d + 1 + 3 * t], acc);
        sb[q][d] = acc;
      }
      g00[q] = gv[0];
      z00[q] = zv[0];
      Zb[w][q][lane] = zv[0];
    }
    __syncwarp();
    // S = sigmoid(z00 G) at columns d Cf + lane, a in order; then eta in place of s_bar.
    float S[kGateStep][kL3];
    gate_pre_lanes<kGateStep>(Zb[w], Gs, kGst, lane, S);
#pragma unroll
    for (int q = 0; q < kGateStep; ++q)
#pragma unroll
      for (int d = 0; d < kL3; ++d) {
        const float sg = sigmoidf_(S[q][d]);
        S[q][d] = sg;
        sb[q][d] = sb[q][d] * sg * (1.0f - sg);
        Eb[w][q][d * kCf + lane] = sb[q][d];
      }
    __syncwarp();
    // z_bar00 at channel `lane`: eta G^T over k in order, k < 48 and k >= 48 apart.
    float e0[kGateStep], e1[kGateStep];
#pragma unroll
    for (int q = 0; q < kGateStep; ++q) e0[q] = e1[q] = 0.0f;
#pragma unroll 2
    for (int k4 = 0; k4 < kLC; k4 += 4) {
      float4 et[kGateStep];
#pragma unroll
      for (int q = 0; q < kGateStep; ++q) et[q] = *reinterpret_cast<const float4*>(&Eb[w][q][k4]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const float gw = Gs[lane * kGst + k4 + kk];
#pragma unroll
        for (int q = 0; q < kGateStep; ++q) {
          const float ek = kk == 0 ? et[q].x : kk == 1 ? et[q].y : kk == 2 ? et[q].z : et[q].w;
          if (k4 < kLC / 2) e0[q] = fmaf(ek, gw, e0[q]);
          else e1[q] = fmaf(ek, gw, e1[q]);
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kGateStep; ++q) {
      if (rb + q >= end) continue;
      float* t = p.z + fo + static_cast<size_t>(rb + q) * p.ROW + lane;  // each lane overwrites what it read
      t[0] = fmaf(g00[q], silu_gradf_(z00[q]), e0[q] + e1[q]);
#pragma unroll
      for (int d = 0; d < kL3; ++d) t[kCf * (d + 1)] = S[q][d];
    }
    __syncwarp();  // Zb and Eb read by every lane before the next step writes them
  }
}

// ---- 2. the products ----
// Shared memory: the item's T and the ring (WsTRing, stack_ws_gated.cuh).
struct WsGatedBwd {
  const float* in;  // (F, Ec, ROW): the layer's output adjoint g (A of the products) and the residual
  float* out;       // (F, Ec, ROW)
  const float* B0;  // this layer's A^T images (kS 2), focus f's at B0 + f 2 M0 M0
  const float* B1;  // its W1^T images (kS 2), focus f's at B1 + f 2 (2 M1)^2
  int Ec, ROW, ntiles, nitems;
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_backward_k(const __grid_constant__ WsGatedBwd p,
                                                                           const __grid_constant__ CUtensorMap tmA,
                                                                           const __grid_constant__ CUtensorMap tmT) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  using R = WsTRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages], t_full, t_empty;
  float* const T = ws_dsmem;
  float* const ring = ws_dsmem + kTFloats;
  WsPipe pp;
  if (!t_kernel_start<kOne>(p, ws_dsmem, full, empty, &t_full, &t_empty, pp, &tmA, &tmT)) return;
  const int ct = threadIdx.x - 128;
  uint32_t tph = 0;
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    ws_bar_wait(&t_full, tph);
    tph ^= 1u;
    {  // ---- m = 0 group: G0' = g0 + z_bar0 A^T; z_bar0 = z_bar00 (T's first Cf columns), then g0 S ----
      float acc[N0 / 2];
      ws_multiply<N0, N0, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc, [&](int row, int k, float4 x) {
        const float4 t = t_quad(T, row, k);  // k < Cf: z_bar00; else S at k - Cf, T's column k
        return k < kCf ? t : make_float4(x.x * t.x, x.y * t.y, x.z * t.z, x.w * t.w);
      });
      residual_epilogue<N0>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
    {  // ---- |m| = 1 group: G1' = g1 + (g1 S) W1^T ----
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc, [&](int row, int k, float4 x) {
        const float4 sg = t_quad(T, row, kCf + (red_l(3 + 1 + k / kCf, 3) - 1) * kCf + k % kCf);
        return make_float4(x.x * sg.x, x.y * sg.y, x.z * sg.z, x.w * sg.w);
      });
      __syncwarp();  // this warp's reads of T are done: the producer may land the next item's
      if ((ct & 31) == 0) ws_bar_arrive(&t_empty);
      residual_epilogue<N1>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}


// ---- 3. SEZM_CUDA_STACK_WS=4 (opt-in; not yet run on a GPU): one launch, no gate pass ----
// Per item, five phases on one ring whose stages hold A's box, B's block and a second box of the
// saved z at A's coordinates (ws_fill's kZoff, read by the hooks beside A: ws_land_a):
//  1. S_pre = z00 G (A = z's scalar-row boxes, B = G's padded image: the one-launch forward's
//     product, so in fp32 S is the forward's to the bit; with `precision tf32` the forward's split
//     form computes S in FFMA, and the two differ at TF32 rounding), S = sigmoid(S_pre);
//  2. the |m| = 1 product G1' = g1 + (g1 S) W1^T, its hook also adding g1 z1 into s_bar;
//  3. a pass without a product over the m = 0 blocks of columns Cf .. M0: s_bar += g0 z0;
//  4. eta G^T (A = eta = s_bar S (1 - S), formed in the hook; B = G^T's padded image, B-only stages);
//  5. the m = 0 product G0' = g0 + z_bar0 A^T, z_bar0 = [g00 silu'(z00) + eta G^T, g0[:, Cf:] S].
// Each consumer thread's S, s_bar and eta G^T values are its own (the products' output quad (q4, h)
// and A's quad (kb = q4, h) cover the same rows and columns 16 q4 + 4 t; stack_ws_gated_fwd.cu):
// they live in shared memory, thread-major (48 + 48 floats per thread, conflict-free), where the
// hooks index them by k, a run-time value in the products' k loops.
// Numerics: S as the one-launch forward's; s_bar in IEEE fp32 FFMA over the orders as they land
// (|m| = 1, then m = 0); eta G^T in 3xTF32 (kOne: one TF32 pass) where the gate pass uses FFMA.
template <bool kOne>
struct WsOneRing {
  static constexpr int kZBox = kWsRows * kWsK;
  static constexpr int kStage = ws_stage_floats(192, kOne) + kZBox, kZoff = kStage - kZBox;
  static constexpr int kStages = kOne ? 4 : 3;
  static constexpr int kScratch = 2 * 48 * 256;  // S, then s_bar / eta G^T: 48 floats per consumer thread
  static constexpr int kBytes = (kScratch + kStages * kStage) * static_cast<int>(sizeof(float));
  static_assert(kBytes + 1024 <= 227 * 1024, "the scratch and the ring fit an SM");
};

struct WsGatedBwdOne {
  const float* in;   // (F, Ec, ROW): the layer's output adjoint g (A of the products) and the residual
  float* out;        // (F, Ec, ROW)
  const float* B0;   // this layer's A^T images, focus f's at B0 + f 2 M0 M0
  const float* B1;   // its W1^T images, focus f's at B1 + f 2 (2 M1)^2
  const float* BG;   // its padded G images (Cf x 128), focus f's at BG + f 2 Cf 128
  const float* BGT;  // its padded G^T images (L Cf x 64), focus f's at BGT + f 2 L Cf 64
  int Ec, ROW, ntiles, nitems;
};

template <int kStages, int kStage, int kZoff, bool kOne>
__device__ __forceinline__ void one_producer(const WsGatedBwdOne& p, float* ring, uint64_t* full, uint64_t* empty,
                                             WsPipe& pp, const CUtensorMap* tmA, const CUtensorMap* tmZ) {
  constexpr int N0 = 128, N1 = 192, NG = 128, NGT = 64;
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    const float* b0 = p.B0 + static_cast<size_t>(f) * 2 * N0 * N0;
    ws_fill<NG, kCf, kStages, kStage, kOne>(ring, full, empty, pp, tmZ,
                                            WsItem{0, y, f, p.BG + static_cast<size_t>(f) * 2 * kCf * NG});
    ws_fill<N1, N1, kStages, kStage, kOne, true, kZoff>(ring, full, empty, pp, tmA,
                                                        WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1},
                                                        0, N1 / kWsK, tmZ);
    ws_fill<N0, N0, kStages, kStage, kOne, true, kZoff, false>(ring, full, empty, pp, tmA, WsItem{0, y, f, b0},
                                                               kCf / kWsK, N0 / kWsK, tmZ);
    ws_fill<NGT, kLC, kStages, kStage, kOne, false>(ring, full, empty, pp, tmA,
                                                    WsItem{0, y, f, p.BGT + static_cast<size_t>(f) * 2 * kLC * NGT});
    ws_fill<N0, N0, kStages, kStage, kOne, true, kZoff>(ring, full, empty, pp, tmA, WsItem{0, y, f, b0}, 0,
                                                        N0 / kWsK, tmZ);
  }
}

// A consumer thread's slots (float j at base[256 j]) of the quad at S's column sc (sc % 16 = 4 t),
// row h: the accumulator indices wg_quad reads.
__device__ __forceinline__ float4 slot_quad(const float* base, int sc, int h) {
  const int b = 8 * (sc >> 4) + 2 * h;
  return make_float4(base[256 * b], base[256 * (b + 1)], base[256 * (b + 4)], base[256 * (b + 5)]);
}
__device__ __forceinline__ void slot_fma(float* base, int sc, int h, float4 x, float4 z) {
  const int b = 8 * (sc >> 4) + 2 * h;
  base[256 * b] = fmaf(x.x, z.x, base[256 * b]);
  base[256 * (b + 1)] = fmaf(x.y, z.y, base[256 * (b + 1)]);
  base[256 * (b + 4)] = fmaf(x.z, z.z, base[256 * (b + 4)]);
  base[256 * (b + 5)] = fmaf(x.w, z.w, base[256 * (b + 5)]);
}
__device__ __forceinline__ float4 mul4(float4 a, float4 b) { return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }

// 2.: A = g1 S (the component's degree), s_bar += g1 z1.
template <int kZ>
struct M1Hook {
  static constexpr int kZoff = kZ;
  const float *S;
  float* sbar;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    const int h = row != ra0, sc = (red_l(3 + 1 + k / kCf, 3) - 1) * kCf + k % kCf;
    slot_fma(sbar, sc, h, x, z);
    return mul4(x, slot_quad(S, sc, h));
  }
};
// 4.: A = eta = s_bar S (1 - S) (the stage's A box is not landed: x unused).
struct EtaHook {
  const float *S, *sbar;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4) const {
    const int h = row != ra0;
    const float4 s = slot_quad(S, k, h), b = slot_quad(sbar, k, h);
    return make_float4(b.x * s.x * (1.0f - s.x), b.y * s.y * (1.0f - s.y), b.z * s.z * (1.0f - s.z),
                       b.w * s.w * (1.0f - s.w));
  }
};
// 5.: A = z_bar0: g00 silu'(z00) + eta G^T on the scalar row's columns, g0 S on the others.
template <int kZ>
struct M0Hook {
  static constexpr int kZoff = kZ;
  const float *S, *eg;
  int ra0;
  __device__ __forceinline__ float4 operator()(int row, int k, float4 x, float4 z) const {
    const int h = row != ra0;
    if (k < kCf) {
      const float4 e = slot_quad(eg, k, h);
      return make_float4(fmaf(x.x, silu_gradf_(z.x), e.x), fmaf(x.y, silu_gradf_(z.y), e.y),
                         fmaf(x.z, silu_gradf_(z.z), e.z), fmaf(x.w, silu_gradf_(z.w), e.w));
    }
    return mul4(x, slot_quad(S, k - kCf, h));
  }
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_backward_one_k(const __grid_constant__ WsGatedBwdOne p,
                                                                               const __grid_constant__ CUtensorMap tmA,
                                                                               const __grid_constant__ CUtensorMap tmZ) {
  constexpr int N0 = 128, N1 = 192, NG = 128, NGT = 64;
  using R = WsOneRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const ring = ws_dsmem + R::kScratch;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    one_producer<R::kStages, R::kStage, R::kZoff, kOne>(p, ring, full, empty, pp, &tmA, &tmZ);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128, t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  float* const S = ws_dsmem + ct;               // S's accumulator j at S[256 j], j < 48
  float* const sbar = ws_dsmem + 48 * 256 + ct;  // s_bar, then eta G^T's accumulators (j < 32)
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    {  // 1. S = sigmoid(z00 G)
      float g[NG / 2];
      ws_multiply<NG, kCf, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, g);
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) {
        S[256 * j] = sigmoidf_(g[j]);
        sbar[256 * j] = 0.0f;
      }
    }
    {  // 2. G1' = g1 + (g1 S) W1^T
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc, M1Hook<R::kZoff>{S, sbar, ra0});
      residual_epilogue<N1>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
#pragma unroll 1
    for (int kb = kCf / kWsK; kb < N0 / kWsK; ++kb) {  // 3. s_bar += g0 z0 (columns Cf .. M0)
      const int cur = pp.stage;
      ws_bar_wait(&full[cur], pp.phase);
      ws_advance<R::kStages>(pp);
      const float* sA = ring + cur * R::kStage;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = h ? ra1 : ra0;
        slot_fma(sbar, kb * kWsK + 4 * t - kCf, h, *reinterpret_cast<const float4*>(sA + ws_a_offset(row, 4 * t)),
                 *reinterpret_cast<const float4*>(sA + R::kZoff + ws_a_offset(row, 4 * t)));
      }
      __syncwarp();
      if ((ct & 31) == 0) ws_bar_arrive(&empty[cur]);
    }
    {  // 4. eta G^T, into s_bar's slots once every s_bar value is read
      float eg[NGT / 2];
      ws_multiply<NGT, kLC, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, eg, EtaHook{S, sbar, ra0});
#pragma unroll
      for (int j = 0; j < NGT / 2; ++j) sbar[256 * j] = eg[j];
    }
    {  // 5. G0' = g0 + z_bar0 A^T
      float acc[N0 / 2];
      ws_multiply<N0, N0, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc, M0Hook<R::kZoff>{S, sbar, ra0});
      residual_epilogue<N0>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}

void launch_gated_backward_one(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                               const float* z, cudaStream_t s) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_backward_one_k<true> : stack_ws_gated_backward_one_k<false>;
  const int bytes = one ? WsOneRing<true>::kBytes : WsOneRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_backward_one_k");
  WsGatedBwdOne p;
  p.in = in;
  p.out = out;
  p.B0 = w.AT_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1T_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  p.BG = w.G_ws + lf * 2 * d.Cf * 128;
  p.BGT = w.GT_ws + lf * 2 * d.L * d.Cf * 64;
  set_ws_items(p, d, Ec);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, activations_map(d, Ec, in), activations_map(d, Ec, z));
  SEZM_LAUNCH("stack_ws_gated_backward_one_k");
}

}  // namespace

void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                           cudaStream_t s) {
  if (d.ROW != 10 * kCf)
    throw Error("launch_gated_backward: rows of ten 32-wide blocks expected (Cf = 32, L = 3)");
  if (d.stack_ws == 4 && w.G_ws != nullptr && w.GT_ws != nullptr) {
    launch_gated_backward_one(d, w, layer, Ec, in, out, z, s);
    return;
  }
  const size_t lf = static_cast<size_t>(layer) * d.F;
  GateBwd gp;
  gp.g = in;
  gp.z = z;
  gp.G = w.G + lf * d.Cf * d.L * d.Cf;
  gp.Ec = Ec;
  gp.ROW = d.ROW;
  gate_backward_k<<<dim3(div_up(Ec, kGateBlockRows), d.F), kGateWarps * 32, 0, s>>>(gp);
  SEZM_LAUNCH("gate_backward_k");

  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_backward_k<true> : stack_ws_gated_backward_k<false>;
  const int bytes = one ? WsTRing<true>::kBytes : WsTRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_backward_k");
  const CUtensorMap tmA = activations_map(d, Ec, in);
  const CUtensorMap tmT = t_map(d, Ec, z);
  WsGatedBwd p;
  p.in = in;
  p.out = out;
  p.B0 = w.AT_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1T_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  set_ws_items(p, d, Ec);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, tmA, tmT);
  SEZM_LAUNCH("stack_ws_gated_backward_k");
}

}  // namespace sezm::cuda
