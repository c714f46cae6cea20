// The stack's backward, every layer in one persistent launch on the warp-specialised tile, the
// mirror of the chained forward (stack_ws_chain.cu): each CTA takes its items (a focus's 128-row
// tile) one at a time through every layer's backward from the last layer to the first, a gated
// layer's as the one-layer launch does it (gated_bwd_item's four phases) and an identity layer's
// through the same item code with its gate steps off (phases 2 and 4, the hooks passing g through:
// G' = g + g W^T, the one-layer identity launches' arithmetic, stack_ws.cu). So each item's
// arithmetic is the one-layer launches': the same bits. An item's step t + 1 reads only the rows
// its step t stored (the hand-over inside the CTA, as in the forward: stores, fence.proxy.async,
// a `stored` barrier per |m| group, the producer's fence and copies; here the |m| = 1 columns come
// first, after phase 2, and a gated step's z00 blocks wait for neither).
// Why: one launch per layer sends every layer's output adjoint through HBM and reads it back
// (per edge and block at C.pt, 3 layers: 12.8 kB read, 7.7 kB written, the z rows included).
// Measured (H200, 4,096 atoms, `precision tf32` fast, kernel-times; docs/performance.md
// 2026-12-05 twelfth session): the stack's backward 9.60 ms in 30 one-layer launches (DRAM 19.3 GB
// read, 10.0 written), 9.13 ms in 10 chained ones (11.3, 9.6); per call fast 39.8 ms either way,
// tf32 fast 34.3 -> 33.7. SEZM_CUDA_STACK_WS=4 turns it off (device.cu, use_stack_ws).
// Each step's input is dropped from L2 right after its last read (ws_drop_group), so that less
// than every hand-over row is written back: measured (H100, the same binary, tf32 fast) this
// launch 11.7 -> 10.4 ms, DRAM written 9.9 -> 8.3 GB (its input adjoint alone: 3.2 GB; the rest
// is evicted before its last read).
// In one TF32 pass (`precision tf32`) stack_ws_chain_bwd_regs.cu runs instead (the adjoint rows kept
// in registers between steps; launch_stack_chain_backward dispatches).
// Layout: activations focus-major (F, Ec, ROW) in two buffers, step t (layer nL - 1 - t) reading
// buf[t % 2] and writing buf[(t + 1) % 2], as chunk_backward's one-layer launches ping-pong.
// Items from the chunk's last (aggregate_backward, just before, wrote the last rows last).
// CPU twin: the mixing stack's backward in engine/so2_convolution.h.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "stack_ws_gated_bwd.cuh"

namespace sezm::cuda {
namespace {

constexpr int kChainMax = kStackChainMax;

// The launch's tensor maps: A's over the two buffers, z's of each gated layer.
struct WsChainBwdMaps {
  CUtensorMap a[2];
  CUtensorMap z[kChainMax];
};

struct WsChainBwd {
  WsBwdImages layer[kChainMax];  // by layer (identity layers': B0, B1)
  float* buf[2];
  int nL, ngated, Ec, ROW, ntiles, nitems;
  int drop;  // every step's input dropped from L2 once read (ws_drop_group)
};

template <int kAr>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_chain_bwd_k(const __grid_constant__ WsChainBwd p,
                                                                      const __grid_constant__ WsChainBwdMaps m) {
  using R = WsBwdRing<kAr>;
  constexpr bool kOne = ws_one_plane(kAr);  // the stages' layout
  constexpr int N0 = 128, N1 = 192;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages], stored[2];  // the m = 0, |m| = 1 columns' hand-overs
  float* const ring = ws_dsmem + R::kScratch;
  // The chained forward's start, written out: with the setmaxnreg steps in a shared helper (sm_90a
  // ptxas) the consumers spilled 0.6-2.6 KB.
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
      const int i = ws_item(k, p.nitems, 1), f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
#pragma unroll 1
      for (int t = 0; t < p.nL; ++t) {
        const int l = p.nL - 1 - t;
        const WsBwdImages& g = p.layer[l];
        const bool gated = l < p.ngated;
        // A gated step's z00 blocks read no adjoint; its |m| = 1 product's blocks wait for step
        // t - 1's |m| = 1 columns, the rest (an identity layer's m = 0 product, phase 4; a gated
        // layer's phases 3 and 4) for its m = 0 columns.
        if (gated) gated_bwd_fill_z<R::kStages, R::kStage, kAr>(g, ring, full, empty, pp, &m.z[l], f, y);
        if (t > 0) ws_chain_wait(&stored[1], parity[1]);
        if (gated)
          gated_bwd_fill_m1<R::kStages, R::kStage, R::kZoff, kAr>(g, ring, full, empty, pp, &m.a[t & 1], &m.z[l], f, y);
        else
          ws_fill<N1, N1, R::kStages, R::kStage, kOne>(ring, full, empty, pp, &m.a[t & 1],
                                                       WsItem{N0, y, f, g.B1 + static_cast<size_t>(f) * 2 * N1 * N1});
        if (t > 0) ws_chain_wait(&stored[0], parity[0]);
        if (gated)
          gated_bwd_fill_m0<R::kStages, R::kStage, R::kZoff, kAr>(g, ring, full, empty, pp, &m.a[t & 1], &m.z[l], f, y);
        else
          ws_fill<N0, N0, R::kStages, R::kStage, kOne>(ring, full, empty, pp, &m.a[t & 1],
                                                       WsItem{0, y, f, g.B0 + static_cast<size_t>(f) * 2 * N0 * N0});
      }
    }
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float4* const scratch = reinterpret_cast<float4*>(ws_dsmem) + ct;
  for (int k = blockIdx.x; k < p.nitems; k += gridDim.x) {
    const int i = ws_item(k, p.nitems, 1), f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
#pragma unroll 1
    for (int t = 0; t < p.nL; ++t) {
      const WsIo io{p.buf[t & 1], p.buf[(t + 1) & 1], nullptr, p.Ec, p.ROW};
      gated_bwd_item<R, kAr>(p.nL - 1 - t < p.ngated, p.drop != 0, io, f, row0, ring, full, empty, pp, ct, scratch,
                             t + 1 < p.nL ? &stored[1] : nullptr);
      ws_chain_stored(&stored[0], t, p.nL);  // the m = 0 columns, to the item's next step
    }
  }
}

}  // namespace

bool stack_ws_chain_bwd(const Dims& d) {
  return d.stack_ws == 1 && ws_shape(d) && d.nL >= 2 && d.nL <= kChainMax && d.ngated <= d.nL;
}

float* launch_stack_chain_backward(const Dims& d, const BlockWDev& w, int Ec, float* buf0, float* buf1,
                                   float* const* z, cudaStream_t s) {
  if (!stack_ws_chain_bwd(d) || w.AT_ws == nullptr || w.W1T_wg == nullptr ||
      (d.ngated > 0 && (w.G_ws == nullptr || w.GT_ws == nullptr)))
    throw Error("launch_stack_chain_backward: the chained backward needs Cf = 32, L = 3, two to " +
                std::to_string(kChainMax) + " layers and the warp-specialised images (Dims::stack_ws)");
  if (buf0 == buf1 || reinterpret_cast<uintptr_t>(buf0) % 16 != 0 || reinterpret_cast<uintptr_t>(buf1) % 16 != 0)
    throw Error("launch_stack_chain_backward: two distinct 16-byte aligned activation buffers expected");
  for (int l = 0; l < d.ngated; ++l)
    if (z == nullptr || z[l] == nullptr || reinterpret_cast<uintptr_t>(z[l]) % 16 != 0)
      throw Error("launch_stack_chain_backward: the gated layers' saved pre-activations (16-byte aligned) expected");
  float* const out = d.nL % 2 ? buf1 : buf0;
  if (Ec == 0) return out;
  if (stack_chain_bwd_regs(d)) {  // one pass: the adjoint rows stay in registers from step to step
    launch_stack_chain_bwd_regs(d, w, Ec, buf0, z, out, s);
    return out;
  }
  const int ar = ws_arithmetic(d);
  const auto k = ar == kAr1xTf32  ? stack_ws_chain_bwd_k<kAr1xTf32>
                 : ar == kAr3xF16 ? stack_ws_chain_bwd_k<kAr3xF16>
                                  : stack_ws_chain_bwd_k<kAr3xTf32>;
  const int bytes = ws_one_plane(ar) ? WsBwdRing<kAr1xTf32>::kBytes : WsBwdRing<kAr3xTf32>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_chain_bwd_k");
  WsChainBwd p{};
  WsChainBwdMaps m{};
  for (int l = 0; l < d.nL; ++l) p.layer[l] = gated_bwd_images(d, w, l, l < d.ngated, ar == kAr3xF16);
  p.buf[0] = buf0;
  p.buf[1] = buf1;
  p.nL = d.nL;
  p.ngated = d.ngated;
  set_ws_items(p, d, Ec);
  // The drops (ws_drop_group): every step's input, the output adjoint g (step 0's, which step 1
  // overwrites: the one-layer launches' ping-pong, engine_backward.cu) and the hand-over rows.
  // Every row the call reads afterwards is in `out` (source_backward reads the stack's input
  // adjoint); a step that writes rows dropped before writes them after the drop, ordered by the
  // hand-over.
  p.drop = ws_may_drop(d, buf0, buf1) ? 1 : 0;
  m.a[0] = activations_map(d, Ec, buf0);
  m.a[1] = activations_map(d, Ec, buf1);
  for (int l = 0; l < d.ngated; ++l) m.z[l] = activations_map(d, Ec, z[l]);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, m);
  SEZM_LAUNCH("stack_ws_chain_bwd_k");
  return out;
}

}  // namespace sezm::cuda
