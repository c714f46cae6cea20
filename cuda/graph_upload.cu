// The call's graph onto the device (EngineBuffers::size_for_call): src, the destination offsets,
// the types and the edge vectors through page-locked staging, in pieces, each piece's transfer in
// flight while the next is copied into the staging by four threads of the host's OpenMP team
// (common/parallel_copy.h); dst is not uploaded but written on the device from the offsets (the
// graph contract, graph/graph.h: edges grouped by destination, CSR).
// Where the graph carries its compact geometry (graph.h), the edge vectors are not uploaded
// either: the positions, each edge's source row and image-shift index and the shifts go up (~5
// bytes per edge instead of 24; 8 with a source row apart from src) and vec is formed on the
// device by the builder's own sums, so bit for bit.
// Why: from pageable memory the driver stages the bytes through its own buffers at one thread's
// copy rate, with the device idle (the call's first kernel needs the graph); docs/performance.md
// (2026-12-03, "the graph's upload through page-locked staging").
#include "buffers.cuh"
#include "common/parallel_copy.h"

namespace sezm::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t round_up(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

// The compact geometry's layout in graph_in: pos, then at, image and shifts where given.
struct CompactLayout {
  size_t pos = 0, at = 0, image = 0, shifts = 0, total = 0;
  explicit CompactLayout(const Graph& g) {
    at = pos + round_up(g.pos.size() * sizeof(double));
    image = at + round_up(g.at.size() * sizeof(int));
    shifts = image + round_up(g.image.size());
    total = shifts + round_up(g.shifts.size() * sizeof(double));
  }
};

// dst[e] = the centre whose range [off[i], off[i + 1]) holds e: a warp per centre.
__global__ void dst_from_offsets_k(const int* __restrict__ off, int N, int* __restrict__ dst) {
  const int i = static_cast<int>((static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
  if (i >= N) return;
  for (int e = off[i] + (threadIdx.x & 31); e < off[i + 1]; e += 32) dst[e] = i;
}

struct CompactGeometry {
  const double* pos;
  const int* at;                // null: the source's row is src[e]
  const unsigned char* image;   // null: no shifts
  const double* shifts;
};

// vec[e] from the compact geometry, with the builder's sums (graph.h): one rounding each, in
// the same order (the intrinsics forbid any contraction or reordering).
__global__ void vec_from_positions_k(CompactGeometry c, const int* __restrict__ src, const int* __restrict__ dst,
                                     int E, double* __restrict__ vec) {
  const int e = static_cast<int>(static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (e >= E) return;
  const size_t a = 3 * static_cast<size_t>(c.at ? c.at[e] : src[e]), d = 3 * static_cast<size_t>(dst[e]);
  const double* sh = c.image ? c.shifts + 3 * c.image[e] : nullptr;
  for (int k = 0; k < 3; ++k) {
    const double p = sh ? __dadd_rn(c.pos[a + k], sh[k]) : c.pos[a + k];
    vec[3 * static_cast<size_t>(e) + k] = __dsub_rn(p, c.pos[d + k]);
  }
}

}  // namespace

size_t compact_upload_bytes(const Graph& g) { return compact_geometry(g) ? CompactLayout(g).total : 0; }

void EngineBuffers::upload_graph(const Graph& gv, size_t compact_bytes, cudaStream_t s) {
  const size_t Er = static_cast<size_t>(E);
  // The staging is reused call after call: the previous call's transfers must be done (the
  // call ends with the stream synchronised; an exception may have left it busy).
  SEZM_CUDA(cudaStreamSynchronize(s));
  constexpr size_t kPiece = size_t(4) << 20;
  const size_t geometry = compact_bytes ? compact_bytes : round_up(3 * Er * sizeof(double));
  const size_t total = round_up((Er + N + 1 + NT) * sizeof(int)) + geometry + 4 * kAlign;
  char* const pin = graph_pin.get(total);
  size_t at = 0;
  const auto put = [&](void* dev, const void* host, size_t bytes) {
    for (size_t done = 0; done < bytes; done += kPiece) {
      const size_t n = bytes - done < kPiece ? bytes - done : kPiece;
      parallel_copy(pin + at + done, static_cast<const char*>(host) + done, n);
      SEZM_CUDA(cudaMemcpyAsync(static_cast<char*>(dev) + done, pin + at + done, n, cudaMemcpyHostToDevice, s));
    }
    at += round_up(bytes);
  };
  // The offsets first: dst's kernel needs only them.
  put(off.resize(N + 1), gv.dst_offsets.data(), (N + 1) * sizeof(int));
  dst.resize(Er);
  if (N > 0) dst_from_offsets_k<<<(N + 7) / 8, 256, 0, s>>>(off.data(), N, dst.data());
  SEZM_LAUNCH("dst_from_offsets_k");
  put(types.resize(NT), gv.types.data(), NT * sizeof(int));
  put(src.resize(Er), gv.src.data(), Er * sizeof(int));
  vec.resize(3 * Er);
  if (!compact_bytes) {
    put(vec.data(), gv.vec.data(), 3 * Er * sizeof(double));
    return;
  }
  const CompactLayout lay(gv);
  char* const in = graph_in.resize(lay.total);
  // Where a region is empty, put() moves nothing and advances nothing (round_up(0) == 0).
  put(in + lay.pos, gv.pos.data(), gv.pos.size() * sizeof(double));
  put(in + lay.at, gv.at.data(), gv.at.size() * sizeof(int));
  put(in + lay.image, gv.image.data(), gv.image.size());
  put(in + lay.shifts, gv.shifts.data(), gv.shifts.size() * sizeof(double));
  const CompactGeometry c{reinterpret_cast<const double*>(in + lay.pos),
                          gv.at.empty() ? nullptr : reinterpret_cast<const int*>(in + lay.at),
                          gv.image.empty() ? nullptr : reinterpret_cast<const unsigned char*>(in + lay.image),
                          reinterpret_cast<const double*>(in + lay.shifts)};
  if (E > 0)
    vec_from_positions_k<<<static_cast<unsigned>((Er + 255) / 256), 256, 0, s>>>(c, src.data(), dst.data(), E, vec.data());
  SEZM_LAUNCH("vec_from_positions_k");
}

}  // namespace sezm::cuda
