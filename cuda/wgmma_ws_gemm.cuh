#pragma once
// One product of the warp-specialised tile in any of its arithmetics (ws_multiply: wgmma_ws.cuh's
// 3xTF32 and one TF32 pass, wgmma_ws_f16.cuh's 3xFP16) and the whole persistent tile for one
// product shape (ws_gemm). Users: the stack's kernels (stack_ws*.cu) and sezm-stack-probe.
#include "wgmma_ws.cuh"
#include "wgmma_ws_f16.cuh"
#include "wgmma_ws_regs.cuh"

namespace sezm::cuda {
namespace {

// One product on the consumers in arithmetic kAr: ws_product (3xTF32), ws_product_one (one TF32
// pass) or ws_product_f16 (3xFP16). kRes (K == N; applied where `res`): acc returns A + A B, A the
// landed operand before ax. The 3x products add A among their partials. The one pass accumulates
// in the tensor cores' registers, where nothing may be added while its products run: it keeps A's
// quads in registers and adds them after the product (acc + u in IEEE fp32, the sum an epilogue
// made with the residual it read back: the same bits, without that round trip to L2 before the
// stores, which cost the 3x products' stack phases 5-6 %, docs/performance.md, 2026-12-03).
// kept (one pass only, K == N): the landed quads handed to the caller too (ws_product_one), for
// epilogues that add the residual after other work (the gated forward's).
template <int N, int K, int kStages, int kStage, int kAr = kAr3xTf32, class AX = WsAsIs, bool kRes = false>
__device__ __forceinline__ void ws_multiply(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                            float (&acc)[N / 2], AX ax = AX{}, bool res = true,
                                            float4* kept = nullptr) {
  if constexpr (kAr == kAr1xTf32) {
    static_assert(!kRes || K == N, "the residual is A itself");
    float4 own[kRes ? N / 8 : 1];
    float4* const q = kept != nullptr ? kept : kRes ? own : nullptr;
    ws_product_one<N, K, kStages, kStage>(ring, full, empty, pp, ct, acc, ax, q);
    if constexpr (kRes) {
      if (res) {
#pragma unroll
        for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
          for (int h = 0; h < 2; ++h) ws_add_quad(acc, q4, h, q[2 * q4 + h]);
      }
    }
  } else if constexpr (kAr == kAr3xF16) {
    ws_product_f16<N, K, kStages, kStage, AX, kRes>(ring, full, empty, pp, ct, acc, ax, res);
  } else {
    ws_product<N, K, kStages, kStage, AX, kRes>(ring, full, empty, pp, ct, acc, ax, res);
  }
}

// The whole persistent tile for one product shape in arithmetic kAr, called by all 384 threads of
// a CTA launched with ws_smem_bytes(N, ws_one_plane(kAr)) of dynamic shared memory (__launch_bounds__(kWsThreads, 1)). Items
// blockIdx.x, + gridDim.x, .. (< n_items). `item(i)` gives WsItem i (called by the producer warp,
// in its 24 registers: keep it simple); `epi(i, acc, ct)` consumes item i's accumulators (float
// (&)[N / 2], free to be overwritten), consumer thread ct (0..255) holding rows ws_row(ct, h) and,
// as wg_quad(acc, q4, h), the quads at columns wg_quad_col(q4) (see ws_for_each_quad). A's tensor
// map tmA: boxes of 16 x kWsRows x 1 floats, no swizzle (the box lands as ws_a_offset's dense rows).
// kRes (K == N): the accumulators handed to epi hold A + A B (ws_multiply).
template <int N, int K, int kAr = kAr3xTf32, bool kRes = false, class Item, class Epi>
__device__ __forceinline__ void ws_gemm(int n_items, const CUtensorMap* tmA, Item item, Epi epi) {
  constexpr bool kOne = ws_one_plane(kAr);  // the stages' layout
  constexpr int kStages = ws_stages(N, kOne), kStage = ws_stage_floats(N, kOne);
  extern __shared__ __align__(128) float ws_dsmem[];  // 128-byte aligned stages: tensor copies' destinations
  __shared__ uint64_t full[kStages], empty[kStages];
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {  // the producer warpgroup: warp 0 fills the ring, the rest leave
    ws_regs_dec<kWsProducerRegs>();
    if (threadIdx.x >= 32) return;
    for (int i = blockIdx.x; i < n_items; i += ws_grid())
      ws_fill<N, K, kStages, kStage, kOne>(ws_dsmem, full, empty, pp, tmA, item(i));
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  float acc[N / 2];
  for (int i = blockIdx.x; i < n_items; i += gridDim.x) {
    ws_multiply<N, K, kStages, kStage, kAr, WsAsIs, kRes>(ws_dsmem, full, empty, pp, ct, acc);
    epi(i, acc, ct);
  }
}

// f(row, col, quad) for each of consumer thread ct's quads of an item: tile row (0..127), first
// logical column (a multiple of 4), the four accumulators of columns col .. col + 3.
template <int M, class F>
__device__ __forceinline__ void ws_for_each_quad(const float (&acc)[M], int ct, F f) {
#pragma unroll
  for (int q4 = 0; q4 < M / 8; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) f(ws_row(ct, h), wg_quad_col(q4), wg_quad(acc, q4, h));
}

}  // namespace
}  // namespace sezm::cuda
