// Rotate-back + destination sum, the forward's last per-edge step (CPU twin: engine/so2_convolution.h;
// docs/model.md §5.8; its backward: aggregate_backward_w in aggregate_backward_warp.cuh, launched from
// value_path.cu): P[n] = sum over n's in-edges of alpha rho_l D^T (alpha_fc U), one CTA per
// (centre, focus), the sums in double in a fixed order.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "async_copy.cuh"
#include "f16_rows.cuh"
#include "stack.cuh"
#include "value_path.cuh"

namespace sezm::cuda {
namespace {

// One CTA per (centre, focus), Cf x kAggRows threads: P[n, p, c] = sum_e alpha rho_l D^T
// (alpha_fc U). A chunk holds only ~100 centres, so the focus and the in-edges are spread over
// CTAs and R thread rows to keep the GPU busy; partial sums are added in a fixed order
// (deterministic).
// 8 rows: 16 rows for focus width 32 was measured slower on the H200 (6.3 vs 5.9 ms per 4096-atom
// call); double partials of at most 57 KiB (sm_89 allows 99 KiB).
//
// Memory-level parallelism (issue 16: 77 % of the warp cycles waited on memory when each thread
// row walked its ~20 edges with an edge's 10 U values, 46 Wigner-row values, alpha and alpha_fc
// loaded one edge after the other): the segment is walked in batches of B edges (B a multiple
// of R, chosen by the launcher). All the CTA's threads copy a batch's data into shared memory:
// the U rows of focus f of B consecutive edges are one contiguous range of B ROW floats
// (focus-major U), copied as 16-byte quads, the Wigner rows, another contiguous range, and the
// scales alpha, alpha_fc, all by asynchronous copies (copy_async16/4: every copy of a thread in
// flight at once, no registers held), into one of two slots: the next batch's copies are issued
// before this one's are waited for, so they overlap its sums (ncu, 512 atoms: the barrier
// after a batch's copies held 19 % of the samples with one slot). After a barrier each
// thread row adds its edges from shared memory only. Row y still takes the segment's edges
// y, y + R, ... in that order, so the sums, and the bits, are the old ones. The staging area
// shares the dynamic shared memory with the partial sums (the batch loop's last barrier orders
// every read of it before the partials are written). 64 registers for L = 3 (ptxas, sm_90): four
// 256-thread CTAs per SM (three at 70), so a 32768-edge chunk's ~400 CTAs run in one wave.
//
// DR (double Wigner rows, the default; SEZM_CUDA_AGG_F32ROWS=1 keeps the fp32 rows above for
// comparison): adding the rounded fp32 product row x v into the double sum converts every
// product, 46 per edge and channel, and fp32 -> fp64 conversions run at 16 per clock and SM:
// ~0.9 ms of conversions alone per 4096-atom call (647,168 edges, two blocks), next to ~1 ms of
// loads. DR converts each staged Wigner-row value once per CTA (a pass after the copy, one more
// barrier per batch) and each v once per row j, then adds the exact product (24 x 24 significant
// bits fit a double) with a double FMA: ~10 conversions per edge and channel instead of 46, and
// at least as accurate. It needs 70 registers (64 spill) and 12 bytes of staging per row value,
// so it runs 6 thread rows by default: four 192-thread CTAs per SM (528 slots on an H200); larger
// chunks take more rows where that saves a mostly idle wave (aggregate_rows).
constexpr int kAggRows = 8, kAggRowsDR = 6;

// The staging of one batch of B edges (a slot; two of them, the batch after the one being added
// in flight): U rows (B ROW), Wigner rows (B kDcs), alpha and alpha_fc (B each), each region a
// multiple of four floats so the next slot's U rows stay 16-byte aligned.
struct AggSlot {
  int U, D, A, Afc, size;
  __host__ __device__ AggSlot(const Dims& d, int B) {
    auto r4 = [](int n) { return (n + 3) / 4 * 4; };
    U = 0; D = r4(B * d.ROW); A = D + r4(B * d.dc_size); Afc = A + B; size = r4(Afc + B);
  }
};

// kF16: U in binary16 rows (stack_out_f16): a batch's halves staged (B ROW / 2 floats, then the
// edges' m = 0 and |m| = 1 inverse scales, nb each, in the slot's U region), each value half x scale.
template <int LT, bool DR, bool kF16>
__global__ void __launch_bounds__(512) rotate_back_aggregate_k(Dims d, int n0, int e0, int Ec, int B,
                                                               const int* __restrict__ off,
                                                               const float* __restrict__ Dc,
                                                               const float* __restrict__ U,
                                                               const float* __restrict__ alpha_fc,
                                                               const float* __restrict__ alpha,
                                                               float* __restrict__ P) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ __align__(16) double part[];  // (R - 1) x kD x Cf; before that the staging area:
  double* sDd = part;                             // DR: the batch's B x kDcs Wigner rows in double
  const AggSlot sl(d, B);
  float* slots = reinterpret_cast<float*>(DR ? sDd + (B * kDcs + 1) / 2 * 2 : part);  // two AggSlots
  const int n = n0 + blockIdx.x, f = blockIdx.y, cf = threadIdx.x, c = f * d.Cf + cf, y = threadIdx.y;
  const int R = blockDim.y, tid = y * d.Cf + cf, nt = R * d.Cf;
  // U is a chunk buffer and ROW = Dm Cf a multiple of 4: quads unless a caller passes an odd base.
  const bool quads = (reinterpret_cast<uintptr_t>(U) & 15) == 0;
  double acc[kMaxD];  // the destination sum feeds every later step: keep it in double
  #pragma unroll
  for (int p = 0; p < kD; ++p) acc[p] = 0.0;
  const int beg = off[n], end = off[n + 1];
  // Batch b0's copies into slot `to` (issued, not waited for).
  auto stage = [&](int b0, float* to) {
    const int nb = min(B, end - b0);
    if constexpr (kF16) {  // ROW halves per edge: ROW / 8 16-byte quads (ROW % 8 == 0), then the scales
      const float* Ub = U + ((size_t)f * Ec + (b0 - e0)) * d.ROW / 2;
      for (int x = tid; x < nb * d.ROW / 8; x += nt) copy_async16(to + sl.U + 4 * x, Ub + 4 * x);
      for (int x = tid; x < 2 * nb; x += nt)  // the batch's m = 0 scales, then its |m| = 1 ones
        copy_async4(to + sl.U + B * d.ROW / 2 + x, U + f16_scale_at(d.F, Ec, d.ROW, x / nb, f, b0 - e0 + x % nb));
    } else if (quads) {
      const float* Ub = U + ((size_t)f * Ec + (b0 - e0)) * d.ROW;
      for (int x = tid; x < nb * d.ROW / 4; x += nt) copy_async16(to + sl.U + 4 * x, Ub + 4 * x);
    } else {
      const float* Ub = U + ((size_t)f * Ec + (b0 - e0)) * d.ROW;
      for (int x = tid; x < nb * d.ROW; x += nt) copy_async4(to + sl.U + x, Ub + x);
    }
    for (int x = tid; x < nb * kDcs; x += nt) copy_async4(to + sl.D + x, Dc + (size_t)b0 * kDcs + x);
    for (int k = tid; k < nb; k += nt) {
      copy_async4(to + sl.A + k, alpha + (size_t)(b0 + k) * d.F + f);
      if (d.F > 1) copy_async4(to + sl.Afc + k, alpha_fc + (size_t)(b0 + k - e0) * d.F + f);
    }
  };
  if (beg < end) stage(beg, slots);
  copy_async_commit();
  for (int b0 = beg, t = 0; b0 < end; b0 += B, ++t) {
    const int nb = min(B, end - b0);
    // The next batch's copies go out first (its slot's last reader, batch t - 1, ended with the
    // barrier below), then this batch's are waited for: the loads overlap this batch's sums.
    if (b0 + B < end) stage(b0 + B, slots + ((t + 1) & 1) * sl.size);
    copy_async_commit();
    copy_async_wait_group<1>();
    __syncthreads();
    const float* st = slots + (t & 1) * sl.size;
    const float *sU = st + sl.U, *sD = st + sl.D, *sA = st + sl.A, *sAfc = st + sl.Afc;
    if constexpr (DR) {
      #pragma unroll 1
      for (int x = tid; x < nb * kDcs; x += nt) sDd[x] = (double)sD[x];
      __syncthreads();
    }
    for (int k = y; k < nb; k += R) {
      const float a = sA[k] * (d.F > 1 ? sAfc[k] : 1.0f);
      const float* u = sU + (size_t)k * d.ROW + cf;
      const __half* uh = reinterpret_cast<const __half*>(sU) + (size_t)k * d.ROW + cf;
      const float* us = sU + B * d.ROW / 2 + k;  // us[0]: the m = 0 scale, us[nb]: the |m| = 1 one
      #pragma unroll
      for (int j = 0; j < kDm; ++j) {
        const int l = red_l(j, LT), m = red_m(j, LT);
        const float uj = kF16 ? __half2float(uh[j * d.Cf]) * us[j <= LT ? 0 : nb] : u[j * d.Cf];
        const float v = a * rotate_back_scalef(l) * uj;
        if (l == 0) {
          acc[0] += v;
          continue;
        }
        const int r = k * kDcs + dc_off(l) + (m + 1) * (2 * l + 1);
        if constexpr (DR) {
          const double dv = v;
          #pragma unroll
          for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] = fma(sDd[r + mp + l], dv, acc[packed(l, mp)]);
        } else {
          #pragma unroll
          for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] += sD[r + mp + l] * v;
        }
      }
    }
    __syncthreads();  // the next batch's copies (or the partials) overwrite what was read here
  }
  if (y > 0) {
    #pragma unroll
    for (int p = 0; p < kD; ++p) part[((size_t)(y - 1) * kD + p) * d.Cf + cf] = acc[p];
  }
  __syncthreads();
  if (y == 0) {
    #pragma unroll
    for (int p = 0; p < kD; ++p) {
      for (int yy = 1; yy < R; ++yy) acc[p] += part[((size_t)(yy - 1) * kD + p) * d.Cf + cf];
      P[((size_t)n * kD + p) * d.Cw + c] = (float)acc[p];
    }
  }
}

// The kernel's shared memory for `rows` thread rows and its staging batch B (below).
size_t aggregate_bytes(const Dims& d, int rows, bool dr, int* B_out) {
  auto staging = [&](int B) {
    return (dr ? (size_t)(B * d.dc_size + 1) / 2 * 2 * sizeof(double) : 0) + 2 * (size_t)AggSlot(d, B).size * sizeof(float);
  };
  const size_t part = (size_t)(rows - 1) * d.D * d.Cf * sizeof(double);
  const size_t budget = part > 56 * 1024 ? part : 56 * 1024;
  int B = 16 / rows * rows;
  if (B < rows) B = rows;
  while (B > rows && staging(B) > budget) B -= rows;
  *B_out = B;
  return part > staging(B) ? part : staging(B);
}

// Thread rows per CTA: kAggRowsDR (kAggRows with fp32 rows) unless the chunk's centres x F CTAs
// would leave the last wave mostly idle. A CTA's time goes as its segment over its rows, so the
// launch takes the rows (6, 8 or 12 with double rows) with the fewest waves per row: on an H200
// (C.pt, L = 3, Cf = 32) 6 rows run 528 CTAs at once, 8 rows 396, 12 rows 264; a 57344-edge chunk's
// ~726 CTAs take two waves of 6 rows (one of them a third full) or two of 8. The rows set which
// thread row adds which edge, so the last bits of P may differ between choices (the sums are in
// double and rounded to fp32 once); fixed for a given GPU, model and chunk. SEZM_CUDA_AGG_ROWS=R
// forces R rows (R Cf <= 512).
int aggregate_rows(const Dims& d, int centres, bool dr) {
  static const int forced = [] {
    const char* v = std::getenv("SEZM_CUDA_AGG_ROWS");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (forced >= 1 && forced * d.Cf <= 512) return forced;  // the kernel's launch bound
  if (!dr) return kAggRows;
  const long ctas = static_cast<long>(centres) * d.F;
  int best = kAggRowsDR;
  double best_cost = 0.0;
  for (int rows : {kAggRowsDR, 8, 12}) {
    if (rows * d.Cf > 512) continue;
    int B = 0;
    const size_t bytes = aggregate_bytes(d, rows, dr, &B);
    const void* fn = d.L == 1   ? reinterpret_cast<const void*>(rotate_back_aggregate_k<1, true, false>)
                     : d.L == 2 ? reinterpret_cast<const void*>(rotate_back_aggregate_k<2, true, false>)
                                : reinterpret_cast<const void*>(rotate_back_aggregate_k<3, true, false>);
    const int slots = resident_grid(fn, d.Cf * rows, bytes, std::numeric_limits<int>::max());
    if (slots == 0) continue;
    const double cost = static_cast<double>((ctas + slots - 1) / slots) / rows;
    if (rows == kAggRowsDR || cost < best_cost) best = rows, best_cost = cost;
  }
  return best;
}
}  // namespace

void launch_rotate_back_aggregate(const Dims& d, const AggregateArgs& a, cudaStream_t s) {
  if (a.n1 <= a.n0) return;
  static const bool f32rows = env_on("SEZM_CUDA_AGG_F32ROWS");
  const bool dr = !f32rows;
  const int rows = aggregate_rows(d, a.n1 - a.n0, dr);
  const dim3 block(d.Cf, rows), grid(a.n1 - a.n0, d.F);
  // Staging batch B (aggregate_bytes): the largest multiple of the row count up to 16 edges whose
  // two slots (AggSlot) and double Wigner rows fit in 56 KiB, or in the partial sums' area where
  // that is larger (L = 3, C_f = 32, DR: 12 edges for 6 or 12 rows, 38.8 KiB; 16 for 8 rows,
  // 51.8 KiB).
  int B = 0;
  const size_t bytes = aggregate_bytes(d, rows, dr, &B);
  auto launch = [&](auto lt, auto drv, auto f16) {
    constexpr int LT = decltype(lt)::value;
    constexpr bool DR = decltype(drv)::value, F16 = decltype(f16)::value;
    if (bytes > 48 * 1024)  // focus width 64: 57 KiB of partial sums (fp32 rows)
      SEZM_CUDA(cudaFuncSetAttribute(rotate_back_aggregate_k<LT, DR, F16>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    rotate_back_aggregate_k<LT, DR, F16><<<grid, block, bytes, s>>>(d, a.n0, a.e0, a.Ec, B, a.off, a.Dc, a.U,
                                                                    a.alpha_fc, a.alpha, a.P);
  };
  if (stack_out_f16(d)) {  // binary16 rows (f16_rows.cuh): the chained forward's shape, L = 3
    if (d.L != 3 || d.ROW % 8 != 0 || (reinterpret_cast<uintptr_t>(a.U) & 15) != 0)
      throw Error("launch_rotate_back_aggregate: binary16 rows need L = 3 and 16-byte aligned rows");
    if (dr) launch(std::integral_constant<int, 3>{}, std::true_type{}, std::true_type{});
    else launch(std::integral_constant<int, 3>{}, std::false_type{}, std::true_type{});
    SEZM_LAUNCH("rotate_back_aggregate");
    return;
  }
  auto on_l = [&](auto drv) {
    const std::false_type f32;
    if (d.L == 1) launch(std::integral_constant<int, 1>{}, drv, f32);
    else if (d.L == 2) launch(std::integral_constant<int, 2>{}, drv, f32);
    else launch(std::integral_constant<int, 3>{}, drv, f32);
  };
  if (dr) on_l(std::true_type{});
  else on_l(std::false_type{});
  SEZM_LAUNCH("rotate_back_aggregate");
}

}  // namespace sezm::cuda
