// The stack's backward in one TF32 pass (`precision tf32`), every layer in one persistent launch,
// each item's adjoint rows kept in the consumers' registers from one step to the next: the
// backward's twin of stack_ws_chain_regs.cu (which says why), on stack_ws_chain_bwd.cu's item
// arithmetic (the gated layers' four phases and hooks of stack_ws_gated_bwd.cuh, an identity
// layer's G' = g + g W^T).
// Group-major per item: its |m| = 1 columns through every step (layer nL - 1 down to 0), then its
// m = 0 columns. A gated layer's m = 0 phases need s_bar's |m| = 1 part (phase 2's sums g1 z1):
// after phase 2 each consumer thread writes its s_bar quads into the layer's saved z, at the |m| = 1
// columns of its own rows (z's |m| = 1 columns are read only by that phase: dead from then on), and
// reads them back before phase 3 (loads issued before phase 1, so their round trip runs behind its
// product). S = sigmoid(z00 G) is formed in both passes (the same product from the same z00).
// Stages: a box (the input adjoint's, or z's through its own tensor map where the one-layer kernels
// land g, the adjoint then coming from registers: ws_product_one_regs with a hook) and B's block,
// 20 KiB; six of them beside the S / s_bar slots (216 KiB). With the stack output's adjoint in
// binary16 rows (stack_adj_f16, f16_rows.cuh) its boxes are halves, the first of a group with the
// rows' scales (ws_fill_input, ws_land_input). With z in binary16 rows too (stack_z_f16, kZh) its
// boxes are halves, the first of each product with the rows' scales (fill_z, ws_fill_h; phase 1 by
// ws_product_one_h, the hooks' z by ws_product_one_regs' kZh), and s_bar's scratch takes the
// 384 bytes of a row's |m| = 1 halves (sbar_row).
// Numerics: stack_ws_chain_bwd.cu's in one pass, the same products, hooks (s_bar's sums in the
// same order), residuals and epilogues, so the same bits (tests/test_cuda_stack_paths.cpp).
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "f16_rows.cuh"
#include "stack_ws_gated_bwd.cuh"

namespace sezm::cuda {
namespace {

template <int kStages>
using BwdRegsRing = WsScratchRing<2 * 48, kStages, ws_stage_floats(192, true)>;

struct WsChainBwdRegs {
  WsBwdImages layer[kStackChainMax];  // by layer (identity layers': B0, B1)
  float* z[kStackChainMax];           // the gated layers' saved pre-activations (|m| = 1 columns: s_bar's scratch)
  float* out;
  const float* in;                    // the output adjoint: its binary16 rows' scales (f16), else unused
  int nL, ngated, Ec, ROW, ntiles, nitems;
  int f16, F;                         // the output adjoint in binary16 rows (stack_adj_f16)
};
struct WsChainBwdRegsMaps {
  CUtensorMap g;                     // the stack output's adjoint (the launch's input)
  CUtensorMap z[kStackChainMax];     // z of each gated layer
};

// The s_bar scratch of row r in a gated layer's saved z: its |m| = 1 columns, from column N0 = 128
// of the fp32 row, or (kZh, binary16 rows: 192 halves, 384 bytes, s_bar's 96 floats) from half 128.
template <bool kZh>
__device__ __forceinline__ float* sbar_row(float* zl, size_t fo, int ROW, int r) {
  const size_t at = fo + static_cast<size_t>(r) * ROW + 128;
  return kZh ? reinterpret_cast<float*>(reinterpret_cast<__half*>(zl) + at) : zl + at;
}
// Gated layer l's saved z as binary16 rows (stack_z_f16): the inverse scales of group g from row
// y of focus f (the run an item's first box of the group carries, fill_z).
__device__ __forceinline__ const float* zscales(const WsChainBwdRegs& p, int l, int g, int f, int y) {
  return p.z[l] + f16_scale_at(p.F, p.Ec, p.ROW, g, f, y);
}
// The producer's stages of a product over gated layer l's saved z (K columns from it.x; B the
// image, N columns): z's box where A's would be and B's block after it (gated_bwd_fill_z's and
// the hooks' layout), fp32 boxes, or (kZh) binary16 ones with the group's scales (ws_fill_h).
template <int N, int K, int kSt, int kStg, bool kZh>
__device__ __forceinline__ void fill_z(float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, const CUtensorMap* tmZ,
                                       const float* scales, const WsItem& it) {
  if constexpr (kZh)
    ws_fill_h<K, kSt, kStg, N>(ring, full, empty, pp, tmZ, scales, it);
  else
    ws_fill<N, K, kSt, kStg, true>(ring, full, empty, pp, tmZ, it);
}
// s_bar's quads of consumer thread ct's live rows to / from `row` scratch: the quad at S's column
// sc = 16 j + 4 t (j = 0 .. 5) of row h at float sc of the row's scratch (sbar_row). kZh: the slots
// hold the sums over z1's unscaled halves (ws_product_one_regs' kZRaw), stored times row h's z1
// scale zsc[h] (exactly the sums over z1: the scale is a power of two).
template <bool kZh>
__device__ __forceinline__ void sbar_out(float* zl, size_t fo, int ROW, int row0, int Ec, int ct, const float4* sbar,
                                         const float (&zsc)[2]) {
  const int t = ct & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row0 + ws_row(ct, h);
    if (r >= Ec) continue;
    float* zr = sbar_row<kZh>(zl, fo, ROW, r);
#pragma unroll
    for (int j = 0; j < kLC / 16; ++j) {
      float4 q = slot_quad(sbar, 16 * j + 4 * t, h);
      if constexpr (kZh) q = make_float4(q.x * zsc[h], q.y * zsc[h], q.z * zsc[h], q.w * zsc[h]);
      *reinterpret_cast<float4*>(zr + 16 * j + 4 * t) = q;
    }
  }
}
// sbar_out's quads back: loaded into registers (sb, zeros for rows past Ec) before phase 1, so the
// round trip runs behind phase 1's product, and put into s_bar's slots after it (which phase 1
// zeroes).
template <bool kZh>
__device__ __forceinline__ void sbar_fetch(float* zl, size_t fo, int ROW, int row0, int Ec, int ct,
                                           float4 (&sb)[2 * kLC / 16]) {
  const int t = ct & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row0 + ws_row(ct, h);
    const float* zr = sbar_row<kZh>(zl, fo, ROW, r);
#pragma unroll
    for (int j = 0; j < kLC / 16; ++j)
      sb[2 * j + h] = r < Ec ? *reinterpret_cast<const float4*>(zr + 16 * j + 4 * t) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}
__device__ __forceinline__ void sbar_put(int ct, const float4 (&sb)[2 * kLC / 16], float4* sbar) {
  const int t = ct & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < kLC / 16; ++j) {
      float2* q = slot_pair(sbar, 16 * j + 4 * t, h);
      q[0] = make_float2(sb[2 * j + h].x, sb[2 * j + h].y);
      q[512] = make_float2(sb[2 * j + h].z, sb[2 * j + h].w);
    }
}

template <int kStages, bool kZh>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_chain_bwd_regs_k(const __grid_constant__ WsChainBwdRegs p,
                                                                           const __grid_constant__ WsChainBwdRegsMaps m) {
  using R = BwdRegsRing<kStages>;
  constexpr int kSt = R::kStages, kStg = R::kStage, kAr = kAr1xTf32, N0 = 128, N1 = 192, NGT = 64, NG = 128;
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
      // |m| = 1: the adjoint's box once; per gated step z00 with G's image (phase 1), z1 with W1^T's.
      ws_fill_input<N1, kSt, kStg>(ring, full, empty, pp, &m.g, kZh || p.f16, p.in + f16_scale_at(p.F, p.Ec, p.ROW, 1, f, y),
                                   N0, y, f);
#pragma unroll 1
      for (int t = 0; t < p.nL; ++t) {
        const int l = p.nL - 1 - t;
        const WsBwdImages& g = p.layer[l];
        const float* B1 = g.B1 + static_cast<size_t>(f) * 2 * N1 * N1;
        if (l < p.ngated) {
          fill_z<NG, kCf, kSt, kStg, kZh>(ring, full, empty, pp, &m.z[l], zscales(p, l, 0, f, y),
                                          WsItem{0, y, f, g.BG + static_cast<size_t>(f) * 2 * kCf * NG});
          fill_z<N1, N1, kSt, kStg, kZh>(ring, full, empty, pp, &m.z[l], zscales(p, l, 1, f, y), WsItem{N0, y, f, B1});
        } else {
          ws_fill<N1, N1, kSt, kStg, true, false>(ring, full, empty, pp, &m.g, WsItem{N0, y, f, B1});
        }
      }
      // m = 0: the adjoint's box once; per gated step z00 with G's image, z0's columns Cf .. with
      // G^T's (phase 3), z0 with A^T's (phase 4).
      ws_fill_input<N0, kSt, kStg>(ring, full, empty, pp, &m.g, kZh || p.f16, p.in + f16_scale_at(p.F, p.Ec, p.ROW, 0, f, y),
                                   0, y, f);
#pragma unroll 1
      for (int t = 0; t < p.nL; ++t) {
        const int l = p.nL - 1 - t;
        const WsBwdImages& g = p.layer[l];
        const float* B0 = g.B0 + static_cast<size_t>(f) * 2 * N0 * N0;
        if (l < p.ngated) {
          const float* sc = zscales(p, l, 0, f, y);
          fill_z<NG, kCf, kSt, kStg, kZh>(ring, full, empty, pp, &m.z[l], sc,
                                          WsItem{0, y, f, g.BG + static_cast<size_t>(f) * 2 * kCf * NG});
          fill_z<NGT, kLC, kSt, kStg, kZh>(ring, full, empty, pp, &m.z[l], sc,
                                           WsItem{kCf, y, f, g.BGT + static_cast<size_t>(f) * 2 * kLC * NGT});
          fill_z<N0, N0, kSt, kStg, kZh>(ring, full, empty, pp, &m.z[l], sc, WsItem{0, y, f, B0});
        } else {
          ws_fill<N0, N0, kSt, kStg, true, false>(ring, full, empty, pp, &m.g, WsItem{0, y, f, B0});
        }
      }
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128, ra0 = ws_row(ct, 0);
  float4* const S = reinterpret_cast<float4*>(ws_dsmem) + ct;  // S's 48 accumulators (slot_quad's groups)
  float4* const sbar = S + 12 * 256;                            // s_bar, then eta G^T's 32 accumulators
  for (int k = blockIdx.x; k < p.nitems; k += gridDim.x) {
    const int i = ws_item(k, p.nitems, 1), f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool live0 = row0 + ra0 < p.Ec, live1 = row0 + ws_row(ct, 1) < p.Ec;
    {  // ---- the |m| = 1 columns through every step ----
      float4 v[N1 / 8];  // the step's output adjoint quads, then its input adjoint's
      ws_land_input<N1, kSt, kStg>(ring, full, empty, pp, ct, kZh || p.f16, live0, live1, v);
#pragma unroll 1
      for (int t = 0; t < p.nL; ++t) {
        const int l = p.nL - 1 - t;
        float acc[N1 / 2];
        if (l < p.ngated) {  // 1., then 2. G1' = g1 + (g1 S) W1^T, s_bar += g1 z1
          gated_bwd_phase1<kSt, kStg, kAr, kZh>(ring, full, empty, pp, ct, S, sbar, live0, live1);
          float zsc[2] = {1.0f, 1.0f};  // kZh: z1's row scales, applied to s_bar's sums as they are stored
          ws_product_one_regs<N1, N1, kSt, kStg, kWsRows * kWsK, M1Hook<0>, kZh, kZh>(
              ring, full, empty, pp, ct, acc, v, M1Hook<0>{S, sbar, ra0, true}, live0, live1, zsc);
          sbar_out<kZh>(p.z[l], fo, p.ROW, row0, p.Ec, ct, sbar, zsc);
        } else {
          ws_product_one_regs<N1, N1, kSt, kStg>(ring, full, empty, pp, ct, acc, v);
        }
        regs_residual_step<N1>(acc, v, t + 1 == p.nL, p.out, fo + N0, p.ROW, row0, p.Ec, ct);
      }
    }
    {  // ---- the m = 0 columns through every step ----
      float4 u[N0 / 8];
      ws_land_input<N0, kSt, kStg>(ring, full, empty, pp, ct, kZh || p.f16, live0, live1, u);
#pragma unroll 1
      for (int t = 0; t < p.nL; ++t) {
        const int l = p.nL - 1 - t;
        float acc[N0 / 2];
        if (l < p.ngated) {  // 1., s_bar's |m| = 1 part back, 3. eta G^T, 4. G0' = g0 + z_bar0 A^T
          float4 sb[2 * kLC / 16];
          sbar_fetch<kZh>(p.z[l], fo, p.ROW, row0, p.Ec, ct, sb);
          gated_bwd_phase1<kSt, kStg, kAr, kZh>(ring, full, empty, pp, ct, S, sbar, live0, live1);
          sbar_put(ct, sb, sbar);
          {
            float eg[NGT / 2];
            ws_product_one_regs<NGT, kLC, kSt, kStg, kWsRows * kWsK, EtaHook<0>, kZh>(
                ring, full, empty, pp, ct, eg, u + 2 * (kCf / kWsK), EtaHook<0>{S, sbar, ra0}, live0, live1);
            set_slots<NGT / 2>(sbar, eg);
          }
          ws_product_one_regs<N0, N0, kSt, kStg, kWsRows * kWsK, M0Hook<0>, kZh>(
              ring, full, empty, pp, ct, acc, u, M0Hook<0>{S, sbar, ra0, true}, live0, live1);
        } else {
          ws_product_one_regs<N0, N0, kSt, kStg>(ring, full, empty, pp, ct, acc, u);
        }
        regs_residual_step<N0>(acc, u, t + 1 == p.nL, p.out, fo, p.ROW, row0, p.Ec, ct);
      }
    }
  }
}

// SEZM_CUDA_CHAIN_BWD_REGS=0: stack_ws_chain_bwd.cu's chain in one pass too.
bool chain_bwd_regs_on() {
  static const bool on = [] {
    const char* e = std::getenv("SEZM_CUDA_CHAIN_BWD_REGS");
    return !(e && *e == '0');
  }();
  return on;
}

}  // namespace

bool stack_chain_bwd_regs(const Dims& d) { return d.tf32_one_pass && stack_ws_chain_bwd(d) && chain_bwd_regs_on(); }

bool stack_adj_f16(const Dims& d) { return stack_out_f16(d) && stack_chain_bwd_regs(d); }

bool stack_z_f16(const Dims& d) { return stack_adj_f16(d) && d.f16_z; }

void launch_stack_chain_bwd_regs(const Dims& d, const BlockWDev& w, int Ec, const float* in, float* const* z, float* out,
                                 cudaStream_t s) {
  if (!stack_chain_bwd_regs(d)) throw Error("launch_stack_chain_bwd_regs: needs precision tf32 and the chained backward's shape");
  const bool zh = stack_z_f16(d);
  const auto k = zh ? stack_ws_chain_bwd_regs_k<6, true> : stack_ws_chain_bwd_regs_k<6, false>;
  const int bytes = BwdRegsRing<6>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_chain_bwd_regs_k");
  WsChainBwdRegs p{};
  WsChainBwdRegsMaps m{};
  for (int l = 0; l < d.nL; ++l) {
    p.layer[l] = gated_bwd_images(d, w, l, l < d.ngated);
    p.z[l] = l < d.ngated ? z[l] : nullptr;
  }
  p.out = out;
  p.in = in;
  p.f16 = stack_adj_f16(d) ? 1 : 0;
  p.F = d.F;
  p.nL = d.nL;
  p.ngated = d.ngated;
  set_ws_items(p, d, Ec);
  m.g = p.f16 ? activations_map_h(d, Ec, in) : activations_map(d, Ec, in);
  for (int l = 0; l < d.ngated; ++l) m.z[l] = zh ? activations_map_h(d, Ec, z[l]) : activations_map(d, Ec, z[l]);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, m);
  SEZM_LAUNCH("stack_ws_chain_bwd_regs_k");
}

}  // namespace sezm::cuda
