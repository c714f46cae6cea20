// The fused source-side backward of the SO(2) value path (CPU twin: so2_tile_backward in
// engine/so2_convolution.h; docs/model.md §7.9; the interface: source_backward.cuh).
//
// Why: condition_rotate_backward_w wrote each edge's X̄_loc (Dm Cw floats, 2560 B for C.pt) to
// memory and src_scatter_k read it back per source segment, and the first read the source's H
// rows (4 KiB) once per edge. Here one CTA per source segment stages the source's H rows once,
// and its kSrcWarps warps take the segment's edges (warp w the edges w, w + kSrcWarps, ... of
// the segment's order: a fixed assignment). A warp does per edge what condition_rotate_backward_w
// does (lanes over channels, NC = Cw / 32 adjacent ones each; the same per-edge outputs, by the
// same arithmetic in the same order), keeps X̄_loc in registers, and adds D^T X̄_loc and the key
// term into its own partial sums of the source's H̄ and k̄ rows in shared memory.
//
// Memory-level parallelism (the scatter's issue 16: most warp cycles waited on dependent loads):
// every per-edge row the warp reads (the edge's G rows, S̄_src, Rh, the R̄ rows it adds to, q[dst],
// the Wigner row and its adjoint, the kernel row, ℓ̄) is copied into one of the warp's two
// shared-memory slots by asynchronous copies (async_copy.cuh) issued one edge ahead: while a warp
// works on its edge k, edge k + 1's copies are in flight (cp.async groups, waited for with one
// group left open). The edge and destination indices of a warp's next 32 edges are read in one
// round trip, one per lane, and handed out by shuffles. The read-modify-writes of the Wigner-row
// adjoint and of R̄ add to the staged old rows (the same bits as "+=").
//
// Order of the source sums (fixed; it differs from the two-kernel path's, so H̄ and k̄ differ from
// it in the last bits): warp 0's partial starts from the old H̄[s] / k̄[s] rows and adds its edges
// in order, warps 1.. from zero; then H̄[s] = ((warp 0 + warp 1) + warp 2) + warp 3. Per edge,
// each H̄ entry p(l, m') takes the edge-frame rows j of degree l in ascending j.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "async_copy.cuh"
#include "radial_tables.cuh"
#include "source_backward.cuh"
#include "value_path_warp.cuh"

namespace sezm::cuda {
namespace {

// Warps (edges in flight) per CTA. A segment has 1 to ~50 edges (diamond, 4096 atoms): four warps
// keep a short segment's CTA from holding idle warps for long.
constexpr int kSrcWarps = 4;
// CTAs per SM the kernel is held to, as many as its shared memory allows for L = 3 (C.pt, Cw = 64:
// 50 KiB per CTA, four CTAs, 127 registers, no spills; Cw = 128: 96-111 KiB, two). Cw = 32 takes
// ~168 registers uncapped and spilled capped at 128 (ptxas, sm_90a): three CTAs.
template <int NC>
constexpr int kSrcCtas = NC == 2 ? 4 : NC == 4 ? 2 : 3;

// The dynamic shared memory in floats (every region a multiple of 4 floats: 16-byte aligned):
// the source's H rows (D Cw), then per warp its partial sums (D + 1) Cw (H̄, then k̄) and two
// slots of one edge's staged rows each.
struct SrcBwdLayout {
  int G, Sb, Rh, Rb, Q, D, Db, K, Lb, slot;  // a slot's regions and size
  int nrb;                                   // R̄ floats staged: all L + 1 rows (added to), or row 0
  int acc, warp, total;                      // per-warp partials, per-warp stride, all
};
inline int round4(int n) { return (n + 3) / 4 * 4; }
SrcBwdLayout src_bwd_layout(const Dims& d) {
  SrcBwdLayout y{};
  const bool rows_to_rbar = !d.degree_mixer && !d.has_rh;  // Rh̄ is added to R̄ directly
  y.nrb = rows_to_rbar ? (d.L + 1) * d.C : d.C;
  y.G = 0;                                            // F runs of ROW: the edge's G rows
  y.Sb = y.G + d.Dm * d.Cw;                           // S̄_src, [f Cf + cf] (F > 1)
  y.Rh = y.Sb + (d.F > 1 ? d.Cw : 0);                 // Rh rows (no mixer)
  y.Rb = y.Rh + (d.degree_mixer ? 0 : (d.L + 1) * d.Cw);
  y.Q = y.Rb + round4(y.nrb);                         // q[dst]
  y.D = y.Q + d.Cw;                                   // Wigner row
  y.Db = y.D + round4(d.dc_size);                     // its adjoint (old values)
  y.K = y.Db + round4(d.dc_size);                     // kernel row (mixer)
  y.Lb = y.K + (d.degree_mixer ? padded_kernel_size(d) : 0);
  y.slot = y.Lb + round4(d.F);
  y.acc = (d.D + 1) * d.Cw;
  y.warp = y.acc + 2 * y.slot;
  y.total = d.D * d.Cw + kSrcWarps * y.warp;
  return y;
}

// rows runs of len floats, stride apart in memory, global -> shared (contiguous), as 16-byte
// copies where sizes and the global base allow, else 4-byte; threads t of nt.
__device__ __forceinline__ void copy_rows(float* sm, const float* gm, int rows, int len, size_t stride, int t,
                                          int nt) {
  if (len % 4 == 0 && stride % 4 == 0 && (reinterpret_cast<uintptr_t>(gm) & 15) == 0) {
    for (int r = 0; r < rows; ++r)
      for (int x = 4 * t; x < len; x += 4 * nt) copy_async16(sm + r * len + x, gm + r * stride + x);
  } else {
    for (int r = 0; r < rows; ++r)
      for (int x = t; x < len; x += nt) copy_async4(sm + r * len + x, gm + r * stride + x);
  }
}

// The lane's 16-byte copies of a row of kLen floats (kLen % 4 == 0; both ends 16-byte aligned).
template <int kLen>
__device__ __forceinline__ void copy_row16(float* sm, const float* gm, int lane) {
#pragma unroll
  for (int s = 0; s < (kLen + 127) / 128; ++s) {
    const int x = 4 * lane + 128 * s;
    if (kLen % 128 == 0 || x < kLen) copy_async16(sm + x, gm + x);
  }
}

// Rows that `stage` copies in 16-byte pieces from per-focus tables (G: F rows of len = ROW floats,
// Ec ROW apart; S̄_src: F rows of len = Cf, Ec Cf apart), landing one after the other: the lane's
// piece r starts at x = 4 lane + 128 r of the slot's region (x < kTotal), focus x / len's element
// x % len, so its source is the edge's focus-0 row + x + (x / len) (fstride - len). The foci of the
// lane's pieces, 4 bits each (F <= 16, source_backward_fused), are packed into one word at bit
// `shift` once per kernel (focus_bits), which keeps the registers of a per-piece table free.
template <int kTotal>
__device__ __forceinline__ uint64_t focus_bits(int len, int lane, int shift) {
  uint64_t b = 0;
#pragma unroll
  for (int r = 0; r < (kTotal + 127) / 128; ++r) {
    const int x = 4 * lane + 128 * r;
    if (x < kTotal) b |= static_cast<uint64_t>(x / len) << (shift + 4 * r);
  }
  return b;
}
template <int kTotal>
__device__ __forceinline__ void copy_focus_pieces(float* sm, const float* gm, size_t fstride, int len, uint64_t bits,
                                                  int shift, int lane) {
#pragma unroll
  for (int r = 0; r < (kTotal + 127) / 128; ++r) {
    const int x = 4 * lane + 128 * r;
    const int f = static_cast<int>(bits >> (shift + 4 * r)) & 15;
    if (kTotal % 128 == 0 || x < kTotal) copy_async16(sm + x, gm + x + f * (fstride - len));
  }
}

// The Wigner row's entries of degree l (its three rows m = -1, 0, 1 of 2l + 1 entries each, from
// dc_off(l)) loaded from the 16-byte aligned staged row sD as the float4s that cover them (at most
// seven, l = 3): ~12 128-bit loads for the row where each use read its entry alone (46 scalar
// loads; the slot's regions are multiples of 4 floats, src_bwd_layout). l is a constant once
// unrolled, and so is every index.
template <int LT>
struct DegreeQuads {
  static constexpr int kMax = (3 * (2 * LT + 1) + 6) / 4 + 1;
  float4 q[kMax];
  int q0;
  __device__ __forceinline__ DegreeQuads(const float* sD, int l) {
    const int off = dc_off(l), nq = (off + 3 * (2 * l + 1) - 1) / 4 - off / 4 + 1;
    q0 = off / 4;
#pragma unroll
    for (int i = 0; i < kMax; ++i)
      if (i < nq) q[i] = reinterpret_cast<const float4*>(sD)[q0 + i];
  }
  // Entry k of the whole row (dc_off(l) <= k < dc_off(l + 1)).
  __device__ __forceinline__ float operator()(int k) const {
    const float4& v = q[(k >> 2) - q0];
    return (k & 3) == 0 ? v.x : (k & 3) == 1 ? v.y : (k & 3) == 2 ? v.z : v.w;
  }
};

// rotate_in_w with H[src] read from shared memory (sHc: the lane's first channel of row 0).
template <int LT, int NC>
__device__ __forceinline__ void rotate_in_s(const float* sD, const float* sHc, int Cw,
                                            float (&xl)[EdgeShape<LT>::Dm][NC]) {
  ldv<NC>(sHc, xl[0]);
  // Degree by degree (each row j's sum is its own, over m' ascending: the order of the j does not
  // change its bits), the degree's Wigner entries loaded once.
#pragma unroll
  for (int l = 1; l <= LT; ++l) {
    const DegreeQuads<LT> dq(sD, l);
#pragma unroll
    for (int x = 0; x < 3; ++x) {
      const int j = l + x * LT, m = red_m(j, LT);
      const int row = dc_off(l) + (m + 1) * (2 * l + 1);
      float v[NC];
#pragma unroll
      for (int t = 0; t < NC; ++t) v[t] = 0.0f;
#pragma unroll
      for (int mp = -l; mp <= l; ++mp) {
        float h[NC];
        ldv<NC>(sHc + (size_t)packed(l, mp) * Cw, h);
#pragma unroll
        for (int t = 0; t < NC; ++t) v[t] += dq(row + mp + l) * h[t];
      }
#pragma unroll
      for (int t = 0; t < NC; ++t) xl[j][t] = v[t];
    }
  }
}

template <int LT, int NC>
__global__ void __launch_bounds__(32 * kSrcWarps, kSrcCtas<NC>)
    source_backward_w(Dims d, BlockWDev w, SourceBackwardArgs a, SrcBwdLayout lay) {
  using S = EdgeShape<LT>;
  // Cw = 32 NC (warp_lanes): a constant here, so the shared-memory rows' offsets are immediates.
  constexpr int kCw = 32 * NC;
  extern __shared__ __align__(16) float sm[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = NC * lane, f = c / d.Cf, cf = c % d.Cf;
  const int s = a.seg_node[blockIdx.x], tb = a.seg_off[blockIdx.x], n = a.seg_off[blockIdx.x + 1] - tb;
  const int Kp = padded_kernel_size(d);
  float* sH = sm;                                        // D x Cw
  float* acc = sm + S::D * kCw + warp * lay.warp;       // (D + 1) x Cw, the lane's columns only
  float* slots = acc + lay.acc;                          // two slots
  // The source's H rows (all threads) and, as warp 0's starting partials, its old H̄ and k̄ rows
  // (each lane its own columns): one copy group, waited for with the first edge's.
  copy_rows(sH, a.H + (size_t)s * S::D * kCw, 1, S::D * kCw, 0, threadIdx.x, 32 * kSrcWarps);
  if (warp == 0) {
#pragma unroll
    for (int p = 0; p < S::D; ++p) copy_async<4 * NC>(acc + p * kCw + c, a.H_bar + ((size_t)s * S::D + p) * kCw + c);
    copy_async<4 * NC>(acc + S::D * kCw + c, a.k_bar + (size_t)s * kCw + c);
  }
  copy_async_commit();
  const int nk = n > warp ? (n - warp + kSrcWarps - 1) / kSrcWarps : 0;  // this warp's edges
  // Edge k of the warp is the segment's edge warp + k kSrcWarps. Lane x holds the edge and
  // destination indices of the warp's edge kb + x (read 32 at a time as k passes kb + 32).
  int kb = -32, ereg = 0, dreg = 0;
  // Stages edge k (warp-uniform, called with k = 0, 1, 2, ...) into slot sl; returns its index.
  // Staging: the shapes that depend on L and Cw = 32 NC only are constants, and the per-focus
  // tables' pieces are placed once here (focus_bits, copy_focus_pieces), so an edge's copies are address arithmetic
  // and the copies themselves (copy_rows per region took ~480 warp instructions per edge for 17
  // copies; docs/performance.md, 2026-12-03).
  constexpr int kGTot = S::Dm * kCw, kSShift = 4 * ((kGTot + 127) / 128);
  static_assert(kSShift + 4 <= 64, "the foci of a lane's pieces fit one word");
  const uint64_t fbits = focus_bits<kGTot>(d.ROW, lane, 0) | focus_bits<kCw>(d.Cf, lane, kSShift);
  auto stage = [&](int k, float* sl) {
    if (k >= kb + 32) {
      kb = k;
      if (kb + lane < nk) {
        ereg = a.perm[tb + warp + (kb + lane) * kSrcWarps];
        dreg = a.dst[ereg];
      }
    }
    const int e = __shfl_sync(0xffffffffu, ereg, k - kb), dd = __shfl_sync(0xffffffffu, dreg, k - kb);
    const size_t i = (size_t)(e - a.e0);
    copy_focus_pieces<kGTot>(sl + lay.G, a.Gbuf + i * d.ROW, (size_t)a.Ec * d.ROW, d.ROW, fbits, 0, lane);
    if (d.F > 1)
      copy_focus_pieces<kCw>(sl + lay.Sb, a.Ssrc_bar + i * d.Cf, (size_t)a.Ec * d.Cf, d.Cf, fbits, kSShift, lane);
    if (!d.degree_mixer) copy_row16<(LT + 1) * kCw>(sl + lay.Rh, a.Rh + i * (LT + 1) * kCw, lane);
    if (a.R_bar != nullptr)
      for (int x = 4 * lane; x < lay.nrb; x += 128) copy_async16(sl + lay.Rb + x, a.R_bar + i * (LT + 1) * d.C + x);
    copy_row16<kCw>(sl + lay.Q, a.q + (size_t)dd * kCw, lane);
    // The Wigner row and its adjoint: S::Dcs floats, 8-byte pieces when even (L = 1, 3: at most
    // one per lane), else 4-byte ones.
    if constexpr (S::Dcs % 2 == 0) {
      static_assert(S::Dcs <= 64, "one 8-byte piece per lane");
      if (lane < S::Dcs / 2) {
        copy_async<8>(sl + lay.D + 2 * lane, a.Dc + (size_t)e * S::Dcs + 2 * lane);
        copy_async<8>(sl + lay.Db + 2 * lane, a.Dc_bar + (size_t)e * S::Dcs + 2 * lane);
      }
    } else {
#pragma unroll
      for (int x = lane; x < S::Dcs; x += 32) {
        copy_async4(sl + lay.D + x, a.Dc + (size_t)e * S::Dcs + x);
        copy_async4(sl + lay.Db + x, a.Dc_bar + (size_t)e * S::Dcs + x);
      }
    }
    if (d.degree_mixer) copy_rows(sl + lay.K, a.kern + i * Kp, 1, Kp, 0, lane, 32);
    for (int x = lane; x < d.F; x += 32) copy_async4(sl + lay.Lb + x, a.lbar + i * d.F + x);
    return e;
  };
  int e_cur = nk > 0 ? stage(0, slots) : 0;
  copy_async_commit();
  int e_nxt = nk > 1 ? stage(1, slots + lay.slot) : 0;
  copy_async_commit();  // (empty groups keep the group counts uniform)
  copy_async_wait_group<1>();  // the H rows, the old partials and edge 0 are in
  if (warp > 0 && nk > 0) {
#pragma unroll
    for (int p = 0; p <= S::D; ++p) {
      const float z[NC] = {};
      stv<NC>(acc + p * kCw + c, z);
    }
  }
  __syncthreads();  // every thread's H-row copies are visible
  float b[NC];
#pragma unroll
  for (int t = 0; t < NC; ++t) b[t] = d.degree_mixer ? w.cb[c + t] : 0.0f;
  const float scale = rsqrtf((float)d.Cf);
  for (int k = 0; k < nk; ++k) {
    __syncwarp();  // every lane's copies of edge k are visible
    float* sl = slots + (k & 1) * lay.slot;
    const int e = e_cur;
    const size_t i = (size_t)(e - a.e0);
    float ub[S::Dm][NC];
#pragma unroll
    for (int o = 0; o < S::Dm; ++o) ldv<NC>(sl + lay.G + f * d.ROW + o * d.Cf + cf, ub[o]);
    if (d.F > 1) {
      float sb[NC];
      ldv<NC>(sl + lay.Sb + c, sb);
#pragma unroll
      for (int t = 0; t < NC; ++t) ub[0][t] += sb[t];
    }
    const float* sD = sl + lay.D;
    float* sRb = sl + lay.Rb;
    float* Rb = a.R_bar + i * (LT + 1) * d.C;
    float xl[S::Dm][NC], xb[S::Dm][NC];
    rotate_in_s<LT, NC>(sD, sH + c, kCw, xl);
    if (!d.degree_mixer) {
      float rh[LT + 1][NC];
#pragma unroll
      for (int l = 0; l <= LT; ++l) ldv<NC>(sl + lay.Rh + l * kCw + c, rh[l]);
      // Rows l >= 1 of R̄ to memory, row 0 to the staged row, which the logit bias completes below.
      condition_backward_rh<LT, NC>(d, ub, rh, xl, xb,
                                    RhBarOut{a.Rh + i * (LT + 1) * kCw + c, sRb + c, sRb + c, Rb + c});
    } else {
      // The kernel row becomes its adjoint (zero padding).
      condition_backward_mixer<LT, NC>(sl + lay.K, b, ub, xl, xb, a.kern + i * Kp, Kp, lane);
    }
    // The source sums: H̄ p(l, m') += D[l, m_j, m'] X̄_loc[j] over the rows j of degree l
    // (ascending j), k̄ += scale ℓ̄[f] q[dst]; the lane's own columns of the warp's partials. A
    // degree's partial rows are loaded before its sums and stored after them, so the Wigner row's
    // float4 loads between are shared (no store to shared memory between them).
#pragma unroll
    for (int l = 0; l <= LT; ++l) {
      const DegreeQuads<LT> dq(sD, l == 0 ? 1 : l);  // (l = 0: unused)
      float v[2 * LT + 1][NC];
#pragma unroll
      for (int mp = -l; mp <= l; ++mp) ldv<NC>(acc + packed(l, mp) * kCw + c, v[mp + l]);
#pragma unroll
      for (int mp = -l; mp <= l; ++mp)
#pragma unroll
        for (int x = 0; x < (l == 0 ? 1 : 3); ++x) {
          const int j = l + x * LT;  // m = 0, -1, +1
          const float dv = l == 0 ? 1.0f : dq(dc_off(l) + (red_m(j, LT) + 1) * (2 * l + 1) + mp + l);
#pragma unroll
          for (int t = 0; t < NC; ++t)
            v[mp + l][t] = l == 0 ? v[mp + l][t] + xb[j][t] : v[mp + l][t] + dv * xb[j][t];
        }
#pragma unroll
      for (int mp = -l; mp <= l; ++mp) stv<NC>(acc + packed(l, mp) * kCw + c, v[mp + l]);
    }
    {
      float v[NC], qv[NC];
      float* kp = acc + S::D * kCw + c;
      ldv<NC>(kp, v);
      ldv<NC>(sl + lay.Q + c, qv);
      const float sc = scale * sl[lay.Lb + f];
#pragma unroll
      for (int t = 0; t < NC; ++t) v[t] += sc * qv[t];
      stv<NC>(kp, v);
    }
    // Dc_bar from the rotation: sum_c xb[j] H[src, p(l_j, m'), c], added to the staged old row.
    const float* sDb = sl + lay.Db;
    float* Db = a.Dc_bar + (size_t)e * S::Dcs;
    warp_sum_scatter<S::Dcs>(
        [&](int kk) {
          if (kk == 0) return 0.0f;
          int l, mp, j;
          dc_coords<LT>(kk, l, mp, j);
          float h[NC];
          ldv<NC>(sH + (size_t)packed(l, mp) * kCw + c, h);
          float v = 0.0f;
#pragma unroll
          for (int t = 0; t < NC; ++t) v += xb[j][t] * h[t];
          return v;
        },
        lane, [&](int kk, float v) { Db[kk] = sDb[kk] + v; });
    // The attention logit bias reads R[e, 0, :]: its adjoint lands on R̄ row 0 (after the other
    // lanes' staged row 0 above); folded (R̄ null), the radial backward reads ℓ̄ itself.
    __syncwarp();
    for (int x = lane; a.R_bar != nullptr && x < d.C; x += 32) {
      float v = 0.0f;
      for (int ff = 0; ff < d.F; ++ff) v += sl[lay.Lb + ff] * w.logit_u[(size_t)ff * d.C + x];
      Rb[x] = sRb[x] + v;
    }
    __syncwarp();  // every lane is done with the slot: edge k + 2 may overwrite it
    const int e_new = k + 2 < nk ? stage(k + 2, sl) : 0;
    copy_async_commit();
    copy_async_wait_group<1>();  // edge k + 1 is in (k + 2 stays in flight)
    e_cur = e_nxt;
    e_nxt = e_new;
  }
  __syncthreads();  // every warp's partials are written
  // H̄[s], k̄[s]: the warps with edges in order, warp 0's partial holding the old rows.
  const int nw = n < kSrcWarps ? n : kSrcWarps;
  float* part = sm + S::D * kCw;
  for (int x = threadIdx.x; x < (S::D + 1) * kCw; x += 32 * kSrcWarps) {
    float v = part[x];
    for (int ww = 1; ww < nw; ++ww) v += part[ww * lay.warp + x];
    if (x < S::D * kCw) a.H_bar[(size_t)s * S::D * kCw + x] = v;
    else a.k_bar[(size_t)s * kCw + x - S::D * kCw] = v;
  }
}

}  // namespace

bool source_backward_fused(const Dims& d) {
  static const bool legacy = env_on("SEZM_CUDA_SRCBWD_LEGACY");
  // The staging's 16-byte pieces (source_backward_w's stage) need Cf and C multiples of 4, its
  // packed foci F <= 16.
  if (legacy || warp_lanes(d) == 0 || d.Cf % 4 != 0 || d.C % 4 != 0 || d.F > 16) return false;
  // The current device's opt-in shared memory per CTA (once per host thread and device): the
  // widest shapes (Cw = 128, L = 3, no mixer: ~110 KiB) pass sm_86 / sm_89's 99 KiB.
  thread_local std::vector<std::pair<int, int>> optin;
  int dev = 0;
  SEZM_CUDA(cudaGetDevice(&dev));
  auto it = std::find_if(optin.begin(), optin.end(), [&](const std::pair<int, int>& o) { return o.first == dev; });
  if (it == optin.end()) {
    int v = 0;
    SEZM_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    it = optin.insert(optin.end(), {dev, v});
  }
  return (size_t)src_bwd_layout(d).total * sizeof(float) <= (size_t)it->second;
}

void launch_source_backward(const Dims& d, const BlockWDev& w, const SourceBackwardArgs& a, cudaStream_t s) {
  if (a.Ec == 0) return;
  if (a.R_bar == nullptr && !d.degree_mixer)
    throw Error("device cuda: launch_source_backward: R_bar may be left out (folded) only with the degree mixer");
  // The lanes' vector accesses to memory: the partial rows of H̄, k̄ and the Rh̄ / R̄ rows written.
  const int nc = warp_lanes(d, a.H_bar, a.k_bar, d.degree_mixer ? nullptr : a.Rh,
                            d.degree_mixer || d.has_rh ? nullptr : a.R_bar);
  if (!source_backward_fused(d) || nc == 0)
    throw Error("device cuda: launch_source_backward outside its shapes (source_backward_fused)");
  const SrcBwdLayout lay = src_bwd_layout(d);
  // The staging's pieces (16 bytes of the per-edge and per-node rows, 8 of the Wigner rows) need
  // the tables' bases so aligned: the engine's allocations are.
  if (!aligned_to(16, a.Gbuf, d.F > 1 ? a.Ssrc_bar : nullptr, d.degree_mixer ? nullptr : a.Rh, a.R_bar, a.q) ||
      !aligned_to(8, a.Dc, a.Dc_bar))
    throw Error("device cuda: launch_source_backward: a table's base is not aligned for its staging copies");
  const size_t bytes = (size_t)lay.total * sizeof(float);
  warp_dispatch(d.L, nc, [&](auto lt, auto ncv) {
    constexpr int LT = decltype(lt)::value, NC = decltype(ncv)::value;
    if (bytes > 48 * 1024)
      SEZM_CUDA(cudaFuncSetAttribute(source_backward_w<LT, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)bytes));
    source_backward_w<LT, NC><<<a.nseg, 32 * kSrcWarps, bytes, s>>>(d, w, a, lay);
  });
  SEZM_LAUNCH("source_backward");
  if (a.R_bar != nullptr) launch_radial_adjoint(d, w, RadialTablesArgs{a.e0, a.Ec, EdgeRadialIn{}, a.Rh, a.kern, a.R_bar}, s);
}

}  // namespace sezm::cuda
