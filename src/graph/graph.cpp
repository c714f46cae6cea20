// The graph's compact geometry check (graph.h).
#include "graph/graph.h"

#include <cstring>
#include <string>

#include "common/error.h"

namespace sezm {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

[[noreturn]] void fail(const std::string& what) {
  throw Error("graph: compact geometry (pos, at, image, shifts; graph/graph.h): " + what);
}

}  // namespace

bool compact_geometry(const Graph& g, int sample) {
  if (g.pos.empty()) return false;
  const size_t E = g.src.size();
  if (g.pos.size() % 3 != 0) fail("pos holds " + std::to_string(g.pos.size()) + " values, not 3 per row");
  const size_t rows = g.pos.size() / 3;
  if (!g.at.empty() && g.at.size() != E)
    fail("at holds " + std::to_string(g.at.size()) + " rows for " + std::to_string(E) + " edges");
  if (g.image.empty() != g.shifts.empty()) fail("image and shifts must be given together");
  if (!g.image.empty() && g.image.size() != E)
    fail("image holds " + std::to_string(g.image.size()) + " entries for " + std::to_string(E) + " edges");
  if (g.shifts.size() % 3 != 0 || g.shifts.size() / 3 > 256)
    fail("shifts holds " + std::to_string(g.shifts.size()) + " values, not 3 per shift for at most 256 shifts");
  if (g.dst.size() != E || g.vec.size() != 3 * E) fail("dst or vec does not hold the graph's edges");
  if (E == 0) return true;
  const size_t n = sample <= 0 || static_cast<size_t>(sample) >= E ? E : static_cast<size_t>(sample);
  for (size_t q = 0; q < n; ++q) {
    const size_t e = n == E || n == 1 ? q : q * (E - 1) / (n - 1);  // first and last included
    const long a = g.at.empty() ? g.src[e] : g.at[e], d = g.dst[e];
    if (a < 0 || static_cast<size_t>(a) >= rows || d < 0 || static_cast<size_t>(d) >= rows)
      fail("edge " + std::to_string(e) + " names row " + std::to_string(a < 0 || static_cast<size_t>(a) >= rows ? a : d) +
           " of " + std::to_string(rows));
    const size_t s = g.image.empty() ? 0 : g.image[e];
    if (!g.image.empty() && 3 * s >= g.shifts.size())
      fail("edge " + std::to_string(e) + " names image shift " + std::to_string(s) + " of " +
           std::to_string(g.shifts.size() / 3));
    for (int k = 0; k < 3; ++k) {
      const double src = g.pos[3 * a + k], dst = g.pos[3 * d + k];
      // Sums and differences only: nothing a compiler may contract, each rounded as on the device.
      const double v = g.image.empty() ? src - dst : (src + g.shifts[3 * s + k]) - dst;
      if (!same_bits(v, g.vec[3 * e + k]))
        fail("edge " + std::to_string(e) + "'s vec is not the one its positions give (was vec edited after the build? "
             "then clear pos)");
    }
  }
  return true;
}

}  // namespace sezm
