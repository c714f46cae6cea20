// A gated layer's forward (docs/model.md §5.4; stack_forward_k's maths, stack.cu) on the
// warp-specialised persistent tile (wgmma_ws.cuh; stack_ws.cu has the layout: one item = a focus's
// 128-row tile, both |m| groups): z0 = U0 A, z1 = U1 W1, S = sigmoid(z00 G), epilogues
// U0' = U0 + [silu(z00), z0[:, Cf:] * S] and U1' = U1 + z1 * S (the update formed in the
// accumulators, then the identity layers' residual epilogue). Two forms:
//  - one launch (3. below; the default, and with `precision tf32` under SEZM_CUDA_STACK_WS=3): the
//    gate product z00 G on the tensor cores between the groups' products, S kept by the consumers;
//  - two launches (1. and 2.; `precision tf32` otherwise, until the one-launch form's one-pass
//    instantiation has run on a GPU): a SIMT gate pass writes T = [z00 | S] over the first 128
//    columns of a scratch row (the kept z's row, else the output's: the product kernel writes it
//    whole), which the product kernel lands by TMA while its m = 0 product runs.
// Why (docs/performance.md, 2026-12-03): the gate between the products in IEEE FFMA by the consumers
// took 159 us per 32,768-edge chunk (ncu) against 89 for an identity layer; split, 54 + 104 us. H200,
// 4,096 atoms, lean, the 80 gated forward launches: split 13.4 ms, one launch 10.2 ms.
// Numerics: one launch: S from the product's z00 in 3xTF32, and that z00 is the one kept and put
// through silu. Two launches: IEEE fp32 FFMA in the gate pass, z00 over k in order and S over a in
// order; z00 is the gate pass's (the product's first Cf columns go unused), used for silu, S and the
// kept z. Either way the backward (stack_ws_gated_bwd.cu, which recomputes S from the kept z00 in
// IEEE FFMA) sees the forward's z00; its S agrees with the forward's to fp32 rounding.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

constexpr int kL3 = kLC / kCf;  // the degrees l = 1 .. L (L = 3)
constexpr int kM0 = 128;        // M0 = (L + 1) Cf

// ---- 1. the gate pass ----
// Block: 4 warps x 32 rows of one focus; a warp takes 4 rows per step, lane c owning channel c of
// z00 and of each degree's S block. The rows' U0 go through a per-warp shared-memory slot (loaded
// one step ahead into registers: coalesced 512-byte rows), A's first Cf columns and G stay in shared
// memory for the block (lane c's reads of As[k][c] and Gs[a][d Cf + c] hit 32 banks; the rows'
// values are broadcasts).
constexpr int kGfWarps = 4, kGfStep = 4, kGfBlockRows = 128;

struct GateFwd {
  const float* u;  // (F, Ec, ROW): the layer's input
  float* t;        // (F, Ec, ROW): T written over columns 0 .. 127
  const float* A;  // the layer's A (M0, M0) row-major, focus f's at A + f M0 M0
  const float* G;  // its gate weights (Cf, L Cf) row-major, focus f's at G + f Cf L Cf
  int Ec, ROW;
};

__global__ void __launch_bounds__(kGfWarps * 32) gate_forward_k(const GateFwd p) {
  __shared__ float As[kM0 * kCf];
  __shared__ float Gs[kCf * kLC];
  __shared__ __align__(16) float Ub[kGfWarps][kGfStep][kM0];
  __shared__ __align__(16) float Zb[kGfWarps][kGfStep][kCf];
  const int f = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const float* Af = p.A + static_cast<size_t>(f) * kM0 * kM0;
  const float* Gf = p.G + static_cast<size_t>(f) * kCf * kLC;
  for (int i = threadIdx.x; i < kM0 * kCf; i += kGfWarps * 32) As[i] = __ldg(Af + (i / kCf) * kM0 + i % kCf);
  for (int i = threadIdx.x; i < kCf * kLC; i += kGfWarps * 32) Gs[i] = __ldg(Gf + i);
  __syncthreads();
  const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
  const int end = min(p.Ec, (blockIdx.x + 1) * kGfBlockRows);
  auto load = [&](int rb, float4 (&v)[kGfStep]) {
#pragma unroll
    for (int q = 0; q < kGfStep; ++q)
      v[q] = rb + q < end ? __ldg(reinterpret_cast<const float4*>(p.u + fo + static_cast<size_t>(rb + q) * p.ROW) + lane)
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  };
  constexpr int kStride = kGfWarps * kGfStep;
  int rb = blockIdx.x * kGfBlockRows + w * kGfStep;
  float4 nu[kGfStep];
  if (rb < end) load(rb, nu);
  for (; rb < end; rb += kStride) {
#pragma unroll
    for (int q = 0; q < kGfStep; ++q) *reinterpret_cast<float4*>(&Ub[w][q][4 * lane]) = nu[q];
    __syncwarp();
    if (rb + kStride < end) load(rb + kStride, nu);  // the next step's rows in flight meanwhile
    // z00 at channel `lane`: sum over k in order.
    float z[kGfStep];
#pragma unroll
    for (int q = 0; q < kGfStep; ++q) z[q] = 0.0f;
#pragma unroll 4
    for (int k4 = 0; k4 < kM0; k4 += 4) {
      float4 uq[kGfStep];
#pragma unroll
      for (int q = 0; q < kGfStep; ++q) uq[q] = *reinterpret_cast<const float4*>(&Ub[w][q][k4]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const float a = As[(k4 + kk) * kCf + lane];
#pragma unroll
        for (int q = 0; q < kGfStep; ++q) {
          const float uk = kk == 0 ? uq[q].x : kk == 1 ? uq[q].y : kk == 2 ? uq[q].z : uq[q].w;
          z[q] = fmaf(uk, a, z[q]);
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kGfStep; ++q) Zb[w][q][lane] = z[q];
    __syncwarp();
    // S = sigmoid(z00 G) at columns d Cf + lane, a in order.
    float S[kGfStep][kL3];
    gate_pre_lanes<kGfStep>(Zb[w], Gs, kLC, lane, S);
#pragma unroll
    for (int q = 0; q < kGfStep; ++q) {
      if (rb + q >= end) continue;
      float* t = p.t + fo + static_cast<size_t>(rb + q) * p.ROW + lane;
      t[0] = z[q];
#pragma unroll
      for (int d = 0; d < kL3; ++d) t[kCf * (d + 1)] = sigmoidf_(S[q][d]);
    }
    __syncwarp();  // Ub and Zb read by every lane before the next step writes them
  }
}

// ---- 2. the products ----
// Quad (q4, h) of the accumulators (wg_quad's) set to v.
template <int M>
__device__ __forceinline__ void set_quad(float (&acc)[M], int q4, int h, float4 v) {
  acc[8 * q4 + 2 * h] = v.x;
  acc[8 * q4 + 2 * h + 1] = v.y;
  acc[8 * q4 + 4 + 2 * h] = v.z;
  acc[8 * q4 + 5 + 2 * h] = v.w;
}

struct WsGatedFwd {
  const float* in;  // (F, Ec, ROW): the layer's input (A of the products) and its residual
  float* out;       // (F, Ec, ROW)
  float* zsave;     // (F, Ec, ROW): z = [z00 (the gate pass's), z0[:, Cf:], z1] kept, or null
  const float* B0;  // this layer's A images (kS 2), focus f's at B0 + f 2 M0 M0
  const float* B1;  // its W1 images (kS 2), focus f's at B1 + f 2 (2 M1)^2
  int Ec, ROW, ntiles, nitems;
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_forward_k(const __grid_constant__ WsGatedFwd p,
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
  const int ra[2] = {ws_row(ct, 0), ws_row(ct, 1)};
  uint32_t tph = 0;
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool in0 = row0 + ra[0] < p.Ec, in1 = row0 + ra[1] < p.Ec;
    {  // ---- m = 0 group: U0' = U0 + [silu(z00), z0[:, Cf:] * S] ----
      float acc[N0 / 2];
      ws_multiply<N0, N0, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc);
      ws_bar_wait(&t_full, tph);  // the item's T, landed while the product ran
      tph ^= 1u;
      // acc becomes the update v (z kept first); the residual epilogue then adds U0 (u + v).
#pragma unroll
      for (int q4 = 0; q4 < N0 / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = wg_quad_col(q4);
          const float4 t = t_quad(T, ra[h], c);  // c < Cf: z00; else S at c - Cf
          float4 z, v;
          if (c < kCf) {  // Cf % 4 == 0: a quad never straddles the scalar row
            z = t;
            v = make_float4(siluf_(z.x), siluf_(z.y), siluf_(z.z), siluf_(z.w));
          } else {
            z = wg_quad(acc, q4, h);
            v = make_float4(z.x * t.x, z.y * t.y, z.z * t.z, z.w * t.w);
          }
          if (p.zsave && (h ? in1 : in0))
            *reinterpret_cast<float4*>(p.zsave + fo + static_cast<size_t>(row0 + ra[h]) * p.ROW + c) = z;
          set_quad(acc, q4, h, v);
        }
      residual_epilogue<N0>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
    {  // ---- |m| = 1 group: U1' = U1 + z1 * S (the sigmoid of the component's degree) ----
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc);
#pragma unroll
      for (int q4 = 0; q4 < N1 / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = wg_quad_col(q4);
          const float4 z = wg_quad(acc, q4, h);
          const float4 sg = t_quad(T, ra[h], kCf + (red_l(3 + 1 + c / kCf, 3) - 1) * kCf + c % kCf);
          if (p.zsave && (h ? in1 : in0))
            *reinterpret_cast<float4*>(p.zsave + fo + static_cast<size_t>(row0 + ra[h]) * p.ROW + N0 + c) = z;
          set_quad(acc, q4, h, make_float4(z.x * sg.x, z.y * sg.y, z.z * sg.z, z.w * sg.w));
        }
      __syncwarp();  // this warp's reads of T are done: the producer may land the next item's
      if ((ct & 31) == 0) ws_bar_arrive(&t_empty);
      residual_epilogue<N1>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}


// ---- 3. the default (fp32): one launch, the gate product on the tensor cores ----
// Per item: z0 = U0 A from the ring's m = 0 blocks; z0 parked in shared memory (each consumer
// thread's 64 floats thread-major: conflict-free) while its scalar row z00 (the thread's quads 0, 1)
// is the A operand of S_pre = z00 G, whose B blocks (G's image, zero-padded to 128 columns: two
// stages holding B alone) the producer streams between the groups; S = sigmoid(S_pre). Every S value
// a thread's epilogues need is in its own accumulators (the product's output quad (q4, h) and A's
// quad (kb = q4, h) are the same rows and columns 16 q4 + 4 t): S stays in registers through the
// m = 0 epilogue, then takes z0's place in shared memory for the |m| = 1 epilogue. No gate pass, no T.
// Numerics: S_pre in 3xTF32 (kOne: one TF32 pass) from the product's z00, which is also the z00 kept
// and put through silu; the backward's gate pass recomputes S in IEEE FFMA from the kept z00 (the
// two agree to fp32 rounding, as wg_tile's tensor-core gate did).
constexpr int kNG = 128;  // G's padded width: two 64-column chunks
static_assert(kTFloats == (kM0 / 2) * 256, "the stash: 64 floats per consumer thread, in T's place");

struct WsGatedTc {
  const float* in;  // (F, Ec, ROW): the layer's input (A of the products) and its residual
  float* out;       // (F, Ec, ROW)
  float* zsave;     // (F, Ec, ROW): z = [z0, z1] kept, or null
  const float* B0;  // this layer's A images (kS 2), focus f's at B0 + f 2 M0 M0
  const float* BG;  // its padded G images, focus f's at BG + f 2 Cf kNG
  const float* B1;  // its W1 images (kS 2), focus f's at B1 + f 2 (2 M1)^2
  int Ec, ROW, ntiles, nitems;
};

template <int kStages, int kStage, bool kOne>
__device__ __forceinline__ void tc_producer(const WsGatedTc& p, float* ring, uint64_t* full, uint64_t* empty,
                                            WsPipe& pp, const CUtensorMap* tmA) {
  constexpr int N0 = 128, N1 = 192;
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    ws_fill<N0, N0, kStages, kStage, kOne>(ring, full, empty, pp, tmA,
                                           WsItem{0, y, f, p.B0 + static_cast<size_t>(f) * 2 * N0 * N0});
    ws_fill<kNG, kCf, kStages, kStage, kOne, false>(ring, full, empty, pp, tmA,
                                                    WsItem{0, y, f, p.BG + static_cast<size_t>(f) * 2 * kCf * kNG});
    ws_fill<N1, N1, kStages, kStage, kOne>(ring, full, empty, pp, tmA,
                                           WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1});
  }
}

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_tc_k(const __grid_constant__ WsGatedTc p,
                                                                     const __grid_constant__ CUtensorMap tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  using R = WsTRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const ring = ws_dsmem + kTFloats;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    tc_producer<R::kStages, R::kStage, kOne>(p, ring, full, empty, pp, &tmA);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float* const stash = ws_dsmem + ct;  // stash[256 j]: this thread's float j
  const int ra0 = ws_row(ct, 0);
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool live[2] = {row0 + ws_row(ct, 0) < p.Ec, row0 + ws_row(ct, 1) < p.Ec};
    float4 z00[4];  // quads (kb, h) of the scalar row: index 2 kb + h
    {
      float acc[N0 / 2];
      ws_multiply<N0, N0, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc);
#pragma unroll
      for (int q = 0; q < 4; ++q) z00[q] = wg_quad(acc, q >> 1, q & 1);
#pragma unroll
      for (int j = 0; j < N0 / 2; ++j) stash[256 * j] = acc[j];
    }
    float g[kNG / 2];  // S_pre, then S (its quads 0 .. 5; 6, 7 are the padding's)
    ws_multiply<kNG, kCf, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, g, [&](int row, int k, float4) {
      const bool h1 = row != ra0;
      return k < kWsK ? (h1 ? z00[1] : z00[0]) : (h1 ? z00[3] : z00[2]);
    });
#pragma unroll
    for (int j = 0; j < kNG / 2; ++j) g[j] = sigmoidf_(g[j]);
    {  // ---- m = 0 epilogue: U0' = U0 + [silu(z00), z0[:, Cf:] * S] ----
      float acc[N0 / 2];
#pragma unroll
      for (int j = 0; j < N0 / 2; ++j) acc[j] = stash[256 * j];
#pragma unroll
      for (int q4 = 0; q4 < N0 / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 z = wg_quad(acc, q4, h);
          float4 v;
          if (q4 < kCf / 16) {  // the scalar row's columns
            v = make_float4(siluf_(z.x), siluf_(z.y), siluf_(z.z), siluf_(z.w));
          } else {
            const float4 sg = wg_quad(g, q4 - kCf / 16, h);  // S at column 16 q4 + 4 t - Cf
            v = make_float4(z.x * sg.x, z.y * sg.y, z.z * sg.z, z.w * sg.w);
          }
          if (p.zsave && live[h])
            *reinterpret_cast<float4*>(p.zsave + fo + static_cast<size_t>(row0 + ws_row(ct, h)) * p.ROW +
                                       wg_quad_col(q4)) = z;
          set_quad(acc, q4, h, v);
        }
      residual_epilogue<N0>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
#pragma unroll
    for (int j = 0; j < kLC / 2; ++j) stash[256 * j] = g[j];  // S's quads 0 .. 5
    {  // ---- |m| = 1 group: U1' = U1 + z1 * S (the sigmoid of the component's degree) ----
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc);
#pragma unroll
      for (int q4 = 0; q4 < N1 / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 z = wg_quad(acc, q4, h);
          // column c = 16 q4 + 4 t: degree red_l(L + 1 + c / Cf) - 1, S's quad 2 d + (c % Cf) / 16
          const int sq = 2 * (red_l(3 + 1 + q4 / 2, 3) - 1) + (q4 & 1), b = 8 * sq + 2 * h;
          const float4 sg = make_float4(stash[256 * b], stash[256 * (b + 1)], stash[256 * (b + 4)], stash[256 * (b + 5)]);
          if (p.zsave && live[h])
            *reinterpret_cast<float4*>(p.zsave + fo + static_cast<size_t>(row0 + ws_row(ct, h)) * p.ROW + N0 +
                                       wg_quad_col(q4)) = z;
          set_quad(acc, q4, h, make_float4(z.x * sg.x, z.y * sg.y, z.z * sg.z, z.w * sg.w));
        }
      residual_epilogue<N1>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}

void launch_gated_tc(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* zsave,
                     cudaStream_t s) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_tc_k<true> : stack_ws_gated_tc_k<false>;
  const int bytes = one ? WsTRing<true>::kBytes : WsTRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_tc_k");
  WsGatedTc p;
  p.in = in;
  p.out = out;
  p.zsave = zsave;
  p.B0 = w.A_ws + lf * 2 * d.M0 * d.M0;
  p.BG = w.G_ws + lf * 2 * d.Cf * kNG;
  p.B1 = w.W1_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  set_ws_items(p, d, Ec);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, activations_map(d, Ec, in));
  SEZM_LAUNCH("stack_ws_gated_tc_k");
}

}  // namespace

void launch_gated_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                          float* zsave, cudaStream_t s) {
  if (d.ROW != 10 * kCf || d.M0 != kM0)
    throw Error("launch_gated_forward: rows of ten 32-wide blocks expected (Cf = 32, L = 3)");
  if (out == in || zsave == in) throw Error("launch_gated_forward: the output and the kept z must not be the input");
  // The gate product on the tensor cores (3.) by default; in one TF32 pass only with stack_ws 3, as
  // its kOne form has not yet run on a GPU (tests/test_cuda_reference.cpp, variant "_tf32wstc").
  if (w.G_ws != nullptr && (!d.tf32_one_pass || d.stack_ws == 3)) {
    launch_gated_tc(d, w, layer, Ec, in, out, zsave, s);
    return;
  }
  const size_t lf = static_cast<size_t>(layer) * d.F;
  float* t = zsave ? zsave : out;  // T's rows: overwritten by the product kernel's epilogue
  GateFwd gp;
  gp.u = in;
  gp.t = t;
  gp.A = w.A + lf * d.M0 * d.M0;
  gp.G = w.G + lf * d.Cf * d.L * d.Cf;
  gp.Ec = Ec;
  gp.ROW = d.ROW;
  gate_forward_k<<<dim3(div_up(Ec, kGfBlockRows), d.F), kGfWarps * 32, 0, s>>>(gp);
  SEZM_LAUNCH("gate_forward_k");

  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_forward_k<true> : stack_ws_gated_forward_k<false>;
  const int bytes = one ? WsTRing<true>::kBytes : WsTRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_forward_k");
  const CUtensorMap tmA = activations_map(d, Ec, in);
  const CUtensorMap tmT = t_map(d, Ec, t);
  WsGatedFwd p;
  p.in = in;
  p.out = out;
  p.zsave = zsave;
  p.B0 = w.A_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  set_ws_items(p, d, Ec);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, tmA, tmT);
  SEZM_LAUNCH("stack_ws_gated_forward_k");
}

}  // namespace sezm::cuda
