// EXPERIMENT (branch exp-f16): the FP16 tile's index maps and B image (cuda/wgmma_f16_layout.h),
// checked on the CPU against the wgmma instruction's documented layouts, as
// tests/test_wgmma_ws_layout.cpp checks the TF32 tile's: the binary16 rounding, the k permutation
// that gives each thread its four k in one 16-byte load, and one emulated 128-row tile (rows scaled
// by powers of two, the 3x split and one pass) whose every output element must be the product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

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

// One 128-row tile as the FP16 tile would compute it: per 16-k block each consumer thread's two
// 16-byte row loads (ws_row, ws_a_offset), its row scale applied and the values split into
// binary16 (hi, lo), placed in the documented fragment (warp w, lane (g, q): row 16 w + g (+ 8),
// k as above); per column chunk q of 64 the products lo hi + hi lo + hi hi (one pass: hi hi) read
// through the chunk's descriptor, the m64n64 accumulators (reg i: row 16 w + g + 8 ((i / 2) % 2),
// column 8 (i / 4) + 2 t + i % 2) added to acc[ws_acc_index(q, i)]; the quads stored as
// wg_quad does and the row and B scales taken off. Returns the largest error against the same
// arithmetic done directly on the scaled, split A and B (any misplaced index: O(1) or NaN); *rel
// gets the largest error against A B in double relative to sum |a||b|.
double emulated_f16_tile_error(int K, int N, bool one, std::mt19937& rng, double* rel) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-40, 0);
  std::vector<float> A(static_cast<size_t>(kWsRows) * K), B(static_cast<size_t>(K) * N);
  std::vector<float> rs(kWsRows);
  for (int r = 0; r < kWsRows; ++r) {  // rows of very different magnitudes, as the adjoints have
    const float m = std::ldexp(1.0f, ex(rng));
    float mx = 0.0f;
    for (int k = 0; k < K; ++k) mx = std::fmax(mx, std::fabs(A[static_cast<size_t>(r) * K + k] = m * u(rng)));
    rs[r] = std::ldexp(1.0f, 7 - std::ilogb(mx));  // the row's max into [2^7, 2^8)
  }
  for (float& x : B) x = 0.25f * u(rng);
  const float bs = 256.0f;
  const std::vector<uint16_t> img = wgmma_b_image_f16(B.data(), K, N, N, bs);
  const size_t block = static_cast<size_t>(ws_f16_b_halves(N, false)), plane = block / 2;
  auto split = [](float x, float& hi, float& lo) {
    hi = f16_to_float_host(f16_rn_host(x));
    lo = f16_to_float_host(f16_rn_host(x - hi));
  };
  std::vector<std::vector<double>> acc(256, std::vector<double>(N / 2, 0.0));
  for (int kb = 0; kb < K / kF16K; ++kb) {
    std::vector<float> st(kWsRows * kWsK);
    for (int r = 0; r < kWsRows; ++r)
      for (int k = 0; k < kWsK; ++k) st[ws_a_offset(r, k)] = A[static_cast<size_t>(r) * K + kF16K * kb + k];
    const std::vector<uint16_t> sb(img.begin() + kb * block, img.begin() + kb * block + ws_f16_b_halves(N, one));
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
            split(rs[row] * x[e], hi, lo);
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
              d += one ? ahh * bh : al[m * 16 + kk] * bh + ahh * read_b16(sb, start + plane, n, kk) + ahh * bh;
            }
            acc[ct][ws_acc_index(q, i)] += d;
          }
        }
      }
    }
  }
  std::vector<double> c(static_cast<size_t>(kWsRows) * N, NAN);
  std::vector<int> hits(static_cast<size_t>(kWsRows) * N, 0);
  for (int ct = 0; ct < 256; ++ct)
    for (int p = 0; p < N / 16; ++p)
      for (int h = 0; h < 2; ++h) {
        const int row = ws_row(ct, h), col = 16 * p + 4 * (ct & 3);
        const int idx[4] = {8 * p + 2 * h, 8 * p + 2 * h + 1, 8 * p + 4 + 2 * h, 8 * p + 5 + 2 * h};
        for (int e = 0; e < 4; ++e) {
          c[static_cast<size_t>(row) * N + col + e] = acc[ct][idx[e]] / (static_cast<double>(rs[row]) * bs);
          ++hits[static_cast<size_t>(row) * N + col + e];
        }
      }
  for (int h : hits)
    if (h != 1) return INFINITY;
  double err = 0.0, worst = 0.0;
  for (int r = 0; r < kWsRows; ++r)
    for (int n = 0; n < N; ++n) {
      double ref = 0.0, exact = 0.0, scale = 0.0;
      for (int k = 0; k < K; ++k) {
        float ahi, alo, bhi, blo;
        const float a = A[static_cast<size_t>(r) * K + k], b = B[static_cast<size_t>(k) * N + n];
        split(rs[r] * a, ahi, alo);
        split(bs * b, bhi, blo);
        ref += one ? static_cast<double>(ahi) * bhi : static_cast<double>(alo) * bhi + static_cast<double>(ahi) * blo +
                                                           static_cast<double>(ahi) * bhi;
        exact += static_cast<double>(a) * b;
        scale += std::fabs(static_cast<double>(a) * b);
      }
      ref /= static_cast<double>(rs[r]) * bs;
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
    EXPECT_LT(emulated_f16_tile_error(KN, KN, false, rng, &rel), 1e-12) << "K = N = " << KN;
    EXPECT_LT(rel, 1e-6) << "K = N = " << KN;  // 3xTF32-like: every element, whatever its row's scale
  }
}

TEST(WgmmaF16Layout, EmulatedOnePassTileMultipliesToTheRoundedProduct) {
  std::mt19937 rng(37);
  for (int KN : {128, 192}) {
    double rel = 0.0;
    EXPECT_LT(emulated_f16_tile_error(KN, KN, true, rng, &rel), 1e-12) << "K = N = " << KN;
    EXPECT_LT(rel, 2e-3) << "K = N = " << KN;  // one TF32 pass's order
  }
  EXPECT_EQ(ws_f16_b_halves(192, true) * 2, ws_f16_b_halves(192, false));
}

}  // namespace
