#include "neighbor/neighbor_list.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace sezm {
namespace {

// Two atoms closer than this (squared, Å^2: 1e-5 Å) are coincident: an error naming both
// (docs/errors.md), since the model's edge is undefined at zero length and dropping the pair
// would change the energy silently. Periodic self-images that close (a lattice translation of
// 1e-5 Å) are not edges.
constexpr double kMinDist2 = 1e-10;
// Bins are made this much (relatively) wider than rcut so that rounding in the fractional
// coordinates used for binning can never hide a pair that the exact distance test keeps.
constexpr double kBinMargin = 1e-8;
// Atoms may lie outside the cell, but not absurdly far: wrapping loses ~|f|·1e-16 of
// fractional precision, which must stay well inside kBinMargin and kScreenSlack.
constexpr double kMaxWrap = 1e6;
// Candidates are pre-screened on the wrapped coordinates with this relative slack on rcut^2;
// the exact test on the original coordinates then decides.
constexpr double kScreenSlack = 1e-8;
// Refuse cells so small against rcut that the number of images visited per bin explodes.
constexpr double kMaxImagesPerBin = 1e6;

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::array<double, 3> cross(const double* u, const double* v) {
  return {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
}
double dot(const double* u, const double* v) { return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]; }
double norm(const double* u) { return std::sqrt(dot(u, u)); }

// Binning of space, per axis: `nbins` bins, and a centre's bin must search `reach` bins
// on either side. Periodic axes bin fractional coordinates in [0, 1) and step through
// images when the search leaves the cell; open axes bin the bounding box.
struct Grid {
  bool periodic = false;
  std::array<int, 3> nbins{1, 1, 1};
  std::array<int, 3> reach{0, 0, 0};
  std::vector<std::array<int, 3>> bin;   // per atom: bin index per axis
  std::vector<std::array<int, 3>> wrap;  // per atom: r = r_wrapped + wrap·cell (periodic)
  std::vector<double> wrapped;           // 3n: r_wrapped (periodic), r (open)
};

// Bin counts from the usable length per axis (cell height or bounding-box extent). Bins are
// at least rcut/2 (plus margin) wide, so a centre searches 5^3 bins of ~1/8 rcut^3 each:
// fewer wasted distance tests than 3^3 bins of rcut^3. At most O(n) bins in total: a sparse
// system in a large box must not cost memory proportional to its volume.
std::array<int, 3> choose_bins(const std::array<double, 3>& length, double rcut, int n) {
  std::array<double, 3> nb;
  for (int a = 0; a < 3; ++a) nb[a] = std::max(1.0, std::floor(2 * length[a] / (rcut * (1 + kBinMargin))));
  const double max_bins = 2.0 * n + 8.0;
  for (double total = nb[0] * nb[1] * nb[2]; total > max_bins; total = nb[0] * nb[1] * nb[2]) {
    const double s = std::cbrt(total / max_bins);
    for (double& x : nb) x = std::max(1.0, std::floor(x / s));
  }
  return {static_cast<int>(nb[0]), static_cast<int>(nb[1]), static_cast<int>(nb[2])};
}

// Bins a centre must search on either side along an axis of the given length cut into
// nbins: 2 when the bins are rcut/2 wide, more when they are narrower than that, i.e. in a
// cell of height < rcut/2, where each step past the cell is one more image.
double bin_reach(double length, int nbins, double rcut) {
  return std::ceil(rcut * (1 + kBinMargin) * nbins / length);
}

Grid periodic_grid(const double* pos, int n, const double* cell, double rcut) {
  const double* a = cell;
  const double* b = cell + 3;
  const double* c = cell + 6;
  // normal[k] is perpendicular to the two other lattice vectors: f_k = r·normal[k] / det.
  const std::array<std::array<double, 3>, 3> normal{cross(b, c), cross(c, a), cross(a, b)};
  const double det = dot(a, normal[0].data());
  const double scale = norm(a) * norm(b) * norm(c);
  if (!std::isfinite(det) || !(std::abs(det) > 1e-12 * scale)) {
    throw Error("neighbour list: the cell is singular or not finite (volume " + fmt(det) +
                " Å^3); cell rows must be three independent lattice vectors");
  }
  Grid g;
  g.periodic = true;
  std::array<double, 3> height;
  for (int k = 0; k < 3; ++k) height[k] = std::abs(det) / norm(normal[k].data());
  g.nbins = choose_bins(height, rcut, n);
  double images = 1.0;
  for (int k = 0; k < 3; ++k) {
    const double reach = bin_reach(height[k], g.nbins[k], rcut);
    images *= 2 * reach + 1;
    if (images > kMaxImagesPerBin) {
      throw Error("neighbour list: the cell is too small for rcut " + fmt(rcut) +
                  " Å (heights " + fmt(height[0]) + ", " + fmt(height[1]) + ", " +
                  fmt(height[2]) + " Å): more than " + fmt(kMaxImagesPerBin) + " images");
    }
    g.reach[k] = static_cast<int>(reach);
  }
  g.bin.resize(n);
  g.wrap.resize(n);
  g.wrapped.resize(3 * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      const double f = dot(pos + 3 * i, normal[k].data()) / det;
      if (!(std::abs(f) < kMaxWrap)) {
        throw Error("neighbour list: atom " + std::to_string(i) + " lies " + fmt(f) +
                    " cell lengths away from the cell; wrap the coordinates first");
      }
      const double w = std::floor(f);
      // f - w can round up to exactly 1.0 for tiny negative f: clamp into the last bin.
      g.bin[i][k] = std::min(g.nbins[k] - 1, static_cast<int>((f - w) * g.nbins[k]));
      g.wrap[i][k] = static_cast<int>(w);
    }
    const auto& w = g.wrap[i];
    for (int k = 0; k < 3; ++k) {
      g.wrapped[3 * i + k] = pos[3 * i + k] - (w[0] * a[k] + w[1] * b[k] + w[2] * c[k]);
    }
  }
  return g;
}

Grid open_grid(const double* pos, int n, double rcut) {
  Grid g;
  std::array<double, 3> lo{0, 0, 0}, extent{0, 0, 0};
  for (int k = 0; k < 3 && n > 0; ++k) {
    double hi = pos[k];
    lo[k] = pos[k];
    for (int i = 1; i < n; ++i) {
      lo[k] = std::min(lo[k], pos[3 * i + k]);
      hi = std::max(hi, pos[3 * i + k]);
    }
    extent[k] = hi - lo[k];
  }
  g.nbins = choose_bins(extent, rcut, n);
  for (int k = 0; k < 3; ++k) {
    // A single bin (possibly of zero extent) holds everything: nothing beside it to search.
    g.reach[k] = g.nbins[k] == 1 ? 0 : static_cast<int>(bin_reach(extent[k], g.nbins[k], rcut));
  }
  g.bin.resize(n);
  g.wrapped.assign(pos, pos + 3 * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      // With one bin the extent may be 0: no division.
      g.bin[i][k] = g.nbins[k] == 1 ? 0
                                    : std::min(g.nbins[k] - 1,
                                               static_cast<int>((pos[3 * i + k] - lo[k]) /
                                                                extent[k] * g.nbins[k]));
    }
  }
  return g;
}

[[noreturn]] void throw_coincident(int i, int j, double d, const std::array<int, 3>& shift) {
  std::string how;
  if (shift != std::array<int, 3>{0, 0, 0})
    how = " through the periodic image (" + std::to_string(shift[0]) + ", " + std::to_string(shift[1]) + ", " +
          std::to_string(shift[2]) + ")";
  throw AtomError("neighbour list",
                  "are coincident" + how + ": distance " + fmt(d) + " Å, below 1e-05 Å (remove the duplicate atom)",
                  std::min(i, j), std::max(i, j));
}

struct Candidate {
  int src;
  std::array<int, 3> shift;
  std::array<double, 3> sv;   // shift · cell, as added into vec
  std::array<double, 3> vec;  // r_src + sv - r_dst
};

// The graph's compact geometry (graph/graph.h): every distinct image shift S once, with the sv
// its edges added, or none at all once there are more than 256 (tiny cells) or two edges of one
// S added different bits (they cannot: one expression; checked, not assumed).
class ShiftTable {
 public:
  explicit ShiftTable(Graph& g) : g_(g) {}
  void add(const Candidate& e) {
    if (!on_) return;
    // A direct-mapped hint by the shifts' low bits, then the list itself.
    int& hint = hint_[((e.shift[0] & 7) << 6) | ((e.shift[1] & 7) << 3) | (e.shift[2] & 7)];
    int code = hint >= 0 && keys_[hint] == e.shift ? hint : -1;
    for (size_t q = 0; code < 0 && q < keys_.size(); ++q)
      if (keys_[q] == e.shift) code = static_cast<int>(q);
    if (code < 0) {
      if (keys_.size() == 256) return drop();
      code = static_cast<int>(keys_.size());
      keys_.push_back(e.shift);
      g_.shifts.insert(g_.shifts.end(), e.sv.begin(), e.sv.end());
    } else if (std::memcmp(&g_.shifts[3 * code], e.sv.data(), sizeof e.sv) != 0) {
      return drop();
    }
    g_.image.push_back(static_cast<unsigned char>(code));
    hint = code;
  }

 private:
  void drop() {
    on_ = false;
    g_.pos.clear(); g_.image.clear(); g_.shifts.clear();
    g_.pos.shrink_to_fit(); g_.image.shrink_to_fit(); g_.shifts.shrink_to_fit();
  }
  Graph& g_;
  bool on_ = true;
  std::vector<std::array<int, 3>> keys_;  // the shifts in code order
  std::array<int, 512> hint_ = filled(-1);
  static std::array<int, 512> filled(int v) {
    std::array<int, 512> a;
    a.fill(v);
    return a;
  }
};

// How far the edge collection got, for the out-of-memory error.
struct Progress {
  int centre = 0;    // the centre being searched
  size_t edges = 0;  // edges found so far, the centre's included
};

Graph collect_edges(const Grid& g, const double* positions, const int* types, int n, const double* cell, double rcut,
                    Progress& progress) {
  // Counting sort of the atoms by bin (row-major bin id).
  const auto& nb = g.nbins;
  const auto bin_id = [&nb](int x, int y, int z) { return (x * nb[1] + y) * nb[2] + z; };
  std::vector<int> bin_start(static_cast<size_t>(nb[0]) * nb[1] * nb[2] + 1, 0);
  for (int i = 0; i < n; ++i) ++bin_start[bin_id(g.bin[i][0], g.bin[i][1], g.bin[i][2]) + 1];
  for (size_t b = 1; b < bin_start.size(); ++b) bin_start[b] += bin_start[b - 1];
  std::vector<int> bin_atoms(n);
  {
    std::vector<int> fill(bin_start.begin(), bin_start.end() - 1);
    for (int i = 0; i < n; ++i) bin_atoms[fill[bin_id(g.bin[i][0], g.bin[i][1], g.bin[i][2])]++] = i;
  }

  Graph out;
  out.n_nodes = n;
  out.n_total = n;
  out.types.assign(types, types + n);
  out.dst_offsets.reserve(n + 1);
  out.dst_offsets.push_back(0);
  out.pos.assign(positions, positions + 3 * static_cast<size_t>(n));
  ShiftTable table(out);
  const double rcut2 = rcut * rcut;
  const double screen2 = rcut2 * (1 + kScreenSlack);
  std::vector<Candidate> found;
  for (int i = 0; i < n; progress.centre = ++i) {
    found.clear();
    const double* ri = positions + 3 * i;
    // Walk the bins within reach. On a periodic axis the walked index c maps to bin
    // c mod nbins in image floor(c / nbins); distinct c give distinct (bin, image) pairs,
    // so no candidate is visited twice even when reach exceeds the bin count.
    std::array<int, 3> c, image{0, 0, 0}, wrapped;
    for (c[0] = g.bin[i][0] - g.reach[0]; c[0] <= g.bin[i][0] + g.reach[0]; ++c[0]) {
      for (c[1] = g.bin[i][1] - g.reach[1]; c[1] <= g.bin[i][1] + g.reach[1]; ++c[1]) {
        for (c[2] = g.bin[i][2] - g.reach[2]; c[2] <= g.bin[i][2] + g.reach[2]; ++c[2]) {
          bool inside = true;
          for (int k = 0; k < 3; ++k) {
            if (g.periodic) {
              image[k] = floor_div(c[k], nb[k]);
              wrapped[k] = c[k] - image[k] * nb[k];
            } else {
              inside = inside && c[k] >= 0 && c[k] < nb[k];
              wrapped[k] = c[k];
            }
          }
          if (!inside) continue;
          const int b = bin_id(wrapped[0], wrapped[1], wrapped[2]);
          // Candidate j is at wrapped_j + image·cell; screen it against wrapped_i.
          std::array<double, 3> origin;
          for (int k = 0; k < 3; ++k) {
            const double shift =
                g.periodic ? image[0] * cell[k] + image[1] * cell[3 + k] + image[2] * cell[6 + k] : 0.0;
            origin[k] = g.wrapped[3 * i + k] - shift;
          }
          for (int q = bin_start[b]; q < bin_start[b + 1]; ++q) {
            const int j = bin_atoms[q];
            const double* pj = &g.wrapped[3 * static_cast<size_t>(j)];
            const double dx = pj[0] - origin[0], dy = pj[1] - origin[1], dz = pj[2] - origin[2];
            if (dx * dx + dy * dy + dz * dz > screen2) continue;
            Candidate e{j, {0, 0, 0}, {0, 0, 0}, {}};
            // In the original coordinates the candidate's shift is S = image + wrap_i - wrap_j.
            if (g.periodic) {
              for (int k = 0; k < 3; ++k) e.shift[k] = image[k] + g.wrap[i][k] - g.wrap[j][k];
              for (int k = 0; k < 3; ++k) {
                e.sv[k] = e.shift[0] * cell[k] + e.shift[1] * cell[3 + k] + e.shift[2] * cell[6 + k];
              }
            }
            const double* rj = positions + 3 * j;
            for (int k = 0; k < 3; ++k) e.vec[k] = rj[k] + e.sv[k] - ri[k];
            const double d2 = dot(e.vec.data(), e.vec.data());
            if (d2 <= kMinDist2 && j != i) throw_coincident(i, j, std::sqrt(d2), e.shift);
            if (d2 > kMinDist2 && d2 <= rcut2) {
              found.push_back(e);
              ++progress.edges;
            }
          }
        }
      }
    }
    std::sort(found.begin(), found.end(), [](const Candidate& x, const Candidate& y) {
      return std::tie(x.src, x.shift) < std::tie(y.src, y.shift);
    });
    for (const Candidate& e : found) {
      out.src.push_back(e.src);
      out.dst.push_back(i);
      out.vec.insert(out.vec.end(), e.vec.begin(), e.vec.end());
      table.add(e);
    }
    if (out.src.size() > static_cast<size_t>(INT_MAX)) {
      throw Error("neighbour list: more than 2^31 edges; rcut is too large for this system");
    }
    out.dst_offsets.push_back(static_cast<int>(out.src.size()));
  }
  return out;
}

}  // namespace

Graph build_graph(const double* positions, const int* types, int n, const double* cell, double rcut) {
  if (n < 0) throw Error("neighbour list: negative atom count " + std::to_string(n));
  if (!std::isfinite(rcut) || !(rcut > 0)) {
    throw Error("neighbour list: rcut must be positive and finite, got " + fmt(rcut));
  }
  for (int i = 0; i < 3 * n; ++i) {
    if (!std::isfinite(positions[i])) {
      throw AtomError("neighbour list", "has a non-finite coordinate " + std::string(1, "xyz"[i % 3]) + " = " +
                                            fmt(positions[i]),
                      i / 3);
    }
  }
  Progress progress;
  try {
    const Grid g = cell ? periodic_grid(positions, n, cell, rcut) : open_grid(positions, n, rcut);
    return collect_edges(g, positions, types, n, cell, rcut, progress);
  } catch (const std::bad_alloc&) {
    // A cell far smaller than rcut makes every image an edge (docs/errors.md).
    throw Error("neighbour list: out of memory at atom " + std::to_string(progress.centre) + " of " +
                std::to_string(n) + " after " + std::to_string(progress.edges) + " edges (about " +
                fmt(progress.edges * (2.0 * sizeof(int) + 3.0 * sizeof(double)) / 1048576.0) +
                " MiB) within rcut " + fmt(rcut) + " Å; is the periodic cell much smaller than rcut?");
  }
}

}  // namespace sezm
