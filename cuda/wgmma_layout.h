#pragma once
// Host-side layout of the B operand of the warpgroup tile product (cuda/wgmma_tile.cuh): the
// weights split into TF32 hi and lo planes, their k and n indices permuted and laid out as the
// tensor cores read them. Plain C++ so that the weight upload (device_weights.cpp) builds the
// images; the why of each permutation is in wgmma_tile.cuh. Below them, the layouts of the SS form
// (cuda/wgmma_tile_ss.cuh, A from shared memory as well): A's stage layout and a natural-order B image.
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
// The image with k (k block kb, step s, k half kh, element c) -> the row of B it holds.
template <class KOf>
std::vector<float> wgmma_b_image_k(const float* B, int K, int N, int ldb, int kS, KOf k_of) {
  const int nkb = (K + 8 * kS - 1) / (8 * kS);
  std::vector<float> img(static_cast<size_t>(nkb) * wg_stage_floats(N, kS), 0.0f);
  for (int kb = 0; kb < nkb; ++kb)
    for (int s = 0; s < kS; ++s)
      for (int ng = 0; ng < N / 8; ++ng)
        for (int kh = 0; kh < 2; ++kh)
          for (int r = 0; r < 8; ++r)
            for (int c = 0; c < 4; ++c) {
              const int k = k_of(kb, s, kh, c);
              const float x = k < K ? B[static_cast<size_t>(k) * ldb + wgmma_col(8 * ng + r)] : 0.0f;
              const float hi = tf32_rna_host(x), lo = tf32_rna_host(x - hi);
              for (int p = 0; p < 2; ++p) {
                const size_t o = ((static_cast<size_t>(kb) * 2 + p) * kS + s) * (N / 8) + ng;
                img[o * 64 + kh * 32 + r * 4 + c] = p == 0 ? hi : lo;
              }
            }
  return img;
}
inline std::vector<float> wgmma_b_image(const float* B, int K, int N, int ldb, int kS) {
  return wgmma_b_image_k(B, K, N, ldb, kS, [kS](int kb, int s, int kh, int c) { return 8 * kS * kb + 2 * kS * c + 2 * s + kh; });
}

// ---- the SS form (cuda/wgmma_tile_ss.cuh: A from shared memory too) ----
// k steps per block of the engine's SS products (stack.cu's forward, Dims::stack_ss): 16-deep
// blocks keep the 192-wide product's stages beside the gate tables at two CTAs per SM.
constexpr int kWgSsKs = 2;
// Both operands are read by descriptor in wgmma's K-major, no-swizzle layout: "core matrices" of 8
// rows (m for A, n for B) x 16 bytes (4 consecutive k), 128 contiguous bytes each, a row 16 bytes
// after the previous one. A k step of 8 is two core matrices along k. The descriptor gives the
// byte offset between core matrices adjacent in k (the "leading dimension byte offset", LBO) and
// between core matrices adjacent in m / n, i.e. 8-row groups (the "stride dimension byte offset",
// SBO). A and B use wg_desc's pair (wgmma_tile.cuh; for B checked on the H200, where the swapped
// pair gave garbage; A's descriptor is the same convention, first run by sezm-stack-probe 8-12).
constexpr int kWgLboBytes = 128;  // k-adjacent core matrices: the two k halves of a step
constexpr int kWgSboBytes = 256;  // 8-row (m or n) groups

// One stage of the SS tile's A: 64 kWG rows x 8 kS k (a k block), fp32 or one TF32 plane.
SEZM_WG_HD constexpr int wgss_a_stage_floats(int kWG, int kS) { return 64 * kWG * 8 * kS; }
// Float offset of A(row, k) (row < 64 kWG, k < 8 kS) in a stage, in NATURAL k order: warpgroup w =
// row / 64, step s = k / 8, row group g = (row % 64) / 8, k half h = (k % 8) / 4, then row % 8
// (16 bytes apart) and k % 4. Each (w, s) is a contiguous 2 KiB plane of 8 groups x 2 halves, so the
// descriptor of warpgroup w's step s starts at wgss_a_step_offset and has LBO 128, SBO 256 (the
// layout of one step of the B image, with m in place of n). A 16-byte chunk of 4 consecutive k
// (k % 4 == 0) lands whole in one core-matrix row.
SEZM_WG_HD constexpr int wgss_a_offset(int row, int k, int kS) {
  return (((row / 64) * kS + k / 8) * 8 + (row % 64) / 8) * 64 + ((k % 8) / 4) * 32 + (row % 8) * 4 + k % 4;
}
SEZM_WG_HD constexpr int wgss_a_step_offset(int w, int s, int kS) { return (w * kS + s) * 512; }
// The 16-byte chunk i (0 .. 128 kWG kS - 1) of a stage, as the stage's copy and split take
// them: row 8 (i / (16 kS)) + i % 8, k 4 ((i / 8) % (2 kS)). Eight consecutive chunks are the 8 rows of one core matrix: 128 contiguous bytes of shared memory per
// quarter warp (no bank conflicts), and a warp reads 8 rows x 64 bytes of global memory.
SEZM_WG_HD constexpr int wgss_chunk_row(int i, int kS) { return 8 * (i / (16 * kS)) + i % 8; }
SEZM_WG_HD constexpr int wgss_chunk_k(int i, int kS) { return 4 * ((i / 8) % (2 * kS)); }
// Shared memory (floats) of wgss_tile: two stages of the B image's block (one pass: its hi plane),
// kStages stages of A (fp32 landing zone, then its TF32 hi plane in place), and for the 3xTF32 split
// two A lo planes.
SEZM_WG_HD constexpr int wgss_smem_floats(int N, int kS, int kWG, int kStages, bool split) {
  return 2 * (split ? 2 : 1) * kS * 8 * N + (kStages + (split ? 2 : 0)) * wgss_a_stage_floats(kWG, kS);
}

// The B image of the SS form: as wgmma_b_image (TF32 hi and lo planes, each step N / 8 x 2 core
// matrices, LBO 128, SBO 256, the same column permutation wgmma_col, so the accumulators come as
// the same quads) but in NATURAL k order, matching A's: for k block kb, plane p, step s, column
// group ng, k half kh, row r, element c:
//   image[(((kb * 2 + p) * kS + s) * (N / 8) + ng) * 64 + kh * 32 + r * 4 + c]
//     = split_p(B[8 kS kb + 8 s + 4 kh + c][wgmma_col(8 ng + r)])
// N % 16 == 0; rows of B beyond K are zero.
inline std::vector<float> wgmma_b_image_natural(const float* B, int K, int N, int ldb, int kS) {
  return wgmma_b_image_k(B, K, N, ldb, kS, [kS](int kb, int s, int kh, int c) { return 8 * kS * kb + 8 * s + 4 * kh + c; });
}

}  // namespace sezm::cuda
