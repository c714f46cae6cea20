#pragma once
// The index maps and the B image of the warp-specialised tile's product on the FP16 tensor cores
// (wgmma m64nNk16.f32.f16.f16, twice the TF32 rate; wgmma_ws_f16.cuh, Dims::stack_f16), in plain
// C++ so that tests/test_wgmma_f16_layout.cpp checks them on the CPU.
//
// Why FP16 (the note of 2026-12-05, thirteenth session; the stack's real operands of C.pt emulated
// against float64): with each A row scaled by a power of two that puts its max in [2^7, 2^8) and B
// by a power of two chosen at upload (both exact), the split a = hi + lo in FP16 gives 3xTF32's
// error (<= 2.0e-7 of sum |a||b| against 1.9e-7, forward and backward operands) and one FP16 pass
// gives one TF32 pass's (2.7e-4 both); without the row scale the backward's adjoint rows (1e-17 ..
// 0.06; half of them below FP16's smallest normal) lose their own precision. Row scaling also lets
// the low parts go unscaled: an element below 2^-3 has a subnormal low part, 2^-25 absolute against
// a row max of 2^7, so the three products share one accumulator as in the 3xTF32 tile.
//
// The layout: a ring stage keeps A as now (dense fp32 rows of 16, wgmma_ws_layout.h) and holds one
// k16 instruction per block instead of two k8 steps. The instruction's A fragment (documented
// m64k16 16-bit layout, per warp the mma.m16n8k16 one) gives lane (g, q) k {2q, 2q+1} (a0: row g,
// a1: row g + 8) and {2q + 8, 2q + 9} (a2, a3): the image puts the stage's k 4q .. 4q + 3 there
// (ws_f16_phys_k), so a thread's four k are one 16-byte load per row, as in the TF32 tile, packed
// into two half2 per row. B is K-major without swizzle: core matrices of 8 columns x 16 bytes
// (8 k), the two k halves of a column group 128 bytes apart (LBO) and column groups 256 apart
// (SBO): kWgLboBytes / kWgSboBytes, the TF32 tile's descriptors.
#include <cstdint>
#include <cstring>
#include <vector>

#include "wgmma_ws_layout.h"

namespace sezm::cuda {

constexpr int kF16K = 16;  // k per instruction and per stage block
// B's scale in the engine's images (wgmma_b_image_f16_ws): a stack weight's |b| of ~0.01 .. 1 lands
// in [2.5, 256] (its low part normal down to |b| ~ 5e-4); the upload refuses |b| >= 2^7 (the scaled
// value must stay below binary16's 65504, with A's rows scaled to 2^8 the products below 2^23).
constexpr float kWsF16BScale = 256.0f;
constexpr float kWsF16BMax = 128.0f;

// Physical k (0..15) of the stage that instruction k j (0..15) multiplies.
SEZM_WG_HD constexpr int ws_f16_phys_k(int j) { return 4 * ((j % 8) / 2) + (j % 2) + 2 * (j / 8); }
// Halves of one k block of the image for width N: two planes (hi, lo) x 16 k x N, or in one pass
// the hi plane alone (the block's first 16 N halves).
SEZM_WG_HD constexpr int ws_f16_b_halves(int N, bool one) { return (one ? 1 : 2) * kF16K * N; }
// Half index of B(instruction k j, instruction column n) in one plane of a block: column group
// n / 8 (SBO), k half j / 8 (LBO), core-matrix row n % 8 (16 bytes), element j % 8.
SEZM_WG_HD constexpr int ws_f16_b_index(int j, int n) {
  return (n / 8) * (kWgSboBytes / 2) + (j / 8) * (kWgLboBytes / 2) + (n % 8) * 8 + j % 8;
}

// Half offset, in one plane of a block, of column chunk q (columns 64 q .. 64 q + 63): its
// descriptor's start.
SEZM_WG_HD constexpr int ws_f16_b_chunk_offset(int q) { return (kWsChunk / 8) * (kWgSboBytes / 2) * q; }

// IEEE binary16 of a finite float, rounded to nearest even as cvt.rn.f16.f32 does (subnormals
// kept, overflow to infinity).
inline uint16_t f16_rn_host(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (a < 0x38800000u) {                                                 // below 2^-14: subnormal or zero
    if (a < 0x33000000u) return static_cast<uint16_t>(sign);              // at most 2^-25: to zero (a tie to even)
    const int e = static_cast<int>(a >> 23);                              // 102 .. 112
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - e;  // value = m 2^(e - 150); in units of 2^-24: m >> (126 - e)
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t r = a - 0x38000000u;  // rebias the exponent (127 -> 15), 13 extra mantissa bits
  const uint32_t rem = r & 0x1FFFu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

inline float f16_to_float_host(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  float f;
  if (e == 0) {
    f = static_cast<float>(m) * (1.0f / 16777216.0f);  // m 2^-24
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= sign;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const uint32_t u = sign | (e == 31 ? 0x7F800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
  std::memcpy(&f, &u, 4);
  return f;
}

// The FP16 B image of B (K x N, row stride ldb) times `scale` (a power of two, so exact): per k
// block kb of 16, plane p (0: hi = f16(x), 1: lo = f16(x - hi)), the plane's 16 N halves at
// ws_f16_b_index(j, n) holding x = scale B[16 kb + ws_f16_phys_k(j)][wgmma_col(n)]. N % 16 == 0;
// rows of B beyond K are zero.
inline std::vector<uint16_t> wgmma_b_image_f16(const float* B, int K, int N, int ldb, float scale) {
  const int nkb = (K + kF16K - 1) / kF16K;
  const size_t block = static_cast<size_t>(ws_f16_b_halves(N, false)), plane = block / 2;
  std::vector<uint16_t> img(static_cast<size_t>(nkb) * block, 0);
  for (int kb = 0; kb < nkb; ++kb)
    for (int j = 0; j < kF16K; ++j)
      for (int n = 0; n < N; ++n) {
        const int k = kF16K * kb + ws_f16_phys_k(j);
        const float x = k < K ? scale * B[static_cast<size_t>(k) * ldb + wgmma_col(n)] : 0.0f;
        const uint16_t hi = f16_rn_host(x), lo = f16_rn_host(x - f16_to_float_host(hi));
        const size_t o = kb * block + ws_f16_b_index(j, n);
        img[o] = hi;
        img[o + plane] = lo;
      }
  return img;
}

// The engine's FP16 image of B (K x N, K % 16 == 0): wgmma_b_image_f16 with the scale kWsF16BScale,
// each 16-k block (16 N floats' worth of halves) followed by 16 N floats of zeros, so that block kb
// starts at float 32 N kb as in the TF32 image (wgmma_b_image, kS = 2) and the image is 2 K N
// floats: ws_fill's one-plane copies and every image offset serve both.
inline std::vector<float> wgmma_b_image_f16_ws(const float* B, int K, int N, int ldb) {
  const std::vector<uint16_t> img = wgmma_b_image_f16(B, K, N, ldb, kWsF16BScale);
  const size_t halves = static_cast<size_t>(ws_f16_b_halves(N, false));  // a block: 32 N halves = 16 N floats
  const size_t nkb = img.size() / halves;
  std::vector<float> out(nkb * halves, 0.0f);  // 32 N floats per block
  for (size_t kb = 0; kb < nkb; ++kb) std::memcpy(out.data() + kb * halves, img.data() + kb * halves, halves * 2);
  return out;
}

}  // namespace sezm::cuda
