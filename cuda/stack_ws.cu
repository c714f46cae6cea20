// The SO(2) mixing stack's layers (docs/model.md §5.4, backward §7.10; stack.cu's maths) on the
// warp-specialised persistent tile (wgmma_ws.cuh; Dims::stack_ws: by default every layer but the replay), per |m|
// group W = A (m = 0, K = N = M0 = 128) or the assembled |m| = 1 weight (K = N = 2 M1 = 192):
//  identity layers: forward U' = U + U W, backward G' = G + G W^T;
//  gated layers: forward and backward as stack_forward_k / stack_backward_k, each split in a gate
//  pass and a product kernel (stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu); the fused forward
//  below (the gate between its products) with SEZM_CUDA_WS_GATED_FUSED=1.
// The replay of gated layers (no product) stays on stack.cu's kernels. With `precision tf32`
// (Dims::tf32_one_pass) every product here is one TF32 pass.
//
// Layout: activations focus-major (F, Ec, ROW); a work item is one focus's 128-row tile (the
// weights differ per focus, so a tile never straddles one): A's tensor map is 3-D {ROW, Ec, F}
// with boxes of 16 columns x 128 rows x 1 focus, rows past Ec arrive as zeros and are never
// stored. Identity layers: one persistent launch per group (the groups' widths are different
// instantiations); gated layers: both groups per item, one launch. Items focus-major, so the
// CTAs working at once share a focus's weight image in L2.
// Numerics: the 3xTF32 split of wg_tile (partials of 2 k steps from zero, added in IEEE fp32 in k
// order); the residual added as stack_forward_k / stack_backward_k do (u + z, IEEE fp32). An
// identity layer's |m| = 1 group's bits equal the old kernel's (the same image, kS = 2); m = 0's
// differ by the partials' grouping (the old kernel's image has k blocks of 4 steps there). The
// gated layers' gate products (S = sigmoid(z00 G), eta G^T) are IEEE fp32 FFMA here, 3xTF32 on
// tensor cores in the old kernel: their bits differ, and so do the products that use S. One TF32
// pass: wg_tile's one-pass arithmetic (wgmma_ws.cuh, ws_product_one), the gate still IEEE FFMA.
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "stack_ws_gated.cuh"

namespace sezm::cuda {
namespace {

// ---- identity layers ----
struct WsLinear {
  const float* in;  // (F, Ec, ROW): the layer's input (A of the product) and its residual
  float* out;       // (F, Ec, ROW): columns col0 .. col0 + N written
  const float* B;   // the group's images of this layer: focus f's at B + f bstride
  size_t bstride;
  int Ec, ROW, col0, ntiles, nitems;
};

template <int N, bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_linear_k(const __grid_constant__ WsLinear p,
                                                                   const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N, kOne>(
      p.nitems, &tmA,
      [&](int i) {
        const int f = i / p.ntiles;
        return WsItem{p.col0, (i - f * p.ntiles) * kWsRows, f, p.B + f * p.bstride};
      },
      [&](int i, float (&acc)[N / 2], int ct) {
        const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
        residual_epilogue<N>(p.in, p.out, static_cast<size_t>(f) * p.Ec * p.ROW + p.col0, p.ROW, row0, p.Ec, ct, acc);
      });
}

template <int N>
void launch_group(const Dims& d, int Ec, const float* in, float* out, const float* img, int col0, cudaStream_t s) {
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_linear_k<N, true> : stack_ws_linear_k<N, false>;
  const int bytes = ws_smem_bytes(N, one);
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_linear_k");
  const CUtensorMap tm = activations_map(d, Ec, in);
  WsLinear p;
  p.in = in;
  p.out = out;
  p.bstride = 2 * static_cast<size_t>(N) * N;
  p.B = img;
  p.Ec = Ec;
  p.ROW = d.ROW;
  p.col0 = col0;
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, tm);
}

// ---- gated layers, forward ----
// The gated forward's ring: stages of the wider product's (N = 192), four of them beside Zs and S.
constexpr int kGStages = 4, kGStage = ws_stage_floats(192);
constexpr int kZst = kCf + 1;  // Zs row stride: the gate's reads of 16 rows at one k hit 16 banks
constexpr int kSst = kLC + 4;  // S row stride: 16-byte rows

// The 256 consumer threads only (named barrier 1; the producer warp never waits on it).
__device__ __forceinline__ void ws_consumers_sync() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

// The gated forward's producer (the first warp; the rest of its warpgroup leaves): both
// groups' k blocks of each item, in the consumers' order, on a ring of kStages stages of kStage
// floats (kOne: the images' hi planes only, one TF32 pass). `p` stays the kernel's
// __grid_constant__ (read from parameter space: the producer has 24 registers).
template <int kStages, int kStage, bool kOne, class P>
__device__ __forceinline__ void ws_gated_producer(const P& p, float* ws_dsmem, uint64_t* full, uint64_t* empty,
                                                  WsPipe& pp, const CUtensorMap* tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    ws_fill<N0, N0, kStages, kStage, kOne>(ws_dsmem, full, empty, pp, tmA,
                                           WsItem{0, y, f, p.B0 + static_cast<size_t>(f) * 2 * N0 * N0});
    ws_fill<N1, N1, kStages, kStage, kOne>(ws_dsmem, full, empty, pp, tmA,
                                           WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1});
  }
}

// One work item (focus, 128-row tile) does both groups, as stack_forward_k does: the m = 0 product
// z0 = U0 A, the gate S = sigmoid(z0[:, :Cf] G) into shared memory, the m = 0 epilogue, then the
// |m| = 1 product z1 = U1 W1 and its epilogue (z * S). The ring's stages are the wider product's
// (N = 192), four of them beside Zs and S: 4 x 32 + 16.5 + 50 KiB.
constexpr int kGatedSmemBytes = (kGStages * kGStage + kWsRows * kZst + kWsRows * kSst) * static_cast<int>(sizeof(float));
static_assert(kGatedSmemBytes + 1024 <= 227 * 1024, "the gated kernel's ring, Zs and S fit an SM");

// The gated forward's ring: as above in the 3xTF32 split; in one TF32 pass (kOne) stages of 20 KiB
// (the hi planes only), six of them (120 + 66.5 KiB: the same carve-out).
template <bool kOne>
struct WsGatedRing {
  static constexpr int kStages = kOne ? 6 : kGStages, kStage = ws_stage_floats(192, kOne);
  static constexpr int kBytes = (kStages * kStage + kWsRows * kZst + kWsRows * kSst) * static_cast<int>(sizeof(float));
  static_assert(kBytes + 1024 <= 227 * 1024, "the ring, Zs and S fit an SM");
};

struct WsGated {
  const float* in;   // (F, Ec, ROW): the layer's input and its residual
  float* out;        // (F, Ec, ROW)
  float* zsave;      // (F, Ec, ROW): z = [z0, z1] kept (fast mode, lean recompute), or null
  const float* B0;   // this layer's A images (kS 2), focus f's at B0 + f 2 M0 M0
  const float* B1;   // its W1 images (kS 2), focus f's at B1 + f 2 (2 M1)^2
  const float* G;    // its gate weights (Cf, L Cf) row-major, focus f's at G + f Cf L Cf
  int Ec, ROW, ntiles, nitems;
};

template <bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_k(const __grid_constant__ WsGated p,
                                                                  const __grid_constant__ CUtensorMap tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  using R = WsGatedRing<kOne>;
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[R::kStages], empty[R::kStages];
  float* const Zs = ws_dsmem + R::kStages * R::kStage;
  float* const S = Zs + kWsRows * kZst;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_gated_producer<R::kStages, R::kStage, kOne>(p, ws_dsmem, full, empty, pp, &tmA);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  const int ra[2] = {ws_row(ct, 0), ws_row(ct, 1)};
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool in0 = row0 + ra[0] < p.Ec, in1 = row0 + ra[1] < p.Ec;
    {  // ---- m = 0 group ----
      float acc[N0 / 2];
      ws_multiply<N0, N0, R::kStages, R::kStage, kOne>(ws_dsmem, full, empty, pp, ct, acc);
      // z00 (the first Cf columns: quads q4 = 0, 1) into Zs. The previous item's readers of S and
      // Zs all passed the barrier below before anyone writes S again.
#pragma unroll
      for (int q4 = 0; q4 < kCf / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 z = wg_quad(acc, q4, h);
          float* zs = Zs + ra[h] * kZst + wg_quad_col(q4);
          zs[0] = z.x; zs[1] = z.y; zs[2] = z.z; zs[3] = z.w;
        }
      ws_consumers_sync();
      {  // S = sigmoid(Zs G): thread ct row ct / 2, columns 48 (ct % 2) .. + 47, IEEE fp32 FFMA in k order
        const int r = ct >> 1, c0 = (kLC / 2) * (ct & 1);
        const float* G = p.G + static_cast<size_t>(f) * kCf * kLC + c0;
        float sa[kLC / 2];
#pragma unroll
        for (int j = 0; j < kLC / 2; ++j) sa[j] = 0.0f;
#pragma unroll 1  // one k's twelve loads in flight: more would hold z0's accumulators in local memory
        for (int a = 0; a < kCf; ++a) {
          const float z = Zs[r * kZst + a];
#pragma unroll
          for (int j = 0; j < kLC / 8; ++j) {
            const float4 g = __ldg(reinterpret_cast<const float4*>(G + a * kLC + 4 * j));
            sa[4 * j] = fmaf(z, g.x, sa[4 * j]);
            sa[4 * j + 1] = fmaf(z, g.y, sa[4 * j + 1]);
            sa[4 * j + 2] = fmaf(z, g.z, sa[4 * j + 2]);
            sa[4 * j + 3] = fmaf(z, g.w, sa[4 * j + 3]);
          }
        }
#pragma unroll
        for (int j = 0; j < kLC / 8; ++j)
          *reinterpret_cast<float4*>(S + r * kSst + c0 + 4 * j) =
              make_float4(sigmoidf_(sa[4 * j]), sigmoidf_(sa[4 * j + 1]), sigmoidf_(sa[4 * j + 2]), sigmoidf_(sa[4 * j + 3]));
      }
      ws_consumers_sync();
      // Epilogue (stack_forward_k's), a row at a time (both rows' residuals beside acc and the
      // gate reads spilled): the row's residual loads before its stores, then U0' = U0 +
      // [silu(z00), z0 * S], z0 kept.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (!(h ? in1 : in0)) continue;
        const size_t ro = fo + static_cast<size_t>(row0 + ra[h]) * p.ROW;
        float4 u[N0 / 16];
#pragma unroll
        for (int q4 = 0; q4 < N0 / 16; ++q4) u[q4] = *reinterpret_cast<const float4*>(p.in + ro + wg_quad_col(q4));
#pragma unroll
        for (int q4 = 0; q4 < N0 / 16; ++q4) {
          const int c = wg_quad_col(q4);
          const float4 z = wg_quad(acc, q4, h);
          float4 v;
          if (c < kCf) {  // Cf % 4 == 0: a quad never straddles the scalar row
            v = make_float4(siluf_(z.x), siluf_(z.y), siluf_(z.z), siluf_(z.w));
          } else {
            const float4 sg = *reinterpret_cast<const float4*>(S + ra[h] * kSst + c - kCf);
            v = make_float4(z.x * sg.x, z.y * sg.y, z.z * sg.z, z.w * sg.w);
          }
          if (p.zsave) *reinterpret_cast<float4*>(p.zsave + ro + c) = z;
          const float4 w = u[q4];
          *reinterpret_cast<float4*>(p.out + ro + c) = make_float4(w.x + v.x, w.y + v.y, w.z + v.z, w.w + v.w);
        }
      }
    }
    {  // ---- |m| = 1 group: U1' = U1 + z1 * S (the sigmoid of the component's degree) ----
      float acc[N1 / 2];
      ws_multiply<N1, N1, R::kStages, R::kStage, kOne>(ws_dsmem, full, empty, pp, ct, acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // a row at a time: a whole tile's residuals beside acc would spill
        if (!(h ? in1 : in0)) continue;
        const size_t ro = fo + static_cast<size_t>(row0 + ra[h]) * p.ROW + N0;
        float4 u[N1 / 16];
#pragma unroll
        for (int q4 = 0; q4 < N1 / 16; ++q4) u[q4] = *reinterpret_cast<const float4*>(p.in + ro + wg_quad_col(q4));
#pragma unroll
        for (int q4 = 0; q4 < N1 / 16; ++q4) {
          const int c = wg_quad_col(q4);
          const float4 z = wg_quad(acc, q4, h);
          const float4 sg = *reinterpret_cast<const float4*>(S + ra[h] * kSst + (red_l(3 + 1 + c / kCf, 3) - 1) * kCf + c % kCf);
          const float4 v = make_float4(z.x * sg.x, z.y * sg.y, z.z * sg.z, z.w * sg.w);
          if (p.zsave) *reinterpret_cast<float4*>(p.zsave + ro + c) = z;
          const float4 w = u[q4];
          *reinterpret_cast<float4*>(p.out + ro + c) = make_float4(w.x + v.x, w.y + v.y, w.z + v.z, w.w + v.w);
        }
      }
    }
  }
}

void launch_gated(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* zsave,
                  cudaStream_t s) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const bool one = d.tf32_one_pass != 0;
  const auto k = one ? stack_ws_gated_k<true> : stack_ws_gated_k<false>;
  const int bytes = one ? WsGatedRing<true>::kBytes : WsGatedRing<false>::kBytes;
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_gated_k");
  const CUtensorMap tm = activations_map(d, Ec, in);
  WsGated p;
  p.in = in;
  p.out = out;
  p.zsave = zsave;
  p.B0 = w.A_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  p.G = w.G + lf * d.Cf * d.L * d.Cf;
  p.Ec = Ec;
  p.ROW = d.ROW;
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, tm);
}

}  // namespace

bool ws_shape(const Dims& d) { return d.Cf == 32 && d.L == 3 && d.M0 == 128 && 2 * d.M1 == 192 && d.ROW % 4 == 0; }

void launch_stack_ws_linear(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, bool bwd,
                            cudaStream_t s) {
  if (!ws_shape(d) || (bwd ? w.AT_ws : w.A_ws) == nullptr)
    throw Error("launch_stack_ws_linear: the warp-specialised stack needs Cf = 32, L = 3 and its images (Dims::stack_ws)");
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const int N1 = 2 * d.M1;
  launch_group<128>(d, Ec, in, out, (bwd ? w.AT_ws : w.A_ws) + lf * 2 * d.M0 * d.M0, 0, s);
  launch_group<192>(d, Ec, in, out, (bwd ? w.W1T_wg : w.W1_wg) + lf * 2 * static_cast<size_t>(N1) * N1, d.M0, s);
}

void launch_stack_ws_gated(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                           bool bwd, cudaStream_t s) {
  if (!ws_shape(d) || (bwd ? w.AT_ws : w.A_ws) == nullptr || w.G == nullptr || w.GT == nullptr || (bwd && z == nullptr))
    throw Error("launch_stack_ws_gated: the warp-specialised stack needs Cf = 32, L = 3, its images (Dims::stack_ws) "
                "and, backward, the saved pre-activations");
  // SEZM_CUDA_WS_GATED_FUSED=1: the forward's gate between the products of one kernel (below), to
  // measure against the split forward (stack_ws_gated_fwd.cu, the default).
  static const bool fused = [] {
    const char* e = std::getenv("SEZM_CUDA_WS_GATED_FUSED");
    return e && std::string(e) == "1";
  }();
  if (bwd) launch_gated_backward(d, w, layer, Ec, in, out, z, s);
  else if (fused) launch_gated(d, w, layer, Ec, in, out, z, s);
  else launch_gated_forward(d, w, layer, Ec, in, out, z, s);
}

}  // namespace sezm::cuda
