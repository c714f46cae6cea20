// The SO(2) mixing stack's layers (docs/model.md §5.4, backward §7.10; stack.cu's maths) on the
// warp-specialised persistent tile (wgmma_ws.cuh; Dims::stack_ws: by default every layer), per |m|
// group W = A (m = 0, K = N = M0 = 128) or the assembled |m| = 1 weight (K = N = 2 M1 = 192):
//  identity layers: forward U' = U + U W, backward G' = G + G W^T;
//  gated layers: forward and backward as stack_forward_k / stack_backward_k, one launch each with
//  the gate products on the tensor cores too (stack_ws_gated_fwd.cu, stack_ws_gated_bwd.cu).
// With `precision tf32` (Dims::tf32_one_pass) every product here is one TF32 pass.
//
// Layout: activations focus-major (F, Ec, ROW); a work item is one focus's 128-row tile (the
// weights differ per focus, so a tile never straddles one): A's tensor map is 3-D {ROW, Ec, F}
// with boxes of 16 columns x 128 rows x 1 focus, rows past Ec arrive as zeros and are never
// stored. Identity layers: one persistent launch per group (the groups' widths are different
// instantiations); gated layers: both groups per item, one launch. Items focus-major, so the
// CTAs working at once share a focus's weight image in L2.
// Numerics: the 3xTF32 split of wg_tile (partials of 2 k steps from zero, added in IEEE fp32 in k
// order); the residual added in IEEE fp32: in a 3x split by the identity layers and the gated
// backward as A lands, among the partials (ws_multiply's kRes), by the gated forward and in one
// TF32 pass after the product (u + z, as stack_forward_k / stack_backward_k do; u from the A the
// product landed, kept in registers). So the bits differ from the
// old kernel's in the last places. The
// gated layers' gate products (S = sigmoid(z00 G), eta G^T) are tensor-core products as in the old
// kernel, on other images and with s_bar summed in another order: their bits differ, and so do the
// products that use them. One TF32 pass: wg_tile's one-pass arithmetic (wgmma_ws.cuh,
// ws_product_one).
// CPU twin: the mixing stack in engine/so2_convolution.h.
#include <cstdint>

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
  int rev;  // items from the last (ws_bwd_reverse)
};

template <int N, bool kOne>
__global__ void __launch_bounds__(kWsThreads, 1) stack_ws_linear_k(const __grid_constant__ WsLinear p,
                                                                   const __grid_constant__ CUtensorMap tmA) {
  ws_gemm<N, N, kOne, true>(  // the product adds the residual
      p.nitems, &tmA,
      [&](int i0) {
        const int i = ws_item(i0, p.nitems, p.rev);
        const int f = i / p.ntiles;
        return WsItem{p.col0, (i - f * p.ntiles) * kWsRows, f, p.B + f * p.bstride};
      },
      [&](int i0, float (&acc)[N / 2], int ct) {
        const int i = ws_item(i0, p.nitems, p.rev);
        const int f = i / p.ntiles, row0 = (i - f * p.ntiles) * kWsRows;
        store_epilogue<N>(p.out, static_cast<size_t>(f) * p.Ec * p.ROW + p.col0, p.ROW, row0, p.Ec, ct, acc);
      });
}

template <int N>
void launch_group(const Dims& d, int Ec, const float* in, float* out, const float* img, int col0, int rev,
                  cudaStream_t s) {
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
  p.col0 = col0;
  p.rev = rev;
  set_ws_items(p, d, Ec);
  k<<<std::min(p.nitems, sms), kWsThreads, bytes, s>>>(p, tm);
  SEZM_LAUNCH("stack_ws_linear_k");
}

}  // namespace

bool ws_shape(const Dims& d) { return d.Cf == 32 && d.L == 3 && d.M0 == 128 && 2 * d.M1 == 192 && d.ROW % 4 == 0; }

void launch_stack_ws_linear(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, bool bwd,
                            cudaStream_t s) {
  if (!ws_shape(d) || (bwd ? w.AT_ws : w.A_ws) == nullptr)
    throw Error("launch_stack_ws_linear: the warp-specialised stack needs Cf = 32, L = 3 and its images (Dims::stack_ws)");
  const size_t lf = static_cast<size_t>(layer) * d.F;
  const int N1 = 2 * d.M1;
  const int rev = bwd ? ws_bwd_reverse(d, layer) : 0;
  launch_group<128>(d, Ec, in, out, (bwd ? w.AT_ws : w.A_ws) + lf * 2 * d.M0 * d.M0, 0, rev, s);
  launch_group<192>(d, Ec, in, out, (bwd ? w.W1T_wg : w.W1_wg) + lf * 2 * static_cast<size_t>(N1) * N1, d.M0, rev, s);
}

void launch_stack_ws_gated(const Dims& d, const BlockWDev& w, int layer, int Ec, const float* in, float* out, float* z,
                           bool bwd, cudaStream_t s) {
  if (!ws_shape(d) || (bwd ? w.AT_ws : w.A_ws) == nullptr || w.G == nullptr || w.GT == nullptr ||
      (bwd && z == nullptr))
    throw Error("launch_stack_ws_gated: the warp-specialised stack needs Cf = 32, L = 3, its images (Dims::stack_ws) "
                "and, backward, the saved pre-activations");
  if (bwd) launch_gated_backward(d, w, layer, Ec, in, out, z, s);
  else launch_gated_forward(d, w, layer, Ec, in, out, z, s);
}

}  // namespace sezm::cuda
