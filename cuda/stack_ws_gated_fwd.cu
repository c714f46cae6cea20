// A gated layer's forward (docs/model.md §5.4; stack_forward_k's maths, stack.cu) on the
// warp-specialised persistent tile (wgmma_ws.cuh; stack_ws.cu has the layout: one item = a focus's
// 128-row tile, both |m| groups), in one launch: z0 = U0 A, S = sigmoid(z00 G) with the gate product
// on the tensor cores between the groups' products, z1 = U1 W1; epilogues
// U0' = U0 + [silu(z00), z0[:, Cf:] * S] and U1' = U1 + z1 * S (the update formed in the
// accumulators, then the identity layers' residual epilogue).
// Why (docs/performance.md, 2026-12-03): the gate between the products in IEEE FFMA by the consumers
// took 159 us per 32,768-edge chunk (ncu) against 89 for an identity layer; a SIMT gate pass beside
// the product kernel (removed) 54 + 104 us. H200, 4,096 atoms, lean, the 80 gated forward launches:
// 13.4 ms split in two launches, 10.2 ms in this one.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

constexpr int kM0 = 128;        // M0 = (L + 1) Cf

// Quad (q4, h) of the accumulators (wg_quad's) set to v.
template <int M>
__device__ __forceinline__ void set_quad(float (&acc)[M], int q4, int h, float4 v) {
  acc[8 * q4 + 2 * h] = v.x;
  acc[8 * q4 + 2 * h + 1] = v.y;
  acc[8 * q4 + 4 + 2 * h] = v.z;
  acc[8 * q4 + 5 + 2 * h] = v.w;
}

// Per item: z0 = U0 A from the ring's m = 0 blocks; z0 parked in shared memory (each consumer
// thread's 64 floats thread-major: conflict-free) while its scalar row z00 (the thread's quads 0, 1)
// is the A operand of S_pre = z00 G, whose B blocks (G's image, zero-padded to 128 columns: two
// stages holding B alone) the producer streams between the groups; S = sigmoid(S_pre). Every S value
// a thread's epilogues need is in its own accumulators (the product's output quad (q4, h) and A's
// quad (kb = q4, h) are the same rows and columns 16 q4 + 4 t): S stays in registers through the
// m = 0 epilogue, then takes z0's place in shared memory for the |m| = 1 epilogue. No gate pass, no T.
// Numerics: S_pre in 3xTF32 (kOne: one TF32 pass) from the product's z00, which is also the z00 kept
// and put through silu; the backward (stack_ws_gated_bwd.cu) recomputes S by the same product
// from the kept z00, so to the bit.
constexpr int kNG = 128;  // G's padded width: two 64-column chunks

// Shared memory: the consumers' stash (64 floats per thread in 16-byte groups, thread-major), then
// the ring, five stages of 32 KiB (one pass: eight of 20 KiB).
template <bool kOne>
using WsTcRing = WsScratchRing<kM0 / 2, kOne ? 8 : 5, ws_stage_floats(192, kOne)>;

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
  using R = WsTcRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const ring = ws_dsmem + R::kScratch;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    tc_producer<R::kStages, R::kStage, kOne>(p, ring, full, empty, pp, &tmA);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  // This thread's stash in 16-byte slot groups (set_slots, slot_quad: stack_ws_gated.cuh), a
  // quarter of the shared-memory instructions of 4-byte ones.
  float4* const stash4 = reinterpret_cast<float4*>(ws_dsmem) + ct;
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
      set_slots<N0 / 2>(stash4, acc);
    }
    float g[kNG / 2];  // S_pre, then S (its quads 0 .. 5; 6, 7 are the padding's, left alone)
    ws_multiply<kNG, kCf, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, g, [&](int row, int k, float4) {
      const bool h1 = row != ra0;
      return k < kWsK ? (h1 ? z00[1] : z00[0]) : (h1 ? z00[3] : z00[2]);
    });
    {  // ---- m = 0 epilogue: U0' = U0 + [silu(z00), z0[:, Cf:] * S] ----
      float4 res[N0 / 8];  // U0's quads, in flight while the sigmoids run
      residual_load<N0>(p.in, fo, p.ROW, row0, p.Ec, ct, res);
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) g[j] = sigmoidf_(g[j]);  // quads 6, 7 are G's padding: unused
      float acc[N0 / 2];
      get_slots<N0 / 2>(stash4, acc);
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
      residual_store<N0>(res, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
    set_slots<kLC / 2>(stash4, g);  // S's quads 0 .. 5
    {  // ---- |m| = 1 group: U1' = U1 + z1 * S (the sigmoid of the component's degree) ----
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne>(ring, full, empty, pp, ct, acc);
      // U1's quads, in flight during the gating and the z stores (one pass: with them and acc live
      // together ptxas spills 72 bytes, so they are read after the stores, as before)
      float4 res[N1 / 8];
      if constexpr (!kOne) residual_load<N1>(p.in, fo + N0, p.ROW, row0, p.Ec, ct, res);
#pragma unroll
      for (int q4 = 0; q4 < N1 / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 z = wg_quad(acc, q4, h);
          // column c = 16 q4 + 4 t: degree red_l(L + 1 + c / Cf) - 1, S's quad 2 d + (c % Cf) / 16
          const int sq = 2 * (red_l(3 + 1 + q4 / 2, 3) - 1) + (q4 & 1);
          const float4 sg = slot_quad(stash4, 16 * sq, h);
          if (p.zsave && live[h])
            *reinterpret_cast<float4*>(p.zsave + fo + static_cast<size_t>(row0 + ws_row(ct, h)) * p.ROW + N0 +
                                       wg_quad_col(q4)) = z;
          set_quad(acc, q4, h, make_float4(z.x * sg.x, z.y * sg.y, z.z * sg.z, z.w * sg.w));
        }
      if constexpr (kOne) residual_load<N1>(p.in, fo + N0, p.ROW, row0, p.Ec, ct, res);
      residual_store<N1>(res, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}

void launch_gated_tc(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* zsave,
                     cudaStream_t s) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_tc_k<true> : stack_ws_gated_tc_k<false>;
  const int bytes = one ? WsTcRing<true>::kBytes : WsTcRing<false>::kBytes;
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
  if (w.G_ws == nullptr) throw Error("launch_gated_forward: the gate's padded image (BlockWDev::G_ws) was not built");
  launch_gated_tc(d, w, layer, Ec, in, out, zsave, s);
}

}  // namespace sezm::cuda
