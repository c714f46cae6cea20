// The binary16 rows of `precision tf32` (cuda/f16_rows.cuh; the scale choice and the scales'
// layout in cuda/f16_rows_layout.h), checked on the CPU: the per-group power-of-two scale brings
// every group's largest |value| into [2^14, 2^15) whatever its magnitude, so that a round trip
// through binary16 (cvt.rn.f16.f32, emulated by wgmma_f16_layout.h's f16_rn_host) keeps every value
// within 2^-11 of itself (TF32's ten fraction bits) where it lies within 2^28 of the group's
// largest, the rest within 2^-39 of that largest, and none overflows; and the scales' runs are
// 16-byte aligned, disjoint from the halves and from each other, and inside the fp32 rows' buffer,
// the 128 floats that the chained kernels' bulk copy reads from an item's first row included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../cuda/f16_rows_layout.h"
#include "../cuda/wgmma_f16_layout.h"

namespace {

using namespace sezm::cuda;

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

TEST(F16Rows, TheScaleBringsTheGroupMaxIntoRange) {
  for (int e = -149; e <= 127; ++e)
    for (const double mant : {1.0, 1.37, 1.9999}) {
      const float m = static_cast<float>(std::ldexp(mant, e));
      if (!std::isfinite(m) || m == 0.0f) continue;
      const int k = f16_scale_k(bits_of(m));
      const float mult = float_of(f16_pow2_bits(k)), inv = float_of(f16_pow2_bits(-k));
      EXPECT_EQ(mult, std::ldexp(1.0f, k)) << m;
      EXPECT_EQ(inv, std::ldexp(1.0f, -k)) << m;
      EXPECT_EQ(mult * inv, 1.0f) << m;
      const double s = static_cast<double>(m) * mult;
      EXPECT_LT(s, 32768.0) << m;                         // below binary16's largest, 65504
      if (m >= std::ldexp(1.0f, -112)) EXPECT_GE(s, 16384.0) << m;  // else clamped: 2^126
    }
  EXPECT_EQ(f16_scale_k(bits_of(0.0f)), 126);
  EXPECT_EQ(f16_scale_k(bits_of(INFINITY)), -114);  // inf x 2^-114 stays infinite: no silent value
  EXPECT_EQ(f16_scale_k(bits_of(NAN)), -114);
}

TEST(F16Rows, TheRoundTripKeepsTf32PrecisionAtAnyScale) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0), spread(0.0, 40.0);
  for (int e = -60; e <= 60; e += 3) {
    // A group of 192 values (the |m| = 1 columns of a row) over 40 binary orders below 2^e.
    std::vector<float> v(192);
    float m = 0.0f;
    for (float& x : v) {
      x = static_cast<float>(std::ldexp(u(rng), e) * std::exp2(-spread(rng)));
      m = std::fmax(m, std::fabs(x));
    }
    const int k = f16_scale_k(bits_of(m));
    const float mult = float_of(f16_pow2_bits(k)), inv = float_of(f16_pow2_bits(-k));
    for (const float x : v) {
      const float back = f16_to_float_host(f16_rn_host(x * mult)) * inv;
      ASSERT_TRUE(std::isfinite(back)) << x;
      const double err = std::fabs(static_cast<double>(back) - x);
      if (std::fabs(x) >= std::ldexp(static_cast<double>(m), -28))
        EXPECT_LE(err, std::ldexp(std::fabs(static_cast<double>(x)), -11)) << x << " in a group of max " << m;
      else
        EXPECT_LE(err, std::ldexp(static_cast<double>(m), -39)) << x << " in a group of max " << m;
    }
  }
}

TEST(F16Rows, TheScaleRunsAreAlignedDisjointAndInside) {
  const int ROW = 320;  // Dm Cf for L = 3, Cf = 32: the chains' shape
  for (const int F : {2, 4})
    for (const int Ec : {1, 2, 3, 127, 128, 129, 1000, 4097}) {
      SCOPED_TRACE("F " + std::to_string(F) + ", Ec " + std::to_string(Ec));
      const size_t halves_end = static_cast<size_t>(F) * Ec * ROW / 2, buffer = static_cast<size_t>(F) * Ec * ROW;
      std::set<size_t> seen;
      for (int g = 0; g < 2; ++g)
        for (int f = 0; f < F; ++f) {
          EXPECT_EQ(f16_scale_at(F, Ec, ROW, g, f, 0) % 4, 0u);  // 16-byte aligned runs
          for (int i = 0; i < Ec; ++i) {
            const size_t at = f16_scale_at(F, Ec, ROW, g, f, i);
            EXPECT_GE(at, halves_end);
            EXPECT_TRUE(seen.insert(at).second) << g << " " << f << " " << i;
          }
          for (int y = 0; y < Ec; y += 128) EXPECT_LE(f16_scale_at(F, Ec, ROW, g, f, y) + 128, buffer) << g << " " << f << " " << y;
        }
    }
}

// Fast mode's buffer of a call's binary16 rows (f16_kept_offset, f16_kept_floats): chunks of whole
// centres (here of 1 to 9 edges each, and one of 4,097 edges), each chunk's halves and scale runs
// (rounded up to 4 floats) inside its own span, before the next chunk's start, every chunk's base
// 128-byte aligned and its runs 16-byte aligned, and the last run's bulk-copy overread inside the
// buffer.
TEST(F16Rows, KeptChunksAreAlignedDisjointAndInside) {
  const int ROW = 320;
  for (const int F : {2, 4}) {
    SCOPED_TRACE("F " + std::to_string(F));
    std::mt19937 rng(7);
    std::vector<int> centre_edges(300);
    for (int& e : centre_edges) e = 1 + static_cast<int>(rng() % 9);
    centre_edges[150] = 4097;
    const size_t N = centre_edges.size();
    size_t E = 0;
    for (int e : centre_edges) E += e;
    const size_t buffer = f16_kept_floats(F, ROW, E, N);
    // chunks: 1, 2, 3, ... centres
    size_t n0 = 0, e0 = 0, prev_end = 0;
    for (size_t len = 1; n0 < N; ++len) {
      const size_t n1 = std::min(N, n0 + len);
      size_t Ec = 0;
      for (size_t n = n0; n < n1; ++n) Ec += centre_edges[n];
      const size_t base = f16_kept_offset(F, ROW, e0, n0);
      EXPECT_EQ(base % 32, 0u) << n0;  // 128-byte aligned, as the fp32 rows' chunks
      EXPECT_GE(base, prev_end) << n0;
      const int ec = static_cast<int>(Ec);
      for (int g = 0; g < 2; ++g)
        for (int f = 0; f < F; ++f) {
          EXPECT_EQ((base + f16_scale_at(F, ec, ROW, g, f, 0)) % 4, 0u);
          for (int y = 0; y < ec; y += 128) EXPECT_LE(base + f16_scale_at(F, ec, ROW, g, f, y) + 128, buffer);
        }
      prev_end = base + f16_scale_at(F, ec, ROW, 1, F - 1, 0) + (static_cast<size_t>(ec) + 3) / 4 * 4;
      EXPECT_LE(prev_end, buffer);
      n0 = n1;
      e0 += Ec;
    }
    EXPECT_EQ(e0, E);
  }
}

}  // namespace
