// sezm-eval: single-point energy, forces and virial of a structure with a SeZM checkpoint.
//
//   sezm-eval MODEL STRUCTURE [--elements E1 E2 ...] [--json] [--no-forces] [--atom-virial]
//             [--head NAME] [--charge-spin Q S]
//
// STRUCTURE is a LAMMPS data file (atom_style atomic; LAMMPS types map to --elements) or an
// (extended) XYZ file; --json prints deepmd-kit's reference schema.
//
// Exit status (docs/errors.md): 0 success; 1 an error while loading, reading, computing or writing
// the output (the cause on stderr, an atom named by its index and file line); 2 bad usage.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/potential.h"
#include "common/error.h"
#include "io/structure.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: sezm-eval MODEL STRUCTURE [--elements E1 E2 ...] [--json] [--no-forces] [--atom-virial]\n"
               "                 [--device cpu|cuda] [--gpu N] [--mode lean|fast] [--precision default|tf32]\n"
               "                 [--head NAME] [--charge-spin Q S]\n"
               "  MODEL      deepmd-kit SeZM/DPA4 training checkpoint (*.pt)\n"
               "  STRUCTURE  LAMMPS data file (atom_style atomic) or (extended) XYZ\n"
               "  --elements element of each LAMMPS atom type, in type order (data files only: an\n"
               "             XYZ file names its species)\n"
               "  --json     print {\"energy\", \"atom_energy\", \"forces\", \"virial\"[, \"atom_virial\"]}\n"
               "  --no-forces      energy only\n"
               "  --atom-virial    also per-atom virials (9 per atom, LAMMPS sign)\n"
               "  --device   cpu (float64 reference engine, default) or cuda (fp32 CUDA engine)\n"
               "  --gpu N    CUDA device ordinal (default 0); --mode: what the CUDA forward keeps\n"
               "             (both with --device cuda only)\n"
               "  --precision default (IEEE fp32) or tf32 (the stack's products in one TF32 pass on\n"
               "             tensor cores: faster, less accurate, see docs/performance.md; cuda only)\n"
               "  --head NAME  branch (or alias, any case) of a multi-task model; default: the one\n"
               "             aliased \"Default\"\n"
               "  --charge-spin Q S  total charge and spin multiplicity of the frame, for models with a\n"
               "             charge/spin embedding (default: the model's default_chg_spin)\n"
               "exit status: 0 success, 1 error (cause on stderr), 2 bad usage\n");
}

// A non-negative int, the whole token; nullopt otherwise.
std::optional<int> parse_index(const char* s) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end != '\0' || errno == ERANGE || v < 0 || v > INT_MAX) return std::nullopt;
  return static_cast<int>(v);
}

// "atom 3 (line 5 of FILE)": the index sezm::AtomError carries, with the file line it came from.
std::string name_atom(const sezm::Structure& s, const std::string& file, int i) {
  std::string out = "atom " + std::to_string(i);
  if (i >= 0 && static_cast<size_t>(i) < s.lines.size())
    out += " (line " + std::to_string(s.lines[i]) + " of " + file + ")";
  return out;
}

// Output that could not be written (a full disk, a closed pipe) is an error, not exit 0.
int finish_output() {
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout);
  const int err = errno;
  if (failed || std::fclose(stdout) != 0) {
    std::fprintf(stderr, "sezm-eval: cannot write the output: %s\n", std::strerror(failed ? err : errno));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional, elements;
  bool json = false, forces = true, atom_virial = false;
  std::string device = "cpu", mode = "lean", head;
  sezm::Precision precision = sezm::Precision::kDeviceDefault;
  int gpu = 0;
  bool gpu_given = false, mode_given = false;
  std::optional<sezm::ChargeSpin> charge_spin;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-forces") {
      forces = false;
    } else if (a == "--atom-virial") {
      atom_virial = true;
    } else if (a == "--device" || a == "--gpu" || a == "--mode" || a == "--precision") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sezm-eval: %s needs a value\n", a.c_str());
        return 2;
      }
      const std::string v = argv[++i];
      if (a == "--device") device = v;
      else if (a == "--mode") mode = v, mode_given = true;
      else if (a == "--precision" && !sezm::parse_precision(v, &precision)) {
        std::fprintf(stderr, "sezm-eval: bad value '%s' for --precision (expected default or tf32)\n", v.c_str());
        return 2;
      }
      if (a == "--gpu") {
        const std::optional<int> g = parse_index(v.c_str());
        if (!g) {
          std::fprintf(stderr, "sezm-eval: --gpu needs a non-negative device index, got '%s'\n", v.c_str());
          return 2;
        }
        gpu = *g;
        gpu_given = true;
      }
      if ((a == "--device" && v != "cpu" && v != "cuda") || (a == "--mode" && v != "lean" && v != "fast")) {
        std::fprintf(stderr, "sezm-eval: bad value '%s' for %s\n", v.c_str(), a.c_str());
        return 2;
      }
    } else if (a == "--head") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sezm-eval: --head needs a value\n");
        return 2;
      }
      head = argv[++i];
    } else if (a == "--charge-spin") {
      char* end1 = nullptr;
      char* end2 = nullptr;
      if (i + 2 < argc) {
        const double q = std::strtod(argv[i + 1], &end1), sp = std::strtod(argv[i + 2], &end2);
        if (*argv[i + 1] && *end1 == '\0' && *argv[i + 2] && *end2 == '\0') charge_spin = sezm::ChargeSpin{q, sp};
      }
      if (!charge_spin) {
        std::fprintf(stderr, "sezm-eval: --charge-spin needs two numbers, the charge Q and the spin S\n");
        return 2;
      }
      i += 2;
    } else if (a == "--elements") {
      while (i + 1 < argc && argv[i + 1][0] != '-') elements.push_back(argv[++i]);
      if (elements.empty()) {
        std::fprintf(stderr, "sezm-eval: --elements needs at least one element symbol\n");
        return 2;
      }
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "sezm-eval: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    usage(stderr);
    return 2;
  }
  if (atom_virial && !forces) {
    std::fprintf(stderr, "sezm-eval: --atom-virial needs forces (drop --no-forces)\n");
    return 2;
  }
  if (device != "cuda" && (gpu_given || mode_given || precision != sezm::Precision::kDeviceDefault)) {
    // as pair_style sezm: never silently ignored
    std::fprintf(stderr, "sezm-eval: --gpu, --mode and --precision tf32 apply to --device cuda only\n");
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    sezm::EngineOptions opt;
    opt.device = device == "cuda" ? sezm::Device::kCuda : sezm::Device::kCpu;
    opt.gpu = gpu;
    opt.mode = mode == "fast" ? sezm::CudaMode::kFast : sezm::CudaMode::kLean;
    opt.precision = precision;
    const sezm::Potential pot = sezm::Potential::load(positional[0], opt, head, charge_spin);
    const sezm::ChargeSpinUse& cs = pot.charge_spin();
    char cs_line[160] = "";
    if (cs.conditioned)
      std::snprintf(cs_line, sizeof cs_line, "charge/spin %g %g (%s)", cs.value.charge, cs.value.spin,
                    cs.from_default ? "the model's default_chg_spin; --charge-spin Q S sets them" : "--charge-spin");
    if (cs.conditioned && json) std::fprintf(stderr, "sezm-eval: %s\n", cs_line);
    const sezm::Structure s = sezm::read_structure(positional[1], elements);
    std::vector<int> types(s.size());
    for (size_t i = 0; i < s.size(); ++i) types[i] = pot.type_index(s.species[i]);
    const auto t1 = std::chrono::steady_clock::now();
    sezm::Evaluation ev;
    try {
      ev = pot.evaluate(s.positions.data(), types.data(), static_cast<int>(s.size()),
                        s.periodic ? s.cell.data() : nullptr, forces, atom_virial);
    } catch (const sezm::AtomError& e) {  // name the atoms by their lines in the structure file
      const std::string& f = positional[1];
      throw sezm::Error(e.other() < 0 ? name_atom(s, f, e.atom()) + " " + e.reason()
                                      : "atoms " + name_atom(s, f, e.atom()).substr(5) + " and " +
                                            name_atom(s, f, e.other()).substr(5) + " " + e.reason());
    }
    const auto t2 = std::chrono::steady_clock::now();
    if (json) {
      nlohmann::json j;
      j["energy"] = ev.energy;
      j["atom_energy"] = ev.atom_energy;
      if (forces) {
        j["forces"] = ev.forces;
        j["virial"] = ev.virial;
      }
      if (atom_virial) j["atom_virial"] = ev.atom_virial;
      if (!pot.config().head.empty()) {
        j["head"] = pot.config().head;
        j["head_reason"] = pot.config().head_reason;
      }
      std::fputs((j.dump() + "\n").c_str(), stdout);
      return finish_output();
    }
    const auto& cfg = pot.config();
    std::printf("model     : %s (descriptor version %g, %s, channels %d, lmax %d, %d blocks, rcut %g)\n",
                positional[0].c_str(), cfg.descriptor_version, cfg.precision.c_str(), cfg.channels, cfg.lmax,
                cfg.n_blocks, cfg.rcut);
    if (!cfg.head.empty()) std::printf("head      : %s\n", cfg.head_reason.c_str());
    if (cs.conditioned) std::printf("condition : %s\n", cs_line);
    std::printf("structure : %s (%zu atoms, %s, %zu edges)\n", positional[1].c_str(), s.size(),
                s.periodic ? "periodic" : "open", ev.n_edges);
    std::printf("energy    : %.10f eV (%.10f eV/atom)\n", ev.energy, s.size() ? ev.energy / s.size() : 0.0);
    if (forces) {
      double fmax = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        const double* f = &ev.forces[3 * i];
        fmax = std::max(fmax, std::sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]));
      }
      std::printf("max |F|   : %.10f eV/A\n", fmax);
      std::printf("virial    : %.8f %.8f %.8f  %.8f %.8f %.8f  %.8f %.8f %.8f eV\n", ev.virial[0], ev.virial[1],
                  ev.virial[2], ev.virial[3], ev.virial[4], ev.virial[5], ev.virial[6], ev.virial[7], ev.virial[8]);
    }
    std::printf("time      : load %.3f s, compute %.3f s\n", std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sezm-eval: %s\n", e.what());
    return 1;
  }
  return finish_output();
}
