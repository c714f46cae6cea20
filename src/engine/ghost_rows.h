#pragma once
// The host side of moving only the exchanged rows of a ghost exchange (FeatureExchange::sent_rows,
// engine.h): which owned rows cross, and their conversion between the device's float rows and the
// exchange's double rows. The CUDA engine's GhostStaging (cuda/host_support.cuh) gathers those
// owned rows on the device into a compact block and copies only that block and the ghost rows;
// this file holds the part of it that needs no device, so the CPU tests exercise it
// (tests/test_ghost_rows.cpp). docs/multi-gpu.md describes the route and its bytes. The
// conversions (ghost_rows.cpp) are compiled with the core's OpenMP, not in the CUDA files.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

namespace sezm {

class GhostRowPlan {
 public:
  // Adopt an exchange's sent rows for a graph of n_nodes owned rows and n_total rows. Throws
  // sezm::Error, naming the fault, unless they are sorted, unique and in [0, n_total). Returns
  // true when the owned rows differ from the previous plan's (the caller then re-uploads them).
  bool set(const std::vector<int>& sent, int n_nodes, int n_total) {
    int prev = -1;
    size_t n_owned = 0;
    for (size_t i = 0; i < sent.size(); ++i) {
      const int r = sent[i];
      if (r < 0 || r >= n_total)
        throw Error("feature exchange: sent row " + std::to_string(r) + " outside the graph's " +
                    std::to_string(n_total) + " rows");
      if (r <= prev)
        throw Error("feature exchange: sent rows not sorted and unique (row " + std::to_string(r) + " after row " +
                    std::to_string(prev) + ")");
      prev = r;
      if (r < n_nodes) n_owned = i + 1;
    }
    const bool changed = n_nodes != n_nodes_ || n_total != n_total_ || n_owned != owned_.size() ||
                         !std::equal(owned_.begin(), owned_.end(), sent.begin());
    if (changed) owned_.assign(sent.begin(), sent.begin() + static_cast<std::ptrdiff_t>(n_owned));
    n_nodes_ = n_nodes;
    n_total_ = n_total;
    return changed;
  }
  // The owned rows that cross, ascending: the rows of the compact block, in its order.
  const std::vector<int>& owned() const { return owned_; }
  int n_nodes() const { return n_nodes_; }
  int n_total() const { return n_total_; }
  size_t n_ghosts() const { return static_cast<size_t>(n_total_ - n_nodes_); }

  // Compact float block (owned() rows of w) -> the double rows at those indices.
  void unpack(const float* compact, size_t w, double* rows) const;
  // The double rows at owned() -> compact float block.
  void pack(const double* rows, size_t w, float* compact) const;
  // Bytes between device and host per exchange of rows of w floats: forward (compact block down,
  // ghost rows up) and reverse (compact block and ghost rows down, compact block up).
  size_t forward_bytes(size_t w) const { return (owned_.size() + n_ghosts()) * w * sizeof(float); }
  size_t reverse_bytes(size_t w) const { return (2 * owned_.size() + n_ghosts()) * w * sizeof(float); }

 private:
  std::vector<int> owned_;
  int n_nodes_ = -1, n_total_ = -1;
};

// Host double rows of the staged route: n_total x w, the owned rows that never cross held at NaN,
// so that an exchange reading a row missing from its sent_rows() gives NaN ghosts (a non-finite
// energy, which the front ends stop on), never stale numbers. poison() after every plan change.
inline void poison_owned_rows(std::vector<double>& rows, int n_nodes, int n_total, size_t w) {
  rows.resize(static_cast<size_t>(n_total) * w);
  std::fill(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(n_nodes) * w),
            std::numeric_limits<double>::quiet_NaN());
}

// Float <-> double of n contiguous scalars (the ghost rows).
void widen(const float* f, size_t n, double* d);
void narrow(const double* d, size_t n, float* f);

}  // namespace sezm
