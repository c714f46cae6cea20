// sezm-edge-bench: the LAMMPS edge layer alone (EdgeBuffers::build, the host's share of every MD
// step before the engine runs; docs/performance.md) on one rank's full neighbour list of rattled
// diamond, built here as LAMMPS builds it: owned atoms, then ghosts (the periodic images within
// rcut + skin of the box), every pair within rcut + skin in both directions, each centre's list in
// the order of a 27-bin stencil. No LAMMPS, no engine. Timings are reported, never asserted.
//   sezm-edge-bench [cells] [skin Å] [repeat]     (defaults 8 = 4,096 atoms, 1.0 as
//   examples/diamond's `neighbor 1.0 bin`, 20); OMP_NUM_THREADS threads; rcut 6 Å (C.pt)
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lattice.h"
#include "sezm_edge_buffers.h"

int main(int argc, char** argv) {
  const int cells = argc > 1 ? std::atoi(argv[1]) : 8;
  const double skin = argc > 2 ? std::atof(argv[2]) : 1.0;
  const int repeat = argc > 3 ? std::atoi(argv[3]) : 20;
  const double a = 3.567, rcut = 6.0, rlist = rcut + skin, box = cells * a;
  if (cells < 1 || repeat < 1 || !(skin >= 0)) {
    std::fprintf(stderr, "usage: sezm-edge-bench [cells >= 1] [skin >= 0] [repeat >= 1]\n");
    return 2;
  }
  std::vector<double> x = sezm_bench::rattled_lattice(sezm_bench::kDiamondBasis, cells, a);
  for (double& c : x) c = std::fmod(c + box, box);  // owned atoms inside the box, as LAMMPS keeps them
  const int nlocal = static_cast<int>(x.size() / 3);
  // Ghosts: images within rlist of the box, with the owned atom each is an image of.
  std::vector<int> owner;
  const int reach = static_cast<int>(std::ceil(rlist / box));
  for (int sx = -reach; sx <= reach; ++sx)
    for (int sy = -reach; sy <= reach; ++sy)
      for (int sz = -reach; sz <= reach; ++sz) {
        if (sx == 0 && sy == 0 && sz == 0) continue;
        for (int i = 0; i < nlocal; ++i) {
          const double p[3] = {x[3 * i] + sx * box, x[3 * i + 1] + sy * box, x[3 * i + 2] + sz * box};
          bool in = true;
          for (double c : p) in = in && c > -rlist && c < box + rlist;
          if (!in) continue;
          for (double c : p) x.push_back(c);
          owner.push_back(i);
        }
      }
  const int nall = static_cast<int>(x.size() / 3);
  // Bins of at least rlist over the ghost-extended box; each owned centre's list: the 27 bins
  // around it in a fixed order, pairs within rlist (neither the centre itself).
  const int nb = std::max(1, static_cast<int>((box + 2 * rlist) / rlist));
  const double bw = (box + 2 * rlist) / nb;
  auto bin_of = [&](int i, int d) { return std::min(nb - 1, std::max(0, static_cast<int>((x[3 * i + d] + rlist) / bw))); };
  std::vector<std::vector<int>> bins(static_cast<size_t>(nb) * nb * nb);
  for (int i = 0; i < nall; ++i) bins[(static_cast<size_t>(bin_of(i, 0)) * nb + bin_of(i, 1)) * nb + bin_of(i, 2)].push_back(i);
  std::vector<int> numneigh(nlocal), ilist(nlocal), pool;
  std::vector<size_t> start(nlocal);
  for (int i = 0; i < nlocal; ++i) {
    ilist[i] = i;
    start[i] = pool.size();
    const int b[3] = {bin_of(i, 0), bin_of(i, 1), bin_of(i, 2)};
    for (int dx = -1; dx <= 1; ++dx)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dz = -1; dz <= 1; ++dz) {
          const int c[3] = {b[0] + dx, b[1] + dy, b[2] + dz};
          if (std::min({c[0], c[1], c[2]}) < 0 || std::max({c[0], c[1], c[2]}) >= nb) continue;
          for (int j : bins[(static_cast<size_t>(c[0]) * nb + c[1]) * nb + c[2]]) {
            if (j == i) continue;
            double r2 = 0;
            for (int d = 0; d < 3; ++d) r2 += (x[3 * j + d] - x[3 * i + d]) * (x[3 * j + d] - x[3 * i + d]);
            if (r2 < rlist * rlist) pool.push_back(j);
          }
        }
    numneigh[i] = static_cast<int>(pool.size() - start[i]);
  }
  std::vector<int*> firstneigh(nlocal);
  for (int i = 0; i < nlocal; ++i) firstneigh[i] = pool.data() + start[i];
  std::vector<int> type(nall, 1), type_map = {-1, 0};

  sezm_kk::EdgeBuffers eb;
  sezm_kk::ListInput in;
  in.inum = nlocal;
  in.ilist = ilist.data();
  in.numneigh = numneigh.data();
  in.firstneigh = firstneigh.data();
  in.x = x.data();
  in.type = type.data();
  in.type_map = type_map.data();
  in.nlocal = nlocal;
  in.nall = nall;
  in.rcut = rcut;
  for (const bool one_rank : {true, false}) {
    in.ghost_owner = one_rank ? owner.data() : nullptr;
    std::vector<double> t;
    for (int r = 0; r < repeat + 2; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      eb.build(in);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    t.erase(t.begin(), t.begin() + 2);  // first touch of the buffers
    std::sort(t.begin(), t.end());
    std::printf("%s: %d atoms, %d ghosts, %zu listed pairs (rcut %.1f + skin %.1f Å), %d edges: build %.3f ms "
                "(median of %d; min %.3f, max %.3f)\n",
                one_rank ? "one rank (ghosts folded onto owners)" : "ghosts as nodes", nlocal, nall - nlocal,
                pool.size(), rcut, skin, eb.graph().n_edges(), 1e3 * t[t.size() / 2], repeat, 1e3 * t.front(),
                1e3 * t.back());
  }
  return 0;
}
