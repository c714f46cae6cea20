// sezm-bench: wall time per energy+force+virial call and peak memory on perfect-lattice diamond
// (or fcc) supercells, rattled so that forces are non-trivial.
//
//   sezm-bench MODEL [--cells N] [--lattice diamond|fcc] [--a A] [--repeat R] [--warmup W]
//              [--threads T] [--element E] [--device cpu|cuda] [--mode lean|fast] [--gpu N]
//              [--chunk EDGES] [--edge-state auto|keep|chunk] [--precision default|tf32] [--committee MODEL2,MODEL3,...]
//              [--no-share-geometry] [--digest] [--energy-only]
//
// Reports the median of R warm calls (neighbour search excluded and timed separately).
// --digest: also the energy to 17 digits and a hash of the last call's per-atom energies, forces
// and virial, to tell whether two builds give the same bits; and whether every call of the run
// gave the same bits (a call's bits must not depend on the call: a race shows here at a rate).
// --energy-only: calls without gradients (the forward alone; forces and virial zero).
// --committee: also the time of a committee's output step (pair_style sezm M1 M2 ... out_freq N,
// docs/lammps.md): every model on the one graph (models of another cutoff on their own),
// forces, virials and the deviations (api/model_deviation.h), against the ordinary step
// (model 1 alone). Same device options for every model. Models on model 1's graph take its
// per-edge geometry where theirs agrees (Engine::compute_like, as the pair style does);
// --no-share-geometry makes each compute its own, to measure what sharing saves.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "api/model_deviation.h"
#include "api/potential.h"
#include "common/error.h"
#include "neighbor/neighbor_list.h"

#include "lattice.h"

namespace {

double peak_rss_gib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB on Linux
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// An output step of a committee: model 1 and the others on the shared graph (their own where the
// cutoff differs), each model's forces and virial, the deviation row.
void time_committee(const sezm::Potential& first, const std::string& list, const sezm::EngineOptions& opt,
                    const std::vector<double>& pos, const std::vector<int>& types, const double* cell,
                    const sezm::Graph& g, int warmup, int repeat, double t_single, double t_graph, bool share) {
  std::vector<sezm::Potential> pots;
  std::vector<sezm::Graph> graphs;  // per model: empty unless its cutoff differs from model 1's
  for (size_t b = 0, e; b <= list.size(); b = e + 1) {
    e = std::min(list.find(',', b), list.size());
    pots.push_back(sezm::Potential::load(list.substr(b, e - b), opt));
    graphs.emplace_back();
    if (pots.back().config().rcut != first.config().rcut)
      graphs.back() = sezm::build_graph(pos.data(), types.data(), static_cast<int>(types.size()), cell,
                                        pots.back().config().rcut);
  }
  const int M = static_cast<int>(pots.size()) + 1, n = static_cast<int>(types.size());
  first.engine().keep_geometry(share);
  int n_all = 0, n_part = 0;  // models that took model 1's geometry (all, all but the radial basis)
  std::vector<double> t_out, t_ord, t_devi, rows, f, vir, devi(n);
  sezm::DeviationRow row;
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  // Ordinary and output steps alternate, so that both see the same machine load.
  for (int r = 0; r < warmup + repeat; ++r) {
    auto t0 = Clock::now();
    {
      const sezm::EngineResult res = first.engine().compute_forces(g, false);
      f.assign(3 * static_cast<size_t>(n), 0.0);
      double w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
      sezm::add_forces_virial(g, res, f.data(), w, nullptr);
    }
    const double ord = since(t0);
    t0 = Clock::now();
    rows.assign(static_cast<size_t>(n) * M * 3, 0.0);
    vir.assign(9 * static_cast<size_t>(M), 0.0);
    double td = 0;
    n_all = n_part = 0;
    for (int m = 0; m < M; ++m) {
      const bool on_g = m == 0 || graphs[m - 1].n_nodes == 0;
      const sezm::Graph& gm = on_g ? g : graphs[m - 1];
      sezm::Engine& eng = (m == 0 ? first : pots[m - 1]).engine();
      const sezm::EngineResult res =
          m > 0 && on_g && share ? eng.compute_forces_like(first.engine(), g, false) : eng.compute_forces(gm, false);
      n_all += m > 0 && eng.last_geometry_share() == sezm::GeometryShare::kAll;
      n_part += m > 0 && eng.last_geometry_share() == sezm::GeometryShare::kExceptRadialBasis;
      const auto t1 = Clock::now();
      f.assign(3 * static_cast<size_t>(n), 0.0);
      sezm::add_forces_virial(gm, res, f.data(), &vir[9 * m], nullptr);
      sezm::put_model_forces(f.data(), m, M, static_cast<size_t>(n), rows.data());
      td += since(t1);
    }
    const auto t2 = Clock::now();
    sezm::force_deviation(rows.data(), M, n, {}, devi.data());
    sezm::ForceDeviationSums sums;
    sums.add(devi.data(), n);
    sezm::virial_deviation(vir.data(), M, n, {}, &row);
    sezm::finish_force_deviation(sums, n, &row);
    td += since(t2);
    if (r >= warmup) {
      t_out.push_back(since(t0));
      t_ord.push_back(ord);
      t_devi.push_back(td);
    }
  }
  const double to = median(t_out), tn = median(t_ord);
  std::printf("committee of %d models (ordinary and output steps alternating, medians of %d): output step (all "
              "models, forces, deviations) %.4f s, ordinary step (model 1) %.4f s, ratio %.2f; forces+deviation "
              "arithmetic %.2e s; one shared neighbour search %.4f s (the graph is built once per step for all "
              "models; model 1 alone in the first loop: %.4f s) | max_devi_f %.6e max_devi_v %.6e\n",
              M, repeat, to, tn, to / tn, median(t_devi), t_graph, t_single, row.max_f, row.max_v);
  std::printf("committee geometry: %s; of %d other models %d took all of model 1's per-edge geometry, %d all of "
              "it but the radial basis\n",
              share ? "shared where it agrees" : "not shared (--no-share-geometry)", M - 1, n_all, n_part);
  first.engine().keep_geometry(false);
}

// --digest: an FNV-1a hash of the bytes of the arrays, for telling whether two builds give the same
// bits (a change meant to keep every sum's order), which the timings cannot.
uint64_t bits_digest(std::initializer_list<const std::vector<double>*> arrays) {
  uint64_t h = 1469598103934665603ull;
  for (const std::vector<double>* v : arrays) {
    const auto* b = reinterpret_cast<const unsigned char*>(v->data());
    for (size_t i = 0; i < v->size() * sizeof(double); ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sezm-bench MODEL [--cells N] [--lattice diamond|fcc] [--a A] [--repeat R] "
                         "[--warmup W] [--threads T] [--element E] [--device cpu|cuda] [--mode lean|fast] [--gpu N] [--chunk EDGES] "
                         "[--edge-state auto|keep|chunk] [--precision default|tf32] [--committee MODEL2,MODEL3,...] [--no-share-geometry] "
                         "[--digest] [--energy-only]\n");
    return 2;
  }
  std::string model = argv[1], lattice = "diamond", element, device = "cpu", mode = "lean", committee;
  int cells = 4, repeat = 3, warmup = 1, threads = 0, gpu = 0, chunk = 0;
  bool share_geometry = true, digest = false, energy_only = false;
  sezm::Precision precision = sezm::Precision::kDeviceDefault;
  sezm::EdgeState edge_state = sezm::EdgeState::kAuto;
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
    else if (k == "--edge-state") {
      if (!sezm::parse_edge_state(next(), &edge_state)) { std::fprintf(stderr, "sezm-bench: --edge-state auto|keep|chunk\n"); return 2; }
    }
    else if (k == "--committee") committee = next();
    else if (k == "--no-share-geometry") share_geometry = false;
    else if (k == "--digest") digest = true;
    else if (k == "--energy-only") energy_only = true;
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
    opt.edge_state = edge_state;
    const sezm::Potential pot = sezm::Potential::load(model, opt);
    sezm_bench::Basis basis;
    if (lattice == "diamond") {
      basis = sezm_bench::kDiamondBasis;
      if (a == 0) a = 3.567;
      if (element.empty()) element = "C";
    } else if (lattice == "fcc") {
      basis = sezm_bench::kFccBasis;
      if (a == 0) a = 3.615;
      if (element.empty()) element = "Cu";
    } else {
      throw sezm::Error("unknown lattice '" + lattice + "' (diamond or fcc)");
    }
    const int type = pot.type_index(element);
    const std::vector<double> pos = sezm_bench::rattled_lattice(basis, cells, a);
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
    uint64_t fnv = 0;  // --digest: of the last call's bits
    struct Seen { double energy; uint64_t fnv; int count, first; };
    std::vector<Seen> seen;  // --digest: each distinct (energy, hash) of the calls, in order of first call
    for (int r = 0; r < warmup + repeat; ++r) {
      t0 = std::chrono::steady_clock::now();
      const sezm::EngineResult res = energy_only ? engine.compute(g, false) : engine.compute_forces(g, false);
      std::vector<double> f(3 * static_cast<size_t>(n), 0.0), w(9, 0.0);
      if (!energy_only) sezm::add_forces_virial(g, res, f.data(), w.data(), nullptr);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      energy = res.energy;
      if (digest) {
        fnv = bits_digest({&res.atom_energy, &f, &w});
        auto it = std::find_if(seen.begin(), seen.end(), [&](const Seen& x) { return x.fnv == fnv && x.energy == energy; });
        if (it == seen.end()) seen.push_back({energy, fnv, 1, r}); else ++it->count;
      }
      if (r >= warmup) {
        times.push_back(dt);
        tf.push_back(res.seconds_forward);
        tb.push_back(res.seconds_backward);
      }
    }
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
    if (digest)
      std::printf("digest: energy %.17g eV | FNV-1a 64 of per-atom energies, forces, virial %016llx\n", energy,
                  static_cast<unsigned long long>(fnv));
    if (digest && seen.size() == 1) std::printf("digest: every one of the %d calls gave these bits\n", warmup + repeat);
    if (digest && seen.size() > 1) {
      std::printf("digest: the %d calls gave %zu different results:\n", warmup + repeat, seen.size());
      for (const Seen& x : seen)
        std::printf("  %d x energy %.17g eV | %016llx (first: call %d)\n", x.count, x.energy,
                    static_cast<unsigned long long>(x.fnv), x.first);
    }
    if (!committee.empty()) time_committee(pot, committee, opt, pos, types, cell, g, warmup, repeat, tm, t_nl,
                                              share_geometry);
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
