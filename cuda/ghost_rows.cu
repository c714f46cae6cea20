// Gather and scatter of node rows by an index list (ghost_rows.cuh). One thread per float4 where
// the row width allows it (every model's node rows, D*C with C a multiple of 4), else per float.
#include <cstdint>

#include "ghost_rows.cuh"

namespace sezm::cuda {

namespace {

template <class V, bool kGather>
__global__ void row_copy_k(long n, int vw, const int* __restrict__ idx, V* rows, V* compact) {
  const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const long i = t / vw, k = t - i * vw;
  V* r = rows + (long)idx[i] * vw + k;
  if (kGather) compact[t] = *r;
  else *r = compact[t];
}

template <bool kGather>
void row_copy(const RowCopyArgs& a, cudaStream_t s) {
  if (a.n_rows <= 0 || a.width == 0) return;
  if (a.width % 4 == 0 && reinterpret_cast<uintptr_t>(a.rows) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(a.compact) % 16 == 0) {
    const int vw = static_cast<int>(a.width / 4);
    const long n = (long)a.n_rows * vw;
    row_copy_k<float4, kGather><<<div_up(n, 256), 256, 0, s>>>(n, vw, a.idx, reinterpret_cast<float4*>(a.rows),
                                                              reinterpret_cast<float4*>(a.compact));
  } else {
    const int vw = static_cast<int>(a.width);
    const long n = (long)a.n_rows * vw;
    row_copy_k<float, kGather><<<div_up(n, 256), 256, 0, s>>>(n, vw, a.idx, a.rows, a.compact);
  }
  SEZM_LAUNCH(kGather ? "gather rows" : "scatter rows");
}

}  // namespace

void launch_gather_rows(const RowCopyArgs& a, cudaStream_t s) { row_copy<true>(a, s); }
void launch_scatter_rows(const RowCopyArgs& a, cudaStream_t s) { row_copy<false>(a, s); }

}  // namespace sezm::cuda
