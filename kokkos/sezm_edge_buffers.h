#pragma once
// Kokkos host layer: LAMMPS full neighbour list -> the engines' sezm::Graph (contract of
// src/graph/graph.h: dst = owned centre, src = owned or ghost neighbour, vec = x[src] - x[dst],
// CSR by dst; its compact geometry: pos = x of every atom held, at = the LAMMPS index of the
// source where ghosts are folded onto their owners). Knows nothing of LAMMPS types: it reads raw list arrays, so the same code can
// later read NeighListKokkos views on a device by changing the space aliases.
//
// Written against Kokkos 3.4 (Debian, Serial) and Kokkos 4: no deprecated 3.x calls, explicit
// execution/memory spaces, allocation through view_alloc.
#include <Kokkos_Core.hpp>
#include <vector>

#include "graph/graph.h"

namespace sezm_kk {

using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using MemSpace = Kokkos::HostSpace;
// The graph owns its arrays (std::vector); the Kokkos loops see them through unmanaged views.
using IntView = Kokkos::View<int*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

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
  // One rank: ghost_owner[g] is the owned atom that ghost nlocal + g is a periodic image of
  // (nall - nlocal entries, found by the caller with its own communication). Given, every edge
  // source is written as its owned atom and the graph has no ghosts (n_total = nlocal): the
  // standalone periodic graph, with no feature exchange and no node work on ghosts. nullptr:
  // sources stay LAMMPS indices and ghosts are nodes (several ranks).
  const int* ghost_owner = nullptr;
};

class EdgeBuffers {
 public:
  EdgeBuffers();
  // Counts, scans and fills the graph for this step. Capacity only grows (by 1/8 headroom), so
  // steady-state steps allocate nothing. The graph stays valid until the next build. Two atoms
  // closer than 1e-5 Å are a sezm::AtomError naming their local indices (LAMMPS indices: the
  // caller names them by atom ID); running out of memory is a sezm::Error with the edge count.
  const sezm::Graph& build(const ListInput& in);

  const sezm::Graph& graph() const { return g_; }
  long reallocations() const { return reallocations_; }
  double bytes() const;

 private:
  std::vector<int> count_;  // edges per owned centre
  std::vector<int> fold_;   // source index of each atom held (ghosts folded onto owners or not)
  sezm::Graph g_;
  long reallocations_ = 0;
};

}  // namespace sezm_kk
