#pragma once
// The register-tiled inner product of the SO(2) stack (`tile_mma`) and its tile geometry, shared
// by the stack layers (stack.cu), the per-chunk radial tables (radial_tables.cu) and the tile
// probe (bench/stack_probe.cu). Everything here is inlined into its callers (no -rdc).
// Arithmetic (TileMath): kIeee, IEEE fp32 FFMA (the engine's default); kTf32, one TF32 pass on
// the tensor cores (mma.sync m16n8k8, sm_80+; `precision tf32`); kTf32x3, the 3xTF32 split (a =
// a_hi + a_lo, each part rounded to TF32; a_hi b_hi + a_hi b_lo + a_lo b_hi, fp32 accumulation):
// fp32-accurate, but at this tile no faster than FFMA (docs/performance.md, "Tensor cores"), so
// only sezm-stack-probe runs it; kWg3 / kWg1, the same two on Hopper's warpgroup instructions
// (wgmma_tile.cuh, sm_90a; 64-row tiles of one warpgroup, two rows x N / 16 quads per thread, B
// an image prepared at upload): the engine's default / `precision tf32` where Dims::wgmma says so.
// Operands are staged in shared memory; a thread's accumulators always come as quads of four
// consecutive columns of one row (tile_row / tile_col say which), so the epilogues are shared.
#include <cstdint>

#include "model_dev.cuh"
#include "wgmma_tile.cuh"

namespace sezm::cuda {

enum TileMath { kIeee = 0, kTf32 = 1, kTf32x3 = 3, kWg1 = 11, kWg3 = 13 };
__host__ __device__ constexpr bool is_wg(int kM) { return kM >= kWg1; }

namespace {

// CTA: 256 threads (8 warps) over BM rows x 64 NC4 columns; each thread owns TR rows x NC4 column
// quads. TR = 4 (64-row tiles): measured on the H200 at 4096 atoms, two such CTAs per SM
// (<= 128 registers) beat one 128-row CTA by 11 ms per call, and the 64-row tile fits every
// supported GPU's shared memory.
// kIeee: thread (ty, tx) of a 16 x 16 grid owns rows ty*TR.. and the quads 64 j + 4 tx; a warp is
// 4 thread-rows x 8 thread-columns, so its B reads per column quad are 128 contiguous bytes (one
// shared-memory wavefront) and its A reads 64 bytes.
// Tensor cores: the 8 warps are 2 (rows) x 4 (columns); warp (wm, wn) owns rows 32 wm.. +32 (two
// m16 tiles) and, in each 64-column group j, the 16 columns 64 j + 16 wn.. (two n8 tiles). Lane
// (g, t) = (lane / 4, lane % 4) holds in the mma accumulator layout rows g, g+8 of each m16 tile
// and columns 2t, 2t+1 of each n8 tile; B's columns are permuted in shared memory so that those
// four accumulators of a row are the logical columns 4t..4t+3 of the warp's 16: thread rows are
// 32 wm + 8 r + g (r < 4), quads 64 j + 16 wn + 4 t.
constexpr int kBK = 16, kThreads = 256, kTC = 16, kTRw = kThreads / kTC;
static_assert(kThreads == 256 && kTC == 16, "tile_tx/tile_ty assume 8 warps as 4 x 8 thread blocks");
__device__ __forceinline__ int tile_tx() { return (threadIdx.x & 7) | (((threadIdx.x >> 5) & 1) << 3); }
__device__ __forceinline__ int tile_ty() { return ((threadIdx.x >> 3) & 3) | ((threadIdx.x >> 6) << 2); }

template <int TR>
struct Tile {
  static constexpr int BM = TR * kTRw;
  static constexpr int AS = BM + 4;   // kIeee: As k-major, row stride (a thread's rows contiguous)
  static constexpr int AR = kBK + 4;  // tensor cores: As row-major, row stride (= 20: the fragment
                                      // reads (g, t) hit 32 distinct banks)
  static constexpr int kAFloats = kBK * AS > BM * AR ? kBK * AS : BM * AR;  // As, either layout
};
// Shared-memory floats of the operand tiles for an arithmetic: the 3xTF32 split stages a hi and a
// lo plane of A and of B (split once per CTA, not at each fragment read).
template <int TR, int kM>
__host__ __device__ constexpr int a_floats() { return (kM == kTf32x3 ? 2 : 1) * Tile<TR>::kAFloats; }
template <int kM>
__host__ __device__ constexpr int b_floats(int np) { return (kM == kTf32x3 ? 2 : 1) * kBK * np; }

// Rows and threads of a CTA's tile: 16 TR rows and 256 threads, or on the warpgroup tile one
// warpgroup of 128 threads over 64 rows (TR = 2: each thread rows r and r + 8), two CTAs per SM
// so that one CTA's epilogues overlap the other's tensor-core products.
template <int TR, int kM>
__host__ __device__ constexpr int tile_bm() {
  return is_wg(kM) ? 64 : Tile<TR>::BM;
}
template <int kM>
__host__ __device__ constexpr int tile_threads() {
  return is_wg(kM) ? 128 : kThreads;
}

// The tile row (0..BM) of a thread's accumulator row r, and the first column of its quad j.
template <int TR, int kM>
__device__ __forceinline__ int tile_row(int r) {
  static_assert(kM == kIeee || (is_wg(kM) ? TR == 2 : TR == 4),
                "the mma.sync tile is 64 rows (TR = 4), the warpgroup tile 128 (TR = 2)");
  if (kM == kIeee) return tile_ty() * TR + r;
  if (is_wg(kM)) return wg_row() + 8 * r;
  return (threadIdx.x >> 7) * 32 + 8 * r + ((threadIdx.x & 31) >> 2);
}
template <int kM>
__device__ __forceinline__ int tile_col(int j) {
  if (kM == kIeee) return 64 * j + 4 * tile_tx();
  if (is_wg(kM)) return wg_quad_col(j);
  return 64 * j + 16 * ((threadIdx.x >> 5) & 3) + 4 * (threadIdx.x & 3);
}

// Row strides of the per-edge tables Zs, S and T: = 16 (mod 32) floats, so the eight threads of
// a 16-byte access phase (two rows x four column quads, as tile_mma's operand load reads them)
// fall in distinct banks; an unpadded stride of a multiple of 32 made that a 2-way conflict, and
// the backward's former scalar reads of S an 8-way one.
__host__ __device__ inline int bank_stride(int n) { return n + ((16 - n % 32) + 32) % 32; }

struct StackSmem {
  float* As;  // a_floats: kBK x AS k-major (kIeee) or BM x AR row-major (tensor cores: TF32 bit
              // patterns, for 3xTF32 the hi plane then the lo plane at + Tile::kAFloats)
  float* Bs;  // b_floats: kBK x NP (N padded to a multiple of 64 with zeros; on tensor cores
              // column-swizzled TF32 bit patterns, 3xTF32's lo plane at + kBK x NP)
  float* Zs;  // BM x zst  (Cf used: scalar pre-activation, forward; z_bar scalar row, backward)
  float* S;   // BM x sst  (L*Cf used: gate sigmoids)
  float* T;   // BM x sst  (eta, backward only)
  int zst, sst;
};

inline int pad64(int n) { return (n + 63) / 64 * 64; }

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float4 zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }

// ---- tensor-core pieces (sm_80+) ----
__device__ __forceinline__ float tf32_round(float x) { return __uint_as_float(wg_tf32(x)); }
// hi = x rounded to TF32; for the 3xTF32 split also lo = (x - hi) rounded to TF32 (x - hi is
// exact in fp32, so hi + lo carries ~22 of x's 24 significant bits; lo lo is left out; lo's
// rounding by wg_tf32_lo).
__device__ __forceinline__ float4 tf32_hi(float4 v) {
  return make_float4(tf32_round(v.x), tf32_round(v.y), tf32_round(v.z), tf32_round(v.w));
}
__device__ __forceinline__ float4 tf32_lo(float4 v, float4 hi) {
  return make_float4(__uint_as_float(wg_tf32_lo(v.x - hi.x)), __uint_as_float(wg_tf32_lo(v.y - hi.y)),
                     __uint_as_float(wg_tf32_lo(v.z - hi.z)), __uint_as_float(wg_tf32_lo(v.w - hi.w)));
}
__device__ __forceinline__ uint32_t bits(float x) { return __float_as_uint(x); }
// (c0 c1; c2 c3) += A (16 x 8, fragment a) B (8 x 8, fragment b0 b1), fp32 accumulate.
__device__ __forceinline__ void mma_m16n8k8(float& c0, float& c1, float& c2, float& c3, const uint32_t (&a)[4],
                                            uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The same with a zero accumulator in (no register moves to clear it).
__device__ __forceinline__ void mma_m16n8k8_from0(float& d0, float& d1, float& d2, float& d3, const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
  const float z = 0.0f;
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}
// Bs column swizzle of k-row k on tensor cores: the B fragment reads of a warp (k = t, t + 4 and
// the eight columns of lane group g) fall in 32 distinct banks when row k's columns are XORed
// with 2 (k odd) and 16 (k & 2). Flipping bit 1 swaps the halves of a stored quad; bit 4 moves it.
__device__ __forceinline__ int bs_swizzle(int k) { return ((k & 1) << 1) | ((k & 2) << 3); }

// The warpgroup tile (is_wg(kM)): N = 16 NC4 exactly, K % 32 == 0, B the weights' image
// (wgmma_b_image, k blocks of wg_ks(N) steps), sm.Bs holding wg_smem_floats(N, wg_ks(N), ..). The
// accumulator quads are renamed to and from the instruction's register order (free: every index
// is a compile-time constant).
template <int NC4, int kM, class LoadA4>
__device__ __forceinline__ void tile_wg(const StackSmem& sm, int K, const float* __restrict__ Bimg, LoadA4 loadA4,
                                        float (&acc)[2][4 * NC4]) {
  constexpr int N = 16 * NC4;
  float d[N / 2];
#pragma unroll
  for (int p = 0; p < NC4; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) d[8 * p + 2 * h + (q & 1) + 4 * (q >> 1)] = acc[h][4 * p + q];
  wg_tile<N, kM - 10, wg_ks(N), 2, 1, wg_kb(N, kM == kWg3)>(sm.Bs, K, Bimg, loadA4, d);
#pragma unroll
  for (int p = 0; p < NC4; ++p)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[h][4 * p + q] = d[8 * p + 2 * h + (q & 1) + 4 * (q >> 1)];
}

// acc[r][4j+q] += sum_k A(row0 + tile_row(r), k) B(k, tile_col(j) + q). `loadA4(row, k)` returns
// A(row, k..k+3) (the prologue: the raw activation, or the gradient with the gates applied).
// K % 4 == 0 and N % 4 == 0 for every supported model. The next k-tile is fetched into registers
// while the current one is multiplied, so global latency hides behind the products.
template <int TR, int NC4, int kM, int kUnroll = 4, class LoadA4>
__device__ __forceinline__ void tile_mma_sm(const StackSmem& sm, int K, int N, const float* __restrict__ B,
                                            LoadA4 loadA4, float (&acc)[TR][4 * NC4]) {
  constexpr int BM = Tile<TR>::BM, AS = Tile<TR>::AS, AR = Tile<TR>::AR, NP = 64 * NC4;
  constexpr int kAPer = BM * kBK / 4 / kThreads;
  constexpr int kBPer = (kBK * NP / 4 + kThreads - 1) / kThreads;
  static_assert(kM == kIeee || TR == 4, "the tensor-core tile is 64 rows (TR = 4)");
  const int tid = threadIdx.x;
  float4 ra[kAPer], rb[kBPer];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      ra[i] = (k0 + k4 < K) ? loadA4(r, k0 + k4) : zero4();
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads, k = idx / (NP / 4), n4 = (idx % (NP / 4)) * 4;
      rb[j] = (idx < kBK * NP / 4 && k0 + k < K && n4 < N)
                  ? __ldg(reinterpret_cast<const float4*>(B + (size_t)(k0 + k) * N + n4))
                  : zero4();
    }
  };
  auto stash = [&]() {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int idx = tid + i * kThreads, r = idx / (kBK / 4), k4 = (idx % (kBK / 4)) * 4;
      if (kM == kIeee) {
        sm.As[(k4 + 0) * AS + r] = ra[i].x;
        sm.As[(k4 + 1) * AS + r] = ra[i].y;
        sm.As[(k4 + 2) * AS + r] = ra[i].z;
        sm.As[(k4 + 3) * AS + r] = ra[i].w;
      } else {  // TF32 bit patterns, split once here
        const float4 hi = tf32_hi(ra[i]);
        st4(sm.As + r * AR + k4, hi);
        if (kM == kTf32x3) st4(sm.As + Tile<TR>::kAFloats + r * AR + k4, tf32_lo(ra[i], hi));
      }
    }
#pragma unroll
    for (int j = 0; j < kBPer; ++j) {
      const int idx = tid + j * kThreads;
      if (idx >= kBK * NP / 4) continue;
      if (kM == kIeee) {
        st4(sm.Bs + idx * 4, rb[j]);  // row k = idx / (NP/4): stride NP
      } else {
        const int k = idx / (NP / 4), n4 = (idx % (NP / 4)) * 4, o = k * NP + (n4 ^ (bs_swizzle(k) & ~3));
        const float4 v = (k & 1) ? make_float4(rb[j].z, rb[j].w, rb[j].x, rb[j].y) : rb[j];
        const float4 hi = tf32_hi(v);
        st4(sm.Bs + o, hi);
        if (kM == kTf32x3) st4(sm.Bs + kBK * NP + o, tf32_lo(v, hi));
      }
    }
  };
  fetch(0);
  for (int k0 = 0; k0 < K; k0 += kBK) {
    stash();
    __syncthreads();
    if (k0 + kBK < K) fetch(k0 + kBK);
    if constexpr (kM == kIeee) {
      const int tx = tile_tx(), ty = tile_ty();
#pragma unroll kUnroll
      for (int k = 0; k < kBK; ++k) {
        float a[TR], b[4 * NC4];
#pragma unroll
        for (int q = 0; q < TR / 4; ++q) {
          const float4 v = ld4(sm.As + k * AS + ty * TR + 4 * q);
          a[4 * q] = v.x; a[4 * q + 1] = v.y; a[4 * q + 2] = v.z; a[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < NC4; ++j) {
          const float4 v = ld4(sm.Bs + k * NP + 64 * j + 4 * tx);
          b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
        }
#pragma unroll
        for (int r = 0; r < TR; ++r)
#pragma unroll
          for (int c = 0; c < 4 * NC4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
      }
    } else {
      const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
      const int wrow = (warp >> 2) * 32, wcol = 16 * (warp & 3), sw = bs_swizzle(t);
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 8) {
        uint32_t ah[2][4], al[2][4];
        constexpr int kLoA = Tile<TR>::kAFloats;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {  // A fragment: (g, t), (g+8, t), (g, t+4), (g+8, t+4)
          const float* p = sm.As + (wrow + 16 * mt + g) * AR + kk + t;
          const int off[4] = {0, 8 * AR, 4, 8 * AR + 4};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            ah[mt][q] = bits(p[off[q]]);
            if (kM == kTf32x3) al[mt][q] = bits(p[kLoA + off[q]]);
          }
        }
#pragma unroll
        for (int j = 0; j < NC4; ++j)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            // B fragment: k rows t and t + 4, the n8 tile's column g, which is logical column
            // 4 (g / 2) + 2 nt + g % 2 of the warp's 16 (see the layout above).
            const int col = (64 * j + wcol + 4 * (g >> 1) + 2 * nt + (g & 1)) ^ sw;
            const float* q0 = sm.Bs + (kk + t) * NP + col;
            const uint32_t bh0 = bits(q0[0]), bh1 = bits(q0[4 * NP]);
            uint32_t bl0 = 0, bl1 = 0;
            if (kM == kTf32x3) bl0 = bits(q0[kBK * NP]), bl1 = bits(q0[kBK * NP + 4 * NP]);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              float *c0 = &acc[2 * mt][4 * j + 2 * nt], *c2 = &acc[2 * mt + 1][4 * j + 2 * nt];
              if (kM == kTf32x3) {
                // The tensor cores' fp32 accumulation truncates (rounds toward zero), so summing
                // all K products in the accumulator biases it by ~K/16 ulp (measured 1.5e-6 of
                // max|C| at K = 128, sezm-stack-probe). The 8-deep partial of this k step is
                // formed from zero (the small cross terms first) and added with an IEEE add.
                float p0, p1, p2, p3;
                mma_m16n8k8_from0(p0, p1, p2, p3, al[mt], bh0, bh1);
                mma_m16n8k8(p0, p1, p2, p3, ah[mt], bl0, bl1);
                mma_m16n8k8(p0, p1, p2, p3, ah[mt], bh0, bh1);
                c0[0] += p0; c0[1] += p1; c2[0] += p2; c2[1] += p3;
              } else {
                mma_m16n8k8(c0[0], c0[1], c2[0], c2[1], ah[mt], bh0, bh1);
              }
            }
          }
      }
    }
    __syncthreads();
  }
}

// The tile product of the arithmetic kM: the SIMT / mma.sync tile, or the warpgroup tile (B
// then the weights' image).
template <int TR, int NC4, int kM, int kUnroll = 4, class LoadA4>
__device__ __forceinline__ void tile_mma(const StackSmem& sm, int K, int N, const float* __restrict__ B, LoadA4 loadA4,
                                         float (&acc)[TR][4 * NC4]) {
  if constexpr (is_wg(kM)) {
    static_assert(TR == 2, "the warpgroup tile: two rows per thread");
    tile_wg<NC4, kM>(sm, K, B, loadA4, acc);
  } else {
    tile_mma_sm<TR, NC4, kM, kUnroll>(sm, K, N, B, loadA4, acc);
  }
}

template <int TR, int NC4>
__device__ __forceinline__ void zero(float (&acc)[TR][4 * NC4]) {
#pragma unroll
  for (int r = 0; r < TR; ++r)
#pragma unroll
    for (int i = 0; i < 4 * NC4; ++i) acc[r][i] = 0.0f;
}

// Calls f(r, j, row, c) for each of the thread's column quads inside the tile (row < Ec,
// c + 3 < N): accumulators acc[r][4j..4j+3] belong to edge `row`, columns c..c+3.
template <int TR, int NC4, int kM, class F>
__device__ __forceinline__ void for_each_quad(int row0, int Ec, int N, F f) {
#pragma unroll
  for (int r = 0; r < TR; ++r) {
    const int row = row0 + tile_row<TR, kM>(r);
    if (row >= Ec) continue;
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = tile_col<kM>(j);
      if (c < N) f(r, j, row, c);
    }
  }
}

// The thread's quads of a row-major table (row stride ld) at `base`, as for_each_quad visits them,
// with every load issued before any is used: an epilogue that loads, adds and stores one quad at a
// time waits a memory round trip per quad (its stores may alias the later loads).
template <int TR, int NC4, int kM>
__device__ __forceinline__ void load_quads(int row0, int Ec, int N, const float* base, size_t ld,
                                           float4 (&v)[TR][NC4]) {
#pragma unroll
  for (int r = 0; r < TR; ++r) {
    const int row = row0 + tile_row<TR, kM>(r);
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = tile_col<kM>(j);
      v[r][j] = (row < Ec && c < N) ? ld4(base + (size_t)row * ld + c) : zero4();
    }
  }
}

template <int TR, int NC4>
__device__ __forceinline__ float4 quad(const float (&acc)[TR][4 * NC4], int r, int j) {
  return make_float4(acc[r][4 * j], acc[r][4 * j + 1], acc[r][4 * j + 2], acc[r][4 * j + 3]);
}

}  // namespace
}  // namespace sezm::cuda
