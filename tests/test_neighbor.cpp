// Neighbour search: the cell list against an O(N^2 · images) brute force, CSR invariants,
// invariances, and the reference configurations.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/engine.h"
#include "neighbor/neighbor_list.h"

namespace sezm {
namespace {

// The search itself is type-blind: these tests give every atom type 0.
Graph search(const double* pos, int n, const double* cell, double rcut) {
  const std::vector<int> types(static_cast<size_t>(n), 0);
  return build_graph(pos, types.data(), n, cell, rcut);
}

struct Edge {
  int dst, src;
  std::array<double, 3> vec;
  bool operator<(const Edge& o) const {
    return std::tie(dst, src, vec) < std::tie(o.dst, o.src, o.vec);
  }
};

// Every (i, j, S) in a generous image range, with the same distance expression and bounds
// as the contract: v = r_j + S·cell - r_i, 1e-10 < |v|^2 <= rcut^2. For each pair the range
// is centred on the shift that brings j nearest to i in fractional coordinates, and extends
// rcut / height + 1 images either way, which covers every image within rcut.
std::vector<Edge> brute_force(const std::vector<double>& pos, const double* cell, double rcut) {
  const int n = static_cast<int>(pos.size() / 3);
  std::vector<double> frac(pos.size(), 0.0);
  std::array<int, 3> reach{0, 0, 0};
  if (cell) {
    const double* a = cell;
    const double* b = cell + 3;
    const double* c = cell + 6;
    const std::array<std::array<double, 3>, 3> normal{{
        {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2], b[0] * c[1] - b[1] * c[0]},
        {c[1] * a[2] - c[2] * a[1], c[2] * a[0] - c[0] * a[2], c[0] * a[1] - c[1] * a[0]},
        {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]}}};
    const double det = a[0] * normal[0][0] + a[1] * normal[0][1] + a[2] * normal[0][2];
    for (int k = 0; k < 3; ++k) {
      const auto& nk = normal[k];
      const double height = std::abs(det) / std::sqrt(nk[0] * nk[0] + nk[1] * nk[1] + nk[2] * nk[2]);
      reach[k] = static_cast<int>(std::ceil(rcut / height)) + 1;
      for (int i = 0; i < n; ++i) {
        frac[3 * i + k] = (pos[3 * i] * nk[0] + pos[3 * i + 1] * nk[1] + pos[3 * i + 2] * nk[2]) / det;
      }
    }
  }
  std::vector<Edge> out;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      std::array<int, 3> mid;
      for (int k = 0; k < 3; ++k) mid[k] = static_cast<int>(std::lround(frac[3 * i + k] - frac[3 * j + k]));
      std::array<int, 3> s;
      for (s[0] = mid[0] - reach[0]; s[0] <= mid[0] + reach[0]; ++s[0]) {
        for (s[1] = mid[1] - reach[1]; s[1] <= mid[1] + reach[1]; ++s[1]) {
          for (s[2] = mid[2] - reach[2]; s[2] <= mid[2] + reach[2]; ++s[2]) {
            Edge e{i, j, {}};
            double d2 = 0;
            for (int k = 0; k < 3; ++k) {
              const double sv = cell ? s[0] * cell[k] + s[1] * cell[3 + k] + s[2] * cell[6 + k] : 0.0;
              e.vec[k] = pos[3 * j + k] + sv - pos[3 * i + k];
              d2 += e.vec[k] * e.vec[k];
            }
            if (d2 > 1e-10 && d2 <= rcut * rcut) out.push_back(e);
          }
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// CSR invariants and the documented within-centre order (src non-decreasing).
void check_invariants(const Graph& el, int n) {
  ASSERT_EQ(el.n_nodes, n);
  ASSERT_EQ(el.n_total, n);
  const size_t e = el.src.size();
  ASSERT_EQ(el.dst.size(), e);
  ASSERT_EQ(el.vec.size(), 3 * e);
  ASSERT_EQ(el.dst_offsets.size(), static_cast<size_t>(n) + 1);
  ASSERT_EQ(el.dst_offsets.front(), 0);
  ASSERT_EQ(static_cast<size_t>(el.dst_offsets.back()), e);
  for (int i = 0; i < n; ++i) {
    ASSERT_LE(el.dst_offsets[i], el.dst_offsets[i + 1]);
    for (int q = el.dst_offsets[i]; q < el.dst_offsets[i + 1]; ++q) {
      ASSERT_EQ(el.dst[q], i);
      ASSERT_GE(el.src[q], 0);
      ASSERT_LT(el.src[q], el.n_total);
      if (q > el.dst_offsets[i]) {
        ASSERT_LE(el.src[q - 1], el.src[q]);
      }
    }
  }
  // The compact geometry (graph/graph.h), where the search gives it, is vec bit for bit: every
  // edge, recomputed here from the positions and shifts (compact_geometry throws otherwise).
  if (!el.pos.empty()) {
    ASSERT_EQ(el.pos.size(), 3 * static_cast<size_t>(n));
    ASSERT_EQ(el.image.size(), e);
    EXPECT_TRUE(compact_geometry(el, 0));
  }
}

std::vector<Edge> edges_of(const Graph& el) {
  std::vector<Edge> out(el.src.size());
  for (size_t q = 0; q < el.src.size(); ++q) {
    out[q] = {el.dst[q], el.src[q], {el.vec[3 * q], el.vec[3 * q + 1], el.vec[3 * q + 2]}};
  }
  std::sort(out.begin(), out.end());
  return out;
}

void expect_same_edges(const std::vector<Edge>& got, const std::vector<Edge>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t q = 0; q < got.size(); ++q) {
    ASSERT_EQ(got[q].dst, want[q].dst) << "edge " << q;
    ASSERT_EQ(got[q].src, want[q].src) << "edge " << q;
    for (int k = 0; k < 3; ++k) ASSERT_NEAR(got[q].vec[k], want[q].vec[k], 1e-12) << "edge " << q;
  }
}

// Build, check invariants, compare with brute force; returns the list for further checks.
Graph check_against_brute_force(const std::vector<double>& pos, const double* cell, double rcut) {
  const int n = static_cast<int>(pos.size() / 3);
  Graph el = search(pos.data(), n, cell, rcut);
  check_invariants(el, n);
  expect_same_edges(edges_of(el), brute_force(pos, cell, rcut));
  return el;
}

// Cartesian positions from fractional ones.
std::vector<double> to_cartesian(const std::vector<double>& frac, const std::array<double, 9>& cell) {
  std::vector<double> pos(frac.size());
  for (size_t i = 0; i < frac.size() / 3; ++i) {
    for (int k = 0; k < 3; ++k) {
      pos[3 * i + k] = frac[3 * i] * cell[k] + frac[3 * i + 1] * cell[3 + k] + frac[3 * i + 2] * cell[6 + k];
    }
  }
  return pos;
}

// 8-atom conventional diamond cell, replicated reps^3 times.
std::vector<double> diamond(double a, int reps, std::array<double, 9>* cell) {
  const double basis[8][3] = {{0, 0, 0},       {0, .5, .5},     {.5, 0, .5},     {.5, .5, 0},
                              {.25, .25, .25}, {.25, .75, .75}, {.75, .25, .75}, {.75, .75, .25}};
  std::vector<double> pos;
  for (int x = 0; x < reps; ++x)
    for (int y = 0; y < reps; ++y)
      for (int z = 0; z < reps; ++z)
        for (const auto& b : basis) {
          pos.push_back((x + b[0]) * a);
          pos.push_back((y + b[1]) * a);
          pos.push_back((z + b[2]) * a);
        }
  *cell = {reps * a, 0, 0, 0, reps * a, 0, 0, 0, reps * a};
  return pos;
}

TEST(NeighborList, RandomTriclinicCellsMatchBruteForce) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 8; ++trial) {
    // Diagonal 4..9 Å, tilts up to ±half a diagonal, a small rotation-like off-diagonal part.
    std::array<double, 9> cell{};
    for (int r = 0; r < 3; ++r) {
      for (int k = 0; k < 3; ++k) {
        cell[3 * r + k] = r == k ? 4.0 + 5.0 * u(rng) : (u(rng) - 0.5) * (k < r ? 4.0 : 1.0);
      }
    }
    const int n = 5 + trial * 3;
    std::vector<double> frac(3 * n);
    for (double& f : frac) f = -0.3 + 1.6 * u(rng);  // some atoms outside the cell
    const double rcut = 3.0 + 4.0 * u(rng);
    SCOPED_TRACE("trial " + std::to_string(trial));
    check_against_brute_force(to_cartesian(frac, cell), cell.data(), rcut);
  }
}

TEST(NeighborList, CellSmallerThanRcutHasManySelfImages) {
  // 2.5 Å slightly sheared cell, rcut 6: several images per axis, ~120 edges per atom.
  const std::array<double, 9> cell{2.5, 0, 0, 0.3, 2.5, 0, -0.2, 0.1, 2.5};
  const std::vector<double> pos = to_cartesian({0.1, 0.2, 0.3, 0.6, 0.55, 0.8}, cell);
  const Graph el = check_against_brute_force(pos, cell.data(), 6.0);
  int self_images = 0;
  for (size_t q = 0; q < el.src.size(); ++q) self_images += el.src[q] == el.dst[q];
  EXPECT_GT(el.src.size(), 200u);
  EXPECT_GT(self_images, 100);
}

TEST(NeighborList, AtomsFarOutsideTheCell) {
  const std::array<double, 9> cell{5.0, 0, 0, 1.0, 4.5, 0, 0.5, -0.7, 6.0};
  const std::vector<double> frac{0.1,  0.2,   0.3,  7.4, -3.2, 0.5,  -12.9, 0.6, 1.0,
                                 0.99, 250.5, -0.01, 0.5, 0.5,  -40.5, 3.0,  3.0, 3.0};
  check_against_brute_force(to_cartesian(frac, cell), cell.data(), 5.5);
}

TEST(NeighborList, OpenClusterWithIsolatedAtom) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  std::vector<double> pos(3 * 20);
  for (double& x : pos) x = u(rng);
  pos.insert(pos.end(), {60.0, -40.0, 100.0});  // isolated, and stretches the bounding box
  const int isolated = 20;
  const Graph el = check_against_brute_force(pos, nullptr, 5.0);
  EXPECT_EQ(el.dst_offsets[isolated], el.dst_offsets[isolated + 1]);
  EXPECT_EQ(std::count(el.src.begin(), el.src.end(), isolated), 0);
  EXPECT_GT(el.src.size(), 0u);
}

TEST(NeighborList, DenseOpenClusterMatchesBruteForce) {
  // Wide enough for several bins per axis.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> pos(3 * 80);
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = u(rng) * (i % 3 == 0 ? 18.0 : 13.0);
  check_against_brute_force(pos, nullptr, 4.5);
}

TEST(NeighborList, EmptyAndSingleAtom) {
  const std::array<double, 9> cell{3, 0, 0, 0, 3, 0, 0, 0, 3};
  for (const double* c : {static_cast<const double*>(nullptr), cell.data()}) {
    const Graph el = search(nullptr, 0, c, 6.0);
    EXPECT_EQ(el.n_nodes, 0);
    EXPECT_EQ(el.src.size(), 0u);
    EXPECT_EQ(el.dst_offsets, std::vector<int>{0});
  }
  const double one[3] = {1.0, 2.0, 3.0};
  EXPECT_EQ(search(one, 1, nullptr, 6.0).src.size(), 0u);
  check_against_brute_force({1.0, 2.0, 3.0}, cell.data(), 6.0);  // only self-images
}

TEST(NeighborList, DiamondNeighbourCounts) {
  std::array<double, 9> cell;
  const std::vector<double> pos = diamond(3.567, 1, &cell);
  const Graph el = check_against_brute_force(pos, cell.data(), 6.0);
  const std::vector<Edge> ref = brute_force(pos, cell.data(), 6.0);
  for (int i = 0; i < 8; ++i) {
    const auto want = std::count_if(ref.begin(), ref.end(), [i](const Edge& e) { return e.dst == i; });
    EXPECT_EQ(el.dst_offsets[i + 1] - el.dst_offsets[i], want) << "atom " << i;
  }
}

TEST(NeighborList, LargeDiamondSupercellIsFastAndConsistent) {
  // 8x8x8 conventional cells = 4096 atoms: every atom must see what it sees in the 8-atom
  // cell (the supercell is wider than 2·rcut), and the build must be quick.
  std::array<double, 9> small_cell, cell;
  const std::vector<double> small = diamond(3.567, 1, &small_cell);
  const Graph ref = search(small.data(), 8, small_cell.data(), 6.0);
  const std::vector<double> pos = diamond(3.567, 8, &cell);
  const auto t0 = std::chrono::steady_clock::now();
  const Graph el = search(pos.data(), 4096, cell.data(), 6.0);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ timing   ] 4096-atom diamond, rcut 6: " << el.src.size() << " edges in " << ms << " ms\n";
  check_invariants(el, 4096);
  ASSERT_EQ(el.src.size(), 512 * ref.src.size());
  for (int i = 0; i < 4096; ++i) {
    EXPECT_EQ(el.dst_offsets[i + 1] - el.dst_offsets[i], ref.dst_offsets[i % 8 + 1] - ref.dst_offsets[i % 8]);
  }
  EXPECT_LT(ms, 2000.0);  // generous: the build takes tens of ms; this only catches O(N^2)
}

// The compact geometry: present for ordinary cells (one shift per image the edges use), absent
// where a tiny cell gives more than 256 distinct image shifts; its guard catches a vec edited
// after the build and indices out of range.
TEST(NeighborList, CompactGeometry) {
  std::array<double, 9> cell;
  std::vector<double> pos = diamond(3.567, 3, &cell);
  cell[3] = -1.1, cell[6] = 0.7, cell[7] = -0.4;  // negative tilts: some S·cell components are -0
  for (size_t i = 0; i < pos.size(); i += 3) pos[i] += -0.03 * (i % 7);  // atoms outside the cell too
  const Graph el = check_against_brute_force(pos, cell.data(), 6.0);
  ASSERT_FALSE(el.pos.empty());
  EXPECT_GE(el.shifts.size() / 3, 27u);  // a cell narrower than 2 rcut, atoms outside it
  EXPECT_TRUE(el.at.empty());
  for (const double* c : {static_cast<const double*>(nullptr), static_cast<const double*>(cell.data())}) {
    const Graph open = search(pos.data(), static_cast<int>(pos.size() / 3), c, 4.0);
    EXPECT_TRUE(compact_geometry(open, 0));
  }
  // 1.2 Å cell, rcut 6: ~520 images within reach, more than 256 distinct shifts.
  const std::array<double, 9> tiny{1.2, 0, 0, 0.2, 1.2, 0, 0, 0.1, 1.2};
  const Graph many = check_against_brute_force(to_cartesian({0.1, 0.2, 0.3}, tiny), tiny.data(), 6.0);
  EXPECT_TRUE(many.pos.empty() && many.image.empty() && many.shifts.empty());
  EXPECT_FALSE(compact_geometry(many));

  const auto throws = [](const Graph& g, const std::string& what) {
    try {
      compact_geometry(g, 0);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
    }
  };
  Graph edited = el;
  edited.vec[3 * (edited.src.size() / 2) + 1] += 1e-12;
  throws(edited, "was vec edited after the build");
  EXPECT_TRUE(compact_geometry(edited, 1));  // the edge checked (the first) is still right
  Graph far = el;
  far.image[far.image.size() - 1] = static_cast<unsigned char>(far.shifts.size() / 3);
  throws(far, "names image shift");
  far = el;
  far.at = far.src;  // the same rows, given apart from src
  EXPECT_TRUE(compact_geometry(far, 0));
  far.at.back() = static_cast<int>(far.pos.size() / 3);
  throws(far, "names row");
  far = el;
  far.image.pop_back();
  throws(far, "image holds");
  far = el;
  far.shifts.clear();
  throws(far, "image and shifts must be given together");
}

// Forces and virial from per-edge gradients on a graph large enough for the threaded assembly
// (>= 65536 edges): against plain sums written here, and bit-identical on a repeat.
TEST(ForceAssembly, LargeGraphMatchesPlainSums) {
  std::array<double, 9> cell;
  const std::vector<double> pos = diamond(3.567, 4, &cell);
  const int n = static_cast<int>(pos.size() / 3);
  const Graph el = search(pos.data(), n, cell.data(), 6.0);
  ASSERT_GE(el.src.size(), 65536u);
  const Graph& g = el;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> ge(3 * static_cast<size_t>(g.n_edges()));
  for (double& x : ge) x = u(rng);
  std::vector<double> f_ref(3 * static_cast<size_t>(n), 0.0), w_ref(9, 0.0);
  for (int e = 0; e < g.n_edges(); ++e)
    for (int k = 0; k < 3; ++k) {
      f_ref[3 * g.dst[e] + k] += ge[3 * e + k];
      f_ref[3 * g.src[e] + k] -= ge[3 * e + k];
      for (int j = 0; j < 3; ++j) w_ref[3 * k + j] -= ge[3 * e + k] * g.vec[3 * e + j];
    }
  std::vector<double> f(3 * static_cast<size_t>(n), 0.0), w(9, 0.0), f2 = f, w2 = w;
  assemble_forces_virial(g, ge.data(), f.data(), w.data(), nullptr);
  assemble_forces_virial(g, ge.data(), f2.data(), w2.data(), nullptr);
  EXPECT_EQ(f, f2);
  EXPECT_EQ(w, w2);
  double fmax = 0, wmax = 0, df = 0, dw = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    fmax = std::max(fmax, std::fabs(f_ref[i]));
    df = std::max(df, std::fabs(f[i] - f_ref[i]));
  }
  for (int k = 0; k < 9; ++k) {
    wmax = std::max(wmax, std::fabs(w_ref[k]));
    dw = std::max(dw, std::fabs(w[k] - w_ref[k]));
  }
  EXPECT_LE(df, 1e-12 * fmax);
  EXPECT_LE(dw, 1e-12 * wmax);
}

TEST(NeighborList, TranslationAndPermutationInvariance) {
  const std::array<double, 9> cell{6.1, 0, 0, 1.3, 5.7, 0, -0.9, 1.1, 6.4};
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> frac(3 * 12);
  for (double& f : frac) f = u(rng);
  const std::vector<double> pos = to_cartesian(frac, cell);
  const Graph base = search(pos.data(), 12, cell.data(), 5.0);

  // Translating every atom by a lattice vector keeps each pair's shift, hence order and vec.
  std::vector<double> moved = pos;
  for (size_t i = 0; i < 12; ++i) {
    for (int k = 0; k < 3; ++k) moved[3 * i + k] += cell[k] - 2 * cell[3 + k] + cell[6 + k];
  }
  const Graph t = search(moved.data(), 12, cell.data(), 5.0);
  ASSERT_EQ(t.src, base.src);
  ASSERT_EQ(t.dst, base.dst);
  for (size_t q = 0; q < base.vec.size(); ++q) ASSERT_NEAR(t.vec[q], base.vec[q], 1e-12);

  // Permuting the atoms relabels the edges and nothing else.
  std::vector<int> perm(12);  // new index of old atom
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<double> permuted(pos.size());
  for (int i = 0; i < 12; ++i) {
    for (int k = 0; k < 3; ++k) permuted[3 * perm[i] + k] = pos[3 * i + k];
  }
  std::vector<Edge> relabelled = edges_of(base);
  for (Edge& e : relabelled) e = {perm[e.dst], perm[e.src], e.vec};
  std::sort(relabelled.begin(), relabelled.end());
  const Graph p = search(permuted.data(), 12, cell.data(), 5.0);
  check_invariants(p, 12);
  expect_same_edges(edges_of(p), relabelled);
}

TEST(NeighborList, RejectsBadInput) {
  const double pos[6] = {0, 0, 0, 1, 1, 1};
  const double flat[9] = {3, 0, 0, 0, 3, 0, 3, 3, 0};  // third row in the plane of the first two
  const double zero[9] = {};
  const double cell[9] = {3, 0, 0, 0, 3, 0, 0, 0, 3};
  const double nan_pos[6] = {0, 0, 0, 1, std::nan(""), 1};
  EXPECT_THROW(search(pos, 2, flat, 6.0), Error);
  EXPECT_THROW(search(pos, 2, zero, 6.0), Error);
  EXPECT_THROW(search(nan_pos, 2, cell, 6.0), Error);
  EXPECT_THROW(search(nan_pos, 2, nullptr, 6.0), Error);
  EXPECT_THROW(search(pos, 2, cell, 0.0), Error);
  EXPECT_THROW(search(pos, 2, cell, INFINITY), Error);
  const double needle[9] = {0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01};  // ~10^9 images within rcut
  EXPECT_THROW(search(pos, 2, needle, 6.0), Error);
  const double far[6] = {0, 0, 0, 3e7, 0, 0};  // 10^7 cell lengths away
  EXPECT_THROW(search(far, 2, cell, 6.0), Error);
  try {
    search(pos, 2, flat, 6.0);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("singular"), std::string::npos) << e.what();
  }
}

TEST(NeighborList, ReferenceConfigurationsMatchBruteForce) {
  std::ifstream in(std::string(SEZM_TEST_DATA_DIR) + "/ref_c32_l3_f2_float64.json");
  ASSERT_TRUE(in) << "missing reference JSON";
  const nlohmann::json ref = nlohmann::json::parse(in);
  int periodic = 0;
  for (const auto& config : ref.at("configs")) {
    SCOPED_TRACE(config.at("name").get<std::string>());
    const auto coords = config.at("coords").get<std::vector<double>>();
    ASSERT_EQ(coords.size(), 3 * config.at("natoms").get<size_t>());
    if (config.at("cell").is_null()) {
      check_against_brute_force(coords, nullptr, 6.0);
    } else {
      const auto cell = config.at("cell").get<std::vector<double>>();
      ASSERT_EQ(cell.size(), 9u);
      check_against_brute_force(coords, cell.data(), 6.0);
      ++periodic;
    }
  }
  EXPECT_GE(periodic, 1);
}

}  // namespace
}  // namespace sezm
