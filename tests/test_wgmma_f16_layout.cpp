// The FP16 tile's index maps and B image (cuda/wgmma_f16_layout.h),
// checked on the CPU against the wgmma instruction's documented layouts, as
// tests/test_wgmma_ws_layout.cpp checks the TF32 tile's: the binary16 rounding, the k permutation
// that gives each thread its four k in one 16-byte load, and one emulated 128-row tile (each block row scaled
// by a power of two, the 3x split) whose every output element must be the product, and the engine's
// image layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ws_tile_emulation.h"
#include "../cuda/wgmma_f16_layout.h"

namespace {

using namespace sezm::cuda;  // the layout under test

TEST(WgmmaF16Layout, RoundsToBinary16AsTheHardwareDoes) {
  EXPECT_EQ(f16_rn_host(1.0f), 0x3C00);
  EXPECT_EQ(f16_rn_host(-2.0f), 0xC000);
  EXPECT_EQ(f16_rn_host(65504.0f), 0x7BFF);
  EXPECT_EQ(f16_rn_host(65519.0f), 0x7BFF);
  EXPECT_EQ(f16_rn_host(65520.0f), 0x7C00);  // the tie past the largest finite: to infinity
  EXPECT_EQ(f16_rn_host(0.1f), 0x2E66);
  EXPECT_EQ(f16_rn_host(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f16_rn_host(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_rn_host(std::ldexp(1.0f, -25)), 0x0000);  // a tie: to even (zero)
  EXPECT_EQ(f16_rn_host(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f16_rn_host(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: a tie, to even
  EXPECT_EQ(f16_rn_host(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // a tie: to even
  EXPECT_EQ(f16_rn_host(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // a tie: to even (up)
  // Every binary16 value converts back exactly and rounds to itself.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7C00u) == 0x7C00u) continue;  // infinities and NaNs
    const float f = f16_to_float_host(static_cast<uint16_t>(h));
    EXPECT_EQ(f16_rn_host(f), (h == 0x8000u ? 0x8000u : h)) << std::hex << h;
  }
}

// Lane (g, q)'s fragment k of the documented m64k16 16-bit A layout: a0 / a1 hold k 2q, 2q + 1 of
// rows g / g + 8, a2 / a3 k 2q + 8, 2q + 9; the image must put the stage's k 4q .. 4q + 3 there.
TEST(WgmmaF16Layout, EachThreadsFourKAreOneLoad) {
  for (int q = 0; q < 4; ++q) {
    EXPECT_EQ(ws_f16_phys_k(2 * q), 4 * q);
    EXPECT_EQ(ws_f16_phys_k(2 * q + 1), 4 * q + 1);
    EXPECT_EQ(ws_f16_phys_k(2 * q + 8), 4 * q + 2);
    EXPECT_EQ(ws_f16_phys_k(2 * q + 9), 4 * q + 3);
  }
  std::vector<int> hit(kF16K, 0);
  for (int j = 0; j < kF16K; ++j) ++hit[ws_f16_phys_k(j)];
  for (int h : hit) EXPECT_EQ(h, 1);
}

// A K-major, no-swizzle 16-bit operand read by descriptor (PTX ISA "Shared Memory Matrix Layout"):
// core matrices of 8 columns x 16 bytes, column n at row n % 8 (16 bytes apart), k at 2 (k % 8)
// bytes; k-adjacent core matrices LBO bytes apart, n-adjacent SBO; in halves from `start`.
float read_b16(const std::vector<uint16_t>& stage, size_t start, int n, int kk) {
  const size_t byte = 2 * start + static_cast<size_t>(n / 8) * kWgSboBytes + static_cast<size_t>(kk / 8) * kWgLboBytes +
                      16 * (n % 8) + 2 * (kk % 8);
  return byte / 2 < stage.size() ? f16_to_float_host(stage[byte / 2]) : NAN;
}

// The scale of a block row whose largest |a| is m, as wgmma_ws_f16.cuh's ws_f16_row_scale: m's
// binary exponent E, at least -103, gives 2^(7 - E).
float block_row_scale(float m) { return std::ldexp(1.0f, 7 - std::max(m > 0.0f ? std::ilogb(m) : -200, -103)); }

// One 128-row tile as the FP16 tile would compute it: per 16-k block each consumer thread's two
// 16-byte row loads (ws_row, ws_a_offset), the block row's scale applied (block_row_scale of the
// row's 16 k) and the values split into binary16 (hi, lo), placed in the documented fragment (warp
// w, lane (g, q): row 16 w + g (+ 8), k as above); per column chunk q of 64 the products lo hi + hi
// lo + hi hi read through the chunk's descriptor from the engine's image (wgmma_b_image_f16_ws),
// the m64n64 partials (reg i: row 16 w + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 t + i % 2)
// divided by the block row's and B's scales and added to acc[ws_acc_index(q, i)]; the quads stored
// as wg_quad does. Returns the largest error against the same arithmetic done directly on the
// scaled, split A and B (any misplaced index: O(1) or NaN); *rel gets the largest error against
// A B in double relative to sum |a||b|.
double emulated_f16_tile_error(int K, int N, std::mt19937& rng, double* rel) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-40, 0);
  const int nkb = K / kF16K;
  std::vector<float> A(static_cast<size_t>(kWsRows) * K), B(static_cast<size_t>(K) * N);
  std::vector<float> rs(static_cast<size_t>(kWsRows) * nkb);  // block row scales
  for (int r = 0; r < kWsRows; ++r)  // rows of very different magnitudes, block to block, as the adjoints have
    for (int kb = 0; kb < nkb; ++kb) {
      const float m = std::ldexp(1.0f, ex(rng));
      float mx = 0.0f;
      for (int k = kF16K * kb; k < kF16K * (kb + 1); ++k)
        mx = std::fmax(mx, std::fabs(A[static_cast<size_t>(r) * K + k] = m * u(rng)));
      rs[static_cast<size_t>(r) * nkb + kb] = block_row_scale(mx);
    }
  for (float& x : B) x = 0.25f * u(rng);
  const float bs = kWsF16BScale;
  const std::vector<float> imgf = wgmma_b_image_f16_ws(B.data(), K, N, N);
  std::vector<uint16_t> img(imgf.size() * 2);
  std::memcpy(img.data(), imgf.data(), img.size() * 2);
  const size_t block = static_cast<size_t>(ws_f16_b_halves(N, false)), plane = block / 2;
  const size_t stride = 2 * block;  // the engine's image: each block padded to the TF32 image's 32 N floats
  auto split = [](float x, float& hi, float& lo) {
    hi = f16_to_float_host(f16_rn_host(x));
    lo = f16_to_float_host(f16_rn_host(x - hi));
  };
  std::vector<std::vector<double>> acc(256, std::vector<double>(N / 2, 0.0));
  for (int kb = 0; kb < K / kF16K; ++kb) {
    std::vector<float> st(kWsRows * kWsK);
    for (int r = 0; r < kWsRows; ++r)
      for (int k = 0; k < kWsK; ++k) st[ws_a_offset(r, k)] = A[static_cast<size_t>(r) * K + kF16K * kb + k];
    const std::vector<uint16_t> sb(img.begin() + kb * stride, img.begin() + kb * stride + block);
    for (int wg = 0; wg < 2; ++wg) {
      std::vector<double> ah(64 * 16, NAN), al(64 * 16, NAN);
      for (int ct = 128 * wg; ct < 128 * wg + 128; ++ct) {
        const int w = (ct >> 5) & 3, g = (ct & 31) >> 2, t = ct & 3;
        for (int h = 0; h < 2; ++h) {
          const int row = ws_row(ct, h);
          const float* x = &st[ws_a_offset(row, 4 * t)];
          const int js[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
          for (int e = 0; e < 4; ++e) {
            float hi, lo;
            split(rs[static_cast<size_t>(row) * nkb + kb] * x[e], hi, lo);
            ah[(16 * w + g + 8 * h) * 16 + js[e]] = hi;
            al[(16 * w + g + 8 * h) * 16 + js[e]] = lo;
          }
        }
      }
      for (int q = 0; q < N / kWsChunk; ++q) {
        const size_t start = ws_f16_b_chunk_offset(q);
        for (int ct = 128 * wg; ct < 128 * wg + 128; ++ct) {
          const int w = (ct >> 5) & 3, g = (ct & 31) >> 2, t = ct & 3;
          for (int i = 0; i < kWsChunk / 2; ++i) {
            const int m = 16 * w + g + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * t + i % 2;
            double d = 0.0;
            for (int kk = 0; kk < kF16K; ++kk) {
              const double bh = read_b16(sb, start, n, kk), ahh = ah[m * 16 + kk];
              d += al[m * 16 + kk] * bh + ahh * read_b16(sb, start + plane, n, kk) + ahh * bh;
            }
            acc[ct][ws_acc_index(q, i)] += d / (static_cast<double>(rs[static_cast<size_t>(m + 64 * wg) * nkb + kb]) * bs);
          }
        }
      }
    }
  }
  std::vector<double> c;
  if (!sezm_test::ws_store_quads(acc, N, c)) return INFINITY;
  double err = 0.0, worst = 0.0;
  for (int r = 0; r < kWsRows; ++r)
    for (int n = 0; n < N; ++n) {
      double ref = 0.0, exact = 0.0, scale = 0.0;
      for (int k = 0; k < K; ++k) {
        float ahi, alo, bhi, blo;
        const float a = A[static_cast<size_t>(r) * K + k], b = B[static_cast<size_t>(k) * N + n];
        const double sc = static_cast<double>(rs[static_cast<size_t>(r) * nkb + k / kF16K]) * bs;
        split(rs[static_cast<size_t>(r) * nkb + k / kF16K] * a, ahi, alo);
        split(bs * b, bhi, blo);
        ref += (static_cast<double>(alo) * bhi + static_cast<double>(ahi) * blo + static_cast<double>(ahi) * bhi) / sc;
        exact += static_cast<double>(a) * b;
        scale += std::fabs(static_cast<double>(a) * b);
      }
      // c's column n is logical: the image's column permutation and wg_quad's stores undo each other.
      const double cv = c[static_cast<size_t>(r) * N + n], d = std::fabs(cv - ref) / scale;
      if (!(d <= err)) err = d;  // NaN (a fragment element never loaded) propagates
      worst = std::fmax(worst, std::fabs(cv - exact) / scale);
    }
  *rel = worst;
  return err;
}

TEST(WgmmaF16Layout, EmulatedTileMultipliesToTheSplitProduct) {
  std::mt19937 rng(31);
  for (int KN : {128, 192}) {
    double rel = 0.0;
    EXPECT_LT(emulated_f16_tile_error(KN, KN, rng, &rel), 1e-12) << "K = N = " << KN;
    EXPECT_LT(rel, 1e-6) << "K = N = " << KN;  // 3xTF32-like: every element, whatever its block rows' scales
  }
}

// The engine's image: the scaled FP16 image's blocks at the TF32 image's 32 N-float stride, zeros
// between, 2 K N floats in all (the offsets BlockWDev's images share).
TEST(WgmmaF16Layout, EngineImageKeepsTheTf32ImagesBlockStride) {
  const int K = 96, N = 64;
  std::vector<float> B(static_cast<size_t>(K) * N);
  for (size_t i = 0; i < B.size(); ++i) B[i] = 0.001f * static_cast<float>(static_cast<int>(i % 257) - 128);
  const std::vector<uint16_t> img = wgmma_b_image_f16(B.data(), K, N, N, kWsF16BScale);
  const std::vector<float> ws = wgmma_b_image_f16_ws(B.data(), K, N, N);
  ASSERT_EQ(ws.size(), 2 * B.size());
  const size_t block = static_cast<size_t>(ws_f16_b_halves(N, false));
  for (int kb = 0; kb < K / kF16K; ++kb) {
    EXPECT_EQ(std::memcmp(ws.data() + kb * block, img.data() + kb * block, block * 2), 0) << "block " << kb;
    for (size_t i = block / 2; i < block; ++i) ASSERT_EQ(ws[kb * block + i], 0.0f) << "block " << kb;
  }
}

}  // namespace
