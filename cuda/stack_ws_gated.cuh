#pragma once
// What the warp-specialised stack's kernels share (stack_ws.cu: identity layers and the gated
// forward; stack_ws_gated_bwd.cu: the gated backward): A's tensor map over the focus-major
// activations, the residual epilogue, the gated kernels' shared-memory constants and their
// producer. CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

#include "stack.cuh"
#include "wgmma_ws_host.cuh"

namespace sezm::cuda {

// A gated layer's backward on the WS tile (stack_ws_gated_bwd.cu; launch_stack_ws_gated's checks
// done): out = the input adjoint of the layer whose output adjoint is `in`, z its saved
// pre-activations.
void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                           const float* z, cudaStream_t s);

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

// ---- the gated layers' kernels ----
// The ring's stages are the wider product's (N = 192), four of them beside Zs and S (and, backward,
// the gate weights).
constexpr int kCf = 32, kLC = 3 * kCf;  // ws_shape: Cf = 32, L = 3
constexpr int kGStages = 4, kGStage = ws_stage_floats(192);
constexpr int kZst = kCf + 1;  // Zs row stride: the gate's reads of 16 rows at one k hit 16 banks
constexpr int kSst = kLC + 4;  // S row stride: 16-byte rows

// The 256 consumer threads only (named barrier 1; the producer warp never waits on it).
__device__ __forceinline__ void ws_consumers_sync() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

// The producer of both gated kernels (the first warp; the rest of its warpgroup leaves): both
// groups' k blocks of each item, in the consumers' order, on a ring of kStages stages of kStage
// floats (kOne: the images' hi planes only, one TF32 pass). `p` stays the kernel's
// __grid_constant__ (read from parameter space: the producer has 24 registers).
template <int kStages, int kStage, bool kOne, class P>
__device__ __forceinline__ void ws_gated_producer(const P& p, float* ws_dsmem, uint64_t* full, uint64_t* empty,
                                                  WsPipe& pp, const CUtensorMap* tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    ws_fill<N0, N0, kStages, kStage, kOne>(ws_dsmem, full, empty, pp, tmA,
                                           WsItem{0, y, f, p.B0 + static_cast<size_t>(f) * 2 * N0 * N0});
    ws_fill<N1, N1, kStages, kStage, kOne>(ws_dsmem, full, empty, pp, tmA,
                                           WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1});
  }
}

}  // namespace
}  // namespace sezm::cuda
