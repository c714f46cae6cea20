#pragma once
// Kokkos host layer: LAMMPS full neighbour list -> the engines' edge buffers (edge contract of
// src/neighbor/neighbor_list.h: dst = owned centre, src = owned or ghost neighbour, vec = x[src]
// - x[dst], CSR by dst). Knows nothing of LAMMPS types: it reads raw list arrays, so the same
// code can later read NeighListKokkos views on a device by changing the space aliases.
//
// Written against Kokkos 3.4 (Debian, Serial) and Kokkos 4: no deprecated 3.x calls, explicit
// execution/memory spaces, allocation through view_alloc.
#include <Kokkos_Core.hpp>

namespace sezm_kk {

using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using MemSpace = Kokkos::HostSpace;
using IntView = Kokkos::View<int*, Kokkos::LayoutRight, MemSpace>;
using VecView = Kokkos::View<double* [3], Kokkos::LayoutRight, MemSpace>;

// Starts Kokkos once per process when nobody else (e.g. a KOKKOS-enabled LAMMPS) did.
void ensure_initialized();

struct ListInput {
  int inum = 0;                  // centres in the list
  const int* ilist = nullptr;    // inum local indices, each < nlocal
  const int* numneigh = nullptr;  // indexed by local index
  int* const* firstneigh = nullptr;
  int neighmask = ~0;            // LAMMPS packs special-bond bits into the upper bits
  const double* x = nullptr;     // nall x 3, contiguous
  const int* type = nullptr;     // nall, LAMMPS types (1-based)
  const int* type_map = nullptr;  // LAMMPS type -> model type index (-1: unmapped)
  int nlocal = 0, nall = 0;
  double rcut = 0.0;
};

class EdgeBuffers {
 public:
  EdgeBuffers();
  // Counts, scans and fills the CSR for this step. Capacity only grows (by 1/8 headroom), so
  // steady-state steps allocate nothing. Returns the number of edges.
  int build(const ListInput& in);

  int n_edges() const { return n_edges_; }
  int n_nodes() const { return n_nodes_; }  // centres = owned atoms, rows [0, nlocal)
  int n_total() const { return n_total_; }  // owned + ghosts; ghost slot = LAMMPS index
  const int* src() const { return src_.data(); }
  const int* dst() const { return dst_.data(); }
  const int* offsets() const { return offsets_.data(); }
  const double* vec() const { return vec_.data(); }
  const int* types() const { return types_.data(); }
  long reallocations() const { return reallocations_; }
  double bytes() const;

 private:
  IntView count_, offsets_, src_, dst_, types_;
  VecView vec_;
  int n_edges_ = 0, n_nodes_ = 0, n_total_ = 0;
  long reallocations_ = 0;
};

}  // namespace sezm_kk
