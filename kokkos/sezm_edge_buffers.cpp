#include "sezm_edge_buffers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "common/error.h"

namespace sezm_kk {

void ensure_initialized() {
  if (Kokkos::is_initialized()) return;
  Kokkos::initialize();
  // Our views live in pair-style objects that are gone before exit in a normal run; after an
  // error exit they are simply leaked, which finalize tolerates.
  std::atexit([] { if (Kokkos::is_initialized()) Kokkos::finalize(); });
}

namespace {
// Sizes v to n; capacity only grows (with headroom). Contents are rewritten by every build, so a
// growth copies nothing. Returns whether it reallocated.
template <class T>
bool resize(std::vector<T>& v, size_t n) {
  const bool grow = v.capacity() < n;
  if (grow) {
    v.clear();
    v.reserve(n + n / 8 + 16);
  }
  v.resize(n);
  return grow;
}
IntView view_of(std::vector<int>& v) { return IntView(v.data(), v.size()); }
}  // namespace

EdgeBuffers::EdgeBuffers() { ensure_initialized(); }

const sezm::Graph& EdgeBuffers::build(const ListInput& in) {
  const int nlocal = in.nlocal, nall = in.nall, inum = in.inum;
  const int* owner = in.ghost_owner;
  const int n_total = owner ? nlocal : nall;
  g_.n_nodes = nlocal;
  g_.n_total = n_total;
  reallocations_ += resize(count_, nlocal);
  reallocations_ += resize(g_.dst_offsets, static_cast<size_t>(nlocal) + 1);
  reallocations_ += resize(g_.types, n_total);

  const double rc2 = in.rcut * in.rcut;
  const double* x = in.x;
  const int* ilist = in.ilist;
  const int* numneigh = in.numneigh;
  int* const* firstneigh = in.firstneigh;
  const int mask = in.neighmask;
  const int* type = in.type;
  const int* tmap = in.type_map;
  IntView count = view_of(count_), offsets = view_of(g_.dst_offsets), types = view_of(g_.types);

  // Owned atoms missing from ilist (none for a plain full list) keep zero edges.
  Kokkos::deep_copy(count, 0);
  // The Debian Kokkos has only the Serial backend: the two passes over the neighbour list (the
  // bulk of the work, ~2.4 M pairs at 4096 diamond atoms) are OpenMP loops over the Views' host
  // data instead. Each centre writes only its own count and edge range, so the result does not
  // depend on the thread count or the schedule. Dynamic, in runs of 64 centres: with a static
  // share per thread the loop waits for a thread that the CUDA driver's threads or another rank
  // has descheduled (the graph upload's hazard, common/parallel_copy.h); here the others take its
  // runs. Same selection as the standalone builder: 1e-10 < r^2 <= rcut^2.
  // Closer than 1e-5 Å (r^2 <= 1e-10) is not an edge but two coincident atoms: an error naming
  // both (docs/errors.md; the standalone search does the same). LAMMPS lists never hold an atom
  // itself, and a periodic image of it is a box length away.
  constexpr double kCoincident2 = 1e-10;
  auto within = [=](int i, int j, double& dx, double& dy, double& dz, double& r2) {
    dx = x[3 * j] - x[3 * i];
    dy = x[3 * j + 1] - x[3 * i + 1];
    dz = x[3 * j + 2] - x[3 * i + 2];
    r2 = dx * dx + dy * dy + dz * dz;
    return r2 > kCoincident2 && r2 <= rc2;
  };
  int* cnt = count.data();
  int bad_ii = inum, bad_j = -1;  // the first centre (in list order) with a coincident neighbour
  double bad_r2 = 0;
#pragma omp parallel for schedule(dynamic, 64)
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    const int* jl = firstneigh[i];
    int c = 0;
    double dx, dy, dz, r2;
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = jl[jj] & mask;
      c += within(i, j, dx, dy, dz, r2);
      if (r2 <= kCoincident2) {  // rare: only for the error
#pragma omp critical(sezm_edge_coincident)
        if (ii < bad_ii) bad_ii = ii, bad_j = j, bad_r2 = r2;
      }
    }
    cnt[i] = c;
  }
  if (bad_j >= 0) {
    char d[32];
    std::snprintf(d, sizeof d, "%.6g", std::sqrt(bad_r2));
    throw sezm::AtomError("edge list",
                          std::string("are coincident: distance ") + d + " Å, below 1e-05 Å (remove the duplicate atom)",
                          ilist[bad_ii], bad_j);
  }
  int total = 0;
  Kokkos::parallel_scan(
      "sezm::edge_offsets", Kokkos::RangePolicy<ExecSpace>(0, nlocal + 1),
      KOKKOS_LAMBDA(const int i, int& partial, const bool final) {
        if (final) offsets(i) = partial;
        if (i < nlocal) partial += count(i);
      },
      total);
  // The compact geometry (graph/graph.h): vec = x[j] - x[i] with x the positions of every atom
  // LAMMPS holds, ghosts included; with ghost_owner the source is the owner and j goes to `at`.
  try {
    reallocations_ += resize(g_.src, total);
    reallocations_ += resize(g_.dst, total);
    reallocations_ += resize(g_.vec, 3 * static_cast<size_t>(total));
    reallocations_ += resize(g_.pos, 3 * static_cast<size_t>(nall));
    if (owner) reallocations_ += resize(g_.at, total);
  } catch (const std::bad_alloc&) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", total * (2.0 * sizeof(int) + 3.0 * sizeof(double)) / 1048576.0);
    throw sezm::Error("edge list: out of memory for " + std::to_string(total) + " edges (" + b + " MiB) of " +
                      std::to_string(nlocal) + " owned atoms");
  }
  if (!owner) g_.at.clear();
  g_.image.clear();
  g_.shifts.clear();
  std::copy(x, x + 3 * static_cast<size_t>(nall), g_.pos.begin());

  // The source index of each atom held: itself, or with ghost_owner the owner of a ghost (a
  // lookup, not a branch on whether j is a ghost).
  reallocations_ += resize(fold_, nall);
  for (int j = 0; j < nall; ++j) fold_[j] = owner && j >= nlocal ? owner[j - nlocal] : j;
  const int* fold = fold_.data();
  int* src = g_.src.data();
  int* dst = g_.dst.data();
  double* vec = g_.vec.data();
  int* at = owner ? g_.at.data() : nullptr;
  const int* off = offsets.data();
  // Every listed pair is written at the next free slot, which advances only for an edge: no
  // branch on the distance test, whose outcome (about 6 pairs in 10 within rcut at LAMMPS's usual
  // skins) the CPU cannot predict (the mispredictions cost more than the writes: sezm-edge-bench,
  // docs/performance.md). A slot is written only below the centre's end, so the pairs after its
  // last edge write nothing, and a slot written for a pair outside rcut is the next edge's.
#pragma omp parallel for schedule(dynamic, 64)
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    const int* jl = firstneigh[i];
    const int n = numneigh[i], end = off[i + 1];
    int e = off[i];
    double dx, dy, dz, r2;
    for (int jj = 0; jj < n; ++jj) {
      const int j = jl[jj] & mask;
      const bool edge = within(i, j, dx, dy, dz, r2);
      if (e < end) {
        src[e] = fold[j];
        if (at) at[e] = j;
        dst[e] = i;
        vec[3 * static_cast<size_t>(e)] = dx;
        vec[3 * static_cast<size_t>(e) + 1] = dy;
        vec[3 * static_cast<size_t>(e) + 2] = dz;
      }
      e += edge;
    }
  }
  // With ghosts, ghost slots are the LAMMPS indices themselves: a ghost no edge touches still
  // relays its owner's features to later swaps of the forward communication, so every ghost
  // keeps a row.
  Kokkos::parallel_for(
      "sezm::node_types", Kokkos::RangePolicy<ExecSpace>(0, n_total),
      KOKKOS_LAMBDA(const int k) { types(k) = tmap[type[k]]; });
  Kokkos::fence();
  return g_;
}

double EdgeBuffers::bytes() const {
  return sizeof(int) * (count_.capacity() + fold_.capacity() + g_.dst_offsets.capacity() + g_.src.capacity() +
                        g_.dst.capacity() + g_.types.capacity() + g_.at.capacity()) +
         sizeof(double) * (g_.vec.capacity() + g_.pos.capacity());
}

}  // namespace sezm_kk
