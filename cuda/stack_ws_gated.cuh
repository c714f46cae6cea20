#pragma once
// What the warp-specialised stack's kernels share (stack_ws.cu: identity layers;
// stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu: the gated layers, one launch each): A's tensor map
// over the focus-major activations, the epilogues' stores and residuals, the items, the gated
// kernels' scratch (the ring beside it, the per-thread slots) and the gated layers' shape.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>
#include <cstdlib>

#include "f16_rows.cuh"
#include "stack.cuh"
#include "wgmma_ws_host.cuh"

namespace sezm::cuda {

// A gated layer's backward on the WS tile (stack_ws_gated_bwd.cu; launch_stack_ws_gated's checks
// done): out = the input adjoint of the layer whose output adjoint is `in`, z its saved
// pre-activations (read only).
void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                           const float* z, cudaStream_t s);
// A gated layer's forward on the WS tile (stack_ws_gated_fwd.cu; the checks done, out != in):
// out = the layer applied to `in`, zsave its pre-activations (or null).
void launch_gated_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                          float* zsave, cudaStream_t s);
// The chained forward in one TF32 pass with each item's rows in registers between layers
// (stack_ws_chain_regs.cu), where stack_chain_regs(d) (precision tf32, stack_ws_chain's shape, at
// most two gated layers; SEZM_CUDA_CHAIN_REGS=0: never): launch_stack_chain_forward's contract,
// reading `in` (the stack's input) and writing only `out` and zsave.
bool stack_chain_regs(const Dims& d);
void launch_stack_chain_regs(const Dims& d, const BlockWDev& w, int Ec, const float* in, float* const* zsave,
                             float* out, cudaStream_t s);
// Its backward twin (stack_ws_chain_bwd_regs.cu), where stack_chain_bwd_regs(d) (precision tf32,
// stack_ws_chain_bwd's shape; SEZM_CUDA_CHAIN_BWD_REGS=0: never): launch_stack_chain_backward's
// contract (in: the stack output's adjoint; z's |m| = 1 columns overwritten with scratch).
bool stack_chain_bwd_regs(const Dims& d);
void launch_stack_chain_bwd_regs(const Dims& d, const BlockWDev& w, int Ec, const float* in, float* const* z, float* out,
                                 cudaStream_t s);

namespace {

// A's tensor map over the (F, Ec, ROW) activations: boxes of 16 columns x 128 rows x 1 focus.
CUtensorMap activations_map(const Dims& d, int Ec, const float* in) {
  const uint64_t dims[3] = {static_cast<uint64_t>(d.ROW), static_cast<uint64_t>(Ec), static_cast<uint64_t>(d.F)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d.ROW) * sizeof(float),
                               static_cast<uint64_t>(d.ROW) * sizeof(float) * static_cast<uint64_t>(Ec)};
  return ws_tensor_map(in, dims, strides);
}

// The same over binary16 rows (f16_rows.cuh: ROW halves per row): boxes of 16 halves x 128 rows.
CUtensorMap activations_map_h(const Dims& d, int Ec, const float* in) {
  const uint64_t dims[3] = {static_cast<uint64_t>(d.ROW), static_cast<uint64_t>(Ec), static_cast<uint64_t>(d.F)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d.ROW) * 2, static_cast<uint64_t>(d.ROW) * 2 * static_cast<uint64_t>(Ec)};
  return ws_tensor_map(in, dims, strides, kWsRows, true);
}

// out = acc over consumer thread ct's quads of the item's rows row0 + ws_row(ct, h) < Ec (base:
// the group's first column of the focus; rows ROW floats apart).
template <int N>
__device__ __forceinline__ void store_epilogue(float* out, size_t base, int ROW, int row0, int Ec, int ct,
                                               const float (&acc)[N / 2]) {
  const int r0 = row0 + ws_row(ct, 0), r1 = row0 + ws_row(ct, 1);
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r < Ec) *reinterpret_cast<float4*>(out + base + static_cast<size_t>(r) * ROW + wg_quad_col(q4)) = wg_quad(acc, q4, h);
    }
}
// The accumulators' quads in ws_product_one's kept layout (u[2 q4 + h] = quad (q4, h)): a layer's
// output as the next layer's A (ws_product_one_regs).
template <int M>
__device__ __forceinline__ void ws_out_quads(const float (&acc)[M], float4* u) {
#pragma unroll
  for (int q4 = 0; q4 < M / 8; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) u[2 * q4 + h] = wg_quad(acc, q4, h);
}
// A register-resident chain's step end (stack_ws_chain_regs.cu, stack_ws_chain_bwd_regs.cu): acc +=
// the step's input quads u (the residual, as ws_multiply's kRes adds it), u = acc's quads (the next
// step's A), and where `store` (the last step) the group's columns stored to out at base.
template <int N>
__device__ __forceinline__ void regs_residual_step(float (&acc)[N / 2], float4 (&u)[N / 8], bool store, float* out,
                                                   size_t base, int ROW, int row0, int Ec, int ct) {
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) ws_add_quad(acc, q4, h, u[2 * q4 + h]);
  ws_out_quads(acc, u);
  if (store) store_epilogue<N>(out, base, ROW, row0, Ec, ct, acc);
}
// The residual quads of consumer thread ct's rows (zero past Ec) of the group at `base`, index
// 2 q4 + h: loaded ahead of an epilogue's other work, so that their round trip to L2 overlaps it.
template <int N>
__device__ __forceinline__ void residual_load(const float* in, size_t base, int ROW, int row0, int Ec, int ct,
                                              float4 (&res)[N / 8]) {
  const int r0 = row0 + ws_row(ct, 0), r1 = row0 + ws_row(ct, 1);
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      res[2 * q4 + h] = r < Ec ? *reinterpret_cast<const float4*>(in + base + static_cast<size_t>(r) * ROW + wg_quad_col(q4))
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}
// The backward's item order per layer: its layers alternate, the last layer's (launched first) from
// the chunk's last item, so that each launch starts on the rows the launch before it wrote last,
// which L2 may still hold (1: items from the last; the chained forward does the same across its
// layers, stack_ws_chain.cu). The same bits either way (each item's arithmetic is its own); 0.5-1 ms
// per 4,096-atom call in fast mode (docs/performance.md, 2026-12-05, tenth session).
inline int ws_bwd_reverse(const Dims& d, int layer) { return (d.nL - 1 - layer) % 2 == 0 ? 1 : 0; }
// Item k of a launch's order: the chunk's item nitems - 1 - k when the launch takes its items from
// the last (rev: ws_bwd_reverse; the chained forward always), else item k.
__device__ __forceinline__ int ws_item(int k, int nitems, int rev) { return rev ? nitems - 1 - k : k; }

// The work items of a WS stack launch's parameters p: a focus's 128-row tile each, focus-major.
template <class P>
void set_ws_items(P& p, const Dims& d, int Ec) {
  p.Ec = Ec;
  p.ROW = d.ROW;
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
}

// A gated kernel's shared memory: the consumers' scratch (kPer floats per consumer thread,
// thread-major: float j of thread ct at [256 j + ct], conflict-free), then a ring of kStages_
// stages of kStage_ floats.
template <int kPer, int kStages_, int kStage_>
struct WsScratchRing {
  static constexpr int kScratch = kPer * 256, kStages = kStages_, kStage = kStage_;
  static constexpr int kBytes = (kScratch + kStages * kStage) * static_cast<int>(sizeof(float));
  static_assert(kBytes + 1024 <= 227 * 1024, "the scratch and the ring fit an SM");
};

// A gated kernel's per-thread scratch slots (stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu; base:
// the scratch as float4, + ct): consumer thread ct's float j at base[256 (j / 4)], element j % 4
// (16-byte groups, thread-major: a warp's access covers 512 contiguous bytes, conflict-free). The
// quad at S's column sc (sc % 16 = 4 t), row h, holds the accumulators wg_quad reads: floats b,
// b + 1, b + 4, b + 5, b = 8 (sc / 16) + 2 h, i.e. the 8-byte pieces h of groups 2 (sc / 16) and
// 2 (sc / 16) + 1 (two 8-byte accesses where 4-byte slots took four).
__device__ __forceinline__ const float2* slot_pair(const float4* base, int sc, int h) {
  return reinterpret_cast<const float2*>(base + 512 * (sc >> 4)) + h;
}
__device__ __forceinline__ float2* slot_pair(float4* base, int sc, int h) {
  return reinterpret_cast<float2*>(base + 512 * (sc >> 4)) + h;
}
__device__ __forceinline__ float4 slot_quad(const float4* base, int sc, int h) {
  const float2* q = slot_pair(base, sc, h);
  const float2 a = q[0], c = q[512];  // the next group: 256 float4 on
  return make_float4(a.x, a.y, c.x, c.y);
}
__device__ __forceinline__ void slot_fma(float4* base, int sc, int h, float4 x, float4 z) {
  float2* q = slot_pair(base, sc, h);
  const float2 a = q[0], c = q[512];
  q[0] = make_float2(fmaf(x.x, z.x, a.x), fmaf(x.y, z.y, a.y));
  q[512] = make_float2(fmaf(x.z, z.z, c.x), fmaf(x.w, z.w, c.y));
}
// v[0 .. kN) into the slots / from them, a group at a time.
template <int kN, int M>
__device__ __forceinline__ void set_slots(float4* base, const float (&v)[M]) {
  static_assert(kN % 4 == 0 && kN <= M, "whole groups");
#pragma unroll
  for (int J = 0; J < kN / 4; ++J) base[256 * J] = make_float4(v[4 * J], v[4 * J + 1], v[4 * J + 2], v[4 * J + 3]);
}
template <int kN, int M>
__device__ __forceinline__ void get_slots(const float4* base, float (&v)[M]) {
  static_assert(kN % 4 == 0 && kN <= M, "whole groups");
#pragma unroll
  for (int J = 0; J < kN / 4; ++J) {
    const float4 x = base[256 * J];
    v[4 * J] = x.x;
    v[4 * J + 1] = x.y;
    v[4 * J + 2] = x.z;
    v[4 * J + 3] = x.w;
  }
}
// Where a layer's activations are, all (F, Ec, ROW): its input (A of the products and the
// residual), its output, and a gated layer's pre-activations z = [z0, z1] kept (or null).
struct WsIo {
  const float* in;
  float* out;
  float* zsave;
  int Ec, ROW;
  // The register-resident chain (stack_ws_chain_regs.cu): z16, z kept as binary16 rows (stack_z_f16)
  // of the item's focus f of F.
  int z16 = 0, F = 0, f = 0;
};

// ---- an identity layer's item: one group_fill per |m| group (the chained forward,
// stack_ws_chain.cu; the one-layer launches, stack_ws.cu, run a group per launch) ----
// The producer warp's fills of one group's product (N = K: 128, the m = 0 columns 0 ..; 192, the
// |m| = 1 columns 128 ..) of item (focus f, rows y ..), B the layer's image of that group (focus
// f's at B + f 2 N N).
template <int N, int kStages, int kStage, int kAr>
__device__ __forceinline__ void group_fill(const float* B, float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                           const CUtensorMap* tmA, int f, int y) {
  ws_fill<N, N, kStages, kStage, ws_one_plane(kAr)>(ring, full, empty, pp, tmA,
                                                    WsItem{N == 128 ? 0 : 128, y, f, B + static_cast<size_t>(f) * 2 * N * N});
}
// The item's rows of a step's input, one |m| group's columns (N: 128, the m = 0 columns at base;
// 192, the |m| = 1 columns), dropped from L2 without their write-back (ws_discard_l2) right after
// the group's epilogue, their last read (the product's tensor copies completed before it; the
// gated forward's residual loads in a 3x split, consumed before the __syncwarp). Why: in the chained
// launches every hand-over row went to HBM (the forward wrote 16.0 GB per 4,096-atom tf32 fast
// call where its z and output are 9.7, the backward 9.6 where its output is 3.2); dropped by the
// producer an item later, the lines had been evicted already and nothing changed. Dropped here
// (H100, the same binary, kernel-times): the forward 16.4 -> 13.5 GB written, the backward 9.9 ->
// 8.3, per call `precision tf32` fast 39.7 -> 37.5 ms, fp32 unchanged (docs/performance.md,
// 2026-12-05 twelfth session). The rows of thread ct are its wgmma rows (ws_row); the four
// lanes that share them (ct & 3) take every fourth 128-byte line. A later step of the item may
// write the rows again (ordered after the drop through the `stored` hand-over). Whole lines:
// ws_may_drop's alignment.
template <int N>
__device__ __forceinline__ void ws_drop_group(const float* in, size_t base, int ROW, int row0, int Ec, int ct) {
  __syncwarp();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row0 + ws_row(ct, h);
    if (r >= Ec) continue;
    const char* row = reinterpret_cast<const char*>(in + base + static_cast<size_t>(r) * ROW);
#pragma unroll
    for (int j = ct & 3; j < N / 32; j += 4) ws_discard_l2(row + 128 * j);
  }
}
// The chained launches' hand-over of an item's step to its next (stack_ws_chain.cu,
// stack_ws_chain_bwd.cu), one per |m| group: the consumers store a group's columns of the step's
// output, order their stores before the async proxy and arrive on that group's `stored` barrier
// (256 arrivals) after every step but the item's last; the producer waits for that phase and
// fences too before its tensor copies of the next step's products that read those columns (the
// SO(2) products of one group read only that group's columns). So the next step's first group
// is copied in while the consumers still work on this step's second group, and the ring does
// not run dry at every step (one barrier for the whole step did: the producer's copies of a step
// waited for all of the step before it, then the consumers for the copies).
__device__ __forceinline__ void ws_chain_wait(uint64_t* stored, uint32_t& parity) {
  ws_bar_wait(stored, parity);
  parity ^= 1u;
  ws_fence_proxy_global();
}
__device__ __forceinline__ void ws_chain_stored(uint64_t* stored, int step, int nsteps) {
  if (step + 1 < nsteps) {
    ws_fence_proxy_global();
    ws_bar_arrive(stored);
  }
}
// Whether the chained launches may drop hand-over rows of buffers buf0, buf1 (ws_drop_group's
// whole lines; SEZM_CUDA_CHAIN_DISCARD=0: never, for an A/B in one binary).
inline bool ws_may_drop(const Dims& d, const float* buf0, const float* buf1) {
  static const bool off = [] { const char* e = std::getenv("SEZM_CUDA_CHAIN_DISCARD"); return e && *e == '0'; }();
  return !off && d.ROW % 32 == 0 && reinterpret_cast<uintptr_t>(buf0) % 128 == 0 &&
         reinterpret_cast<uintptr_t>(buf1) % 128 == 0;
}

// The chained launches' arithmetic: one TF32 pass with `precision tf32`, else 3xFP16 where the
// FP16 images were built (Dims::stack_f16), else 3xTF32.
inline int ws_arithmetic(const Dims& d) {
  return d.tf32_one_pass ? kAr1xTf32 : d.stack_f16 ? kAr3xF16 : kAr3xTf32;
}

// ---- the gated layers' shapes ----
constexpr int kCf = 32, kLC = 3 * kCf;  // ws_shape: Cf = 32, L = 3

// Group g (0: the m = 0 columns, from column 0; 1: the |m| = 1 columns, from 4 Cf) of consumer
// thread ct's rows of item (focus f, rows row0 ..) as binary16 rows (f16_rows.cuh) of a chunk's
// (F, Ec, ROW) buffer: quad(q4, h) the quad of the group's columns wg_quad_col(q4) .. + 3 of row
// ws_row(ct, h); a row's largest |value| from the four threads that hold it. kStream: stored
// evict-first (st.global.cs: rows nothing reads before the backward, store_z's reason).
template <int N, bool kStream, class Quad>
__device__ __forceinline__ void store_rows_h(float* out, int F, int Ec, int ROW, int f, int row0, int g, int ct,
                                             Quad quad) {
  __half* const oh = reinterpret_cast<__half*>(out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = 0.0f;
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4) {
      const float4 v = quad(q4, h);
      m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    float mult, inv;
    f16_scale(m, mult, inv);
    const int r = row0 + ws_row(ct, h);
    if (r >= Ec) continue;
    const size_t row = static_cast<size_t>(f) * Ec + r;
    __half* const o = oh + row * ROW + (g == 0 ? 0 : 4 * kCf);
#pragma unroll
    for (int q4 = 0; q4 < N / 16; ++q4) {
      const float4 v = quad(q4, h);
      const __half2 a = __floats2half2_rn(v.x * mult, v.y * mult), b = __floats2half2_rn(v.z * mult, v.w * mult);
      const uint2 x = make_uint2(*reinterpret_cast<const unsigned*>(&a), *reinterpret_cast<const unsigned*>(&b));
      uint2* const dst = reinterpret_cast<uint2*>(o + wg_quad_col(q4));
      if constexpr (kStream) __stcs(dst, x);
      else *dst = x;
    }
    float* const sc = out + f16_scale_at(F, Ec, ROW, g, f, r);
    if ((ct & 3) == 0) {
      if constexpr (kStream) __stcs(sc, inv);
      else *sc = inv;
    }
  }
}

}  // namespace
}  // namespace sezm::cuda
