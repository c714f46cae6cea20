// The warpgroup tile's operand layout contract (cuda/wgmma_layout.h, cuda/wgmma_tile.cuh), checked
// on the CPU: the host-side TF32 rounding, the column permutation that makes a thread's
// accumulators quads of consecutive columns, and the B image against the A-fragment loads of
// wg_tile, by emulating the instruction's products from the image and the documented fragment
// layouts. The GPU tests check the tile itself; this pins the layout that both sides assume, so
// a change to one side alone fails here without a GPU. The SS form (cuda/wgmma_tile_ss.cuh, A from
// shared memory too): its A stage layout, copy / split chunk assignment and natural-order B image,
// by reading both operands through the descriptors' (start, LBO, SBO) as the instruction does.
#include <gtest/gtest.h>

#include <algorithm>
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

// The SS stage's chunks: every (row, 4 consecutive k) of a stage exactly once, each landing whole in
// one core-matrix row, the stage's floats covered once; 8 consecutive chunks fill one 128-byte core
// matrix (what keeps a quarter warp's copies and split free of bank conflicts).
TEST(WgmmaLayout, SsStageChunksCoverTheStageOnce) {
  for (int kWG : {1, 2})
    for (int kS : {2, 4}) {
      const int floats = wgss_a_stage_floats(kWG, kS), chunks = floats / 4;
      std::vector<int> hit_chunk(static_cast<size_t>(chunks), 0), hit_float(static_cast<size_t>(floats), 0);
      for (int i = 0; i < chunks; ++i) {
        const int row = wgss_chunk_row(i, kS), k = wgss_chunk_k(i, kS);
        ASSERT_TRUE(row >= 0 && row < 64 * kWG && k >= 0 && k < 8 * kS && k % 4 == 0);
        ++hit_chunk[static_cast<size_t>(row) * 2 * kS + k / 4];
        const int o = wgss_a_offset(row, k, kS);
        EXPECT_EQ(o % 4, 0);
        for (int e = 0; e < 4; ++e) {
          EXPECT_EQ(wgss_a_offset(row, k + e, kS), o + e);  // the chunk is contiguous
          ++hit_float[static_cast<size_t>(o + e)];
        }
        if (i % 8 == 0) {
          for (int j = 1; j < 8; ++j) EXPECT_EQ(wgss_a_offset(wgss_chunk_row(i + j, kS), wgss_chunk_k(i + j, kS), kS), o + 4 * j);
        }
      }
      for (int h : hit_chunk) EXPECT_EQ(h, 1);
      for (int h : hit_float) EXPECT_EQ(h, 1);
    }
}

// The float a K-major, no-swizzle wgmma operand read by descriptor (start, LBO, SBO; start in floats,
// offsets in bytes) has at row i (m for A, n for B) and k index kk of the step (PTX ISA, "Shared
// Memory Matrix Layout"): core matrix (i / 8, kk / 4) at i / 8 SBOs and kk / 4 LBOs from the start,
// its rows 16 bytes apart, 4 consecutive k per row.
float read_kmajor(const std::vector<float>& smem, size_t start, int lbo, int sbo, int i, int kk) {
  return smem[start + static_cast<size_t>(i / 8) * (sbo / 4) + static_cast<size_t>(kk / 4) * (lbo / 4) + (i % 8) * 4 + kk % 4];
}

// C = A B as wgss_tile issues it, emulated on the CPU: each k block's A copied chunk by chunk into a
// stage (wgss_chunk_row / _k, wgss_a_offset), split in place into TF32 hi and a lo plane, and the
// products lo*hi, hi*lo, hi*hi of every step read through the descriptors of A's planes
// (wgss_a_step_offset) and of B's natural image (step s of plane p at (2 kb + p) kS + s planes of
// 8 N floats), with the LBO / SBO of wgss_desc; the instruction's column n is logical column
// wgmma_col(n). Reference: the same three products summed directly from A and B in natural order.
// Returns max |C - reference| over the tile.
double ss_emulated_error(int kWG, int kS, int K, int N, int lbo, int sbo, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int rows = 64 * kWG, nkb = K / (8 * kS), stage = wgss_a_stage_floats(kWG, kS);
  std::vector<float> A(static_cast<size_t>(rows) * K), B(static_cast<size_t>(K) * N);
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  const std::vector<float> img = wgmma_b_image_natural(B.data(), K, N, N, kS);
  EXPECT_EQ(img.size(), static_cast<size_t>(nkb) * wg_stage_floats(N, kS));
  std::vector<double> c(static_cast<size_t>(rows) * N, 0.0), ref(static_cast<size_t>(rows) * N, 0.0);
  auto hi = [](float x) { return tf32_rna_host(x); };
  auto lo = [](float x) { return tf32_rna_host(x - tf32_rna_host(x)); };
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k) {
      const float a = A[static_cast<size_t>(r) * K + k];
      for (int n = 0; n < N; ++n) {
        const float b = B[static_cast<size_t>(k) * N + n];
        ref[static_cast<size_t>(r) * N + n] += static_cast<double>(lo(a)) * hi(b) + static_cast<double>(hi(a)) * lo(b) +
                                               static_cast<double>(hi(a)) * hi(b);
      }
    }
  for (int kb = 0; kb < nkb; ++kb) {
    std::vector<float> st(static_cast<size_t>(stage), std::nanf("")), stlo(static_cast<size_t>(stage), std::nanf(""));
    for (int i = 0; i < stage / 4; ++i) {  // the copy, then the split, chunk by chunk
      const int row = wgss_chunk_row(i, kS), k = wgss_chunk_k(i, kS), o = wgss_a_offset(row, k, kS);
      for (int e = 0; e < 4; ++e) {
        const float x = A[static_cast<size_t>(row) * K + 8 * kS * kb + k + e];
        st[static_cast<size_t>(o + e)] = hi(x);
        stlo[static_cast<size_t>(o + e)] = lo(x);
      }
    }
    for (int w = 0; w < kWG; ++w)
      for (int s = 0; s < kS; ++s) {
        const size_t a0 = static_cast<size_t>(wgss_a_step_offset(w, s, kS));
        for (int pair = 0; pair < 3; ++pair) {  // lo*hi, hi*lo, hi*hi
          const std::vector<float>& ap = pair == 0 ? stlo : st;
          const size_t b0 = ((static_cast<size_t>(kb) * 2 + (pair == 1 ? 1 : 0)) * kS + s) * 8 * N;
          for (int m = 0; m < 64; ++m)
            for (int n = 0; n < N; ++n) {
              double sum = 0.0;
              for (int kk = 0; kk < 8; ++kk)
                sum += static_cast<double>(read_kmajor(ap, a0, lbo, sbo, m, kk)) * read_kmajor(img, b0, lbo, sbo, n, kk);
              c[static_cast<size_t>(64 * w + m) * N + wgmma_col(n)] += sum;
            }
        }
      }
  }
  double err = 0.0;
  for (size_t i = 0; i < c.size(); ++i) err = std::max(err, std::fabs(c[i] - ref[i]));  // NaN: a hole read
  for (double x : c)
    if (std::isnan(x)) return INFINITY;
  return err;
}

TEST(WgmmaLayout, SsStageAndNaturalImageThroughTheDescriptorsMultiplyToTheProduct) {
  std::mt19937 rng(17);
  for (int kWG : {1, 2})
    for (int kS : {2, 4})
      for (const auto& shape : std::vector<std::pair<int, int>>{{32, 32}, {64, 96}, {128, 128}, {192, 192}}) {
        if (shape.first % (8 * kS) != 0) continue;
        EXPECT_LT(ss_emulated_error(kWG, kS, shape.first, shape.second, kWgLboBytes, kWgSboBytes, rng), 1e-12)
            << "kWG " << kWG << " kS " << kS << " K " << shape.first << " N " << shape.second;
      }
  // The emulation tells the two offsets apart: the swapped pair reads other elements.
  EXPECT_GT(ss_emulated_error(1, 4, 64, 64, kWgSboBytes, kWgLboBytes, rng), 1e-2);
}

}  // namespace
