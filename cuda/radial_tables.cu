// The per-chunk radial conditioning tables (Rh = R W_rh, or the degree mixer's kernel values
// kern = R mixp) and their adjoint into R_bar (CPU twin: the radial conditioning in
// engine/so2_convolution.h). Kept apart from radial.cu (the radial MLP, engine/radial_mlp.h):
// these are the value path's per-block, per-chunk products. The degree mixer's (every shipped
// potential) run on their own tile kernels (a CTA per tile of edges, the mixer staged once per
// CTA, IEEE FFMA); the hidden projection's on the stack's tiled inner product (stack_tile.cuh).
#include <cstdint>

#include "radial.cuh"
#include "radial_tables.cuh"
#include "stack_tile.cuh"

namespace sezm::cuda {
namespace {

// Without the degree mixer, Rh[i, l, :] = R(e0 + i, l, :) W_rh (rows (i, l), K = C, N = Cw; R formed
// from rho + type rows in the operand load). With it only the kernel values are used, and W_rh
// folds into the mixer on the host (mixp = blockdiag(W_rh) W_mix, ((L+1)C, Kp)): kern[i, :] =
// R(e0 + i, :, :) mixp (rows i, K = (L+1) C). The backward's radial adjoint runs the transposed
// products on the same kernel, adding into R_bar (kAcc).
enum RadialA { kDenseA = 0, kRByDegree = 1, kRByEdge = 2 };

// R(e, l, a..a+3) as EdgeRadialIn forms it ((rho + T[ts]) + T[td] per value), in three 16-byte
// loads (C % 4 == 0: a quad never straddles a degree; rows and type rows 16-byte aligned).
__device__ __forceinline__ float4 r4(const Dims& d, const EdgeRadialIn& R, int e, int l, int a, int ts, int td) {
  const float4 x = __ldg(reinterpret_cast<const float4*>(R.rho + ((size_t)e * (d.L + 1) + l) * d.C + a));
  const float4 s = __ldg(reinterpret_cast<const float4*>(R.T + (size_t)ts * d.C + a));
  const float4 t = __ldg(reinterpret_cast<const float4*>(R.T + (size_t)td * d.C + a));
  return make_float4(x.x + s.x + t.x, x.y + s.y + t.y, x.z + s.z + t.z, x.w + s.w + t.w);
}
template <int NC4, int kFromR, bool kAcc, int kM>
__global__ void __launch_bounds__(kThreads, 2) radial_prep_k(Dims d, int rows, int K, int N, EdgeRadialIn R, int e0,
                                                             const float* __restrict__ A, const float* __restrict__ B,
                                                             float* out) {
  __shared__ float4 smem4[(a_floats<4, kM>() + b_floats<kM>(64 * NC4)) / 4];
  StackSmem sm;
  sm.As = reinterpret_cast<float*>(smem4);
  sm.Bs = sm.As + a_floats<4, kM>();
  const int row0 = blockIdx.x * Tile<4>::BM;
  float acc[4][4 * NC4];
  zero<4, NC4>(acc);
  tile_mma<4, NC4, kM>(sm, K, N, B,
                   [&](int r, int k) {
                     const int rr = row0 + r;
                     if (rr >= rows) return zero4();
                     if (kFromR == kDenseA) return ld4(A + (size_t)rr * K + k);
                     const int e = kFromR == kRByEdge ? e0 + rr : e0 + rr / (d.L + 1);
                     const int l = kFromR == kRByEdge ? k / d.C : rr % (d.L + 1), a = kFromR == kRByEdge ? k % d.C : k;
                     // Rows by edge: three 16-byte loads (NC4 = 1). Rows by degree keep scalar
                     // loads: NC4 = 4 (Cw = 256) is at the register limit.
                     if (kFromR == kRByEdge) return r4(d, R, e, l, a, R.types[R.src[e]], R.types[R.dst[e]]);
                     return make_float4(R(d, e, l, a), R(d, e, l, a + 1), R(d, e, l, a + 2), R(d, e, l, a + 3));
                   },
                   acc);
  // A row's earlier values are all loaded before its first store (a round trip per row, not per
  // quad; a whole-tile prefetch would spill).
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row0 + tile_row<4, kM>(r);
    if (row >= rows) continue;
    float4 o[NC4];
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = tile_col<kM>(j);
      o[j] = (kAcc && c < N) ? ld4(out + (size_t)row * N + c) : zero4();
    }
#pragma unroll
    for (int j = 0; j < NC4; ++j) {
      const int c = tile_col<kM>(j);
      if (c >= N) continue;
      const float4 v = quad<4, NC4>(acc, r, j);
      st4(out + (size_t)row * N + c, make_float4(o[j].x + v.x, o[j].y + v.y, o[j].z + v.z, o[j].w + v.w));
    }
  }
}

// Without a hidden projection (C == Cw) Rh is R itself (by quads).
__global__ void radial_copy_k(Dims d, int Ec, EdgeRadialIn R, int e0, float* Rh) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const long W4 = (long)(d.L + 1) * d.C / 4;
  if (i >= (long)Ec * W4) return;
  const int e = e0 + (int)(i / W4), o = 4 * (int)(i % W4);
  reinterpret_cast<float4*>(Rh)[i] = r4(d, R, e, o / d.C, o % d.C, R.types[R.src[e]], R.types[R.dst[e]]);
}

template <int kFromR, bool kAcc, int kM>
void launch_prep_widths(const Dims& d, int rows, int K, int N, const EdgeRadialIn& R, int e0, const float* A,
                        const float* B, float* out, cudaStream_t s) {
  const int grid = div_up(rows, Tile<4>::BM), nc4 = (N + 63) / 64;
  if constexpr (kFromR == kRByEdge) {  // N = Kp <= 28 (lmax <= 3, model_dims): one column block
    if (nc4 > 1) throw Error("radial_prep: degree mixer wider than 64 kernel values");
    radial_prep_k<1, kFromR, kAcc, kM><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  } else if (nc4 <= 1) radial_prep_k<1, kFromR, kAcc, kM><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  else if (nc4 == 2) radial_prep_k<2, kFromR, kAcc, kM><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  else if (nc4 == 3) radial_prep_k<3, kFromR, kAcc, kM><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
  else radial_prep_k<4, kFromR, kAcc, kM><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
}

// The stack's arithmetic (stack_tile.cuh): IEEE fp32 FFMA, or one TF32 pass under `precision tf32`.
template <int kFromR, bool kAcc = false>
void launch_prep_gemm(const Dims& d, int rows, int K, int N, const EdgeRadialIn& R, int e0, const float* A,
                      const float* B, float* out, cudaStream_t s) {
  if (d.tf32_one_pass) launch_prep_widths<kFromR, kAcc, kTf32>(d, rows, K, N, R, e0, A, B, out, s);
  else launch_prep_widths<kFromR, kAcc, kIeee>(d, rows, K, N, R, e0, A, B, out, s);
  SEZM_LAUNCH(kAcc ? "radial_adjoint" : "radial_prep");
}

// ---- The degree mixer's tables on their own tile kernels ----
//
// kern = R mixp is a product with K = W = (L+1) C and N = Kp <= 28 columns (L <= 3), and the
// adjoint R_bar += kb mixT one with K = Kp and N = W: on the stack's 64-wide column tile the first
// wastes most of its columns, and both spent their time forming the A operand per k block. Here a
// CTA of 256 threads owns a tile of 64 edges (looping over tiles, the mixer staged in shared
// memory once per CTA): the tile's rows are staged with 16-byte loads, then each thread sums a
// register block over k in order from zero, the IEEE tile's order (tile_mma, kIeee): the same
// table bits as the stack tile's FFMA arithmetic (under `precision tf32` too, which ran one TF32
// pass there: FFMA is the more accurate, and here not the slower).
constexpr int kMT = 256, kMTE = 64;

// kern: R rows (TE x RS, RS / 4 odd, so a warp's 16-byte loads of distinct rows fall in distinct
// bank quads), mixp (W x Kp), the tile's type indices. Thread (te, tq) = (tid / NQ, tid % NQ),
// tid < 16 NQ, owns edges te, te + 16, te + 32, te + 48 and columns 4tq..4tq+3: per four k eight
// 16-byte shared loads feed 64 FMAs (with two edges per thread, six fed 32: the kernel's stalls
// were shared-load latency, docs/performance.md). Each sum is still over k in order from zero.
struct PrepSmem {
  int W, Kp, RS, bs, rs, tt, total;
  __host__ __device__ explicit PrepSmem(const Dims& d) {
    W = (d.L + 1) * d.C; Kp = padded_kernel_size(d); RS = ((W / 4) | 1) * 4;
    bs = 0; rs = W * Kp; tt = rs + kMTE * RS; total = tt + 2 * kMTE;
  }
};

__global__ void __launch_bounds__(kMT) mixer_prep_k(Dims d, int Ec, EdgeRadialIn R, int e0,
                                                    const float* __restrict__ mixp, float* kern) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const PrepSmem L(d);
  const int W = L.W, Kp = L.Kp, RS = L.RS, NQ = Kp / 4, tid = threadIdx.x;
  float *bs = sm + L.bs, *rs = sm + L.rs;
  int* tt = reinterpret_cast<int*>(sm + L.tt);
  for (int i = tid; i < W * Kp / 4; i += kMT)
    reinterpret_cast<float4*>(bs)[i] = __ldg(reinterpret_cast<const float4*>(mixp) + i);
  const int tq = tid % NQ, te = tid / NQ, ntiles = (Ec + kMTE - 1) / kMTE;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int t0 = tile * kMTE, ne = min(kMTE, Ec - t0);
    for (int i = tid; i < ne; i += kMT) {
      tt[i] = R.types[R.src[e0 + t0 + i]];
      tt[kMTE + i] = R.types[R.dst[e0 + t0 + i]];
    }
    __syncthreads();
    // Four quads' loads in flight per thread before their stores.
    for (int i0 = tid; i0 < kMTE * W / 4; i0 += 4 * kMT) {
      float4 v[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int i = i0 + b * kMT, r = 4 * i / W, o = 4 * i % W;
        v[b] = r < ne ? r4(d, R, e0 + t0 + r, o / d.C, o % d.C, tt[r], tt[kMTE + r]) : zero4();
      }
      // Indexed as float4 from the 16-byte aligned base: through st4 on rs + r RS + o (a float
      // pointer at a run-time offset) the compiler emitted four 4-byte stores per quad, each a
      // 4-way bank conflict (ncu: 71 % of the kernel's shared-store wavefronts).
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int i = i0 + b * kMT, r = 4 * i / W, o = 4 * i % W;
        if (r < kMTE) smem4[(L.rs + r * RS + o) / 4] = v[b];
      }
    }
    __syncthreads();
    if (tid < 16 * NQ) {
      float acc[4][4];
#pragma unroll
      for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[p][j] = 0.0f;
      rows_4x4(rs, RS, te, 16, bs, Kp, tq, W, acc);
#pragma unroll
      for (int p = 0; p < 4; ++p)
        if (te + 16 * p < ne)
          st4(kern + (size_t)(t0 + te + 16 * p) * Kp + 4 * tq, make_float4(acc[p][0], acc[p][1], acc[p][2], acc[p][3]));
    }
    __syncthreads();  // the next tile overwrites rs, tt
  }
}

// R_bar += kb mixT: kb k-major (Kp x TE), mixT (Kp x WP, W padded to a multiple of 128 with zero
// columns); thread (te, tn) = (tid / 16, tid % 16) owns edges 4te..4te+3 and the quads tn, tn + 16
// of each 128-column block (per k one 16-byte load of kb and two of mixT for 32 FMAs); a warp's
// read-add-writes of R_bar are two edges' 256 contiguous bytes each.
struct AdjSmem {
  int W, WP, Kp, bs, as, total;
  __host__ __device__ explicit AdjSmem(const Dims& d) {
    W = (d.L + 1) * d.C; WP = (W + 127) / 128 * 128; Kp = padded_kernel_size(d);
    bs = 0; as = Kp * WP; total = as + Kp * kMTE;
  }
};

__global__ void __launch_bounds__(kMT) mixer_adjoint_k(Dims d, int Ec, const float* __restrict__ kb,
                                                       const float* __restrict__ mixT, float* R_bar) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const AdjSmem L(d);
  const int W = L.W, WP = L.WP, Kp = L.Kp, tid = threadIdx.x;
  float *bs = sm + L.bs, *as = sm + L.as;
  for (int i = tid; i < Kp * WP / 4; i += kMT) {
    const int k = 4 * i / WP, o = 4 * i % WP;
    reinterpret_cast<float4*>(bs)[i] = o < W ? __ldg(reinterpret_cast<const float4*>(mixT + (size_t)k * W + o)) : zero4();
  }
  const int tn = tid % 16, te = tid / 16, ntiles = (Ec + kMTE - 1) / kMTE;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int t0 = tile * kMTE, ne = min(kMTE, Ec - t0);
    // Lanes take consecutive edges of one k: conflict-free stores; the tile's kb rows are one
    // contiguous 7 KiB block, so the strided loads hit L1 after each line's first touch.
    for (int i = tid; i < kMTE * Kp; i += kMT) {
      const int e = i % kMTE, k = i / kMTE;
      as[k * kMTE + e] = e < ne ? __ldg(kb + (size_t)(t0 + e) * Kp + k) : 0.0f;
    }
    __syncthreads();
    for (int cb = 0; cb < W; cb += 128) {
      float acc[4][8];
      tile_4x8<4>(as, kMTE, bs, WP, Kp, te, tn, cb, acc);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int e = 4 * te + r;
        if (e >= ne) continue;
        float* out = R_bar + (size_t)(t0 + e) * W;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int o = cb + 64 * q + 4 * tn;
          if (o >= W) continue;
          const float4 v = ld4(out + o);
          st4(out + o, make_float4(v.x + acc[r][4 * q], v.y + acc[r][4 * q + 1], v.z + acc[r][4 * q + 2],
                                   v.w + acc[r][4 * q + 3]));
        }
      }
    }
    __syncthreads();  // the next tile overwrites as
  }
}

// ---- The degree mixer's kernel values from the radial MLP's hidden layer (folded) ----
//
// kern = R mixp with R = rho + T[ts] + T[td] (T added at every degree) and rho = env (a W1), a the
// MLP's activations (C per edge): kern = env (a kern_w) + kern_type[ts] + kern_type[td], with
// kern_w = W1 mixp and kern_type = T sum_l mixp_l folded in double at upload (BlockWDev); their F
// further columns give the attention's radial logit bias R(e, 0, :) . u_f alike (lbias). Per edge
// the hidden layer again (nr x C, the radial forward's tile_hidden and activation expression) and a
// C x Kp product instead of the (L+1) C x Kp one, reading the nr rbf values instead of R's (L+1) C.
// A CTA of 256 threads per tile of 64 edges (looping over tiles, W0 and kern_w staged once per
// CTA); the activations k-major (as[c][e]), thread (te, tq) = (tid / NQ, tid % NQ), tid < 16 NQ,
// owns edges 4te..4te+3 and columns 4tq..4tq+3 (KP = round4(Kp + F) columns: Kp % 4 == 0, so a
// quad is all kernel values or all logit biases): per c one 16-byte load of a and one of kern_w
// for 16 FMAs, summed over c in order from zero.
// Two sets (rbssz, ssz apart) of a tile's staged rows (rbs, es) and edge indices (ix: src, dst), so
// that the next tile's are copied while one is worked on; tt the tile's types.
struct FoldSmem {
  int Kp, KP, rbssz, w0, nrm, kw, rbs, hs, rs, es, as, tt, ix, total;
  __host__ __device__ FoldSmem(const Dims& d, int KC) {
    Kp = padded_kernel_size(d); KP = (Kp + d.F + 3) / 4 * 4;
    rbssz = tile_round4(kMTE * (d.nr + 1));
    w0 = 0; nrm = w0 + tile_round4(d.nr * (KC + 1)); kw = nrm + tile_round4(KC); rbs = kw + KC * KP;
    hs = rbs + 2 * rbssz; rs = hs + tile_round4(kMTE * (KC + 1)); es = rs + kMTE;
    as = es + 2 * kMTE; tt = as + KC * kMTE; ix = tt + 2 * kMTE; total = ix + 4 * kMTE;
  }
};

template <int KC>
__global__ void __launch_bounds__(kTT) mixer_prep_fold_k(Dims d, ModelWDev mw, const float* __restrict__ kern_w,
                                                         const float* __restrict__ kern_type, RadialFoldIn in,
                                                         float* kern, float* lbias) {
  constexpr int TE = kMTE;
  static_assert(kTT == kMT && TE % 4 == 0, "the tile's 256 threads and edge quads");
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const FoldSmem L(d, KC);
  const int Kp = L.Kp, KP = L.KP, NQ = KP / 4, tid = threadIdx.x;
  float *w0s = sm + L.w0, *nrm = sm + L.nrm, *kw = sm + L.kw, *rbs0 = sm + L.rbs, *hs = sm + L.hs, *rs = sm + L.rs,
        *es0 = sm + L.es, *as = sm + L.as;
  int* tt = reinterpret_cast<int*>(sm + L.tt);
  int* ix0 = reinterpret_cast<int*>(sm + L.ix);
  stage_w0<KC>(d, mw, w0s, nrm);
  for (int i = tid; i < KC * KP / 4; i += kTT)
    reinterpret_cast<float4*>(kw)[i] = __ldg(reinterpret_cast<const float4*>(kern_w) + i);
  const int tq = tid % NQ, te = tid / NQ, ntiles = (in.Ec + TE - 1) / TE;
  // A tile's rows and edge indices into set `set` (asynchronous copies); the set was last read by
  // the tile before it, behind that tile's last barrier.
  auto stage = [&](int tile, int set) {
    const int t0 = tile * TE, ne = min(TE, in.Ec - t0);
    int* ix = ix0 + set * 2 * TE;
    for (int i = tid; i < ne; i += kTT) {
      copy_async4(reinterpret_cast<float*>(ix + i), reinterpret_cast<const float*>(in.src + in.e0 + t0 + i));
      copy_async4(reinterpret_cast<float*>(ix + TE + i), reinterpret_cast<const float*>(in.dst + in.e0 + t0 + i));
    }
    stage_rows<TE>(d.nr, t0, ne, in.rbf, in.env, rbs0 + set * L.rbssz, es0 + set * TE);
  };
  if (blockIdx.x < ntiles) stage(blockIdx.x, 0);
  int set = 0;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x, set ^= 1) {
    const int t0 = tile * TE, ne = min(TE, in.Ec - t0);
    float* rbs = rbs0 + set * L.rbssz;
    float* es = es0 + set * TE;
    copy_async_wait();
    __syncthreads();
    if (tile + (int)gridDim.x < ntiles) stage(tile + gridDim.x, set ^ 1);
    // The types (read in the epilogue, behind tile_activations' barriers).
    const int* ix = ix0 + set * 2 * TE;
    for (int i = tid; i < ne; i += kTT) {
      tt[i] = in.types[ix[i]];
      tt[TE + i] = in.types[ix[TE + i]];
    }
    tile_activations<KC, TE>(d, w0s, nrm, rbs, hs, rs, as);
    __syncthreads();
    if (tid < (TE / 4) * NQ) {
      float acc[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[r][j] = 0.0f;
#pragma unroll 8
      for (int c = 0; c < KC; ++c) {
        const float4 x = *reinterpret_cast<const float4*>(as + c * TE + 4 * te);
        const float4 y = *reinterpret_cast<const float4*>(kw + c * KP + 4 * tq);
        const float av[4] = {x.x, x.y, x.z, x.w}, bv[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[r][j] = fmaf(av[r], bv[j], acc[r][j]);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int e = 4 * te + r;
        if (e >= ne) continue;
        const float4 ks = __ldg(reinterpret_cast<const float4*>(kern_type + (size_t)tt[e] * KP + 4 * tq));
        const float4 kd = __ldg(reinterpret_cast<const float4*>(kern_type + (size_t)tt[TE + e] * KP + 4 * tq));
        const float en = es[e];
        const float4 v = make_float4(en * acc[r][0] + ks.x + kd.x, en * acc[r][1] + ks.y + kd.y,
                                     en * acc[r][2] + ks.z + kd.z, en * acc[r][3] + ks.w + kd.w);
        if (4 * tq < Kp) {
          st4(kern + (size_t)(t0 + e) * Kp + 4 * tq, v);
        } else if (lbias) {
          const float vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (4 * tq + j - Kp < in.F) lbias[(size_t)(t0 + e) * in.F + 4 * tq + j - Kp] = vv[j];
        }
      }
    }
    __syncthreads();  // the next tile overwrites tt, as, hs, rs and this set
  }
}

bool launch_prep_fold(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s) {
  const size_t bytes = FoldSmem(d, d.C).total * sizeof(float);
  const int tiles = div_up(a.Ec, kMTE);
  const auto go = [&](auto fn) {
    return launch_tiles(fn, kTT, bytes, tiles, s, d, *a.fold.mw, w.kern_w, w.kern_type, a.fold, a.kern,
                        a.fold.lbias);
  };
  if (d.C == 32) return go(mixer_prep_fold_k<32>);
  if (d.C == 16) return go(mixer_prep_fold_k<16>);
  if (d.C == 64) return go(mixer_prep_fold_k<64>);
  return false;
}

const void* prep_fold_kernel(int C) {
  return C == 32   ? reinterpret_cast<const void*>(mixer_prep_fold_k<32>)
         : C == 16 ? reinterpret_cast<const void*>(mixer_prep_fold_k<16>)
         : C == 64 ? reinterpret_cast<const void*>(mixer_prep_fold_k<64>)
                   : nullptr;
}

}  // namespace

bool radial_prep_folds(const Dims& d) {
  const void* fn = prep_fold_kernel(d.C);
  if (!d.degree_mixer || fn == nullptr) return false;
  const FoldSmem L(d, d.C);
  // 16 edge quads x KP / 4 column quads multiply: at most the CTA's 256 threads.
  return L.KP <= 64 && resident_grid(fn, kTT, L.total * sizeof(float), 1) > 0;
}


void launch_radial_prep(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s) {
  const int e0 = a.e0, Ec = a.Ec;
  const EdgeRadialIn& R = a.R;
  float* Rh = a.Rh;
  float* kern = a.kern;
  if (Ec == 0) return;
  if (d.degree_mixer) {
    // 16 edge quads x Kp / 4 <= 8 column quads: at most 128 of the 256 threads multiply (L <= 3: Kp <= 28).
    const bool fits = reinterpret_cast<uintptr_t>(kern) % 16 == 0 && padded_kernel_size(d) <= 32;
    if (a.fold.mw != nullptr) {  // the caller asked for the fold (radial_prep_folds): its logit bias too
      if (reinterpret_cast<uintptr_t>(kern) % 16 != 0 || w.kern_w == nullptr || !launch_prep_fold(d, w, a, s))
        throw Error("device cuda: launch_radial_prep: the folded kernel values did not launch (radial_prep_folds)");
      SEZM_LAUNCH("radial_prep (folded)");
      return;
    }
    if (fits && launch_tiles(mixer_prep_k, kMT, PrepSmem(d).total * sizeof(float), div_up(Ec, kMTE), s, d, Ec, R,
                                e0, w.mixp, kern)) {
      SEZM_LAUNCH("radial_prep");
      return;
    }
    launch_prep_gemm<kRByEdge>(d, Ec, (d.L + 1) * d.C, padded_kernel_size(d), R, e0, nullptr, w.mixp, kern, s);
  } else if (d.has_rh) {
    launch_prep_gemm<kRByDegree>(d, Ec * (d.L + 1), d.C, d.Cw, R, e0, nullptr, w.rh, Rh, s);
  } else {
    const long n = (long)Ec * (d.L + 1) * d.C / 4;
    radial_copy_k<<<div_up(n, 256), 256, 0, s>>>(d, Ec, R, e0, Rh);
    SEZM_LAUNCH("radial_copy");
  }
}

void launch_radial_adjoint(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s) {
  const int e0 = a.e0, Ec = a.Ec;
  float* Rh = a.Rh;
  const float* kb = a.kern;
  float* R_bar = a.R_bar;
  if (Ec == 0) return;
  float* Rb = R_bar;  // the chunk's rows
  if (d.degree_mixer) {  // R_bar += kb mixp^T (kb's pad columns are zero)
    const bool aligned = reinterpret_cast<uintptr_t>(Rb) % 16 == 0;
    if (aligned && launch_tiles(mixer_adjoint_k, kMT, AdjSmem(d).total * sizeof(float), div_up(Ec, kMTE), s, d, Ec,
                                (const float*)kb, (const float*)w.mixT, Rb)) {
      SEZM_LAUNCH("radial_adjoint");
      return;
    }
    launch_prep_gemm<kDenseA, true>(d, Ec, padded_kernel_size(d), (d.L + 1) * d.C, EdgeRadialIn{}, e0, kb, w.mixT,
                                    Rb, s);
  } else if (d.has_rh) {  // R_bar += Rh_bar W_rh^T, rows (i, l)
    launch_prep_gemm<kDenseA, true>(d, Ec * (d.L + 1), d.Cw, d.C, EdgeRadialIn{}, e0, Rh, w.rhT, Rb, s);
  }
}

}  // namespace sezm::cuda
