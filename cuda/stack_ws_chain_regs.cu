// The stack's forward in one TF32 pass (`precision tf32`), every layer in one persistent launch,
// each item's rows kept in the consumers' registers from one layer to the next.
// stack_ws_chain.cu hands each layer's output to the next through L2 (stored, fenced, copied back
// by the tensor unit: per item and layer 160 KiB each way; that chain ran at 81 % of L2 throughput,
// docs/performance.md, 2026-12-06). In one pass a product's landed A quads are laid out as its
// output quads (ws_product_one's kept), so a layer's output, after its epilogue, is the next
// layer's A in registers (ws_product_one_regs), and rows cross L2 only where the call keeps them:
// the stack's input (read once, by the tensor unit into A-only stages, ws_land_quads), the gated
// layers' z and the last layer's output.
// Registers hold one |m| group at a time (the |m| = 1 group's 96 A floats and 96 accumulators per
// consumer thread), so an item runs group-major: its m = 0 columns through every layer, then its
// |m| = 1 columns through every layer (the SO(2) products of one group read only that group's
// columns). A gated layer's |m| = 1 epilogue needs its gate S = sigmoid(z00 G), formed in the
// m = 0 pass: each gated layer's z00 quads (16 floats per thread) wait in shared memory, and S is
// formed again before the |m| = 1 product, by the same product from the same z00 (2 more B-only
// stages per gated layer). Shared memory: the consumers' park (z0 during a gate product in the
// m = 0 pass, S in the |m| = 1 pass: 64 floats per thread), the z00 quads (16 per thread and
// gated layer, at most kRegsGatedMax), then the ring. A stage holds A's box (8 KiB) or B's block
// (12 KiB at N = 192, 8 at 128), never both (ws_fill's kBAt0), so 12 KiB: ten stages, 216 KiB in
// all (this kernel reads nothing through L1, so the larger carve-out costs it nothing that the
// others lose).
// With binary16 rows (stack_in_f16 / stack_out_f16, f16_rows.cuh) the input's boxes are halves
// (ws_fill_input, ws_land_input) and the last layer stores halves with per-row scales
// (store_rows_h); so do the gated layers' z where stack_z_f16 (store_z_any), which the backward reads.
// Numerics: stack_ws_chain.cu's in one pass, the same products, epilogues and order of every sum
// (the same device functions), so the same bits (tests/test_cuda_stack_paths.cpp, the digests).
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "f16_rows.cuh"
#include "stack_ws_gated_fwd.cuh"

namespace sezm::cuda {
namespace {

constexpr int kRegsGatedMax = 2;  // gated layers whose z00 the shared memory holds (C.pt: 2)
constexpr int kRegsPark = 64;     // floats per consumer thread: z0 (m = 0 pass), S (|m| = 1 pass)
template <int kStages>
using RegsRing = WsScratchRing<kRegsPark + 16 * kRegsGatedMax, kStages, ws_b_floats(192, true)>;

struct WsChainRegs {
  WsGatedImages g[kStackChainMax];  // an identity layer's images in B0, B1 (BG null)
  float* zsave[kStackChainMax];     // a gated layer's pre-activations kept there, or null
  float* last;                      // the last layer's output
  const float* in;                  // the stack's input: its binary16 rows' scales (in16), else unused
  int nL, ngated, Ec, ROW, ntiles, nitems;
  int f16, in16, z16, F;            // the output / input / z in binary16 rows (stack_out_f16, stack_in_f16,
                                    // stack_z_f16)
};

// An identity layer's step end on group N (128: the m = 0 columns, 192: the |m| = 1 columns;
// regs_residual_step), the last layer's output stored as fp32 rows or binary16 rows (p.f16).
template <int N>
__device__ __forceinline__ void regs_identity_step(const WsChainRegs& p, float (&acc)[N / 2], float4 (&u)[N / 8], bool last,
                                                   size_t fo, int f, int row0, int ct) {
  constexpr int g = N == 128 ? 0 : 1;
  regs_residual_step<N>(acc, u, last && !p.f16, p.last, fo + (g ? 128 : 0), p.ROW, row0, p.Ec, ct);
  if (last && p.f16)
    store_rows_h<N, false>(p.last, p.F, p.Ec, p.ROW, f, row0, g, ct, [&](int q4, int h) { return u[2 * q4 + h]; });
}

// The producer warp's stages of one group (N: 128 the m = 0 columns, 192 the |m| = 1 columns) of
// item (focus f, rows y ..): the item's input once per group (ws_fill_input), B's blocks alone
// (each layer's product), G's blocks (a gated layer's gate product).
template <int N, int kStages, int kStage>
__device__ __forceinline__ void regs_fill_b(const float* B, float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                            const CUtensorMap* tm, int f, int y) {
  ws_fill<N, N, kStages, kStage, true, false, 0, true, kWsRows, true>(
      ring, full, empty, pp, tm, WsItem{0, y, f, B + static_cast<size_t>(f) * 2 * N * N});
}
template <int kStages, int kStage>
__device__ __forceinline__ void regs_fill_g(const float* BG, float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                            const CUtensorMap* tm, int f, int y) {
  ws_fill<kNG, kCf, kStages, kStage, true, false, 0, true, kWsRows, true>(
      ring, full, empty, pp, tm, WsItem{0, y, f, BG + static_cast<size_t>(f) * 2 * kCf * kNG});
}

template <int kStages>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_chain_regs_k(const __grid_constant__ WsChainRegs p,
                                                                       const __grid_constant__ CUtensorMap tm) {
  using R = RegsRing<kStages>;
  constexpr int kSt = R::kStages, kStg = R::kStage, kAr = kAr1xTf32, N0 = 128, N1 = 192;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[kSt], empty[kSt];
  float* const ring = ws_dsmem + R::kScratch;
  // The WS kernels' start, written out (stack_ws_chain_bwd.cu says why: setmaxnreg in a helper spilled).
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_regs_dec<kWsProducerRegs>();
    if (threadIdx.x >= 32) return;
    for (int k = blockIdx.x; k < p.nitems; k += ws_grid()) {
      const int i = ws_item(k, p.nitems, 1), f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
      ws_fill_input<N0, kSt, kStg>(ring, full, empty, pp, &tm, p.in16, p.in + f16_scale_at(p.F, p.Ec, p.ROW, 0, f, y),
                                   0, y, f);
#pragma unroll 1
      for (int l = 0; l < p.nL; ++l) {
        regs_fill_b<N0, kSt, kStg>(p.g[l].B0, ring, full, empty, pp, &tm, f, y);
        if (l < p.ngated) regs_fill_g<kSt, kStg>(p.g[l].BG, ring, full, empty, pp, &tm, f, y);
      }
      ws_fill_input<N1, kSt, kStg>(ring, full, empty, pp, &tm, p.in16, p.in + f16_scale_at(p.F, p.Ec, p.ROW, 1, f, y),
                                   N0, y, f);
#pragma unroll 1
      for (int l = 0; l < p.nL; ++l) {
        if (l < p.ngated) regs_fill_g<kSt, kStg>(p.g[l].BG, ring, full, empty, pp, &tm, f, y);
        regs_fill_b<N1, kSt, kStg>(p.g[l].B1, ring, full, empty, pp, &tm, f, y);
      }
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float4* const park4 = reinterpret_cast<float4*>(ws_dsmem) + ct;  // the per-thread slots (set_slots)
  float4* const z00s = park4 + 256 * (kRegsPark / 4);             // gated layer l's z00 quad q at [256 (4 l + q)]
  for (int k = blockIdx.x; k < p.nitems; k += gridDim.x) {
    const int i = ws_item(k, p.nitems, 1), f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool live[2] = {row0 + ws_row(ct, 0) < p.Ec, row0 + ws_row(ct, 1) < p.Ec};
    {  // ---- the m = 0 columns through every layer ----
      float4 u[N0 / 8];  // the layer's input quads, then its output's
      ws_land_input<N0, kSt, kStg>(ring, full, empty, pp, ct, p.in16, live[0], live[1], u);
#pragma unroll 1
      for (int l = 0; l < p.nL; ++l) {
        const bool last = l + 1 == p.nL;
        float4 z00[4];
        {
          float acc[N0 / 2];
          ws_product_one_regs<N0, N0, kSt, kStg, 0>(ring, full, empty, pp, ct, acc, u);
          if (l < p.ngated) {
            gated_fwd_park(acc, z00, park4);
#pragma unroll
            for (int q = 0; q < 4; ++q) z00s[256 * (4 * l + q)] = z00[q];
          } else {  // an identity layer: U' = U + U W
            regs_identity_step<N0>(p, acc, u, last, fo, f, row0, ct);
          }
        }
        if (l < p.ngated) {
          const WsIo io{nullptr, last ? p.last : nullptr, p.zsave[l], p.Ec, p.ROW, p.z16, p.F, f};
          gated_fwd_gate<kSt, kStg, kAr, true>(io, fo, row0, live, z00, ring, full, empty, pp, ct, park4, u, u);
        }
      }
    }
    {  // ---- the |m| = 1 columns through every layer ----
      float4 v[N1 / 8];
      ws_land_input<N1, kSt, kStg>(ring, full, empty, pp, ct, p.in16, live[0], live[1], v);
#pragma unroll 1
      for (int l = 0; l < p.nL; ++l) {
        const bool last = l + 1 == p.nL;
        if (l < p.ngated) {  // S again, from the z00 the m = 0 pass kept, parked for the epilogue
          float4 z00[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) z00[q] = z00s[256 * (4 * l + q)];
          float g[kNG / 2];
          gated_fwd_s_pre<kSt, kStg, kAr, true>(z00, ring, full, empty, pp, ct, g);
#pragma unroll
          for (int j = 0; j < kLC / 2; ++j) g[j] = sigmoidf_(g[j]);
          set_slots<kLC / 2>(park4, g);
        }
        float acc[N1 / 2];
        ws_product_one_regs<N1, N1, kSt, kStg, 0>(ring, full, empty, pp, ct, acc, v);
        if (l < p.ngated) {
          const WsIo io{nullptr, last ? p.last : nullptr, p.zsave[l], p.Ec, p.ROW, p.z16, p.F, f};
          gated_fwd_m1_epilogue<true>(io, fo, row0, live, acc, ct, park4, v, v);
        } else {
          regs_identity_step<N1>(p, acc, v, last, fo, f, row0, ct);
        }
      }
    }
  }
}

// SEZM_CUDA_CHAIN_REGS: 0 off (stack_ws_chain.cu's chain in one pass too), 6 a ring of six stages
// (168 KiB, under the 196 KiB carve-out step), else ten.
int chain_regs_mode() {
  static const int m = [] {
    const char* e = std::getenv("SEZM_CUDA_CHAIN_REGS");
    return e && *e == '0' ? 0 : e && *e == '6' ? 6 : 10;
  }();
  return m;
}

}  // namespace

bool stack_chain_regs(const Dims& d) {
  return d.tf32_one_pass && stack_ws_chain(d) && d.ngated <= kRegsGatedMax && chain_regs_mode() != 0;
}

bool stack_out_f16(const Dims& d) { return stack_chain_regs(d) && d.f16_rows && (d.F == 2 || d.F == 4); }
bool stack_in_f16(const Dims& d) { return stack_out_f16(d); }

void launch_stack_chain_regs(const Dims& d, const BlockWDev& w, int Ec, const float* in, float* const* zsave,
                             float* out, cudaStream_t s) {
  if (!stack_chain_regs(d)) throw Error("launch_stack_chain_regs: needs precision tf32 and the chained forward's shape");
  const bool six = chain_regs_mode() == 6;
  const auto k = six ? stack_ws_chain_regs_k<6> : stack_ws_chain_regs_k<10>;
  const int bytes = six ? RegsRing<6>::kBytes : RegsRing<10>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_chain_regs_k");
  WsChainRegs p{};
  for (int l = 0; l < d.nL; ++l) {
    const bool gated = l < d.ngated;
    p.g[l] = gated_images(d, w, l, gated);
    p.zsave[l] = gated && zsave ? zsave[l] : nullptr;
  }
  p.last = out;
  p.f16 = stack_out_f16(d) ? 1 : 0;
  p.in16 = stack_in_f16(d) ? 1 : 0;
  p.z16 = stack_z_f16(d) ? 1 : 0;
  p.in = in;
  p.F = d.F;
  p.nL = d.nL;
  p.ngated = d.ngated;
  set_ws_items(p, d, Ec);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, p.in16 ? activations_map_h(d, Ec, in) : activations_map(d, Ec, in));
  SEZM_LAUNCH("stack_ws_chain_regs_k");
}

}  // namespace sezm::cuda
