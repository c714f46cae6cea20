#pragma once
// Forces and virials from dE/dv on the device (CPU twin: assemble_forces_virial,
// src/engine/engine.cpp), so that a call with forces (Engine::compute_forces) copies back
// 3 n_total forces and 9 virial terms instead of 3E edge gradients. Every sum is in a fixed order
// (no atomics: repeated calls are bit-identical):
//  - F_k = (sum of g_e over k's in-edges, in edge order) + (-sum of g_e over the edges whose
//    source is k, in edge order): the host's single-thread order (graphs under 65,536 edges),
//    so those forces equal the host's to the bit;
//  - the virial W[3i+j] = -sum_e g_{e,i} v_{e,j}: per centre over its in-edges (edge order), then
//    the centres in a fixed tree (the host sums edges in edge order: equal to rounding);
//  - the per-atom virial (only when asked): half of each edge's term on each endpoint, the
//    in-edges' sum plus the source edges' sum (the host adds them interleaved in edge order:
//    equal to rounding).
// The edges whose source is k come from the chunks' source grouping (ChunkPlan: per chunk, edges
// grouped by source, and each node's segments in chunk order): no per-edge array is added.
#include "cuda_common.cuh"

namespace sezm::cuda {

struct ForceAssemblyArgs {
  int N, NT;                // centres, all nodes (centres and ghosts)
  const int* off;           // (N + 1) in-edges of centre k: [off[k], off[k + 1])
  const int* perm;          // ChunkPlan::perm: positions -> edges, grouped by source per chunk
  const int* seg_off;       // ChunkPlan::seg_off: segment t holds positions [seg_off[t], seg_off[t + 1])
  const int* node_seg_off;  // (NT + 1) ChunkPlan::node_seg_off
  const int* node_seg;      // ChunkPlan::node_seg: node k's segments, in chunk order
  const double* edge_grad;  // (E, 3) dE/dv
  const double* vec;        // (E, 3) the edge vectors the host's Graph holds (double)
  double* forces;           // (NT, 3) written
  double* node_virial;      // (N, 9) scratch: each centre's in-edge virial
  double* atom_virial;      // (NT, 9) written, or null: not asked for
  double* virial;           // (9) written
};

void launch_force_assembly(const ForceAssemblyArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
