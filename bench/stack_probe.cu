// sezm-stack-probe: where the SO(2) stack's time goes, kernel by kernel, on synthetic data.
//
//   sezm-stack-probe [--edges E] [--repeat R] [--L L] [--cf Cf] [--focus F]
//   SEZM_PROBE_F16_ONLY=1: only 106 against the FP16 tile (111, cuda/wgmma_ws_f16.cuh), part 1 alone.
//
// Part 1 times the stack's tile product alone (launch_tile_probe below, on cuda/stack_tile.cuh)
// at the two shapes of a layer (the m = 0 group, K = N = (L+1)Cf, and the |m| = 1 group, K = N = 2 L Cf),
// with A streamed from HBM or made in registers, on the layers' 64-row tile (4 rows per thread)
// and on variants of it (128 rows, the k loop unrolled): the inner product's ceiling without the
// layers' epilogues, beside cuBLAS's IEEE-fp32 SGEMM at the same shape when cuBLAS is found.
// Part 2 times the real layer kernels (forward gated / linear, backward) on E edges x F
// foci with random weights of the given shape (default: potentials/C.pt's stack, L = 3, Cf = 32,
// F = 2), in the engine's arithmetic (IEEE fp32 FFMA) and with `precision tf32`. Medians of
// R launches; TFLOP/s count the useful products only; the H200's fp32 FFMA peak is 67 TFLOP/s,
// its dense TF32 tensor-core peak ~495 TFLOP/s (3xTF32: a third of that, as useful products).
// Part 1 also prints each arithmetic's error against the exact (double) product. On a CC 9.0 GPU
// both parts also run the warpgroup tile (wgmma_tile.cuh), and part 1 the engine's shape of it and
// its variants (100-103) and the warp-specialised persistent tile (variant 106, cuda/wgmma_ws.cuh
// via stack_probe_ws.cuh: a TMA producer warp, two consumer warpgroups; printed with its shared
// memory and CTAs per SM), then that tile under two schedules (106 cooperative, 107 / 108
// ping-pong) with two epilogues (a store; a gated layer's kind: a residual read, z kept), and three
// chained identity layers through HBM (106) or with the rows on chip between layers (109).
// A probe for kernel work, not a test.
#include <cuda_runtime.h>
#ifdef SEZM_PROBE_CUBLAS
#include <cublas_v2.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "stack.cuh"
#include "stack_tile.cuh"
#include "stack_probe_mc.cuh"
#include "stack_probe_ws.cuh"
#include "stack_probe_ws110.cuh"
#include "stack_probe_f16.cuh"

// The stack's tile product alone, C (rows x N) = A (rows x K, row stride lda) B (K x N), N <= 192.
// variants 0-3 in IEEE fp32 FFMA: 0 the 64-row tile; 1: 128 rows (8 per thread, one CTA per SM);
// 2: variant 0 with the k loop fully unrolled; 3: 128 rows at two CTAs per SM (N <= 128); on
// tensor cores: 4 the layers' 3xTF32 tile, 5 one TF32 pass; 6, 7 the warpgroup tile (3xTF32, one
// pass); 100-103 the engine's warpgroup tile shape (launch_wg1_probe; 102 in stack_probe_mc.cuh).
// A read from HBM, or (hbm_a false) made in registers: only B and C touch memory. Probe-only: the
// engine never launches it, so it lives here rather than in cuda/.
namespace sezm::cuda {
namespace {

// ---- throughput probe of the tile product alone ----
// C = A B over `rows` rows with the stack's tile and inner product, the result stored once: A
// streamed from HBM as the layer kernels stream it (hbm_a), or made in registers from (row, k)
// so that no operand leaves the chip. Separates the inner product's own ceiling from what the
// layer kernels add around it (residual epilogues, gate tables, HBM streaming).
// A(row, k..k+3) of the probe: streamed from HBM (kHbmA), or made in registers from (row, k).
template <bool kHbmA>
__device__ __forceinline__ float4 probe_a4(const float* __restrict__ A, int lda, int rows, int row, int k) {
  if (kHbmA) return row < rows ? ld4(A + (size_t)row * lda + k) : zero4();
  const float v = 1e-3f * (float)((row * 7 + k) & 63);
  return make_float4(v, v + 1e-3f, v - 1e-3f, v + 2e-3f);
}

template <int TR, int NC4, bool kHbmA, int kMinBlocks, int kUnroll, int kM>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    tile_probe_k(int rows, int K, int N, const float* __restrict__ A, int lda, const float* __restrict__ B, float* C) {
  extern __shared__ float4 smem4[];
  StackSmem sm;
  sm.As = reinterpret_cast<float*>(smem4);
  sm.Bs = sm.As + a_floats<TR, kM>();
  const int row0 = blockIdx.x * Tile<TR>::BM;
  float acc[TR][4 * NC4];
  zero<TR, NC4>(acc);
  tile_mma<TR, NC4, kM, kUnroll>(sm, K, N, B,
                             [&](int r, int k) { return probe_a4<kHbmA>(A, lda, rows, row0 + r, k); },
                             acc);
  for_each_quad<TR, NC4, kM>(row0, rows, N, [&](int r, int j, int row, int c) {
    st4(C + (size_t)row * N + c, quad<TR, NC4>(acc, r, j));
  });
}

template <int TR, int NC4, int kMinBlocks = (TR == 4 ? 2 : 1), int kUnroll = 4, int kM = kIeee>
void launch_probe(bool hbm_a, int rows, int K, int N, const float* A, int lda, const float* B, float* C,
                  cudaStream_t s) {
  const size_t bytes = ((size_t)a_floats<TR, kM>() + (size_t)b_floats<kM>(64 * NC4)) * sizeof(float);
  const dim3 grid(div_up(rows, Tile<TR>::BM));
  if (hbm_a)
    tile_probe_k<TR, NC4, true, kMinBlocks, kUnroll, kM><<<grid, kThreads, bytes, s>>>(rows, K, N, A, lda, B, C);
  else
    tile_probe_k<TR, NC4, false, kMinBlocks, kUnroll, kM><<<grid, kThreads, bytes, s>>>(rows, K, N, A, lda, B, C);
  SEZM_LAUNCH("tile_probe");
}

// The warpgroup tile (wgmma_tile.cuh, sm_90a): 128 rows per CTA of two warpgroups, B the weights'
// image (wgmma_b_image), the 3xTF32 split (kPasses 3) or one TF32 pass (1).
template <int N, int kPasses, bool kHbmA>
__global__ void __launch_bounds__(kThreads, 1)
    wg_probe_k(int rows, int K, const float* __restrict__ A, int lda, const float* __restrict__ Bimg, float* C) {
  extern __shared__ float4 smem4[];
  const int row0 = blockIdx.x * 128;
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  wg_tile<N, kPasses, 4, 2, 2>(reinterpret_cast<float*>(smem4), K, Bimg,
                               [&](int r, int k) { return probe_a4<kHbmA>(A, lda, rows, row0 + r, k); },
                               acc);
  wg_store_rows(C, N, row0, rows, acc);
}

template <int N, int kPasses>
void launch_wg_probe(bool hbm_a, int rows, int K, const float* A, int lda, const float* Bimg, float* C,
                     cudaStream_t s) {
  const size_t bytes = (size_t)wg_smem_floats(N, 4, kPasses == 3) * sizeof(float);
  const dim3 grid(div_up(rows, 128));
  auto k = hbm_a ? wg_probe_k<N, kPasses, true> : wg_probe_k<N, kPasses, false>;
  SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  k<<<grid, kThreads, bytes, s>>>(rows, K, A, lda, Bimg, C);
  SEZM_LAUNCH("wg_probe");
}

// The engine's warpgroup tile shape (stack.cu): 64 rows, one warpgroup, two CTAs per SM, k blocks
// of wg_ks(N) steps (kS: another block depth), the 3xTF32 split, kStages stages of B (the engine: 2).
template <int N, bool kHbmA, int kStages, int kS = wg_ks(N)>
__global__ void __launch_bounds__(128, 2)
    wg1_probe_k(int rows, int K, const float* __restrict__ A, int lda, const float* __restrict__ Bimg, float* C) {
  extern __shared__ float4 smem4[];
  const int row0 = blockIdx.x * 64;
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  wg_tile<N, 3, kS, 2, 1, 1, kStages>(reinterpret_cast<float*>(smem4), K, Bimg,
                                              [&](int r, int k) { return probe_a4<kHbmA>(A, lda, rows, row0 + r, k); },
                                              acc);
  wg_store_rows(C, N, row0, rows, acc);
}
// kind 0: the engine's (two stages), 1: three stages, 2: two stages of 32-deep k blocks (kS = 4;
// Bimg then the image for kS = 4).
template <int N>
void launch_wg1_probe(int kind, bool hbm_a, int rows, int K, const float* A, int lda, const float* Bimg, float* C,
                      cudaStream_t s) {
  const int ks = kind == 2 ? 4 : wg_ks(N);
  const size_t bytes = (size_t)wg_smem_floats(N, ks, true) * (kind == 1 ? 3 : 2) / 2 * sizeof(float);
  auto k = kind == 1   ? (hbm_a ? wg1_probe_k<N, true, 3> : wg1_probe_k<N, false, 3>)
           : kind == 2 ? (hbm_a ? wg1_probe_k<N, true, 2, 4> : wg1_probe_k<N, false, 2, 4>)
                       : (hbm_a ? wg1_probe_k<N, true, 2> : wg1_probe_k<N, false, 2>);
  SEZM_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  k<<<div_up(rows, 64), 128, bytes, s>>>(rows, K, A, lda, Bimg, C);
  SEZM_LAUNCH("wg1_probe");
}

void launch_tile_probe(int variant, bool hbm_a, int rows, int K, int N, const float* A, int lda, const float* B,
                       const float* Bimg, float* C, cudaStream_t s) {
  const bool wide = pad64(N) / 64 > 2;
  if (variant == 102) {  // the same with B multicast to clusters of two CTAs (stack_probe_mc.cuh)
    if (N == 192) launch_wgmc_probe<192>(hbm_a, rows, K, A, lda, Bimg, C, s);
    else if (N == 128) launch_wgmc_probe<128>(hbm_a, rows, K, A, lda, Bimg, C, s);
    else throw Error("the warpgroup tile probe takes N = 128 or 192");
    return;
  }
  if (variant >= 100) {  // the engine's warpgroup tile shape; 100: two B stages, 101: three, 103: k32 blocks
    const int kind = variant == 101 ? 1 : variant == 103 ? 2 : 0;
    if (N == 192) launch_wg1_probe<192>(kind, hbm_a, rows, K, A, lda, Bimg, C, s);
    else if (N == 128) launch_wg1_probe<128>(kind, hbm_a, rows, K, A, lda, Bimg, C, s);
    else throw Error("the warpgroup tile probe takes N = 128 or 192");
    return;
  }
  if (variant >= 6) {  // the warpgroup tile: N = K = 128 or 192
    const bool split = variant == 6;
    if (N == 192) split ? launch_wg_probe<192, 3>(hbm_a, rows, K, A, lda, Bimg, C, s)
                        : launch_wg_probe<192, 1>(hbm_a, rows, K, A, lda, Bimg, C, s);
    else if (N == 128) split ? launch_wg_probe<128, 3>(hbm_a, rows, K, A, lda, Bimg, C, s)
                             : launch_wg_probe<128, 1>(hbm_a, rows, K, A, lda, Bimg, C, s);
    else throw Error("the warpgroup tile probe takes N = 128 or 192");
    return;
  }
  switch (variant) {
    case 0:  // the layers' tile: 64 rows, 4 x 4NC per thread, 2 CTAs per SM, k loop unrolled by 4
      if (wide) launch_probe<4, 3>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<4, 2>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    case 1:  // 128 rows, 8 x 4NC per thread, 1 CTA per SM
      if (wide) launch_probe<8, 3>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<8, 2>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    case 2:  // the layers' tile with the k loop fully unrolled
      if (wide) launch_probe<4, 3, 2, kBK>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<4, 2, 2, kBK>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    case 3:  // 128 rows at 2 CTAs per SM (<= 128 registers: 8 x 8 per thread; N <= 128 only)
      if (wide) throw Error("tile probe variant 3 takes N <= 128");
      launch_probe<8, 2, 2>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    case 4:  // the layers' tile on tensor cores, 3xTF32 (fp32-accurate; not used by the engine yet)
      if (wide) launch_probe<4, 3, 2, 4, kTf32x3>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<4, 2, 2, 4, kTf32x3>(hbm_a, rows, K, N, A, lda, B, C, s);
      break;
    default:  // the layers' tile on tensor cores, one TF32 pass (`precision tf32`)
      if (wide) launch_probe<4, 3, 2, 4, kTf32>(hbm_a, rows, K, N, A, lda, B, C, s);
      else launch_probe<4, 2, 2, 4, kTf32>(hbm_a, rows, K, N, A, lda, B, C, s);
  }
}

}  // namespace
}  // namespace sezm::cuda

namespace {

using namespace sezm::cuda;

struct DevBuf {
  float* p = nullptr;
  explicit DevBuf(size_t n, std::mt19937* rng = nullptr, float scale = 0.0f) {
    SEZM_CUDA(cudaMalloc(&p, n * sizeof(float)));
    std::vector<float> h(n, 0.0f);
    if (rng) {
      std::uniform_real_distribution<float> u(-scale, scale);
      for (float& x : h) x = u(*rng);
    }
    SEZM_CUDA(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

template <class F>
double median_ms(int repeat, cudaStream_t s, F launch) {
  cudaEvent_t a, b;
  SEZM_CUDA(cudaEventCreate(&a));
  SEZM_CUDA(cudaEventCreate(&b));
  launch();  // warm-up (and the shared-memory attribute)
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    SEZM_CUDA(cudaEventRecord(a, s));
    launch();
    SEZM_CUDA(cudaEventRecord(b, s));
    SEZM_CUDA(cudaEventSynchronize(b));
    float ms = 0.0f;
    SEZM_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

#include "stack_probe_ws_runs.cuh"  // (uses DevBuf and median_ms above)
#include "stack_probe_f16_runs.cuh"  // variant 111; the same

int arg_int(int argc, char** argv, const std::string& name, int def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int E = arg_int(argc, argv, "--edges", 131072), R = arg_int(argc, argv, "--repeat", 20);
    Dims d{};
    d.L = arg_int(argc, argv, "--L", 3);
    d.Cf = arg_int(argc, argv, "--cf", 32);
    d.F = arg_int(argc, argv, "--focus", 2);
    d.M0 = (d.L + 1) * d.Cf;
    d.M1 = d.L * d.Cf;
    d.Dm = 3 * d.L + 1;
    d.ROW = d.Dm * d.Cf;
    d.nL = 3;
    d.ngated = 2;
    if (2 * d.M1 > 192 || d.M0 > 192) {
      std::fprintf(stderr, "sezm-stack-probe: group widths above 192 are not probed\n");
      return 2;
    }
    cudaDeviceProp prop{};
    SEZM_CUDA(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t s;
    SEZM_CUDA(cudaStreamCreate(&s));
    std::mt19937 rng(12345);
    std::printf("device %s | L %d, Cf %d, F %d: m=0 group %d wide, |m|=1 group %d wide, row %d floats\n",
                prop.name, d.L, d.Cf, d.F, d.M0, 2 * d.M1, d.ROW);

    // ---- part 1: the tile product alone ----
    const int rows = E * d.F;
    std::printf("tile product alone, %d rows (edges x foci), median of %d:\n", rows, R);
    const bool f16_only = std::getenv("SEZM_PROBE_F16_ONLY") != nullptr;
    for (int K : {d.M0, 2 * d.M1}) {
      DevBuf A((size_t)rows * d.ROW, &rng, 1.0f), B((size_t)K * K, &rng, 0.1f), C((size_t)rows * K);
      static const char* names[] = {"IEEE FFMA, 64-row tile (SIMT)", "IEEE FFMA, 128 rows, 1 CTA/SM",
                                    "IEEE FFMA, 64 rows, k unrolled", "IEEE FFMA, 128 rows, 2 CTAs/SM",
                                    "3xTF32 mma.sync, 64 rows",      "1xTF32 mma.sync (tf32, SIMT)",
                                    "3xTF32 wgmma, 128 rows (H100)",  "1xTF32 wgmma (tf32, H100)"};
      // The warpgroup tile needs sm_90a code and a CC 9.0 device, and N = K = 128 or 192.
      const bool wg_ok = prop.major == 9 && prop.minor == 0 && (K == 128 || K == 192);
      // Then the engine's own tile shape and its variants (launch_tile_probe 100 .. 103), then 106,
      // the warp-specialised tile (cuda/wgmma_ws.cuh via stack_probe_ws.cuh; A from HBM only).
      const int kWs = 8 + 4, kVariants = wg_ok ? kWs + 1 : 6;
      static const char* wg1_names[] = {"3xTF32 wgmma, 64 rows (engine)", "same, three B stages",
                                        "same, B multicast in 2-CTA clusters", "same, k blocks of 32 (kS 4)",
                                        "3xTF32 wgmma WS, coop., A by TMA (106)"};
      std::vector<float> hbw((size_t)K * K);
      SEZM_CUDA(cudaMemcpy(hbw.data(), B.p, hbw.size() * sizeof(float), cudaMemcpyDeviceToHost));
      const std::vector<float> img = wgmma_b_image(hbw.data(), K, K, K, 4);
      DevBuf Bimg(img.size());
      SEZM_CUDA(cudaMemcpy(Bimg.p, img.data(), img.size() * sizeof(float), cudaMemcpyHostToDevice));
      const std::vector<float> img_e = wgmma_b_image(hbw.data(), K, K, K, wg_ks(K));  // the engine's k blocks
      DevBuf Bimg_e(img_e.size());
      SEZM_CUDA(cudaMemcpy(Bimg_e.p, img_e.data(), img_e.size() * sizeof(float), cudaMemcpyHostToDevice));
      // The warp-specialised tile's image: k blocks of 2 steps at both widths.
      const std::vector<float> img2 = wgmma_b_image(hbw.data(), K, K, K, 2);
      DevBuf Bimg2(img2.size());
      SEZM_CUDA(cudaMemcpy(Bimg2.p, img2.data(), img2.size() * sizeof(float), cudaMemcpyHostToDevice));
      // Each variant's C (A from HBM) against the IEEE tile's: the split's and one pass's rounding.
      std::vector<float> ref((size_t)rows * K), got((size_t)rows * K);
      // The exact product (double) of the first rows, for each arithmetic's own error.
      const int nx = std::min(rows, 2048);
      std::vector<double> exact((size_t)nx * K);
      {
        std::vector<float> ha((size_t)nx * d.ROW), hb((size_t)K * K);
        SEZM_CUDA(cudaMemcpy(ha.data(), A.p, ha.size() * sizeof(float), cudaMemcpyDeviceToHost));
        SEZM_CUDA(cudaMemcpy(hb.data(), B.p, hb.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int r = 0; r < nx; ++r)
          for (int k = 0; k < K; ++k) {
            const double a = ha[(size_t)r * d.ROW + k];
            for (int n = 0; n < K; ++n) exact[(size_t)r * K + n] += a * hb[(size_t)k * K + n];
          }
      }
      // SEZM_PROBE_F16_ONLY=1: 106 against 111 alone, then no part 2.
      if (f16_only) {
        if (wg_ok) probe_f16_tile(rows, K, d.ROW, A.p, hbw, Bimg2.p, exact, R, s);
        continue;
      }
      for (int v = 0; v < kVariants; ++v)
        for (bool hbm : {true, false}) {
          if (v == 3 && K > 128) continue;
          const bool ws = v >= kWs;
          if (ws && !hbm) continue;  // the warp-specialised tile only streams A from HBM
          std::string info;  // the warp-specialised variant's shared memory and CTAs per SM
          // Fill C with 3.4e38 first, so that any element the new tile leaves unwritten shows as error.
          if (ws) SEZM_CUDA(cudaMemset(C.p, 0x7F, (size_t)rows * K * sizeof(float)));
          const double ms = median_ms(R, s, [&] {
            if (v < 8) launch_tile_probe(v, hbm, rows, K, K, A.p, d.ROW, B.p, Bimg.p, C.p, s);
            else if (ws) info = launch_wgws_probe_variant(106, kEpiStore, WsProbeArgs{rows, Bimg2.p, C.p, nullptr, nullptr}, K, K, A.p, d.ROW, s);
            else
              launch_tile_probe(100 + v - 8, hbm, rows, K, K, A.p, d.ROW, B.p, v - 8 == 3 ? Bimg.p : Bimg_e.p, C.p, s);
          });
          std::string err;
          if (hbm) {
            SEZM_CUDA(cudaMemcpy((v == 0 ? ref : got).data(), C.p, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
            if (v > 0) {
              double num = 0, den = 0;
              for (size_t i = 0; i < got.size(); ++i) {
                num = std::max(num, (double)std::fabs(got[i] - ref[i]));
                den = std::max(den, (double)std::fabs(ref[i]));
              }
              char b[64];
              std::snprintf(b, sizeof b, "  max|C - C_ieee|/max|C_ieee| %.1e", num / den);
              err = b;
            }
            const std::vector<float>& c = v == 0 ? ref : got;
            double num = 0, den = 0;
            for (size_t i = 0; i < exact.size(); ++i) {
              num = std::max(num, std::fabs(c[i] - exact[i]));
              den = std::max(den, std::fabs(exact[i]));
            }
            char b[48];
            std::snprintf(b, sizeof b, "  vs exact %.1e", num / den);
            err += b;
          }
          std::printf("  K = N = %3d, %-32s A %-9s %8.3f ms  %6.2f TFLOP/s%s%s\n", K,
                      v < 8 ? names[v] : wg1_names[v - 8], hbm ? "from HBM" : "on chip", ms,
                      2.0 * rows * K * K / (ms * 1e9), err.c_str(), info.c_str());
        }
      if (wg_ok) probe_ws_schedules(rows, K, d.ROW, A.p, Bimg2.p, R, rng, s);
      if (wg_ok) probe_f16_tile(rows, K, d.ROW, A.p, hbw, Bimg2.p, exact, R, s);
#ifdef SEZM_PROBE_CUBLAS
      // The vendor's fp32 GEMM at the same shape, IEEE fp32 (pedantic math: no TF32), as a
      // reference ceiling. Row-major C = A B is column-major C^T = B^T A^T.
      {
        cublasHandle_t h;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
        cublasSetStream(h, s);
        cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
        const float one = 1.0f, zero = 0.0f;
        const double ms = median_ms(R, s, [&] {
          if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, K, rows, K, &one, B.p, K, A.p, d.ROW, &zero, C.p, K) !=
              CUBLAS_STATUS_SUCCESS)
            throw std::runtime_error("cublasSgemm failed");
        });
        std::printf("  K = N = %3d, %-26s A %-9s %8.3f ms  %6.2f TFLOP/s\n", K, "cuBLAS SGEMM (pedantic)",
                    "from HBM", ms, 2.0 * rows * K * K / (ms * 1e9));
        cublasDestroy(h);
      }
#endif
    }

    if (f16_only) return 0;
    // ---- part 2: the layer kernels ----
    const int LC = d.L * d.Cf;
    const float sa = 1.0f / std::sqrt((float)d.M0), s1 = 1.0f / std::sqrt(2.0f * d.M1);
    const float sg = 1.0f / std::sqrt((float)d.Cf);
    DevBuf A(d.nL * d.F * (size_t)d.M0 * d.M0, &rng, sa), AT(d.nL * d.F * (size_t)d.M0 * d.M0, &rng, sa);
    DevBuf W1(d.nL * d.F * 4 * (size_t)d.M1 * d.M1, &rng, s1), W1T(d.nL * d.F * 4 * (size_t)d.M1 * d.M1, &rng, s1);
    DevBuf G(d.ngated * d.F * (size_t)d.Cf * LC, &rng, sg), GT(d.ngated * d.F * (size_t)d.Cf * LC, &rng, sg);
    BlockWDev w{};
    w.A = A.p; w.AT = AT.p; w.W1 = W1.p; w.W1T = W1T.p; w.G = G.p; w.GT = GT.p;
    const size_t n = (size_t)d.F * E * d.ROW;
    DevBuf U(n, &rng, 1.0f), V(n), Z(n, &rng, 1.0f);
    const double flop = 2.0 * E * d.F * ((double)d.M0 * d.M0 + 4.0 * d.M1 * d.M1);
    const double gate = 2.0 * E * d.F * (double)d.Cf * LC;
    const double row_gb = (double)n * sizeof(float) / 1e9;  // one pass over the activations
    std::printf("layer kernels, %d edges x %d foci (one pass over the activations: %.2f GB), median of %d:\n", E,
                d.F, row_gb, R);
    auto report = [&](const char* what, double ms, double f, double passes) {
      std::printf("  %-42s %8.3f ms  %6.2f TFLOP/s  %6.0f GB/s for its %.0f minimal passes\n", what, ms,
                  f / (ms * 1e9), passes * row_gb / (ms * 1e-3), passes);
    };
    // The engine's arithmetics of the tile products: on the SIMT / mma.sync tile IEEE FFMA (default
    // off Hopper) and one TF32 pass (`precision tf32`); on the warpgroup tile the 3xTF32 split
    // (default on Hopper) and one TF32 pass.
    // On a CC 9.0 GPU the same layers also on the warpgroup tile (the engine's default there):
    // the weights' images as the engine uploads them (device_weights.cpp).
    std::vector<std::unique_ptr<DevBuf>> images;
    auto image_of = [&](const DevBuf& w, int count, int K, int N) {
      std::vector<float> h((size_t)count * K * N), all;
      SEZM_CUDA(cudaMemcpy(h.data(), w.p, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
      for (int i = 0; i < count; ++i) {
        const float* m = h.data() + (size_t)i * K * N;
        const std::vector<float> img = wgmma_b_image(m, K, N, N, wg_ks(N));
        all.insert(all.end(), img.begin(), img.end());
      }
      images.push_back(std::make_unique<DevBuf>(all.size()));
      SEZM_CUDA(cudaMemcpy(images.back()->p, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice));
      return static_cast<const float*>(images.back()->p);
    };
    const bool wg = prop.major == 9 && prop.minor == 0 && wgmma_shape(d);
    if (wg) {
      w.A_wg = image_of(A, d.nL * d.F, d.M0, d.M0);
      w.AT_wg = image_of(AT, d.nL * d.F, d.M0, d.M0);
      w.W1_wg = image_of(W1, d.nL * d.F, 2 * d.M1, 2 * d.M1);
      w.W1T_wg = image_of(W1T, d.nL * d.F, 2 * d.M1, 2 * d.M1);
      w.G_wg = image_of(G, d.ngated * d.F, d.Cf, LC);
      w.GT_wg = image_of(GT, d.ngated * d.F, LC, d.Cf);
    }
    for (const int arith : {0, 1, 2, 3}) {
      const int tf32 = arith & 1;
      d.tf32_one_pass = tf32;
      d.wgmma = arith >= 2;
      if (d.wgmma && !wg) break;
      const std::string p = std::string(d.wgmma ? "wgmma " : "SIMT ") + (tf32 ? "tf32: " : "fp32: ");
      report((p + "forward, gated (z kept: fast)").c_str(),
             median_ms(R, s, [&] { launch_stack_layer_forward(d, w, 0, E, U.p, V.p, Z.p, s); }), flop + gate, 3);
      report((p + "forward, gated (lean)").c_str(),
             median_ms(R, s, [&] { launch_stack_layer_forward(d, w, 0, E, U.p, V.p, nullptr, s); }), flop + gate, 2);
      report((p + "forward, linear").c_str(),
             median_ms(R, s, [&] { launch_stack_layer_forward(d, w, 2, E, U.p, V.p, nullptr, s); }), flop, 2);
      // Last: the warp-specialised gated backward overwrites part of Z (its repeats redo the same work).
      report((p + "backward, gated").c_str(),
             median_ms(R, s, [&] { launch_stack_layer_backward(d, w, 0, E, U.p, V.p, Z.p, s); }), flop + 2 * gate, 3);
      report((p + "backward, linear").c_str(),
             median_ms(R, s, [&] { launch_stack_layer_backward(d, w, 2, E, U.p, V.p, nullptr, s); }), flop, 2);
    }
    SEZM_CUDA(cudaStreamDestroy(s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sezm-stack-probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
