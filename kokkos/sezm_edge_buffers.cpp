#include "sezm_edge_buffers.h"

#include <cstdlib>

namespace sezm_kk {

void ensure_initialized() {
  if (Kokkos::is_initialized()) return;
  Kokkos::initialize();
  // Our views live in pair-style objects that are gone before exit in a normal run; after an
  // error exit they are simply leaked, which finalize tolerates.
  std::atexit([] { if (Kokkos::is_initialized()) Kokkos::finalize(); });
}

namespace {
// Grow-only reallocation; contents are rewritten by every build.
template <class V>
bool reserve(V& v, size_t n, const char* label) {
  if (v.extent(0) >= n) return false;
  const size_t cap = n + n / 8 + 16;
  v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), cap);
  return true;
}
}  // namespace

EdgeBuffers::EdgeBuffers() { ensure_initialized(); }

int EdgeBuffers::build(const ListInput& in) {
  const int nlocal = in.nlocal, nall = in.nall, inum = in.inum;
  n_nodes_ = nlocal;
  n_total_ = nall;
  reallocations_ += reserve(count_, nlocal, "sezm::edge_count");
  reallocations_ += reserve(offsets_, static_cast<size_t>(nlocal) + 1, "sezm::edge_offsets");
  reallocations_ += reserve(types_, nall, "sezm::node_types");

  const double rc2 = in.rcut * in.rcut;
  const double* x = in.x;
  const int* ilist = in.ilist;
  const int* numneigh = in.numneigh;
  int* const* firstneigh = in.firstneigh;
  const int mask = in.neighmask;
  const int* type = in.type;
  const int* tmap = in.type_map;
  IntView count = count_, offsets = offsets_, types = types_;

  // Owned atoms missing from ilist (none for a plain full list) keep zero edges.
  Kokkos::deep_copy(Kokkos::subview(count, Kokkos::make_pair(0, nlocal)), 0);
  // The Debian Kokkos has only the Serial backend: the two passes over the neighbour list (the
  // bulk of the work, ~2.4 M pairs at 4096 diamond atoms) are OpenMP loops over the Views' host
  // data instead. Each centre writes only its own count and edge range, so the result does not
  // depend on the thread count. Same selection as the standalone builder: 1e-10 < r^2 <= rcut^2.
  auto within = [=](int i, int j, double& dx, double& dy, double& dz) {
    dx = x[3 * j] - x[3 * i];
    dy = x[3 * j + 1] - x[3 * i + 1];
    dz = x[3 * j + 2] - x[3 * i + 2];
    const double r2 = dx * dx + dy * dy + dz * dz;
    return r2 > 1e-10 && r2 <= rc2;
  };
  int* cnt = count.data();
#pragma omp parallel for schedule(static)
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    const int* jl = firstneigh[i];
    int c = 0;
    double dx, dy, dz;
    for (int jj = 0; jj < numneigh[i]; ++jj) c += within(i, jl[jj] & mask, dx, dy, dz);
    cnt[i] = c;
  }
  int total = 0;
  Kokkos::parallel_scan(
      "sezm::edge_offsets", Kokkos::RangePolicy<ExecSpace>(0, nlocal + 1),
      KOKKOS_LAMBDA(const int i, int& partial, const bool final) {
        if (final) offsets(i) = partial;
        if (i < nlocal) partial += count(i);
      },
      total);
  n_edges_ = total;
  reallocations_ += reserve(src_, total, "sezm::edge_src");
  reallocations_ += reserve(dst_, total, "sezm::edge_dst");
  reallocations_ += reserve(vec_, total, "sezm::edge_vec");

  IntView src = src_, dst = dst_;
  VecView vec = vec_;
#pragma omp parallel for schedule(static)
  for (int ii = 0; ii < inum; ++ii) {
    const int i = ilist[ii];
    const int* jl = firstneigh[i];
    int e = offsets(i);
    double dx, dy, dz;
    for (int jj = 0; jj < numneigh[i]; ++jj) {
      const int j = jl[jj] & mask;
      if (!within(i, j, dx, dy, dz)) continue;
      src(e) = j;
      dst(e) = i;
      vec(e, 0) = dx;
      vec(e, 1) = dy;
      vec(e, 2) = dz;
      ++e;
    }
  }
  // Ghost slots are the LAMMPS indices themselves: a ghost no edge touches still relays its
  // owner's features to later swaps of the forward communication, so every ghost keeps a row.
  Kokkos::parallel_for(
      "sezm::node_types", Kokkos::RangePolicy<ExecSpace>(0, nall),
      KOKKOS_LAMBDA(const int k) { types(k) = tmap[type[k]]; });
  Kokkos::fence();
  return total;
}

double EdgeBuffers::bytes() const {
  return sizeof(int) * (count_.extent(0) + offsets_.extent(0) + src_.extent(0) + dst_.extent(0) + types_.extent(0)) +
         sizeof(double) * 3 * vec_.extent(0);
}

}  // namespace sezm_kk
