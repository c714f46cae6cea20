#pragma once
// Index maps of the warp-specialised tile (cuda/wgmma_ws.cuh), plain C++ so that the
// CPU test tests/test_wgmma_ws_layout.cpp checks them against the instruction's documented fragment
// and descriptor layouts without a GPU. The tile: 128 rows per tile, k blocks of 16 (two k steps of
// 8, one ring stage), A rows copied whole per stage (16 floats, 64 bytes each, dense row-major), B
// the weights' wgmma_b_image for kS = 2 (wgmma_layout.h), split into column chunks of 64 per product.
#include "wgmma_layout.h"

namespace sezm::cuda {

constexpr int kWsRows = 128;      // rows per tile: two consumer warpgroups of 64
constexpr int kWsK = 16;          // k per stage (two k steps of 8)
constexpr int kWsKs = kWsK / 8;   // k steps per stage: the B image's kS
constexpr int kWsChunk = 64;      // columns per product (m64n64k8)

// Floats of the B image's block that a ring stage receives: both TF32 planes (3xTF32), or in one
// TF32 pass (`precision tf32`) the hi plane alone, which is the block's first kWsKs 8 N floats
// (wgmma_b_image lays plane 0 first), so the same image serves both.
SEZM_WG_HD constexpr int ws_b_floats(int N, bool one) { return (one ? 1 : 2) * kWsKs * 8 * N; }
// Float offset of A(row, k) (row < 128, k < 16) in a stage: dense rows of 16 floats, as one 64-byte
// bulk copy per row lands them.
SEZM_WG_HD constexpr int ws_a_offset(int row, int k) { return row * kWsK + k; }
// Tile row of consumer thread ct (0..255; warpgroup ct / 128) for fragment rows g (h = 0) and g + 8
// (h = 1): the wgmma A-fragment and accumulator rows.
SEZM_WG_HD constexpr int ws_row(int ct, int h) {
  return 64 * (ct >> 7) + 16 * ((ct >> 5) & 3) + ((ct & 31) >> 2) + 8 * h;
}
// Physical k (0..15) of the stage that fragment column c (0..7) of k step s (0, 1) holds: the k
// permutation of wgmma_b_image for kS = 2, so that thread t's columns t and t + 4 of both steps are
// the four consecutive k = 4 t .. 4 t + 3: one 16-byte shared-memory load per fragment row.
SEZM_WG_HD constexpr int ws_frag_k(int s, int c) { return 4 * (c % 4) + 2 * s + c / 4; }
// Float offset, in one step's plane of the B image (N / 8 column groups of 64 floats), of the
// column chunk q (columns 64 q .. 64 q + 63 of the instruction): its descriptor's start.
SEZM_WG_HD constexpr int ws_b_chunk_offset(int q) { return (kWsChunk / 8) * 64 * q; }
// Accumulator index (of the full-width N / 2) of register i (0..31) of chunk q's product: the
// accumulators of an m64nN product are 4 per 8 columns, so chunk q's are the full product's
// 32 q .. 32 q + 31, and wg_store_rows / wg_quad read them as the full-width tile's.
SEZM_WG_HD constexpr int ws_acc_index(int q, int i) { return (kWsChunk / 2) * q + i; }

}  // namespace sezm::cuda
