// The per-chunk radial conditioning tables (Rh = R W_rh, or the degree mixer's kernel values
// kern = R mixp) and their adjoint into R_bar, on the stack's tiled inner product (CPU twin: the
// radial conditioning in engine/so2_convolution.h). Kept apart from radial.cu (the radial MLP,
// engine/radial_mlp.h): these are the value path's per-block, per-chunk products and reuse the
// stack's tile (stack_tile.cuh), not the per-edge MLP.
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

// Without a hidden projection (C == Cw) Rh is R itself.
__global__ void radial_copy_k(Dims d, int Ec, EdgeRadialIn R, int e0, float* Rh) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const long W = (long)(d.L + 1) * d.C;
  if (i >= (long)Ec * W) return;
  const int e = e0 + (int)(i / W), l = (int)((i % W) / d.C), a = (int)(i % d.C);
  Rh[i] = R(d, e, l, a);
}

template <int kFromR, bool kAcc, int kM>
void launch_prep_widths(const Dims& d, int rows, int K, int N, const EdgeRadialIn& R, int e0, const float* A,
                        const float* B, float* out, cudaStream_t s) {
  const int grid = div_up(rows, Tile<4>::BM), nc4 = (N + 63) / 64;
  if (nc4 <= 1) radial_prep_k<1, kFromR, kAcc, kM><<<grid, kThreads, 0, s>>>(d, rows, K, N, R, e0, A, B, out);
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

}  // namespace


void launch_radial_prep(const Dims& d, const BlockWDev& w, const RadialTablesArgs& a, cudaStream_t s) {
  const int e0 = a.e0, Ec = a.Ec;
  const EdgeRadialIn& R = a.R;
  float* Rh = a.Rh;
  float* kern = a.kern;
  if (Ec == 0) return;
  if (d.degree_mixer) {
    launch_prep_gemm<kRByEdge>(d, Ec, (d.L + 1) * d.C, padded_kernel_size(d), R, e0, nullptr, w.mixp, kern, s);
  } else if (d.has_rh) {
    launch_prep_gemm<kRByDegree>(d, Ec * (d.L + 1), d.C, d.Cw, R, e0, nullptr, w.rh, Rh, s);
  } else {
    const long n = (long)Ec * (d.L + 1) * d.C;
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
  if (d.degree_mixer)  // R_bar += kb mixp^T (kb's pad columns are zero)
    launch_prep_gemm<kDenseA, true>(d, Ec, padded_kernel_size(d), (d.L + 1) * d.C, EdgeRadialIn{}, e0, kb, w.mixT,
                                    Rb, s);
  else if (d.has_rh)  // R_bar += Rh_bar W_rh^T, rows (i, l)
    launch_prep_gemm<kDenseA, true>(d, Ec * (d.L + 1), d.Cw, d.C, EdgeRadialIn{}, e0, Rh, w.rhT, Rb, s);
}

}  // namespace sezm::cuda
