// The call's graph onto the device (EngineBuffers::size_for_call): src, the destination offsets,
// the types and the edge vectors through page-locked staging, in pieces, each piece's transfer in
// flight while the next is copied into the staging by four threads of the host's OpenMP team
// (common/parallel_copy.h); dst is not uploaded but written on the device from the offsets (the
// graph contract, graph/graph.h: edges grouped by destination, CSR).
// Why: from pageable memory the driver stages the ~33 bytes per edge through its own buffers at
// one thread's copy rate, with the device idle (the call's first kernel needs the graph);
// docs/performance.md (2026-12-03, "the graph's upload through page-locked staging").
#include "buffers.cuh"
#include "common/parallel_copy.h"

namespace sezm::cuda {
namespace {

// dst[e] = the centre whose range [off[i], off[i + 1]) holds e: a warp per centre.
__global__ void dst_from_offsets_k(const int* __restrict__ off, int N, int* __restrict__ dst) {
  const int i = static_cast<int>((static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  if (i >= N) return;
  for (int e = off[i] + (threadIdx.x & 31); e < off[i + 1]; e += 32) dst[e] = i;
}

}  // namespace

void EngineBuffers::upload_graph(const Graph& gv, cudaStream_t s) {
  const size_t Er = static_cast<size_t>(E);
  // The staging is reused call after call: the previous call's transfers must be done (the
  // call ends with the stream synchronised; an exception may have left it busy).
  SEZM_CUDA(cudaStreamSynchronize(s));
  constexpr size_t kPiece = size_t(4) << 20, kAlign = 256;
  const auto round = [](size_t b) { return (b + kAlign - 1) / kAlign * kAlign; };
  const size_t total = round((Er + N + 1 + NT) * sizeof(int)) + round(3 * Er * sizeof(double)) + 4 * kAlign;
  char* const pin = graph_pin.get(total);
  size_t at = 0;
  const auto put = [&](void* dev, const void* host, size_t bytes) {
    for (size_t done = 0; done < bytes; done += kPiece) {
      const size_t n = bytes - done < kPiece ? bytes - done : kPiece;
      parallel_copy(pin + at + done, static_cast<const char*>(host) + done, n);
      SEZM_CUDA(cudaMemcpyAsync(static_cast<char*>(dev) + done, pin + at + done, n, cudaMemcpyHostToDevice, s));
    }
    at += round(bytes);
  };
  // The offsets first: dst's kernel needs only them.
  put(off.resize(N + 1), gv.dst_offsets.data(), (N + 1) * sizeof(int));
  dst.resize(Er);
  if (N > 0) dst_from_offsets_k<<<(N + 7) / 8, 256, 0, s>>>(off.data(), N, dst.data());
  SEZM_LAUNCH("dst_from_offsets_k");
  put(types.resize(NT), gv.types.data(), NT * sizeof(int));
  put(src.resize(Er), gv.src.data(), Er * sizeof(int));
  put(vec.resize(3 * Er), gv.vec.data(), 3 * Er * sizeof(double));
}

}  // namespace sezm::cuda
