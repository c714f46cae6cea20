// The warp-specialised tile's index maps (cuda/wgmma_ws_layout.h, used by cuda/wgmma_ws.cuh:
// sezm-stack-probe variant 106 and the stack's layers under SEZM_CUDA_STACK_WS=1), checked on the CPU against the wgmma
// instruction's documented layouts: a ring stage's A rows as the bulk copies land them, each
// consumer thread's 16-byte fragment loads (free of bank conflicts), the B image of kS = 2 read by
// descriptor per column chunk of 64, and the chunk accumulators folded into the full-width tile that
// wg_store_rows' quads store; in one TF32 pass (ws_product_one) the stage's hi plane alone (ws_b_floats)
// read by one full-width descriptor per k step. The tile is emulated for one 128-row tile: a
// misplaced index anywhere shows as an O(1) error or as an element of C written twice or never.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "ws_tile_emulation.h"
#include "../cuda/wgmma_ws_layout.h"

namespace {

using namespace sezm::cuda;  // the layout under test

TEST(WgmmaWsLayout, StageRowsAreDenseAndEachLandsWholeFromOneCopy) {
  std::vector<int> hit(kWsRows * kWsK, 0);
  for (int r = 0; r < kWsRows; ++r) {
    EXPECT_EQ(ws_a_offset(r, 0) % 4, 0);  // a 16-byte aligned bulk-copy destination
    for (int k = 0; k < kWsK; ++k) {
      EXPECT_EQ(ws_a_offset(r, k), ws_a_offset(r, 0) + k);  // one contiguous 64-byte copy per row
      ++hit[ws_a_offset(r, k)];
    }
  }
  for (int h : hit) EXPECT_EQ(h, 1);
}

// Each 16-byte shared load of a warp is served in four phases of eight lanes (128 bytes each); a
// phase without two lanes on one bank is conflict-free.
TEST(WgmmaWsLayout, FragmentLoadsAreFreeOfBankConflicts) {
  for (int w = 0; w < 8; ++w)
    for (int h = 0; h < 2; ++h)
      for (int phase = 0; phase < 4; ++phase) {
        std::set<int> banks;
        for (int l = 8 * phase; l < 8 * phase + 8; ++l) {
          const int ct = 32 * w + l, o = ws_a_offset(ws_row(ct, h), 4 * (ct & 3));
          for (int e = 0; e < 4; ++e) banks.insert((o + e) % 32);
        }
        EXPECT_EQ(banks.size(), 32u) << "warp " << w << " row half " << h << " phase " << phase;
      }
}

// The instruction's k of fragment column c of step s is B's row 8 s' + c of the image's step (core
// matrix row half c / 4, element c % 4), which wgmma_b_image (kS = 2) fills with B row
// 4 (c % 4) + 2 s + c / 4 of the block: ws_frag_k must name the same row.
TEST(WgmmaWsLayout, FragmentKMatchesTheImagePermutation) {
  const int K = 16, N = 64;
  std::vector<float> B(K * N);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) B[k * N + n] = static_cast<float>(k);  // exact in TF32: hi = k, lo = 0
  const std::vector<float> img = wgmma_b_image(B.data(), K, N, N, kWsKs);
  for (int s = 0; s < kWsKs; ++s)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(img[static_cast<size_t>(s) * (N / 8) * 64 + (c / 4) * 32 + c % 4], static_cast<float>(ws_frag_k(s, c)));
  // Thread t's columns t and t + 4 of both steps: the four consecutive k of its 16-byte load.
  for (int t = 0; t < 4; ++t)
    for (int s = 0; s < kWsKs; ++s) {
      EXPECT_EQ(ws_frag_k(s, t), 4 * t + 2 * s);
      EXPECT_EQ(ws_frag_k(s, t + 4), 4 * t + 2 * s + 1);
    }
}

// A K-major, no-swizzle operand read by descriptor (PTX ISA "Shared Memory Matrix Layout"; LBO 128,
// SBO 256 bytes as wg_desc): column n, k index kk of the step; NaN outside the stage's B.
float read_b(const std::vector<float>& stage, size_t start, int n, int kk) {
  const size_t i = start + static_cast<size_t>(n / 8) * (kWgSboBytes / 4) + static_cast<size_t>(kk / 4) * (kWgLboBytes / 4) +
                   (n % 8) * 4 + kk % 4;
  return i < stage.size() ? stage[i] : NAN;
}

// One tile C = A B as wgws_probe_k computes it: per block, the A stage and the B stage (the image
// block's first ws_b_floats floats, as ws_fill copies them), each consumer thread's loads and
// fragments (rows ws_row, k ws_frag_k: the documented m64k8 TF32 A fragment of warp w, lane (g, t):
// a0 (16 w + g, t), a1 (+8, t), a2 (g, t + 4), a3 (+8, t + 4)), per chunk q and step s the product
// with the image's hi + lo read through the chunk's descriptor, the result registers of the m64n64
// accumulator (reg i: row 16 w + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 t + i % 2) added to
// acc[ws_acc_index(q, i)], and finally wg_quad's stores (quad p, half h: logical columns 16 p + 4 t
// .. + 3 from acc[8p + 2h], [8p + 2h + 1], [8p + 4 + 2h], [8p + 5 + 2h], at row ws_row(ct, h)).
// `one` (one TF32 pass, ws_product_one): the fragments rounded to TF32, per step one m64nN product
// (registers as above, i < N / 2, into acc[i]) with the hi plane read through the step's descriptor;
// the reference is then the product of the rounded A and B.
double emulated_tile_error(int K, int N, bool one, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A(static_cast<size_t>(kWsRows) * K), B(static_cast<size_t>(K) * N);
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  const std::vector<float> img = wgmma_b_image(B.data(), K, N, N, kWsKs);
  const size_t block = static_cast<size_t>(wg_stage_floats(N, kWsKs)), plane = static_cast<size_t>(kWsKs) * 8 * N;
  std::vector<std::vector<double>> acc(256, std::vector<double>(N / 2, 0.0));
  for (int kb = 0; kb < K / kWsK; ++kb) {
    std::vector<float> st(kWsRows * kWsK);
    for (int r = 0; r < kWsRows; ++r)
      for (int k = 0; k < kWsK; ++k) st[ws_a_offset(r, k)] = A[static_cast<size_t>(r) * K + kWsK * kb + k];
    const std::vector<float> sb(img.begin() + kb * block, img.begin() + kb * block + ws_b_floats(N, one));
    // Per warpgroup, the m64 x k8 fragment matrix of each step, assembled from the threads' registers.
    for (int wg = 0; wg < 2; ++wg)
      for (int s = 0; s < kWsKs; ++s) {
        std::vector<double> af(64 * 8, NAN);
        for (int ct = 128 * wg; ct < 128 * wg + 128; ++ct) {
          const int w = (ct >> 5) & 3, g = (ct & 31) >> 2, t = ct & 3;
          const float* x0 = &st[ws_a_offset(ws_row(ct, 0), 4 * t)];
          const float* x1 = &st[ws_a_offset(ws_row(ct, 1), 4 * t)];
          float a[4] = {x0[2 * s], x1[2 * s], x0[2 * s + 1], x1[2 * s + 1]};
          if (one)
            for (float& x : a) x = tf32_rna_host(x);
          af[(16 * w + g) * 8 + t] = a[0];
          af[(16 * w + g + 8) * 8 + t] = a[1];
          af[(16 * w + g) * 8 + t + 4] = a[2];
          af[(16 * w + g + 8) * 8 + t + 4] = a[3];
        }
        if (one) {  // one full-width product per step: the step's hi plane from its start
          const size_t start = s * 8 * static_cast<size_t>(N);
          for (int ct = 128 * wg; ct < 128 * wg + 128; ++ct) {
            const int w = (ct >> 5) & 3, g = (ct & 31) >> 2, t = ct & 3;
            for (int i = 0; i < N / 2; ++i) {
              const int m = 16 * w + g + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * t + i % 2;
              double d = 0.0;
              for (int kk = 0; kk < 8; ++kk) d += af[m * 8 + kk] * static_cast<double>(read_b(sb, start, n, kk));
              acc[ct][i] += d;
            }
          }
          continue;
        }
        for (int q = 0; q < N / kWsChunk; ++q) {
          const size_t start = s * 8 * static_cast<size_t>(N) + ws_b_chunk_offset(q);
          for (int ct = 128 * wg; ct < 128 * wg + 128; ++ct) {
            const int w = (ct >> 5) & 3, g = (ct & 31) >> 2, t = ct & 3;
            for (int i = 0; i < kWsChunk / 2; ++i) {
              const int m = 16 * w + g + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * t + i % 2;
              double d = 0.0;
              for (int kk = 0; kk < 8; ++kk)
                d += af[m * 8 + kk] * (static_cast<double>(read_b(sb, start, n, kk)) + read_b(sb, start + plane, n, kk));
              acc[ct][ws_acc_index(q, i)] += d;
            }
          }
        }
      }
  }
  std::vector<double> c;
  if (!sezm_test::ws_store_quads(acc, N, c)) return INFINITY;
  double err = 0.0;
  for (int r = 0; r < kWsRows; ++r)
    for (int n = 0; n < N; ++n) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k) {
        const float x = B[static_cast<size_t>(k) * N + n], hi = tf32_rna_host(x), lo = tf32_rna_host(x - hi);
        const float a = A[static_cast<size_t>(r) * K + k];
        ref += one ? static_cast<double>(tf32_rna_host(a)) * hi : static_cast<double>(a) * (static_cast<double>(hi) + lo);
      }
      const double d = std::fabs(c[static_cast<size_t>(r) * N + n] - ref);
      if (!(d <= err)) err = d;  // NaN (a fragment element never loaded) propagates
    }
  return err;
}

TEST(WgmmaWsLayout, EmulatedTileMultipliesToTheProduct) {
  std::mt19937 rng(23);
  for (int KN : {128, 192}) EXPECT_LT(emulated_tile_error(KN, KN, false, rng), 1e-12) << "K = N = " << KN;
}

// One TF32 pass: the stage's hi plane (the image block's first ws_b_floats(N, true) floats) holds
// every B element the full-width products read, and their accumulators are the tile's quads.
TEST(WgmmaWsLayout, EmulatedOnePassTileMultipliesToTheRoundedProduct) {
  std::mt19937 rng(29);
  for (int KN : {128, 192}) EXPECT_LT(emulated_tile_error(KN, KN, true, rng), 1e-12) << "K = N = " << KN;
  EXPECT_EQ(ws_b_floats(192, false), wg_stage_floats(192, kWsKs));  // 3xTF32: the whole block
}

}  // namespace
