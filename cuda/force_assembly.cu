// Forces and virials from dE/dv on the device (CPU twin: assemble_forces_virial,
// src/engine/engine.cpp; the sums and their order: force_assembly.cuh).
#include "force_assembly.cuh"

namespace sezm::cuda {
namespace {

constexpr int kWarps = 8;          // warps per CTA of the assembly, one node each
constexpr int kVirThreads = 256;   // threads of the virial's tree

// One warp's staging of up to 32 edges: their dE/dv and vectors (3 doubles each).
struct Staged {
  double g[32 * 3], v[32 * 3];
  int pos[32];  // the batch's perm positions (source edges of several short segments)
};

// Lane `lane` (< n) copies edge e's dE/dv (and, with_v, its vector) into slot `lane`.
__device__ __forceinline__ void stage_edge(Staged& st, int lane, long e, bool with_v, const double* __restrict__ eg,
                                           const double* __restrict__ vec) {
#pragma unroll
  for (int c = 0; c < 3; ++c) st.g[3 * lane + c] = eg[3 * e + c];
  if (with_v) {
#pragma unroll
    for (int c = 0; c < 3; ++c) st.v[3 * lane + c] = vec[3 * e + c];
  }
}

// Adds the n staged edges in slot order, each lane one sum: lanes 0-2 the force component `lane`
// (f += g, or f -= g for the source side: the host's "fs[src] -= g"), lanes 3-11 (with_w) the
// virial component (i, j) = ((lane - 3) / 3, (lane - 3) % 3), w -= g_i v_j with the product
// rounded on its own as the host's loop rounds it (no contraction into an FMA).
template <bool kSub>
__device__ __forceinline__ void add_staged(const Staged& st, int lane, int n, bool with_w, double& f, double& w) {
  if (lane < 3) {
    for (int j = 0; j < n; ++j) f = kSub ? __dsub_rn(f, st.g[3 * j + lane]) : __dadd_rn(f, st.g[3 * j + lane]);
  } else if (with_w && lane < 12) {
    const int i = (lane - 3) / 3, jj = (lane - 3) % 3;
    for (int j = 0; j < n; ++j) w = __dsub_rn(w, __dmul_rn(st.g[3 * j + i], st.v[3 * j + jj]));
  }
}

// One warp per node k: F_k, centre k's in-edge virial and (atom_virial) k's per-atom virial.
__global__ void __launch_bounds__(kWarps * 32) force_assembly_k(ForceAssemblyArgs a) {
  __shared__ Staged stage[kWarps];
  const int lane = threadIdx.x & 31, k = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (k >= a.NT) return;  // whole warps: every shuffle below has the full warp
  Staged& st = stage[threadIdx.x >> 5];
  const bool av = a.atom_virial != nullptr;
  // In-edges (centres only): contiguous, in edge order.
  double fd = 0.0, wd = 0.0;
  if (k < a.N) {
    const int e1 = a.off[k + 1];
    for (int b = a.off[k]; b < e1; b += 32) {
      const int n = min(32, e1 - b);
      if (lane < n) stage_edge(st, lane, b + lane, true, a.edge_grad, a.vec);
      __syncwarp();
      add_staged<false>(st, lane, n, true, fd, wd);
      __syncwarp();  // the next batch overwrites the staging
    }
  }
  // Source edges: node k's segments in chunk order, each segment's edges in edge order, so the
  // edges in edge order. A batch is one piece of 32 of a long segment, or the next whole segments
  // whose edges fit in 32 slots.
  double fs = 0.0, ws = 0.0;
  const int t1 = a.node_seg_off[k + 1];
  for (int t = a.node_seg_off[k]; t < t1;) {
    int len = 0, p0 = 0;
    if (t + lane < t1) {
      const int sg = a.node_seg[t + lane];
      p0 = a.seg_off[sg];
      len = a.seg_off[sg + 1] - p0;
    }
    const int len0 = __shfl_sync(0xffffffffu, len, 0), q0 = __shfl_sync(0xffffffffu, p0, 0);
    if (len0 > 32) {  // segment t alone, 32 edges at a time
      for (int b = 0; b < len0; b += 32) {
        const int n = min(32, len0 - b);
        if (lane < n) stage_edge(st, lane, a.perm[q0 + b + lane], av, a.edge_grad, a.vec);
        __syncwarp();
        add_staged<true>(st, lane, n, av, fs, ws);
        __syncwarp();
      }
      ++t;
      continue;
    }
    int cum = len;  // inclusive prefix of the segment lengths over the lanes
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, cum, o);
      if (lane >= o) cum += x;
    }
    // Every segment holds at least one edge, so the lanes whose segments fit are a prefix (and
    // lane 0's does: len0 <= 32).
    const int m = __popc(__ballot_sync(0xffffffffu, t + lane < t1 && cum <= 32));
    const int n = __shfl_sync(0xffffffffu, cum, m - 1);
    if (lane < m)
      for (int q = 0; q < len; ++q) st.pos[cum - len + q] = p0 + q;
    __syncwarp();
    if (lane < n) stage_edge(st, lane, a.perm[st.pos[lane]], av, a.edge_grad, a.vec);
    __syncwarp();
    add_staged<true>(st, lane, n, av, fs, ws);
    __syncwarp();
    t += m;
  }
  if (lane < 3) a.forces[3 * (size_t)k + lane] = fd + fs;
  if (lane >= 3 && lane < 12) {
    if (k < a.N) a.node_virial[9 * (size_t)k + lane - 3] = wd;
    // Half of each edge's term on each endpoint: 0.5 (sum w) is the sum of the halves, exactly.
    if (av) a.atom_virial[9 * (size_t)k + lane - 3] = 0.5 * wd + 0.5 * ws;
  }
}

// The virial: the centres' in-edge virials summed by each thread over nodes i = tid mod the
// block, then the threads in a fixed tree.
__global__ void __launch_bounds__(kVirThreads) virial_k(int N, const double* __restrict__ node_virial,
                                                        double* __restrict__ virial) {
  __shared__ double part[9][kVirThreads];
  const int tid = threadIdx.x;
  double acc[9];
#pragma unroll
  for (int c = 0; c < 9; ++c) acc[c] = 0.0;
#pragma unroll 4
  for (int i = tid; i < N; i += kVirThreads)
#pragma unroll
    for (int c = 0; c < 9; ++c) acc[c] += node_virial[9 * (size_t)i + c];
#pragma unroll
  for (int c = 0; c < 9; ++c) part[c][tid] = acc[c];
  __syncthreads();
  for (int h = kVirThreads / 2; h > 0; h >>= 1) {
    if (tid < h)
#pragma unroll
      for (int c = 0; c < 9; ++c) part[c][tid] += part[c][tid + h];
    __syncthreads();
  }
  if (tid < 9) virial[tid] = part[tid][0];
}

}  // namespace

void launch_force_assembly(const ForceAssemblyArgs& a, cudaStream_t s) {
  if (a.NT > 0) {
    force_assembly_k<<<div_up(a.NT, kWarps), kWarps * 32, 0, s>>>(a);
    SEZM_LAUNCH("force_assembly");
  }
  virial_k<<<1, kVirThreads, 0, s>>>(a.N, a.node_virial, a.virial);
  SEZM_LAUNCH("force_assembly virial");
}

}  // namespace sezm::cuda
