#pragma once
// Memory exhaustion in an engine becomes a sezm::Error that names the step, what it allocates and
// about how much, and the graph that asked for it (docs/errors.md, "Run time"). The CPU engine
// records its step before each phase (SezmEngine::compute) and converts a std::bad_alloc at the
// end; OpenMP regions hand their exceptions out through ParallelErrors (engine/threads.h). A tiny
// periodic cell is the usual cause: every image within rcut is an edge, and one atom's edges form
// one tile of the value path, whose scratch is tens of kB per edge.
#include <string>

#include "graph/graph.h"
#include "model/config.h"

namespace sezm {

struct MemoryStep {
  std::string what;  // "block 2 forward: SO(2) value path scratch of the largest edge tile (N edges)"
  double bytes = 0;  // about what that allocation needs (0: unknown)
  void at(std::string w, double b) {
    what = std::move(w);
    bytes = b;
  }
};

// "1.23 GiB", "45.6 MiB", "789 kiB", "12 B"
std::string format_bytes(double bytes);

// Bytes per edge of the SO(2) value path scratch of one tile in precision T (a lower bound: the
// radial conditioning, the rotated features, the stack state and the messages of the tile).
double so2_tile_bytes_per_edge(const ModelConfig& cfg, int scalar_bytes);

// The whole message: "<engine>: out of memory in <step.what> (about <bytes>); the graph has N atoms
// and E edges within rcut R Å, K of them on atom i" and, for a centre with more than 10^4
// neighbours, the hint that the cell is far smaller than rcut or the atoms overlap.
std::string out_of_memory_message(const std::string& engine, const MemoryStep& step, const Graph& g, double rcut);

}  // namespace sezm
