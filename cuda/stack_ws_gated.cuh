#pragma once
// What the warp-specialised stack's kernels share (stack_ws.cu: identity layers;
// stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu: the gated layers, each split in a gate pass and a
// product kernel): A's tensor map over the focus-major activations, the residual
// epilogue, the gated layers' shape, the split kernels' T tile and producer. CPU twin: the mixing stack in
// engine/so2_convolution.h.
#include <cstdint>

#include "stack.cuh"
#include "wgmma_ws_host.cuh"

namespace sezm::cuda {

// A gated layer's backward on the WS tile (stack_ws_gated_bwd.cu; launch_stack_ws_gated's checks
// done): out = the input adjoint of the layer whose output adjoint is `in`, z its saved
// pre-activations, whose first 128 columns it overwrites with its gate pass's results.
void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                           cudaStream_t s);
// A gated layer's forward in two launches (stack_ws_gated_fwd.cu; the checks done, out != in):
// out = the layer applied to `in`, zsave its pre-activations (or null).
void launch_gated_forward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                          float* zsave, cudaStream_t s);

namespace {

// A's tensor map over the (F, Ec, ROW) activations: boxes of 16 columns x 128 rows x 1 focus.
CUtensorMap activations_map(const Dims& d, int Ec, const float* in) {
  const uint64_t dims[3] = {static_cast<uint64_t>(d.ROW), static_cast<uint64_t>(Ec), static_cast<uint64_t>(d.F)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d.ROW) * sizeof(float),
                               static_cast<uint64_t>(d.ROW) * sizeof(float) * static_cast<uint64_t>(Ec)};
  return ws_tensor_map(in, dims, strides);
}

// out = in + acc over consumer thread ct's quads of the item's rows row0 + ws_row(ct, h) < Ec
// (base: the group's first column of the focus; rows ROW floats apart), in IEEE fp32. Every
// residual load before any store (in and out may be one buffer; the compiler would otherwise keep
// each load behind the previous store).
template <int N>
__device__ __forceinline__ void residual_epilogue(const float* in, float* out, size_t base, int ROW, int row0, int Ec,
                                                  int ct, float (&acc)[N / 2]) {
  const int r0 = row0 + ws_row(ct, 0), r1 = row0 + ws_row(ct, 1);
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r < Ec)
        ws_add_quad(acc, q4, h, *reinterpret_cast<const float4*>(in + base + static_cast<size_t>(r) * ROW + wg_quad_col(q4)));
    }
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r < Ec) *reinterpret_cast<float4*>(out + base + static_cast<size_t>(r) * ROW + wg_quad_col(q4)) = wg_quad(acc, q4, h);
    }
}

// The work items of a WS stack launch's parameters p: a focus's 128-row tile each, focus-major.
template <class P>
void set_ws_items(P& p, const Dims& d, int Ec) {
  p.Ec = Ec;
  p.ROW = d.ROW;
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
}

// ---- the gated layers' shapes ----
constexpr int kCf = 32, kLC = 3 * kCf;  // ws_shape: Cf = 32, L = 3

// S_pre = z00 G of a warp's kStep rows at columns d Cf + lane (d < L), IEEE fp32 FFMA with a in
// order: the gate passes' (stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu), lane c owning channel c.
// Zb: the rows' z00 in shared memory; Gs: G's rows gst floats apart in shared memory.
template <int kStep>
__device__ __forceinline__ void gate_pre_lanes(const float (*Zb)[kCf], const float* Gs, int gst, int lane,
                                               float (&S)[kStep][kLC / kCf]) {
  constexpr int kL = kLC / kCf;
#pragma unroll
  for (int q = 0; q < kStep; ++q)
#pragma unroll
    for (int d = 0; d < kL; ++d) S[q][d] = 0.0f;
#pragma unroll 2
  for (int a4 = 0; a4 < kCf; a4 += 4) {
    float4 zq[kStep];
#pragma unroll
    for (int q = 0; q < kStep; ++q) zq[q] = *reinterpret_cast<const float4*>(&Zb[q][a4]);
#pragma unroll
    for (int aa = 0; aa < 4; ++aa) {
      float gw[kL];
#pragma unroll
      for (int d = 0; d < kL; ++d) gw[d] = Gs[(a4 + aa) * gst + d * kCf + lane];
#pragma unroll
      for (int q = 0; q < kStep; ++q) {
        const float za = aa == 0 ? zq[q].x : aa == 1 ? zq[q].y : aa == 2 ? zq[q].z : zq[q].w;
#pragma unroll
        for (int d = 0; d < kL; ++d) S[q][d] = fmaf(za, gw[d], S[q][d]);
      }
    }
  }
}

// ---- the split gated kernels (stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu) ----
// A gate pass writes a row of T (128 floats: the scalar row, then S's L Cf columns) over the
// first 128 columns of a scratch row; the product kernel lands each item's T by TMA beside its
// ring: eight boxes of 16 columns x 128 rows, A's format (ws_a_offset within a box).
constexpr int kTCols = kCf + kLC;
static_assert(kTCols == 128, "T is the first 128 columns of a row: eight of A's 16-column boxes");
constexpr int kTFloats = kWsRows * kTCols;

// Shared memory: T, then the ring, five stages of 32 KiB (one pass: eight of 20 KiB).
template <bool kOne>
struct WsTRing {
  static constexpr int kStages = kOne ? 8 : 5, kStage = ws_stage_floats(192, kOne);
  static constexpr int kBytes = (kTFloats + kStages * kStage) * static_cast<int>(sizeof(float));
  static_assert(kBytes + 1024 <= 227 * 1024, "T and the ring fit an SM");
};

// T(row, col .. col + 3) (col % 4 == 0) in the landed tile: a warp's quads at (ws_row, col + 4 t)
// read 512 contiguous bytes.
__device__ __forceinline__ float4 t_quad(const float* T, int row, int col) {
  return *reinterpret_cast<const float4*>(T + (col / kWsK) * (kWsRows * kWsK) + ws_a_offset(row, col % kWsK));
}

// T's tensor map: the first 128 columns of the (F, Ec, ROW) rows at t, in A's boxes.
inline CUtensorMap t_map(const Dims& d, int Ec, const float* t) {
  const uint64_t dims[3] = {static_cast<uint64_t>(kTCols), static_cast<uint64_t>(Ec), static_cast<uint64_t>(d.F)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d.ROW) * sizeof(float),
                               static_cast<uint64_t>(d.ROW) * sizeof(float) * static_cast<uint64_t>(Ec)};
  return ws_tensor_map(t, dims, strides);
}

// The split kernels' producer warp (p: the kernel's __grid_constant__ parameters, with B0, B1,
// ntiles, nitems): per item, the m = 0 group's first k blocks (as many as the ring holds: they need
// only the previous item's stages), then, once the consumers are done with the previous item's T
// (t_empty: one arrival per consumer warp), the item's T (t_full), then the rest of both groups'
// blocks.
template <int kStages, int kStage, bool kOne, class P>
__device__ __forceinline__ void t_producer(const P& p, float* ring, float* T, uint64_t* full, uint64_t* empty,
                                           uint64_t* t_full, uint64_t* t_empty, WsPipe& pp, const CUtensorMap* tmA,
                                           const CUtensorMap* tmT) {
  constexpr int N0 = 128, N1 = 192, kHead = kStages < N0 / kWsK ? kStages : N0 / kWsK;
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  uint32_t tph = 0;
  for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    const WsItem m0{0, y, f, p.B0 + static_cast<size_t>(f) * 2 * N0 * N0};
    ws_fill<N0, N0, kStages, kStage, kOne>(ring, full, empty, pp, tmA, m0, 0, kHead);
    ws_bar_wait(t_empty, tph ^ 1u);
    if ((threadIdx.x & 31) == 0) {  // rows past Ec arrive as zeros (and count as bytes)
      ws_bar_expect(t_full, kTFloats * sizeof(float));
#pragma unroll 1
      for (int b = 0; b < kTCols / kWsK; ++b) ws_tma_3d(T + b * kWsRows * kWsK, tmT, b * kWsK, y, f, t_full);
    }
    tph ^= 1u;
    ws_fill<N0, N0, kStages, kStage, kOne>(ring, full, empty, pp, tmA, m0, kHead);
    ws_fill<N1, N1, kStages, kStage, kOne>(ring, full, empty, pp, tmA,
                                           WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1});
  }
}

// The split product kernels' start, by all threads: the ring's and T's barriers (t_full: the
// producer's; t_empty: one arrival per consumer warp), then the producer warpgroup runs t_producer
// and gets false; the consumers get true with their registers raised. smem: T, then the ring.
template <bool kOne, class P, int kStages = WsTRing<kOne>::kStages>
__device__ __forceinline__ bool t_kernel_start(const P& p, float* smem, uint64_t (&full)[kStages],
                                               uint64_t (&empty)[kStages], uint64_t* t_full, uint64_t* t_empty,
                                               WsPipe& pp, const CUtensorMap* tmA, const CUtensorMap* tmT) {
  if (threadIdx.x == 0) {  // before ws_init's barrier
    ws_bar_init(t_full, 1);
    ws_bar_init(t_empty, 8);
  }
  ws_init(full, empty);
  if (threadIdx.x < 128) {
    t_producer<kStages, WsTRing<kOne>::kStage, kOne>(p, smem + kTFloats, smem, full, empty, t_full, t_empty, pp, tmA,
                                                     tmT);
    return false;
  }
  ws_regs_inc<kWsConsumerRegs>();
  return true;
}

}  // namespace
}  // namespace sezm::cuda
