// The stack's forward, every layer in one persistent launch on the warp-specialised tile
// (wgmma_ws.cuh): each CTA takes its items (a focus's 128-row tile, as the one-layer launches of
// stack_ws.cu and stack_ws_gated_fwd.cu) through all the layers, gated (gated_fwd_item's steps)
// and identity (both |m| groups), with the layers' products and epilogues unchanged (chain_unit).
// An item's layer k + 1 reads only that item's rows of layer k's output, which the same CTA wrote:
// no grid-wide wait between layers, only a hand-over inside the CTA, one per |m| group: the
// consumers store a group's columns of the item's output, order their stores before the async
// proxy (fence.proxy.async.global) and arrive on that group's barrier (`stored0` after the m = 0
// epilogue, `stored1` after the |m| = 1 one); the producer waits on it (and fences too) before its
// tensor copies of the next layer's product of that group (stack_ws_gated.cuh, ws_chain_wait).
// One item at a time: the rows handed over live in L2 between two layers of an item, 160 KiB per
// item and CTA, ~21 MiB for the grid, which L2 keeps; items taken in pairs, interleaved by layer
// so that one's hand-over overlapped the other's products, held twice that, and the hand-over rows
// went through HBM. Measured (H200, 4,096 atoms, the same bits): `precision tf32` fast 35.8 ->
// 35.1 ms, fp32 unchanged (docs/performance.md, 2026-12-05 ninth session).
// Why one launch: a one-layer launch pays a fixed cost (the ring's first fill, the last item's
// epilogue that nothing overlaps, the idle SMs of a partial last round; ~16 us per gated forward
// launch, a two-point fit, docs/performance.md 2026-12-03), paid here once per chunk pass instead
// of once per launch (four per pass at C.pt's two gated and one identity layer). Measured (H200,
// 4,096 atoms, lean, kernel-times): the forward's stack kernels 17.85 ms per call in 144 one-layer
// launches, 16.96 ms in 36 chained ones.
// In one TF32 pass (`precision tf32`) stack_ws_chain_regs.cu runs instead where it can (the rows
// kept in registers between layers; launch_stack_chain_forward dispatches).
// Layout: activations focus-major (F, Ec, ROW) in two buffers, layer k reading buf[k % 2] and
// writing buf[(k + 1) % 2] (the one-layer path's ping-pong, the same buffers). Numerics: the
// one-layer kernels' (the same device functions, products and epilogues).
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>
#include <string>

#include "stack_ws_gated_fwd.cuh"

namespace sezm::cuda {
namespace {

constexpr int kChainMax = kStackChainMax;

struct WsChainLayer {
  WsGatedImages g;  // a gated layer's images
  float* zsave;     // its pre-activations kept there, or null
};

struct WsChainFwd {
  WsChainLayer layer[kChainMax];  // the identity layers' images in g.B0, g.B1
  float* buf[2];
  float* last;  // the last layer's output (buf[nL % 2] or fast mode's kept stack output)
  int nL, ngated, Ec, ROW, ntiles, nitems;
  int drop;  // the layers after the first drop their input rows from L2 once read (ws_drop_group)
};

// Item k of the launch's order is the chunk's item nitems - 1 - k: the chunk's last rows first,
// which rotate_condition (edges ascending, just before) wrote last and L2 may still hold, and its
// first rows last, which rotate_back_aggregate (centres ascending, just after) reads first. The
// same items and arithmetic: the same bits. Measured (H200, 4,096 atoms, three rounds each):
// fast 42.0 / 41.8 / 42.0 -> 41.8 / 41.7 / 41.9 ms, lean 49.2 / 49.2 / 49.1 -> 48.7 / 49.1 / 48.7.
__device__ __forceinline__ int chain_item(const WsChainFwd& p, int k) { return ws_item(k, p.nitems, 1); }

// The consumers' part of one unit (an item's layer): a gated layer's (gated_fwd_item's steps) or
// an identity layer's (io.out = io.in + io.in W per group), both through the same two products, so
// that the kernel holds one copy of each (the residual, ws_multiply's kRes, switched on at run time
// for the identity layers; the gated epilogues add theirs, in one TF32 pass from the quads the
// product landed, in a 3x split read back). Why one copy: the two layer
// kinds' code inlined apart made a 150 KB kernel, past the SM's instruction cache, and the chain
// ran 11 % slower than the one-layer launches (docs/performance.md, 2026-12-03). drop: each group's
// input columns dropped from L2 after its epilogue (ws_drop_group).
// stored0: the m = 0 columns' hand-over (arrived on after their epilogue and drop), or null (the
// item's last layer).
template <int kStages, int kStage, int kAr>
__device__ __forceinline__ void chain_unit(bool gated, bool drop, const WsIo& io, int f, int row0, const float* ring,
                                           uint64_t* full, uint64_t* empty, WsPipe& pp, int ct, float4* stash4,
                                           uint64_t* stored0) {
  constexpr int N0 = 128, N1 = 192;
  constexpr bool kOne = ws_one_pass(kAr);  // the gated epilogues' residuals from the landed quads
  const size_t fo = static_cast<size_t>(f) * io.Ec * io.ROW;
  const bool live[2] = {row0 + ws_row(ct, 0) < io.Ec, row0 + ws_row(ct, 1) < io.Ec};
  float4 z00[4];
  float4 u0[kOne ? N0 / 8 : 1];
  {
    float acc[N0 / 2];
    ws_multiply<N0, N0, kStages, kStage, kAr, WsAsIs, true>(ring, full, empty, pp, ct, acc, WsAsIs{}, !gated,
                                                           kOne ? u0 : nullptr);
    if (gated) gated_fwd_park(acc, z00, stash4);
    else store_epilogue<N0>(io.out, fo, io.ROW, row0, io.Ec, ct, acc);
  }
  if (gated)
    gated_fwd_gate<kStages, kStage, kAr>(io, fo, row0, live, z00, ring, full, empty, pp, ct, stash4,
                                         kOne ? u0 : nullptr);
  if (drop) ws_drop_group<N0>(io.in, fo, io.ROW, row0, io.Ec, ct);
  if (stored0) {  // the next layer's m = 0 product may start
    ws_fence_proxy_global();
    ws_bar_arrive(stored0);
  }
  float acc[N1 / 2];
  float4 u1[kOne ? N1 / 8 : 1];
  ws_multiply<N1, N1, kStages, kStage, kAr, WsAsIs, true>(ring, full, empty, pp, ct, acc, WsAsIs{}, !gated,
                                                         kOne ? u1 : nullptr);
  if (gated) gated_fwd_m1_epilogue(io, fo, row0, live, acc, ct, stash4, kOne ? u1 : nullptr);
  else store_epilogue<N1>(io.out, fo + N0, io.ROW, row0, io.Ec, ct, acc);
  if (drop) ws_drop_group<N1>(io.in, fo + N0, io.ROW, row0, io.Ec, ct);
}

template <int kAr>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_chain_fwd_k(const __grid_constant__ WsChainFwd p,
                                                                      const __grid_constant__ CUtensorMap tm0,
                                                                      const __grid_constant__ CUtensorMap tm1) {
  using R = WsTcRing<kAr>;  // the gated layers' scratch and ring; the identity layers use the ring
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages], stored[2];  // the m = 0, |m| = 1 columns' hand-overs
  float* const ring = ws_dsmem + R::kScratch;
  if (threadIdx.x == 0) {  // every consumer thread, after its stores (before ws_init's fence)
    ws_bar_init(&stored[0], 256);
    ws_bar_init(&stored[1], 256);
  }
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_regs_dec<kWsProducerRegs>();
    if (threadIdx.x >= 32) return;
    uint32_t parity[2] = {0, 0};  // the parities of stored's next phases
    for (int k = blockIdx.x; k < p.nitems; k += ws_grid()) {
      const int i = chain_item(p, k), f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
#pragma unroll 1
      for (int l = 0; l < p.nL; ++l) {
        const CUtensorMap* tm = (l & 1) ? &tm1 : &tm0;
        // The m = 0 product's blocks (a gated layer's G blocks after them), once layer l - 1's
        // m = 0 columns are stored; the |m| = 1 product's once its |m| = 1 columns are.
        if (l > 0) ws_chain_wait(&stored[0], parity[0]);
        if (l < p.ngated)
          gated_fwd_fill_m0<R::kStages, R::kStage, kAr>(p.layer[l].g, ring, full, empty, pp, tm, f, y);
        else
          group_fill<128, R::kStages, R::kStage, kAr>(p.layer[l].g.B0, ring, full, empty, pp, tm, f, y);
        if (l > 0) ws_chain_wait(&stored[1], parity[1]);
        group_fill<192, R::kStages, R::kStage, kAr>(p.layer[l].g.B1, ring, full, empty, pp, tm, f, y);
      }
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float4* const stash4 = reinterpret_cast<float4*>(ws_dsmem) + ct;  // the gated items' scratch
  for (int k = blockIdx.x; k < p.nitems; k += gridDim.x) {
    const int i = chain_item(p, k), f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
#pragma unroll 1
    for (int l = 0; l < p.nL; ++l) {
      const WsIo io{p.buf[l & 1], l + 1 == p.nL ? p.last : p.buf[(l + 1) & 1], p.layer[l].zsave, p.Ec, p.ROW};
      chain_unit<R::kStages, R::kStage, kAr>(l < p.ngated, p.drop && l > 0, io, f, row0, ring, full, empty, pp, ct,
                                              stash4, l + 1 < p.nL ? &stored[0] : nullptr);
      ws_chain_stored(&stored[1], l, p.nL);  // the |m| = 1 columns, to the item's next layer
    }
  }
}

}  // namespace

bool stack_ws_chain(const Dims& d) {
  const bool on = d.stack_ws == 1 || d.stack_ws == 2 || d.stack_ws == 4;  // not 3: a launch per layer
  return on && ws_shape(d) && d.nL <= kChainMax && d.ngated <= d.nL;
}

float* launch_stack_chain_forward(const Dims& d, const BlockWDev& w, int Ec, float* buf0, float* buf1,
                                  float* const* zsave, float* out, cudaStream_t s) {
  if (!stack_ws_chain(d) || w.A_ws == nullptr || w.W1_wg == nullptr || (d.ngated > 0 && w.G_ws == nullptr))
    throw Error("launch_stack_chain_forward: the chained forward needs Cf = 32, L = 3, at most " +
                std::to_string(kChainMax) + " layers and the warp-specialised images (Dims::stack_ws)");
  if (buf0 == buf1 || reinterpret_cast<uintptr_t>(buf0) % 16 != 0 || reinterpret_cast<uintptr_t>(buf1) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 16 != 0)
    throw Error("launch_stack_chain_forward: two distinct 16-byte aligned activation buffers expected");
  if (out == nullptr) out = d.nL % 2 ? buf1 : buf0;
  if (Ec == 0) return out;
  if (stack_chain_regs(d)) {  // one pass: the rows stay in registers from layer to layer
    launch_stack_chain_regs(d, w, Ec, buf0, zsave, out, s);
    return out;
  }
  const int ar = ws_arithmetic(d);
  const auto k = ar == kAr1xTf32  ? stack_ws_chain_fwd_k<kAr1xTf32>
                 : ar == kAr3xF16 ? stack_ws_chain_fwd_k<kAr3xF16>
                                  : stack_ws_chain_fwd_k<kAr3xTf32>;
  const int bytes = ws_one_plane(ar) ? WsTcRing<kAr1xTf32>::kBytes : WsTcRing<kAr3xTf32>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_chain_fwd_k");
  WsChainFwd p{};
  for (int l = 0; l < d.nL; ++l) {  // an identity layer: A and W1 images only, nothing kept
    const bool gated = l < d.ngated;
    p.layer[l] = WsChainLayer{gated_images(d, w, l, gated, ar == kAr3xF16), gated && zsave ? zsave[l] : nullptr};
  }
  p.buf[0] = buf0;
  p.buf[1] = buf1;
  p.last = out;
  p.nL = d.nL;
  p.ngated = d.ngated;
  set_ws_items(p, d, Ec);
  // The drops (ws_drop_group): the inputs of layers 1 .. nL - 1, the hand-over rows, which only
  // the next layer reads; never the stack's input (rotate_condition's U0, layer 0's). Every row the
  // call reads later is in `out` or a kept z (engine.cu: the backward reads the stack's output and
  // z only); where `out` is a layer's input (lean: buf[nL % 2]), the last layer writes it after
  // that layer's drop, ordered by the hand-over.
  p.drop = ws_may_drop(d, buf0, buf1) ? 1 : 0;
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, activations_map(d, Ec, buf0), activations_map(d, Ec, buf1));
  SEZM_LAUNCH("stack_ws_chain_fwd_k");
  return out;
}

}  // namespace sezm::cuda
