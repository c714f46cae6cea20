#pragma once
// Chunk planning and the per-chunk source grouping (host side). Edges are processed in chunks
// of whole destination segments, so destination sums need no atomics; source-side sums read the
// chunk's edges grouped by source.
#include <vector>

#include "cuda_common.cuh"
#include "graph/graph.h"

namespace sezm::cuda {

// Centres [n0, n1), their edges [e0, e1), their source segments [s0, s1) (after grouping).
struct Chunk { int n0, n1, e0, e1, s0, s1; };

class ChunkPlan {
 public:
  std::vector<Chunk> chunks;

  // Chunks of whole destination segments of at most `limit` edges (a centre with more edges is a
  // chunk alone). Cheap: O(nodes). Forgets the previous call's source grouping.
  void plan(const Graph& g, int limit);
  int max_edges() const;
  int max_nodes() const;  // centres of the largest chunk (by centres)

  // Per chunk, its edges grouped by source (a counting sort: stable, so the order within a
  // source segment is the edge order), uploaded on `s`. Only calls with gradients need it; the
  // engine calls it once the first blocks' forward is queued, so it runs while the GPU works.
  // Idempotent within a call. `report`: print the segment counts (SEZM_CUDA_TIMING).
  void group_sources(const Graph& g, MemCounter* mem, cudaStream_t s, bool report);
  const int* perm() const { return perm_.data(); }
  const int* seg_node() const { return seg_node_.data(); }
  const int* seg_off() const { return seg_off_.data(); }

  // After group_sources: every node's source segments in chunk order (a stable counting sort of
  // the segments by node, O(segments + n_total) on the host), uploaded on `s`. Node k's segments
  // are node_seg()[node_seg_off()[k] .. node_seg_off()[k + 1]); with seg_off and perm they list
  // the edges whose source is k in edge order (the chunks are consecutive edge ranges). For the
  // device's force assembly (force_assembly.cuh).
  void group_segments_by_node(int n_total, MemCounter* mem, cudaStream_t s);
  const int* node_seg_off() const { return node_seg_off_.data(); }
  const int* node_seg() const { return node_seg_.data(); }

 private:
  bool grouped_ = false;
  std::vector<int> src_count_, src_pos_, touched_;  // per node / per chunk, reused across calls
  std::vector<int> perm_h_, seg_node_h_, seg_off_h_;
  std::vector<int> node_seg_off_h_, node_seg_h_;
  DBuf<int> perm_, seg_node_, seg_off_;
  DBuf<int> node_seg_off_, node_seg_;
};

}  // namespace sezm::cuda
