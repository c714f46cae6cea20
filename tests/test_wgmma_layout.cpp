// The warpgroup tile's operand layout contract (cuda/wgmma_layout.h, cuda/wgmma_tile.cuh), checked
// on the CPU: the host-side TF32 rounding, the column permutation that makes a thread's
// accumulators quads of consecutive columns, and the B image against the A-fragment loads of
// wg_tile, by emulating the instruction's products from the image and the documented fragment
// layouts. The GPU tests check the tile itself; this pins the layout that both sides assume, so
// a change to one side alone fails here without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "../cuda/wgmma_layout.h"

namespace {

using namespace sezm::cuda;  // the layout under test (wgmma_layout.h)

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(WgmmaLayout, Tf32RoundingIsNearestTiesAwayOnTenMantissaBits) {
  // TF32 keeps 10 explicit mantissa bits: the ulp at 1 is 2^-10.
  EXPECT_EQ(tf32_rna_host(1.0f + std::ldexp(1.0f, -12)), 1.0f);                         // below half: down
  EXPECT_EQ(tf32_rna_host(1.0f + std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -10));  // tie: away
  EXPECT_EQ(tf32_rna_host(-1.0f - std::ldexp(1.0f, -11)), -1.0f - std::ldexp(1.0f, -10));
  EXPECT_EQ(tf32_rna_host(1.0f + 3 * std::ldexp(1.0f, -12)), 1.0f + std::ldexp(1.0f, -10));  // above half: up
  // Carry into the exponent.
  EXPECT_EQ(tf32_rna_host(from_bits(0x3FFFF000u)), 2.0f);
  // hi + lo carries all but ~2 of fp32's 24 bits (the 3xTF32 split).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(rng), hi = tf32_rna_host(x), lo = tf32_rna_host(x - hi);
    uint32_t bh;
    std::memcpy(&bh, &hi, 4);
    EXPECT_EQ(bh & 0x1FFFu, 0u);
    EXPECT_LE(std::fabs(static_cast<double>(x) - hi - lo), std::ldexp(std::fabs(x), -21));
  }
}

TEST(WgmmaLayout, ColumnPermutationGivesEachThreadQuadsOfConsecutiveColumns) {
  for (int N : {32, 64, 96, 128, 192}) {
    std::set<int> seen;
    for (int n = 0; n < N; ++n) {
      const int c = wgmma_col(n);
      EXPECT_EQ(c / 16, n / 16);  // within its 16-column group
      seen.insert(c);
    }
    EXPECT_EQ(static_cast<int>(seen.size()), N);
    // Thread t of a row holds the instruction's columns 16p + 2t, +1 (n8 tile 2p) and 16p + 8 + 2t,
    // +1 (tile 2p + 1): logical columns 16p + 4t .. + 3 in that order (wg_quad).
    for (int p = 0; p < N / 16; ++p)
      for (int t = 0; t < 4; ++t) {
        const int phys[4] = {16 * p + 2 * t, 16 * p + 2 * t + 1, 16 * p + 8 + 2 * t, 16 * p + 9 + 2 * t};
        for (int q = 0; q < 4; ++q) EXPECT_EQ(wgmma_col(phys[q]), 16 * p + 4 * t + q);
      }
  }
}

// C = A B through the image and the fragment layouts, as wg_tile issues the products: for k block
// kb and step s, fragment column c (0..7) of every row is A(row, 8 kS kb + 2 kS (c % 4) + 2 s +
// c / 4) (thread t = c % 4 loads 2 kS consecutive k from 8 kS kb + 2 kS t; wg_tile takes elements
// 2s and 2s + 1 of them), and B's row c of the step is the image's core-matrix row kh = c / 4,
// element c % 4, of the instruction's column n = 8 ng + r, which is logical column wgmma_col(n).
TEST(WgmmaLayout, ImageAndFragmentLoadsMultiplyToTheProduct) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int kS : {2, 4})
    for (const auto& shape : std::vector<std::pair<int, int>>{{32, 32}, {96, 32}, {128, 128}, {192, 192}, {32, 96}, {40, 64}}) {
      const int K = shape.first, N = shape.second, rows = 5;
      std::vector<float> A(static_cast<size_t>(rows) * K), B(static_cast<size_t>(K) * N);
      for (float& x : A) x = u(rng);
      for (float& x : B) x = u(rng);
      const std::vector<float> img = wgmma_b_image(B.data(), K, N, N, kS);
      const int nkb = (K + 8 * kS - 1) / (8 * kS);
      ASSERT_EQ(img.size(), static_cast<size_t>(nkb) * wg_stage_floats(N, kS));
      for (int row = 0; row < rows; ++row) {
        std::vector<double> c(N, 0.0), exact(N, 0.0);
        // The product with B as the split carries it (hi + lo, the ~2 bits below lo dropped), so any
        // misplaced element shows as an O(1) difference and the rest is double rounding.
        for (int k = 0; k < K; ++k)
          for (int n = 0; n < N; ++n) {
            const float x = B[static_cast<size_t>(k) * N + n], hi = tf32_rna_host(x), lo = tf32_rna_host(x - hi);
            exact[n] += static_cast<double>(A[row * K + k]) * (static_cast<double>(hi) + lo);
          }
        for (int kb = 0; kb < nkb; ++kb)
          for (int s = 0; s < kS; ++s)
            for (int cc = 0; cc < 8; ++cc) {
              const int k = 8 * kS * kb + 2 * kS * (cc % 4) + 2 * s + cc / 4;
              const double a = k < K ? A[row * K + k] : 0.0;
              for (int n = 0; n < N; ++n) {
                const int ng = n / 8, r = n % 8, kh = cc / 4, e = cc % 4;
                double b = 0.0;
                for (int p = 0; p < 2; ++p)  // hi + lo
                  b += img[((((static_cast<size_t>(kb) * 2 + p) * kS + s) * (N / 8) + ng) * 64) + kh * 32 + r * 4 + e];
                c[wgmma_col(n)] += a * b;
              }
            }
        for (int n = 0; n < N; ++n) EXPECT_NEAR(c[n], exact[n], 1e-12) << "kS " << kS << " K " << K << " N " << N;
      }
    }
}

}  // namespace
