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

 private:
  bool grouped_ = false;
  std::vector<int> src_count_, src_pos_, touched_;  // per node / per chunk, reused across calls
  std::vector<int> perm_h_, seg_node_h_, seg_off_h_;
  DBuf<int> perm_, seg_node_, seg_off_;
};

}  // namespace sezm::cuda
