#pragma once
// Gather and scatter of whole node rows by an index list: the device side of moving only an
// exchange's sent rows (GhostStaging, host_support.cuh; the host side and its CPU tests:
// src/engine/ghost_rows.h; the route: docs/multi-gpu.md). No CPU twin: the CPU engine exchanges
// its rows in place.
#include "cuda_common.cuh"

namespace sezm::cuda {

struct RowCopyArgs {
  int n_rows = 0;         // rows listed in idx
  size_t width = 0;       // floats per row
  const int* idx = nullptr;  // (n_rows) row indices into `rows`
  float* rows = nullptr;     // (any, width) the node rows
  float* compact = nullptr;  // (n_rows, width) one row per index, in idx order
};
// compact[i] = rows[idx[i]]
void launch_gather_rows(const RowCopyArgs& a, cudaStream_t s);
// rows[idx[i]] = compact[i] (idx unique)
void launch_scatter_rows(const RowCopyArgs& a, cudaStream_t s);

}  // namespace sezm::cuda
