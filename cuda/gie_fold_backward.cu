// The GIE's edge backward from the radial MLP's hidden layer, the mirror of gie_forward_fold_k
// (gie.cu; CPU twin: engine/embeddings.h, the GIE and radial MLP backward; docs/sezm/01). With
// rho[e, l, :] = env_e a_e W1[:, l C .. l C + C) (a_e the SiLU of the radial hidden layer, C = 32
// values), the GIE's edge adjoints need neither rho nor rho_bar:
//   Y[n, p, k]    = sum_c W1[k, l(p) C + c] X0_bar[n, p, c]             per centre, rows p >= 1
//   v[e, p]       = env_e sum_k a_e[k] Y[n, p, k]                      (= sum_c X0_bar[n, p, c] rho[e, l(p), c])
//   Dc_bar[e, p] += isd_n g_e v[e, p]                                   (the m = 0 row of block l(p))
//   gate_bar[e]  += isd_n sum_p Dc[e, p] v[e, p]
//   G[e, k]       = isd_n g_e sum_p Dc[e, p] Y[n, p, k]                 (= sum_o W1[k, o] rho_bar[e, o])
// G is what the radial MLP's backward forms from rho_bar first (radial.cu, g = W1 rho_bar): it
// takes G as it is (RadialMlpArgs::plain). Why: the route through rho recomputed rho per chunk in
// both modes, read it and wrote rho_bar (1 KiB per edge at C.pt), and the radial tile's product
// then ran over W = (L + 1) C rows of rho_bar instead of C of G (docs/performance.md, 2026-12-05
// sixteenth session).
//
// A CTA per centre (a chunk's centres: chunks hold whole destination segments): its X0_bar rows
// and W0 are staged, Y formed once in shared memory, then its four warps take contiguous quarters
// of its in-edges, 32 edges' basis and Wigner rows staged at a time as gie_forward_fold_k does;
// lane k forms a_e[k] by the forward's arithmetic, G[e, k] (p ascending), and its terms of v, which
// a warp reduce-scatter sums (cta_reduce.cuh) and lane p adds to the edge's entry p. Each edge's
// outputs are its own: no order between edges to keep, and repeated runs are bit-identical.
#include "async_copy.cuh"
#include "cta_reduce.cuh"
#include "embeddings.cuh"
#include "radial.cuh"

namespace sezm::cuda {
namespace {

constexpr int kWarps = 4, kC = 32, kMaxP = 15;

// Shared memory (floats): W0 (nr x C), the centre's X0_bar rows p >= 1 and Y (P x C each), then per
// warp its staging: 32 edges' basis rows, Wigner rows, envelopes and gates, and the 16 slots that
// hand an edge's sums v[p] to lane p.
struct FoldBwdSmem {
  int w0, xs, ys, stage, rb, dc, en, ga, vs, per_warp, total;
  explicit FoldBwdSmem(const Dims& d) {
    const int P = d.D - 1;
    w0 = 0;
    xs = w0 + (d.nr * kC + 3) / 4 * 4;
    ys = xs + P * kC;
    stage = ys + P * kC;
    rb = 0; dc = 32 * d.nr; en = dc + 32 * ((d.dc_size + 3) / 4 * 4); ga = en + 32; vs = ga + 32;
    per_warp = vs + 16;
    total = stage + kWarps * per_warp;
  }
};

// NR: n_radial at compile time (W0's column in registers), 0: at run time (read from shared memory).
template <int L, int NR>
__global__ void __launch_bounds__(32 * kWarps) gie_edge_backward_fold_k(Dims d, ModelWDev w, FoldBwdSmem S,
                                                                        GieFoldArgs a) {
  constexpr int P = (L + 1) * (L + 1) - 1;
  static_assert(P <= 16, "lane p < P holds the entry p of an edge's Wigner-row adjoint");
  extern __shared__ __align__(16) float fsm[];
  const int n = a.n0 + blockIdx.x, warp = threadIdx.x / 32, k = threadIdx.x % 32, nr = NR > 0 ? NR : d.nr;
  const int dcs = d.dc_size;
  float* w0s = fsm + S.w0;
  float* xs = fsm + S.xs;
  float* ys = fsm + S.ys;
  float* st = fsm + S.stage + warp * S.per_warp;
  copy_async_span(w0s, w.rad_w0, nr * kC, threadIdx.x, blockDim.x);
  copy_async_span(xs, a.X0_bar + ((size_t)n * d.D + 1) * kC, P * kC, threadIdx.x, blockDim.x);
  copy_async_wait();
  __syncthreads();
  // Y[p, k] = sum_c W1[k, l C + c] X0_bar[n, p + 1, c] (c ascending); W1^T's rows keep a warp's
  // loads of one c in one line.
  for (int t = threadIdx.x; t < P * kC; t += blockDim.x) {
    const int p = t / kC, kk = t % kC, l = degree_of_packed(p + 1);
    const float* wt = w.rad_w1_t + (size_t)l * kC * kC + kk;
    float y = 0.0f;
#pragma unroll 8
    for (int c = 0; c < kC; ++c) y += xs[p * kC + c] * wt[(size_t)c * kC];
    ys[t] = y;
  }
  __syncthreads();
  // The centre's Y column k and W0's column k stay in registers for all its edges.
  float yv[P];
#pragma unroll
  for (int p = 0; p < P; ++p) yv[p] = ys[p * kC + k];
  const FoldHidden<NR> hid(w0s, nr, kC, k, d.edge_norm ? w.rad_norm[k] : 1.0f, d.edge_norm);
  const float sc = a.isd[n];
  const int e0 = a.off[n] - a.e0, ne = a.off[n + 1] - a.off[n];
  const int eb = e0 + (int)((long)ne * warp / kWarps), ee = e0 + (int)((long)ne * (warp + 1) / kWarps);
  // Lane p < P writes entry p of each edge's Wigner-row adjoint: its old value is loaded an edge
  // ahead (the row is this warp's alone), so the add does not wait on memory.
  const int my_o = k < P ? dc_m0(k + 1) : 0;
  float old_nxt = k < P && eb < ee ? a.Dc_bar[(size_t)eb * dcs + my_o] : 0.0f;
  for (int b = eb; b < ee; b += 32) {
    const int cnt = min(32, ee - b);
    __syncwarp();  // the previous batch's rows are read
    copy_async_span(st + S.rb, a.rbf + (size_t)b * nr, cnt * nr, k, 32);
    copy_async_span(st + S.dc, a.Dc + (size_t)b * dcs, cnt * dcs, k, 32);
    if (k < cnt) {
      st[S.en + k] = a.env[b + k];
      st[S.ga + k] = a.gate ? a.gate[b + k] : 1.0f;
    }
    copy_async_wait();
    __syncwarp();
    for (int i = 0; i < cnt; ++i) {
      const int e = b + i;  // chunk-relative
      const float old = old_nxt;
      if (k < P && e + 1 < ee) old_nxt = a.Dc_bar[(size_t)(e + 1) * dcs + my_o];
      // a_e[k] as the forward forms it (gie_forward_fold_k, the radial tiles)
      const float ea = st[S.en + i] * hid(st + S.rb + i * nr), ge = st[S.ga + i];
      const float* zr = st + S.dc + i * dcs;
      float g = 0.0f;
#pragma unroll
      for (int p = 0; p < P; ++p) g += zr[dc_m0(p + 1)] * yv[p];
      if (a.gate) g *= ge;
      a.G[(size_t)e * kC + k] = sc * g;
      // v[p] = sum_k ea[k] Y[p, k], each to its slot, then lane p's entry and gate term.
      warp_sum_scatter<P>([&](int p) { return ea * yv[p]; }, k, [&](int p, float v) { st[S.vs + p] = v; });
      __syncwarp();
      float gp = 0.0f;
      if (k < P) {
        const float v = st[S.vs + k];
        gp = v * zr[my_o];
        a.Dc_bar[(size_t)e * dcs + my_o] = old + sc * (a.gate ? v * ge : v);
      }
      __syncwarp();  // the slots are read before the next edge's sums land
      if (a.gate) {
        gp = warp_sum(gp);
        if (k == 0) a.gate_bar[e] += sc * gp;
      }
    }
  }
}

}  // namespace

bool gie_backward_folds(const Dims& d) {
  static const bool legacy = env_on("SEZM_CUDA_GIE_LEGACY");
  return !legacy && d.C == kC && d.L >= 1 && d.L <= 3 && d.D - 1 <= kMaxP && d.nr >= 1 &&
         FoldBwdSmem(d).total * sizeof(float) <= 48 * 1024 && radial_backward_plain(d);
}

void launch_gie_edge_backward_folded(const Dims& d, const ModelWDev& w, const GieFoldArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  if (!gie_backward_folds(d) || w.rad_w1_t == nullptr)
    throw Error("device cuda: launch_gie_edge_backward_folded outside its shapes (gie_backward_folds)");
  const FoldBwdSmem S(d);
  const size_t bytes = S.total * sizeof(float);
  auto run = [&](auto kernel) { kernel<<<a.N, 32 * kWarps, bytes, s>>>(d, w, S, a); };
  const bool nr16 = d.nr == 16;  // the shipped potentials' n_radial
  if (d.L == 1) nr16 ? run(gie_edge_backward_fold_k<1, 16>) : run(gie_edge_backward_fold_k<1, 0>);
  else if (d.L == 2) nr16 ? run(gie_edge_backward_fold_k<2, 16>) : run(gie_edge_backward_fold_k<2, 0>);
  else nr16 ? run(gie_edge_backward_fold_k<3, 16>) : run(gie_edge_backward_fold_k<3, 0>);
  SEZM_LAUNCH("gie_edge_backward_fold");
}

}  // namespace sezm::cuda
