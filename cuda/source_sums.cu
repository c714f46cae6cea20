// The source-side sums of the SO(2) value path's backward (CPU twin: engine/so2_convolution.h;
// docs/model.md §7.9): H_bar[s] += sum_e D^T Xloc_bar and the attention key adjoint k_bar[s], per
// source segment of a chunk's per-chunk source grouping (chunks.cu; no atomics, deterministic).
// Split from value_path.cu, whose kernels it mirrors. The two-kernel path only
// (SEZM_CUDA_SRCBWD_LEGACY=1, or shapes outside the warp kernels): by default source_backward.cu
// forms these sums per segment from the edges' X̄_loc without storing it.
#include <cstdint>

#include "async_copy.cuh"
#include "value_path.cuh"

namespace sezm::cuda {
namespace {

// One CTA of Cw x R threads per source segment of the chunk: H_bar[s] += sum_e D^T Xloc_bar,
// k_bar[s] += scale sum_e lbar q[dst]. A source near the chunk's centres has tens of edges in it
// (49 at most for the 4096-atom diamond): thread row y takes every R-th of them, so no thread
// walks a whole segment's chain of dependent loads alone; the rows' partial sums are added in a
// fixed order.
//
// Memory-level parallelism (issue 16: 72 % of the warp cycles waited on the chain perm -> edge
// -> (Xloc_bar row, Wigner row, lbar, dst) -> q[dst], taken one edge after the other by each
// row): the CTA first reads the edge and destination indices of up to BI of the segment's edges
// into shared memory (one thread per edge), then, in batches of B edges, copies their Xloc_bar
// rows (kDm Cw contiguous floats each, 16-byte quads), q[dst] rows, Wigner rows and lbar into
// shared memory with asynchronous copies (all of a thread's copies in flight at once), and the
// rows add their edges from shared memory. BI and B are multiples of R, so row y still takes the
// segment's edges y, y + R, ... in that order: the sums, and the bits, are the old ones. The
// staging area shares the dynamic shared memory with the partial sums. At most 512 threads
// (R = min(8, 512 / Cw): 8 rows up to Cw = 64), so that 40 registers (no spills, ptxas for
// sm_90) let three CTAs share an SM; 1024-thread CTAs could not be held under 64.
constexpr int kScatterThreads = 512;

template <int LT>
__global__ void __launch_bounds__(kScatterThreads, 3)
    src_scatter_k(Dims d, int B, int BI, const int* __restrict__ seg_node, const int* __restrict__ seg_off,
                  const int* __restrict__ perm, int e0, const int* __restrict__ dst, const float* __restrict__ Dc,
                  const float* __restrict__ Xloc_bar, const float* __restrict__ lbar, const float* __restrict__ q,
                  float* __restrict__ H_bar, float* __restrict__ k_bar, int h_off) {
  constexpr int kDm = 3 * LT + 1, kD = (LT + 1) * (LT + 1), kDcs = 1 + 3 * (kD - 1);
  (void)kDm; (void)kD; (void)kDcs;
  extern __shared__ __align__(16) float spart[];  // (R - 1) x (kD + 1) x Cw; before that the staging:
  const int XW = kDm * d.Cw;        // floats of an edge's Xloc_bar row
  float* sX = spart;                // B x XW
  float* sQ = sX + (size_t)B * XW;  // B x Cw: q[dst] rows
  float* sD = sQ + B * d.Cw;        // B x kDcs Wigner rows
  float* sL = sD + B * kDcs;        // B x F: lbar
  int* sE = reinterpret_cast<int*>(sL + B * d.F);  // BI edge indices
  int* sT = sE + BI;                               // BI destination indices
  const int sgi = blockIdx.x, c = threadIdx.x, y = threadIdx.y, R = blockDim.y, f = c / d.Cf;
  const int tid = y * d.Cw + c, nt = R * d.Cw;
  // The segment's node and edge range in one round trip (before the asm copies below, which no
  // load may cross).
  const int s = seg_node[sgi], tb = seg_off[sgi], t1 = seg_off[sgi + 1];
  const float scale = rsqrtf((float)d.Cf);
  const bool quads =
      d.Cw % 4 == 0 && ((reinterpret_cast<uintptr_t>(Xloc_bar) | reinterpret_cast<uintptr_t>(q)) & 15) == 0;
  // The source's H_bar and k_bar rows, read at the start (asynchronously, waited for with the
  // first batch) instead of after the sums: the closing read-modify-write was one more dependent
  // round trip at the end of every CTA. No other CTA of the launch touches source s.
  float* sH = reinterpret_cast<float*>(reinterpret_cast<char*>(spart) + h_off);  // (kD + 1) x Cw
  const bool hquads =
      d.Cw % 4 == 0 && ((reinterpret_cast<uintptr_t>(H_bar) | reinterpret_cast<uintptr_t>(k_bar)) & 15) == 0;
  {
    const float* hrow = H_bar + (size_t)s * kD * d.Cw;
    const float* krow = k_bar + (size_t)s * d.Cw;
    if (hquads) {
      for (int x = tid; x < kD * d.Cw / 4; x += nt) copy_async16(sH + 4 * x, hrow + 4 * x);
      for (int x = tid; x < d.Cw / 4; x += nt) copy_async16(sH + kD * d.Cw + 4 * x, krow + 4 * x);
    } else {
      for (int x = tid; x < kD * d.Cw; x += nt) copy_async4(sH + x, hrow + x);
      for (int x = tid; x < d.Cw; x += nt) copy_async4(sH + kD * d.Cw + x, krow + x);
    }
  }
  float acc[kD + 1];  // acc[kD]: the k_bar sum
  #pragma unroll
  for (int p = 0; p <= kD; ++p) acc[p] = 0.0f;
  for (int t0 = tb; t0 < t1; t0 += BI) {
    const int ni = min(BI, t1 - t0);
    for (int k = tid; k < ni; k += nt) sE[k] = perm[t0 + k];
    __syncthreads();
    for (int b = 0; b < ni; b += B) {
      const int nb = min(B, ni - b);
      // The edge rows (Xloc_bar, Wigner, lbar) need only the edge index: they are in flight while
      // the first batch reads the index batch's destinations (which were one more round trip
      // before any copy could start), then the q[dst] rows follow.
      if (quads) {
        for (int x = tid; x < nb * XW / 4; x += nt) {
          const int k = x / (XW / 4), r = x - k * (XW / 4);
          copy_async16(sX + 4 * x, Xloc_bar + (size_t)(sE[b + k] - e0) * XW + 4 * r);
        }
      } else {
        for (int x = tid; x < nb * XW; x += nt) {
          const int k = x / XW, r = x - k * XW;
          copy_async4(sX + x, Xloc_bar + (size_t)(sE[b + k] - e0) * XW + r);
        }
      }
      for (int x = tid; x < nb * kDcs; x += nt) {
        const int k = x / kDcs, r = x - k * kDcs;
        copy_async4(sD + x, Dc + (size_t)sE[b + k] * kDcs + r);
      }
      for (int x = tid; x < nb * d.F; x += nt) {
        const int k = x / d.F, r = x - k * d.F;
        copy_async4(sL + x, lbar + (size_t)(sE[b + k] - e0) * d.F + r);
      }
      if (b == 0) {
        for (int k = tid; k < ni; k += nt) sT[k] = dst[sE[k]];
        __syncthreads();
      }
      // Xloc_bar and q rows: Cw % 4 == 0 (model_dev.cuh limits), so 16-byte quads from the
      // (cudaMalloc-aligned) chunk and node buffers; single floats from any other base.
      if (quads) {
        for (int x = tid; x < nb * d.Cw / 4; x += nt) {
          const int k = x / (d.Cw / 4), r = x - k * (d.Cw / 4);
          copy_async16(sQ + 4 * x, q + (size_t)sT[b + k] * d.Cw + 4 * r);
        }
      } else {
        for (int x = tid; x < nb * d.Cw; x += nt) {
          const int k = x / d.Cw, r = x - k * d.Cw;
          copy_async4(sQ + x, q + (size_t)sT[b + k] * d.Cw + r);
        }
      }
      copy_async_wait();
      __syncthreads();
      for (int k = y; k < nb; k += R) {
        const float* Dce = sD + k * kDcs;
        const float* xb = sX + (size_t)k * XW + c;
        #pragma unroll
        for (int j = 0; j < kDm; ++j) {
          const int l = red_l(j, LT), m = red_m(j, LT);
          const float x = xb[j * d.Cw];
          if (l == 0) {
            acc[0] += x;
            continue;
          }
          const float* row = Dce + dc_off(l) + (m + 1) * (2 * l + 1);
          #pragma unroll
          for (int mp = -l; mp <= l; ++mp) acc[packed(l, mp)] += row[mp + l] * x;
        }
        acc[kD] += scale * sL[k * d.F + f] * sQ[k * d.Cw + c];
      }
      __syncthreads();  // the next batch (or index batch, or the partials) overwrite the staging
    }
  }
  if (y > 0) {
    #pragma unroll
    for (int p = 0; p <= kD; ++p) spart[((size_t)(y - 1) * (kD + 1) + p) * d.Cw + c] = acc[p];
  }
  copy_async_wait();  // sH (an empty segment never waited in the loop)
  __syncthreads();
  if (y > 0) return;
  #pragma unroll
  for (int p = 0; p <= kD; ++p)
    for (int yy = 1; yy < R; ++yy) acc[p] += spart[((size_t)(yy - 1) * (kD + 1) + p) * d.Cw + c];
  float* hb = H_bar + (size_t)s * kD * d.Cw + c;
  #pragma unroll
  for (int p = 0; p < kD; ++p) hb[(size_t)p * d.Cw] = sH[p * d.Cw + c] + acc[p];  // the old "+=", same bits
  k_bar[(size_t)s * d.Cw + c] = sH[kD * d.Cw + c] + acc[kD];
}

}  // namespace

void launch_src_scatter(const Dims& d, const SourceSumArgs& a, cudaStream_t s) {
  if (a.nseg == 0) return;
  const int rows = std::max(1, std::min(8, kScatterThreads / d.Cw));
  const dim3 block(d.Cw, rows);
  // Staging batch B: the largest multiple of the row count up to 32 edges whose rows fit in
  // 48 KiB beside BI = 128 (rounded to a multiple of B) edge and destination indices (L = 3,
  // Cw = 64: 16 edges, 48 KiB).
  auto staging = [&](int B, int BI) {
    return (size_t)B * (d.Dm * d.Cw + d.Cw + d.dc_size + d.F) * sizeof(float) + 2 * (size_t)BI * sizeof(int);
  };
  auto index_batch = [](int B) { return B * (128 / B > 1 ? 128 / B : 1); };
  int B = 32 / rows * rows;
  while (B > rows && staging(B, index_batch(B)) > 48 * 1024) B -= rows;
  const int BI = index_batch(B);
  const size_t part = (size_t)(rows - 1) * (d.D + 1) * d.Cw * sizeof(float);
  // Then the source's H_bar and k_bar rows (16-byte aligned): 4.25 KiB for L = 3, Cw = 64.
  const size_t h_off = ((part > staging(B, BI) ? part : staging(B, BI)) + 15) / 16 * 16;
  const size_t bytes = h_off + (size_t)(d.D + 1) * d.Cw * sizeof(float);
  if (bytes > 48 * 1024) {
    const void* fn = d.L == 1 ? (const void*)src_scatter_k<1>
                   : d.L == 2 ? (const void*)src_scatter_k<2> : (const void*)src_scatter_k<3>;
    SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  }
  if (d.L == 1)
    src_scatter_k<1><<<a.nseg, block, bytes, s>>>(d, B, BI, a.seg_node, a.seg_off, a.perm, a.e0, a.dst, a.Dc,
                                                  a.Xloc_bar, a.lbar, a.q, a.H_bar, a.k_bar, (int)h_off);
  else if (d.L == 2)
    src_scatter_k<2><<<a.nseg, block, bytes, s>>>(d, B, BI, a.seg_node, a.seg_off, a.perm, a.e0, a.dst, a.Dc,
                                                  a.Xloc_bar, a.lbar, a.q, a.H_bar, a.k_bar, (int)h_off);
  else
    src_scatter_k<3><<<a.nseg, block, bytes, s>>>(d, B, BI, a.seg_node, a.seg_off, a.perm, a.e0, a.dst, a.Dc,
                                                  a.Xloc_bar, a.lbar, a.q, a.H_bar, a.k_bar, (int)h_off);
  SEZM_LAUNCH("src_scatter");
}

}  // namespace sezm::cuda
