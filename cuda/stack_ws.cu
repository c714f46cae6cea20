// The SO(2) mixing stack's layers (docs/model.md §5.4, backward §7.10; stack.cu's maths) on the
// warp-specialised persistent tile (wgmma_ws.cuh; Dims::stack_ws: by default all but the gated backward), per |m|
// group W = A (m = 0, K = N = M0 = 128) or the assembled |m| = 1 weight (K = N = 2 M1 = 192):
//  identity layers: forward U' = U + U W, backward G' = G + G W^T;
//  gated layers: forward and backward as stack_forward_k / stack_backward_k (below).
// The replay of gated layers (no product) stays on stack.cu's kernels, and with `precision tf32`
// (Dims::tf32_one_pass: the identity layers and the gated forward in one TF32 pass here) the gated
// backward too.
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

#include "stack.cuh"
#include "wgmma_ws.cuh"

namespace sezm::cuda {
namespace {

// A's tensor map over the (F, Ec, ROW) activations: boxes of 16 columns x 128 rows x 1 focus.
CUtensorMap activations_map(const Dims& d, int Ec, const float* in) {
  const uint64_t dims[3] = {static_cast<uint64_t>(d.ROW), static_cast<uint64_t>(Ec), static_cast<uint64_t>(d.F)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d.ROW) * sizeof(float),
                               static_cast<uint64_t>(d.ROW) * sizeof(float) * static_cast<uint64_t>(Ec)};
  return ws_tensor_map(in, dims, strides);
}

// out = in + acc over consumer thread ct's quads of the item's rows row0 + ws_row(ct, h) < Ec
// (base: the group's first column of the focus; rows ROW floats apart), in IEEE fp32. Every
// residual load before any store (in and out may be one buffer; the compiler would otherwise keep
// each load behind the previous store).
template <int N>
__device__ __forceinline__ void residual_epilogue(const float* in, float* out, size_t base, int ROW, int row0, int Ec,
                                                  int ct, float (&acc)[N / 2]) {
  const int r0 = row0 + ws_row(ct, 0), r1 = row0 + ws_row(ct, 1);
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r < Ec)
        ws_add_quad(acc, q4, h, *reinterpret_cast<const float4*>(in + base + static_cast<size_t>(r) * ROW + wg_quad_col(q4)));
    }
#pragma unroll
  for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h ? r1 : r0;
      if (r < Ec) *reinterpret_cast<float4*>(out + base + static_cast<size_t>(r) * ROW + wg_quad_col(q4)) = wg_quad(acc, q4, h);
    }
}

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
// One work item (focus, 128-row tile) does both groups, as stack_forward_k does: the m = 0 product
// z0 = U0 A, the gate S = sigmoid(z0[:, :Cf] G) into shared memory, the m = 0 epilogue, then the
// |m| = 1 product z1 = U1 W1 and its epilogue (z * S). The ring's stages are the wider product's
// (N = 192), four of them beside Zs and S: 4 x 32 + 16.5 + 50 KiB.
constexpr int kCf = 32, kLC = 3 * kCf;  // ws_shape: Cf = 32, L = 3
constexpr int kGStages = 4, kGStage = ws_stage_floats(192);
constexpr int kZst = kCf + 1;  // Zs row stride: the gate's reads of 16 rows at one k hit 16 banks
constexpr int kSst = kLC + 4;  // S row stride: 16-byte rows
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

// The 256 consumer threads only (named barrier 1; the producer warp never waits on it).
__device__ __forceinline__ void ws_consumers_sync() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

// The gated backward's producer (the first warp; the rest of its warpgroup leaves): both
// groups' k blocks of each item, in the consumers' order. `p` stays the kernel's __grid_constant__
// (read from parameter space: the producer has 24 registers).
template <class P>
__device__ __forceinline__ void ws_gated_producer(const P& p, float* ws_dsmem, uint64_t* full, uint64_t* empty,
                                                  WsPipe& pp, const CUtensorMap* tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  ws_regs_dec<kWsProducerRegs>();
  if (threadIdx.x >= 32) return;
  for (int i = blockIdx.x; i < p.nitems; i += ws_grid()) {
    const int f = i / p.ntiles, y = (i - f * p.ntiles) * kWsRows;
    ws_fill<N0, N0, kGStages, kGStage>(ws_dsmem, full, empty, pp, tmA,
                                       WsItem{0, y, f, p.B0 + static_cast<size_t>(f) * 2 * N0 * N0});
    ws_fill<N1, N1, kGStages, kGStage>(ws_dsmem, full, empty, pp, tmA,
                                       WsItem{N0, y, f, p.B1 + static_cast<size_t>(f) * 2 * N1 * N1});
  }
}

// ws_gated_producer on a ring of kStages stages of kStage floats (kOne: the images' hi planes only,
// one TF32 pass): the gated forward's, on WsGatedRing<kOne>.
template <int kStages, int kStage, bool kOne, class P>
__device__ __forceinline__ void ws_gated_ring_producer(const P& p, float* ws_dsmem, uint64_t* full, uint64_t* empty,
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
    ws_gated_ring_producer<R::kStages, R::kStage, kOne>(p, ws_dsmem, full, empty, pp, &tmA);
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

// ---- gated layers, backward (stack_backward_k's maths) ----
// Per item: z00 from the saved Z into Zs; per thread (row ct / 2, gate columns 48 (ct % 2) ..):
// s_bar (sum over the three orders of each degree of g z), S = sigmoid(z00 G) into shared memory,
// eta = s_bar S (1 - S) in registers, and eta's share of eta G^T over the thread's 48 k, the two
// halves of a row summed across the lane pair; the scalar row of z_bar = g00 silu'(z00) + eta G^T
// into Zs in place. Then G0' = g0 + z_bar0 A^T and G1' = g1 + (g1 S) W1^T, the A operands formed
// in registers from the landed g (ws_product's ax: z_bar from Zs on the scalar row, g S elsewhere).
struct WsGatedBwd {
  const float* in;  // (F, Ec, ROW): the layer's output adjoint g (A of the products) and the residual
  float* out;       // (F, Ec, ROW)
  const float* z;   // (F, Ec, ROW): the forward's saved pre-activations
  const float* B0;  // this layer's A^T images (kS 2), focus f's at B0 + f 2 M0 M0
  const float* B1;  // its W1^T images (kS 2), focus f's at B1 + f 2 (2 M1)^2
  const float* G;   // its gate weights (Cf, L Cf) row-major, focus f's at G + f Cf L Cf
  const float* GT;  // their transposes (L Cf, Cf), likewise
  int Ec, ROW, ntiles, nitems;
};

__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_gated_backward_k(const __grid_constant__ WsGatedBwd p,
                                                                           const __grid_constant__ CUtensorMap tmA) {
  constexpr int N0 = 128, N1 = 192;  // M0, 2 M1
  extern __shared__ __align__(128) float ws_dsmem[];
  __shared__ uint64_t full[kGStages], empty[kGStages];
  float* const Zs = ws_dsmem + kGStages * kGStage;
  float* const S = Zs + kWsRows * kZst;
  ws_init(full, empty);
  WsPipe pp;
  if (threadIdx.x < 128) {
    ws_gated_producer(p, ws_dsmem, full, empty, pp, &tmA);
    return;
  }
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128;
  const int r = ct >> 1, half = ct & 1, c0 = (kLC / 2) * half;  // the gate's row and columns
  for (int i = blockIdx.x; i < p.nitems; i += gridDim.x) {
    const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
    const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW;
    const bool live = row0 + r < p.Ec;
    const float* g = p.in + fo + static_cast<size_t>(row0 + r) * p.ROW;
    const float* Z = p.z + fo + static_cast<size_t>(row0 + r) * p.ROW;
    // z00 of row r (this thread: columns 16 half ..), into Zs. The previous item's readers of Zs
    // and S all passed this item's first barrier before anyone writes S; Zs's last readers (the
    // previous m = 0 product) finished before any thread left it.
#pragma unroll
    for (int j = 0; j < kCf / 8; ++j) {
      const int a = (kCf / 2) * half + 4 * j;
      const float4 z = live ? __ldg(reinterpret_cast<const float4*>(Z + a)) : make_float4(0.f, 0.f, 0.f, 0.f);
      float* zs = Zs + r * kZst + a;
      zs[0] = z.x; zs[1] = z.y; zs[2] = z.z; zs[3] = z.w;
    }
    // s_bar[gg Cf + b] = sum over the orders of degree gg + 1 of g z (zero past Ec).
    float sb[kLC / 2];
#pragma unroll  // whole: sb stays in registers
    for (int j = 0; j < kLC / 8; ++j) {
      const int cq = c0 + 4 * j, gg = cq / kCf, b = cq % kCf;
      float4 acc4 = make_float4(0.f, 0.f, 0.f, 0.f);
      if (live) {
        const int rows[3] = {gg + 1, 3 + gg + 1, 6 + gg + 1};  // L = 3
#pragma unroll
        for (int t = 0; t < 3; ++t) {
          const float4 gv = __ldg(reinterpret_cast<const float4*>(g + rows[t] * kCf + b));
          const float4 zv = __ldg(reinterpret_cast<const float4*>(Z + rows[t] * kCf + b));
          acc4.x = fmaf(gv.x, zv.x, acc4.x); acc4.y = fmaf(gv.y, zv.y, acc4.y);
          acc4.z = fmaf(gv.z, zv.z, acc4.z); acc4.w = fmaf(gv.w, zv.w, acc4.w);
        }
      }
      sb[4 * j] = acc4.x; sb[4 * j + 1] = acc4.y; sb[4 * j + 2] = acc4.z; sb[4 * j + 3] = acc4.w;
    }
    ws_consumers_sync();  // Zs (z00) complete
    {
      // S = sigmoid(Zs G) as in the forward, into shared memory; eta = s_bar S (1 - S) into sb.
      const float* G = p.G + static_cast<size_t>(f) * kCf * kLC + c0;
      float sa[kLC / 2];
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) sa[j] = 0.0f;
#pragma unroll 1
      for (int a = 0; a < kCf; ++a) {
        const float z = Zs[r * kZst + a];
#pragma unroll
        for (int j = 0; j < kLC / 8; ++j) {
          const float4 gw = __ldg(reinterpret_cast<const float4*>(G + a * kLC + 4 * j));
          sa[4 * j] = fmaf(z, gw.x, sa[4 * j]);
          sa[4 * j + 1] = fmaf(z, gw.y, sa[4 * j + 1]);
          sa[4 * j + 2] = fmaf(z, gw.z, sa[4 * j + 2]);
          sa[4 * j + 3] = fmaf(z, gw.w, sa[4 * j + 3]);
        }
      }
#pragma unroll
      for (int j = 0; j < kLC / 2; ++j) {
        const float sg = sigmoidf_(sa[j]);
        sa[j] = sg;
        sb[j] = sb[j] * sg * (1.0f - sg);
      }
#pragma unroll
      for (int j = 0; j < kLC / 8; ++j)
        *reinterpret_cast<float4*>(S + r * kSst + c0 + 4 * j) = make_float4(sa[4 * j], sa[4 * j + 1], sa[4 * j + 2], sa[4 * j + 3]);
    }
    {
      // eta G^T over this thread's 48 k (k in order), the lane pair's halves summed (half 0's + half
      // 1's), then this thread's 16 columns of z_bar00 = g00 silu'(z00) + eta G^T into Zs.
      const float* GT = p.GT + static_cast<size_t>(f) * kLC * kCf + static_cast<size_t>(c0) * kCf;
      float e[kCf];
#pragma unroll
      for (int c = 0; c < kCf; ++c) e[c] = 0.0f;
#pragma unroll
      for (int k = 0; k < kLC / 2; ++k) {
#pragma unroll
        for (int j = 0; j < kCf / 4; ++j) {
          const float4 gw = __ldg(reinterpret_cast<const float4*>(GT + k * kCf + 4 * j));
          e[4 * j] = fmaf(sb[k], gw.x, e[4 * j]);
          e[4 * j + 1] = fmaf(sb[k], gw.y, e[4 * j + 1]);
          e[4 * j + 2] = fmaf(sb[k], gw.z, e[4 * j + 2]);
          e[4 * j + 3] = fmaf(sb[k], gw.w, e[4 * j + 3]);
        }
      }
      float zb[kCf / 2];
#pragma unroll
      for (int c = 0; c < kCf; ++c) {
        const float o = __shfl_xor_sync(0xffffffffu, e[c], 1);
        const float tot = half ? o + e[c] : e[c] + o;  // half 0's share first, on both lanes
        if ((c < kCf / 2) == (half == 0)) zb[c % (kCf / 2)] = tot;
      }
      const int cb = (kCf / 2) * half;
#pragma unroll
      for (int j = 0; j < kCf / 8; ++j) {
        float* zs = Zs + r * kZst + cb + 4 * j;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (live) {
          const float4 gg = __ldg(reinterpret_cast<const float4*>(g + cb + 4 * j));
          v = make_float4(fmaf(gg.x, silu_gradf_(zs[0]), zb[4 * j]), fmaf(gg.y, silu_gradf_(zs[1]), zb[4 * j + 1]),
                          fmaf(gg.z, silu_gradf_(zs[2]), zb[4 * j + 2]), fmaf(gg.w, silu_gradf_(zs[3]), zb[4 * j + 3]));
        }
        zs[0] = v.x; zs[1] = v.y; zs[2] = v.z; zs[3] = v.w;
      }
    }
    ws_consumers_sync();  // z_bar00 in Zs and S complete
    {  // ---- m = 0 group: G0' = g0 + z_bar0 A^T ----
      float acc[N0 / 2];
      ws_product<N0, N0, kGStages, kGStage>(ws_dsmem, full, empty, pp, ct, acc, [&](int row, int k, float4 x) {
        if (k < kCf) {
          const float* zs = Zs + row * kZst + k;
          return make_float4(zs[0], zs[1], zs[2], zs[3]);
        }
        const float4 sg = *reinterpret_cast<const float4*>(S + row * kSst + k - kCf);
        return make_float4(x.x * sg.x, x.y * sg.y, x.z * sg.z, x.w * sg.w);
      });
      residual_epilogue<N0>(p.in, p.out, fo, p.ROW, row0, p.Ec, ct, acc);
    }
    {  // ---- |m| = 1 group: G1' = g1 + (g1 S) W1^T ----
      float acc[N1 / 2];
      ws_product<N1, N1, kGStages, kGStage>(ws_dsmem, full, empty, pp, ct, acc, [&](int row, int k, float4 x) {
        const float4 sg = *reinterpret_cast<const float4*>(S + row * kSst + (red_l(3 + 1 + k / kCf, 3) - 1) * kCf + k % kCf);
        return make_float4(x.x * sg.x, x.y * sg.y, x.z * sg.z, x.w * sg.w);
      });
      residual_epilogue<N1>(p.in, p.out, fo + N0, p.ROW, row0, p.Ec, ct, acc);
    }
  }
}

void launch_gated_backward(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out,
                           const float* z, cudaStream_t s) {
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const int sms =
      ws_prepare(reinterpret_cast<const void*>(stack_ws_gated_backward_k), kGatedSmemBytes, "stack_ws_gated_backward_k");
  const CUtensorMap tm = activations_map(d, Ec, in);
  WsGatedBwd p;
  p.in = in;
  p.out = out;
  p.z = z;
  p.B0 = w.AT_ws + lf * 2 * d.M0 * d.M0;
  p.B1 = w.W1T_wg + lf * 2 * static_cast<size_t>(2 * d.M1) * (2 * d.M1);
  p.G = w.G + lf * d.Cf * d.L * d.Cf;
  p.GT = w.GT + lf * d.Cf * d.L * d.Cf;
  p.Ec = Ec;
  p.ROW = d.ROW;
  p.ntiles = div_up(Ec, kWsRows);
  p.nitems = p.ntiles * d.F;
  stack_ws_gated_backward_k<<<std::min(p.nitems, sms), kWsThreads, kGatedSmemBytes, s>>>(p, tm);
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
  if (bwd) launch_gated_backward(d, w, layer, Ec, in, out, z, s);
  else launch_gated(d, w, layer, Ec, in, out, z, s);
}

}  // namespace sezm::cuda
