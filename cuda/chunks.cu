// Chunk planning and the per-chunk source grouping of the CUDA engine (host side).
#include "chunks.cuh"

#include <algorithm>
#include <cstdio>

namespace sezm::cuda {

void ChunkPlan::plan(const Graph& g, int limit) {
  grouped_ = false;
  chunks.clear();
  int n0 = 0;
  while (n0 < g.n_nodes) {
    int n1 = n0 + 1;
    while (n1 < g.n_nodes && g.dst_offsets[n1 + 1] - g.dst_offsets[n0] <= limit) ++n1;
    chunks.push_back(Chunk{n0, n1, g.dst_offsets[n0], g.dst_offsets[n1], 0, 0});
    n0 = n1;
  }
}

int ChunkPlan::max_edges() const {
  int m = 0;
  for (const Chunk& c : chunks) m = std::max(m, c.e1 - c.e0);
  return m;
}

int ChunkPlan::max_nodes() const {
  int m = 0;
  for (const Chunk& c : chunks) m = std::max(m, c.n1 - c.n0);
  return m;
}

void ChunkPlan::group_sources(const Graph& g, MemCounter* mem, cudaStream_t s, bool report) {
  if (grouped_) return;
  grouped_ = true;
  perm_h_.resize(g.n_edges());
  seg_node_h_.clear();
  seg_off_h_.assign(1, 0);
  src_count_.assign(g.n_total, 0);
  src_pos_.resize(g.n_total);
  for (Chunk& c : chunks) {
    c.s0 = static_cast<int>(seg_node_h_.size());
    touched_.clear();
    for (int e = c.e0; e < c.e1; ++e)
      if (src_count_[g.src[e]]++ == 0) touched_.push_back(g.src[e]);
    std::sort(touched_.begin(), touched_.end());
    int at = c.e0;
    for (int v : touched_) {
      seg_node_h_.push_back(v);
      src_pos_[v] = at;
      at += src_count_[v];
      seg_off_h_.push_back(at);
      src_count_[v] = 0;
    }
    for (int e = c.e0; e < c.e1; ++e) perm_h_[src_pos_[g.src[e]]++] = e;
    c.s1 = static_cast<int>(seg_node_h_.size());
  }
  perm_.set_counter(mem);
  seg_node_.set_counter(mem);
  seg_off_.set_counter(mem);
  perm_.upload(perm_h_.data(), perm_h_.size(), s);
  seg_node_.upload(seg_node_h_.data(), seg_node_h_.size(), s);
  seg_off_.upload(seg_off_h_.data(), seg_off_h_.size(), s);
  if (report) {
    int longest = 0;
    for (size_t i = 0; i + 1 < seg_off_h_.size(); ++i) longest = std::max(longest, seg_off_h_[i + 1] - seg_off_h_[i]);
    std::fprintf(stderr, "[sezm cuda timing] %zu chunks, %zu source segments (longest %d edges)\n", chunks.size(),
                 seg_node_h_.size(), longest);
  }
}

void ChunkPlan::group_segments_by_node(int n_total, MemCounter* mem, cudaStream_t s) {
  const size_t S = seg_node_h_.size();
  node_seg_off_h_.assign(static_cast<size_t>(n_total) + 1, 0);
  for (size_t t = 0; t < S; ++t) ++node_seg_off_h_[seg_node_h_[t] + 1];
  for (int k = 0; k < n_total; ++k) node_seg_off_h_[k + 1] += node_seg_off_h_[k];
  src_pos_.assign(node_seg_off_h_.begin(), node_seg_off_h_.end() - 1);  // each node's next slot
  node_seg_h_.resize(S);
  for (size_t t = 0; t < S; ++t) node_seg_h_[src_pos_[seg_node_h_[t]]++] = static_cast<int>(t);
  node_seg_off_.set_counter(mem);
  node_seg_.set_counter(mem);
  node_seg_off_.upload(node_seg_off_h_.data(), node_seg_off_h_.size(), s);
  node_seg_.upload(node_seg_h_.data(), S, s);
}

}  // namespace sezm::cuda
