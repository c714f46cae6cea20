#pragma once
// The benchmark programs' structures: perfect-lattice supercells (conventional cubic cells of
// side a, cells^3 of them), each coordinate rattled by N(0, 0.02 Å) from one fixed seed, so that
// forces are non-trivial and every program sees the same positions.
#include <array>
#include <random>
#include <vector>

namespace sezm_bench {

using Basis = std::vector<std::array<double, 3>>;
inline const Basis kDiamondBasis = {{0, 0, 0},       {0, .5, .5},     {.5, 0, .5},     {.5, .5, 0},
                                    {.25, .25, .25}, {.25, .75, .75}, {.75, .25, .75}, {.75, .75, .25}};
inline const Basis kFccBasis = {{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0}};

// x, y, z of every atom, cell by cell, not wrapped into the box.
inline std::vector<double> rattled_lattice(const Basis& basis, int cells, double a) {
  std::mt19937 rng(12345);
  std::normal_distribution<double> rattle(0.0, 0.02);
  std::vector<double> pos;
  for (int i = 0; i < cells; ++i)
    for (int j = 0; j < cells; ++j)
      for (int k = 0; k < cells; ++k)
        for (const auto& b : basis) {
          pos.push_back((i + b[0]) * a + rattle(rng));
          pos.push_back((j + b[1]) * a + rattle(rng));
          pos.push_back((k + b[2]) * a + rattle(rng));
        }
  return pos;
}

}  // namespace sezm_bench
