#include "engine/out_of_memory.h"

#include <cstdio>

namespace sezm {

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "kiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

double so2_tile_bytes_per_edge(const ModelConfig& cfg, int scalar_bytes) {
  const int L = cfg.lmax, C = cfg.channels, Cw = cfg.wide(), D = cfg.n_coeff(), Dm = cfg.n_reduced();
  // R (L+1)C, Rhat (L+1)Cw, rotated features Dm Cw, stack state F x Dm Cf = Dm Cw, messages D Cw.
  return static_cast<double>(scalar_bytes) * ((L + 1) * C + (L + 1) * Cw + 2.0 * Dm * Cw + D * Cw);
}

std::string out_of_memory_message(const std::string& engine, const MemoryStep& step, const Graph& g, double rcut) {
  int busiest = 0, most = 0;
  for (int i = 0; i < g.n_nodes && i + 1 < static_cast<int>(g.dst_offsets.size()); ++i) {
    const int k = g.dst_offsets[i + 1] - g.dst_offsets[i];
    if (k > most) most = k, busiest = i;
  }
  char rc[32];
  std::snprintf(rc, sizeof rc, "%g", rcut);
  std::string msg = engine + ": out of memory in " + (step.what.empty() ? "an unnamed step" : step.what);
  if (step.bytes > 0) msg += " (about " + format_bytes(step.bytes) + ")";
  msg += "; the graph has " + std::to_string(g.n_nodes) + " atoms and " + std::to_string(g.n_edges()) +
         " edges within rcut " + rc + " Å";
  if (g.n_nodes > 0) msg += ", " + std::to_string(most) + " of them on atom " + std::to_string(busiest);
  if (most > 10000)
    msg += ". More than 10^4 neighbours of one atom: is the periodic cell much smaller than rcut, or are the "
           "atoms packed far too densely?";
  return msg;
}

}  // namespace sezm
