#pragma once
// The binary16 rows' scale choice and scale layout (f16_rows.cuh), in plain C++ so that
// tests/test_f16_rows.cpp checks them on the CPU: the scale brings every group into binary16's
// range with TF32's ten fraction bits, and the scales' runs are 16-byte aligned, disjoint and,
// with the 128 floats an item's bulk copy reads past a run's start, inside the fp32 rows' buffer.
#include <cstddef>
#include <cstdint>

#include "wgmma_layout.h"  // SEZM_WG_HD

namespace sezm::cuda {

// The power of two 2^k (k returned) that brings m into [2^14, 2^15), from m's bits (m >= 0 or NaN):
// k = 141 - m's biased exponent, clamped to [-126, 126] so that 2^k and 2^-k are normal floats
// (m = 0 or below 2^-112: 2^126, the group's values then still far below 2^15; m infinite or NaN:
// 2^-114, which keeps them so).
SEZM_WG_HD constexpr int f16_scale_k(uint32_t m_bits) {
  const int k = 141 - static_cast<int>((m_bits >> 23) & 0xffu), lo = k < -126 ? -126 : k;
  return lo > 126 ? 126 : lo;
}
// The bits of the float 2^k (-126 <= k <= 127).
SEZM_WG_HD constexpr uint32_t f16_pow2_bits(int k) { return static_cast<uint32_t>(127 + k) << 23; }

// Floats from the rows' base to the inverse scale of group g (0: the m = 0 columns 0 .. 4 Cf - 1,
// 1: the |m| = 1 columns) of row (f, i) of a chunk of Ec edges: after the F Ec ROW halves, one run
// of Ec rows per (g, f), each run rounded up to 4 floats (16-byte aligned).
SEZM_WG_HD inline size_t f16_scale_at(int F, int Ec, int ROW, int g, int f, int i) {
  const size_t run = (static_cast<size_t>(Ec) + 3) / 4 * 4;
  return static_cast<size_t>(F) * Ec * ROW / 2 + (static_cast<size_t>(g) * F + f) * run + i;
}

// Fast mode keeps the binary16 rows of every chunk of a call (E edges, N centres) in one buffer:
// chunk (e0, n0)'s from f16_kept_offset floats on, so that its halves and its 2F runs of scales
// (each rounded up to 4 floats) end before the next chunk's start (a chunk holds at least one
// centre: 8F + 32 floats of room per centre cover the runs' rounding and the alignment), every
// chunk 128-byte aligned where F ROW / 2 is a multiple of 32 (stack_out_f16's shapes: F = 2 or 4,
// ROW = 320), as the fp32 rows' chunks are: a chunk only 16-byte aligned splits every 32-byte
// piece of its boxes over two sectors (32,768 atoms: 7 % slower). f16_kept_floats: the buffer,
// with the 128 floats an item's bulk copy may read past the last run's start.
SEZM_WG_HD inline size_t f16_kept_offset(int F, int ROW, size_t e0, size_t n0) {
  const size_t room = 2 * static_cast<size_t>(F) * e0 + (8 * static_cast<size_t>(F) + 32) * n0;
  return static_cast<size_t>(F) * e0 * ROW / 2 + (room + 31) / 32 * 32;
}
inline size_t f16_kept_floats(int F, int ROW, size_t E, size_t N) { return f16_kept_offset(F, ROW, E, N) + 128; }

}  // namespace sezm::cuda
