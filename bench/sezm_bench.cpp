// sezm-bench: wall time per energy+force+virial call and peak memory on perfect-lattice diamond
// (or fcc) supercells, rattled so that forces are non-trivial.
//
//   sezm-bench MODEL [--cells N] [--lattice diamond|fcc] [--a A] [--repeat R] [--warmup W]
//              [--threads T] [--element E] [--device cpu|cuda] [--mode lean|fast] [--gpu N]
//              [--chunk EDGES] [--precision default|tf32]
//
// Reports the median of R warm calls (neighbour search excluded and timed separately).
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "api/potential.h"
#include "common/error.h"
#include "neighbor/neighbor_list.h"

namespace {

double peak_rss_gib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sezm-bench MODEL [--cells N] [--lattice diamond|fcc] [--a A] [--repeat R] "
                         "[--warmup W] [--threads T] [--element E] [--device cpu|cuda] [--mode lean|fast] [--gpu N] [--chunk EDGES] "
                         "[--precision default|tf32]\n");
    return 2;
  }
  std::string model = argv[1], lattice = "diamond", element, device = "cpu", mode = "lean";
  int cells = 4, repeat = 3, warmup = 1, threads = 0, gpu = 0, chunk = 0;
  sezm::Precision precision = sezm::Precision::kDeviceDefault;
  double a = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "sezm-bench: %s needs a value\n", k.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (k == "--cells") cells = std::atoi(next());
    else if (k == "--lattice") lattice = next();
    else if (k == "--a") a = std::atof(next());
    else if (k == "--repeat") repeat = std::atoi(next());
    else if (k == "--warmup") warmup = std::atoi(next());
    else if (k == "--threads") threads = std::atoi(next());
    else if (k == "--element") element = next();
    else if (k == "--device") device = next();
    else if (k == "--mode") mode = next();
    else if (k == "--gpu") gpu = std::atoi(next());
    else if (k == "--chunk") chunk = std::atoi(next());
    else if (k == "--precision") {
      if (!sezm::parse_precision(next(), &precision)) { std::fprintf(stderr, "sezm-bench: --precision default|tf32\n"); return 2; }
    }
    else { std::fprintf(stderr, "sezm-bench: unknown option %s\n", k.c_str()); return 2; }
  }
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(threads);
  threads = omp_get_max_threads();
#else
  threads = 1;
#endif
  try {
    if (device != "cpu" && device != "cuda") throw sezm::Error("unknown device '" + device + "' (cpu or cuda)");
    sezm::EngineOptions opt;
    opt.device = device == "cuda" ? sezm::Device::kCuda : sezm::Device::kCpu;
    opt.gpu = gpu;
    opt.mode = mode == "fast" ? sezm::CudaMode::kFast : sezm::CudaMode::kLean;
    opt.chunk_edges = chunk;
    opt.precision = precision;
    const sezm::Potential pot = sezm::Potential::load(model, opt);
    std::vector<std::array<double, 3>> basis;
    if (lattice == "diamond") {
      basis = {{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0}, {.25, .25, .25}, {.25, .75, .75}, {.75, .25, .75}, {.75, .75, .25}};
      if (a == 0) a = 3.567;
      if (element.empty()) element = "C";
    } else if (lattice == "fcc") {
      basis = {{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0}};
      if (a == 0) a = 3.615;
      if (element.empty()) element = "Cu";
    } else {
      throw sezm::Error("unknown lattice '" + lattice + "' (diamond or fcc)");
    }
    const int type = pot.type_index(element);
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
    const int n = static_cast<int>(pos.size() / 3);
    const double L = cells * a;
    const double cell[9] = {L, 0, 0, 0, L, 0, 0, 0, L};
    std::vector<int> types(n, type);

    auto t0 = std::chrono::steady_clock::now();
    const sezm::Graph g = sezm::build_graph(pos.data(), types.data(), n, cell, pot.config().rcut);
    const double t_nl = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sezm::Engine& engine = pot.engine();

    std::vector<double> times, tf, tb;
    double energy = 0;
    for (int r = 0; r < warmup + repeat; ++r) {
      t0 = std::chrono::steady_clock::now();
      const sezm::EngineResult res = engine.compute(g, true);
      std::vector<double> f(3 * static_cast<size_t>(n), 0.0), w(9, 0.0);
      sezm::assemble_forces_virial(g, res.edge_grad.data(), f.data(), w.data(), nullptr);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      energy = res.energy;
      if (r >= warmup) {
        times.push_back(dt);
        tf.push_back(res.seconds_forward);
        tb.push_back(res.seconds_backward);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
    };
    const double tm = median(times);
    // Model FLOPs of the SO(2) mixing stacks (forward + input-gradient backward), the figure the
    // project's targets use (2.65 MFLOP per edge for the shipped potentials).
    const sezm::ModelConfig& c = pot.config();
    const double M0 = (c.lmax + 1.0) * c.focus_width(), M1 = 2.0 * c.lmax * c.focus_width();
    const double stack = c.n_focus * (c.mixing_layers * 2.0 * (M0 * M0 + M1 * M1) +
                                      (c.mixing_layers - 1) * 2.0 * c.focus_width() * c.lmax * c.focus_width());
    const int E = g.n_edges();
    const double flops = 2.0 * stack * c.n_blocks * E;
    std::printf("model %s | %s %d^3 cells, %d atoms, %d edges (%.1f per atom) | device %s\n", model.c_str(),
                lattice.c_str(), cells, n, E, double(E) / n, engine.description().c_str());
    std::printf("neighbour search %.3f s | energy+forces+virial: median %.4f s of %d (forward %.4f s, backward %.4f s)"
                " | %.3g edges/s | %.2f TFLOP/s (stack model flops %.2f MFLOP/edge) | E/atom %.6f eV\n",
                t_nl, tm, repeat, median(tf), median(tb), E / tm, flops / tm * 1e-12, flops / E * 1e-6,
                energy / n);
    std::printf("peak host RSS %.2f GiB", peak_rss_gib());
    if (opt.device != sezm::Device::kCpu)
      std::printf(" | peak device memory (engine buffers) %.3f GiB", engine.peak_device_bytes() / 1073741824.0);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sezm-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
