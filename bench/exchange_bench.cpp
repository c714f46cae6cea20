// The host conversions of the staged ghost exchange (src/engine/ghost_rows.{h,cpp}, the CUDA
// engine's GhostStaging in cuda/host_support.cuh) at the sizes of one rank of the diamond example
// (docs/multi-gpu.md, "Sizes"): per force call, two blocks, each a forward (the sent owned rows to
// double, the ghost rows back to float) and a reverse (sent and ghost rows to double, the sent
// rows back to float). No GPU, no MPI: the conversions alone, on OMP_NUM_THREADS threads.
//   sezm-exchange-bench [cells]   (8: 4,096 atoms per rank, the default; 16: 32,768)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/ghost_rows.h"
#include "engine/threads.h"

int main(int argc, char** argv) {
  const int cells = argc > 1 ? std::atoi(argv[1]) : 8;
  // Exact counts for the perfect lattice and a 7 Å ghost cutoff (docs/multi-gpu.md's table).
  int N = 0, G = 0, S = 0;
  if (cells == 8) N = 4096, G = 8899, S = 3475;
  else if (cells == 16) N = 32768, G = 28891, S = 18043;
  else {
    std::fprintf(stderr, "sezm-exchange-bench: cells 8 or 16 (the sizes docs/multi-gpu.md counts)\n");
    return 1;
  }
  const size_t w = 512;  // C.pt: D = 16 rows of 32 channels
  std::vector<int> sent;
  for (int i = 0; i < S; ++i) sent.push_back(static_cast<int>(static_cast<long>(i) * N / S));
  for (int g = N; g < N + G; ++g) sent.push_back(g);
  sezm::GhostRowPlan plan;
  plan.set(sent, N, N + G);
  std::vector<double> rows;
  sezm::poison_owned_rows(rows, N, N + G, w);
  std::vector<float> compact(static_cast<size_t>(S) * w, 1.0f), ghost(static_cast<size_t>(G) * w, 2.0f);
  double* ghost_rows = rows.data() + static_cast<size_t>(N) * w;
  const size_t ng = static_cast<size_t>(G) * w;
  std::vector<double> t;
  for (int r = 0; r < 12; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < 2; ++b) {
      plan.unpack(compact.data(), w, rows.data());  // forward
      sezm::narrow(ghost_rows, ng, ghost.data());
      plan.unpack(compact.data(), w, rows.data());  // reverse
      sezm::widen(ghost.data(), ng, ghost_rows);
      plan.pack(rows.data(), w, compact.data());
    }
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  const double med = t[t.size() / 2], scalars = 2.0 * (2.0 * (S + G) + S) * w;
  std::printf("%d atoms per rank (%d sent, %d ghost rows of %zu), %d thread(s): conversions %.2f ms per force call, median of %zu"
              " (%.1f M scalars, %.2f ns each)\n",
              N, S, G, w, sezm::engine_threads(), med * 1e3, t.size(), scalars / 1e6, med * 1e9 / scalars);
  return 0;
}
