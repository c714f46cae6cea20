#pragma once
// The warp-specialised tile's one-pass product with A from the consumers' registers, and the
// landing of a chain's input into them: what the register-resident chains run
// (stack_ws_chain_regs.cu, stack_ws_chain_bwd_regs.cu; the gate product of stack_ws_gated_fwd.cuh
// there). On wgmma_ws.cuh's ring, schedule and rounding (ws_product_one_loop), so the same bits as
// landing the same quads.
#include <type_traits>

#include "wgmma_ws.cuh"

namespace sezm::cuda {
namespace {

// ws_product_one with A from registers: a[2 kb + h] this thread's quad of block kb and row
// ws_row(ct, h) (the layout of ws_product_one's kept, i.e. of its output quads (kb, h)), so that a
// product's output, after its epilogue, is the next product's A without leaving the SM. The stages
// hold B's block at kBOff floats (by default after where A's box would be; 0: a ring of B-only
// stages, ws_fill's kBAt0) and are waited for as ws_land_a waits; the fragments are ws_land_a's
// from the same quads. A hook other than WsAsIs is called as ax(row, k, x, zx), x the quad from
// registers, zx the quad at the same place of the box the stage holds where A's box would be (the
// chained backward's saved z, copied by A's tensor copy from z's map), in ws_land_a's order (block
// by block, row ra0 then ra1), so a hook with side effects (s_bar's sums) makes them in that order.
template <int N, int K, int kStages, int kStage, int kBOff = kWsRows * kWsK, class AX = WsAsIs>
__device__ __forceinline__ void ws_product_one_regs(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp,
                                                    int ct, float (&acc)[N / 2], const float4* a, AX ax = AX{}) {
  const int t = ct & 3;
  const int ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
  auto next_block = [&](uint32_t (&h)[kWsKs][4], int kb) {
    const int cur = ws_wait_full<kStages>(full, pp);
    float4 x0 = a[2 * kb], x1 = a[2 * kb + 1];
    if constexpr (!std::is_same_v<AX, WsAsIs>) {
      const float* sZ = ring + cur * kStage;
      const float4 z0 = *reinterpret_cast<const float4*>(sZ + ws_a_offset(ra0, 4 * t));
      const float4 z1 = *reinterpret_cast<const float4*>(sZ + ws_a_offset(ra1, 4 * t));
      x0 = ax(ra0, kb * kWsK + 4 * t, x0, z0);
      x1 = ax(ra1, kb * kWsK + 4 * t, x1, z1);
    }
    float f[kWsKs][4];
    ws_frag_order(x0, x1, f);
    ws_round_one(f, h);
    return cur;
  };
  ws_product_one_loop<N, K, kStages, kStage, kBOff>(ring, empty, ct, acc, next_block);
}

// The A quads of K / 16 stages that hold A's boxes alone (ws_fill's !kB) into q, in
// ws_product_one's kept layout, each stage released once read: a chain's input, whose products
// then take A from registers (ws_product_one_regs).
template <int K, int kStages, int kStage>
__device__ __forceinline__ void ws_land_quads(const float* ring, uint64_t* full, uint64_t* empty, WsPipe& pp, int ct,
                                              float4 (&q)[K / 8]) {
  const int t = ct & 3, ra0 = ws_row(ct, 0), ra1 = ws_row(ct, 1);
#pragma unroll
  for (int kb = 0; kb < K / kWsK; ++kb) {
    const int cur = ws_wait_full<kStages>(full, pp);
    const float* sA = ring + cur * kStage;
    q[2 * kb] = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra0, 4 * t));
    q[2 * kb + 1] = *reinterpret_cast<const float4*>(sA + ws_a_offset(ra1, 4 * t));
    __syncwarp();
    if ((ct & 31) == 0) ws_bar_arrive(&empty[cur]);
  }
}

}  // namespace
}  // namespace sezm::cuda
