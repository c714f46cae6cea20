#pragma once
// Host-side layout of the B operand of the warpgroup tile product (cuda/wgmma_tile.cuh): the
// weights split into TF32 hi and lo planes, their k and n indices permuted and laid out as the
// tensor cores read them. Plain C++ so that the weight upload (device_weights.cpp) builds the
// images; the why of each permutation is in wgmma_tile.cuh.
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef __CUDACC__
#define SEZM_WG_HD __host__ __device__
#else
#define SEZM_WG_HD
#endif

namespace sezm::cuda {

// k steps of 8 per k block of the B image of a product of width N: 4 (blocks of 32), or 2 for
// N > 128, so that the two stages of the widest stack product in the 3xTF32 split (2 M1 = 192 for
// C.pt) fit beside another CTA's on one SM (stack.cu's SmemPlan). The image (wgmma_b_image) and
// the tile (wg_tile) of a width agree on it.
SEZM_WG_HD constexpr int wg_ks(int N) { return N > 128 ? 2 : 4; }
// Image k blocks per shared-memory stage: one in the 3xTF32 split; in one TF32 pass (which stages
// only the hi plane) as many as make 32 k, so that its barriers stay one per 32 k.
SEZM_WG_HD constexpr int wg_kb(int N, bool split) { return split ? 1 : 4 / wg_ks(N); }
// Floats of one k block of the B image for width N: two planes (hi, lo) x kS k steps x 8 k x N.
SEZM_WG_HD constexpr int wg_stage_floats(int N, int kS) { return 2 * kS * 8 * N; }
// Shared memory (floats) of wg_tile: two stages of kB blocks (one pass: of their hi planes only).
SEZM_WG_HD constexpr int wg_smem_floats(int N, int kS, bool split, int kB = 1) {
  return 2 * kB * (split ? 2 : 1) * kS * 8 * N;
}

// Logical column of the instruction's column n (the quad permutation, wgmma_tile.cuh).
inline int wgmma_col(int n) {
  return 16 * (n / 16) + 4 * ((n % 8) / 2) + 2 * ((n / 8) % 2) + (n % 2);
}

// TF32 rounding as cvt.rna.tf32.f32 does it (nearest, ties away from zero), for finite x.
inline float tf32_rna_host(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xFFFFE000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// The B image (host) of B (K x N, row stride ldb) for k blocks of kS steps of 8: for each k
// block kb, plane p (0: hi, 1: lo), step s, column group ng (N / 8), k half kh (0, 1), row r
// (0..7), element c (0..3):
//   image[(((kb * 2 + p) * kS + s) * (N / 8) + ng) * 64 + kh * 32 + r * 4 + c]
//     = split_p(B[8 kS kb + 2 kS c + 2 s + kh][wgmma_col(8 ng + r)])
// i.e. each step's plane is N / 8 x 2 "core matrices" of 8 rows x 16 bytes (no swizzle), the
// two k halves of a column group adjacent (128 bytes apart), column groups 256 bytes apart.
// N % 16 == 0; rows of B beyond K are zero.
inline std::vector<float> wgmma_b_image(const float* B, int K, int N, int ldb, int kS) {
  const int nkb = (K + 8 * kS - 1) / (8 * kS);
  std::vector<float> img(static_cast<size_t>(nkb) * wg_stage_floats(N, kS), 0.0f);
  for (int kb = 0; kb < nkb; ++kb)
    for (int s = 0; s < kS; ++s)
      for (int ng = 0; ng < N / 8; ++ng)
        for (int kh = 0; kh < 2; ++kh)
          for (int r = 0; r < 8; ++r)
            for (int c = 0; c < 4; ++c) {
              const int k = 8 * kS * kb + 2 * kS * c + 2 * s + kh;
              const float x = k < K ? B[static_cast<size_t>(k) * ldb + wgmma_col(8 * ng + r)] : 0.0f;
              const float hi = tf32_rna_host(x), lo = tf32_rna_host(x - hi);
              for (int p = 0; p < 2; ++p) {
                const size_t o = ((static_cast<size_t>(kb) * 2 + p) * kS + s) * (N / 8) + ng;
                img[o * 64 + kh * 32 + r * 4 + c] = p == 0 ? hi : lo;
              }
            }
  return img;
}

// The tensor cores read B by descriptor in wgmma's K-major, no-swizzle layout: "core matrices" of
// 8 rows (n) x 16 bytes (4 consecutive k), 128 contiguous bytes each, a row 16 bytes after the
// previous one; a k step of 8 is two core matrices along k. The descriptor gives the byte offset
// between core matrices adjacent in k (the "leading dimension byte offset", LBO) and between core
// matrices adjacent in n, i.e. 8-row groups (the "stride dimension byte offset", SBO); wg_desc
// (wgmma_tile.cuh) makes it with this pair, checked on the H200, where the swapped pair gave garbage.
constexpr int kWgLboBytes = 128;  // k-adjacent core matrices: the two k halves of a step
constexpr int kWgSboBytes = 256;  // 8-row (n) groups

}  // namespace sezm::cuda
