// The SO(2) mixing stack's identity layers (docs/model.md §5.4, backward §7.10) on the
// warp-specialised persistent tile (wgmma_ws.cuh; Dims::stack_ws, SEZM_CUDA_STACK_WS=1): forward
// U' = U + U W and backward G' = G + G W^T per |m| group, W = A (m = 0, K = N = M0 = 128) or the
// assembled |m| = 1 weight (K = N = 2 M1 = 192). The gated layers, the replay of gated layers and
// `precision tf32` stay on stack.cu's kernels.
//
// Layout: activations focus-major (F, Ec, ROW); a work item is one focus's 128-row tile of one
// group (the weights differ per focus, so a tile never straddles one): A's tensor map is 3-D
// {ROW, Ec, F} with boxes of 16 columns x 128 rows x 1 focus, rows past Ec arrive as zeros and are
// never stored. One persistent launch per group (the groups' widths are different instantiations);
// items focus-major, so the CTAs working at once share a focus's weight image in L2.
// Numerics: the 3xTF32 split of wg_tile (partials of 2 k steps from zero, added in IEEE fp32 in k
// order); the residual added as stack_forward_k / stack_backward_k do (u + z, IEEE fp32). The
// |m| = 1 group's bits equal the old kernel's (the same image, kS = 2); m = 0's differ by the
// partials' grouping (the old kernel's image has k blocks of 4 steps there).
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

#include "stack.cuh"
#include "wgmma_ws.cuh"

namespace sezm::cuda {
namespace {

struct WsLinear {
  const float* in;  // (F, Ec, ROW): the layer's input (A of the product) and its residual
  float* out;       // (F, Ec, ROW): columns col0 .. col0 + N written
  const float* B;   // the group's images of this layer: focus f's at B + f bstride
  size_t bstride;
  int Ec, ROW, col0, ntiles, nitems;
};

template <int N>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_linear_k(const __grid_constant__ WsLinear p,
                                                                   const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N>(
      p.nitems, &tmA,
      [&](int i) {
        const int f = i / p.ntiles;
        return WsItem{p.col0, (i - f * p.ntiles) * kWsRows, f, p.B + f * p.bstride};
      },
      [&](int i, float (&acc)[N / 2], int ct) {
        const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
        const size_t fo = static_cast<size_t>(f) * p.Ec * p.ROW + p.col0;
        const int r0 = row0 + ws_row(ct, 0), r1 = row0 + ws_row(ct, 1);
        // Every residual load before any store (in and out may be one buffer; the compiler would
        // otherwise keep each load behind the previous store), then the sums stored.
#pragma unroll
        for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = h ? r1 : r0;
            if (r < p.Ec)
              ws_add_quad(acc, q4, h,
                          *reinterpret_cast<const float4*>(p.in + fo + static_cast<size_t>(r) * p.ROW + wg_quad_col(q4)));
          }
#pragma unroll
        for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = h ? r1 : r0;
            if (r < p.Ec)
              *reinterpret_cast<float4*>(p.out + fo + static_cast<size_t>(r) * p.ROW + wg_quad_col(q4)) = wg_quad(acc, q4, h);
          }
      });
}

template <int N>
void launch_group(const Dims& d, int Ec, const float* in, float* out, const float* img, int col0, cudaStream_t s) {
  const auto k = stack_ws_linear_k<N>;
  const int bytes = ws_smem_bytes(N);
  const int sms = ws_prepare(reinterpret_cast<const void*>(k), bytes, "stack_ws_linear_k");
  const uint64_t dims[3] = {static_cast<uint64_t>(d.ROW), static_cast<uint64_t>(Ec), static_cast<uint64_t>(d.F)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d.ROW) * sizeof(float),
                               static_cast<uint64_t>(d.ROW) * sizeof(float) * static_cast<uint64_t>(Ec)};
  const CUtensorMap tm = ws_tensor_map(in, dims, strides);
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

}  // namespace sezm::cuda
