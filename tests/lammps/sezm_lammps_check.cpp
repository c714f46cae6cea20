// In-process LAMMPS checks for pair_style sezm (runs under mpirun with any rank count).
//
//   sezm_lammps_check ref JSON CONFIG [--procs PX PY PZ] [--triclinic XY XZ YZ] [--out FILE]
//                        [--expect-empty-rank] [--tol-engine T] [--tol-ref T] [--model PT]
//                        [--head NAME]   (multi-task: pair_style ... head NAME, the CONFIG of that head)
//                        [--types E1,E2,...] [--comm-tiled]
//       `run 0` on a reference configuration: energy, forces, per-atom energies, global and
//       per-atom virial against the CPU engine (sezm::Potential on the same coordinates) and,
//       for the unmodified configuration, against deepmd-kit's reference values (per-atom
//       virials too where the JSON has "atom_virial", tests/data/recipes).
//       --types gives LAMMPS atom type i the element Ei (`pair_coeff * * E1 E2 ...`) instead of
//       the type_map order: any permutation, an element may be listed under several types (its
//       atoms are dealt to those types in turn), elements the configuration lacks may be listed.
//       --triclinic shears the cell (lower-triangular tilts, fractional coordinates kept), so
//       only the engine comparison applies; `press` is checked against the engine virial.
//       --comm-tiled: `comm_style tiled` (CommTiled's swaps instead of CommBrick's).
//       Every run also checks the pair style's record of sent rows (FeatureExchange::sent_rows,
//       docs/multi-gpu.md): a forward comm from the recorded rows alone fills every ghost.
//   sezm_lammps_check compare FILE_A FILE_B TOL
//       Same system on different rank counts: per-ID agreement, relative to the largest value.
//   sezm_lammps_check nve MODEL ELEMENT LATTICE A0 NCELL STEPS DT_PS TEMP MAX_DEV
//       Short NVE run; prints the energy drift in eV/atom/ps (least-squares slope) and fails when
//       the total energy strays more than MAX_DEV eV/atom from its start (a short run's slope is
//       dominated by the Verlet fluctuation, so it is reported, not bounded).
//
// Exit status 0 on success; prints the measured deviations either way.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <optional>
#include <vector>

#include "atom.h"
#include "compute.h"
#include "domain.h"
#include "force.h"
#include "input.h"
#include "lammps.h"
#include "library.h"
#include "modify.h"
#include "pair.h"
#include "pair_sezm.h"

#include "api/potential.h"
#include "graph/graph.h"

using namespace LAMMPS_NS;

namespace {

int me = 0, nprocs = 1;

Pair *creator(LAMMPS *lmp) { return new PairSezm(lmp); }

LAMMPS *open_lammps(const std::string &log) {
  std::vector<std::string> a = {"sezm_lammps_check", "-log", log, "-screen", "none", "-nocite"};
  std::vector<char *> argv;
  for (auto &s : a) argv.push_back(&s[0]);
  auto *lmp = new LAMMPS(static_cast<int>(argv.size()), argv.data(), MPI_COMM_WORLD);
  (*lmp->force->pair_map)["sezm"] = &creator;
  return lmp;
}

void cmd(LAMMPS *lmp, const std::string &c) { lmp->input->one(c); }

// Per-atom record gathered to rank 0, keyed by atom ID.
struct AtomRec {
  double f[3], e, v[6];
};

std::map<long, AtomRec> gather_atoms(LAMMPS *lmp) {
  const int nlocal = lmp->atom->nlocal;
  Compute *pea = lmp->modify->compute[lmp->modify->find_compute("pea")];
  Compute *sa = lmp->modify->compute[lmp->modify->find_compute("sa")];
  const double nktv2p = lmp->force->nktv2p;
  std::vector<double> mine;
  for (int i = 0; i < nlocal; i++) {
    mine.push_back(static_cast<double>(lmp->atom->tag[i]));
    for (int k = 0; k < 3; k++) mine.push_back(lmp->atom->f[i][k]);
    mine.push_back(pea->vector_atom[i]);
    // stress/atom is -virial * nktv2p
    for (int k = 0; k < 6; k++) mine.push_back(-sa->array_atom[i][k] / nktv2p);
  }
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(nprocs), displs(nprocs);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < nprocs; r++) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<double> all(me == 0 ? total : 0);
  MPI_Gatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::map<long, AtomRec> out;
  for (size_t p = 0; p + 11 <= all.size(); p += 11) {
    AtomRec r;
    for (int k = 0; k < 3; k++) r.f[k] = all[p + 1 + k];
    r.e = all[p + 4];
    for (int k = 0; k < 6; k++) r.v[k] = all[p + 5 + k];
    out[static_cast<long>(all[p])] = r;
  }
  return out;
}

// Largest |a-b| over the largest |b| (the reference's scale).
struct Dev {
  double maxdiff = 0, scale = 0;
  void add(double a, double b) {
    maxdiff = std::max(maxdiff, std::fabs(a - b));
    scale = std::max(scale, std::fabs(b));
  }
  double rel() const { return scale > 0 ? maxdiff / scale : maxdiff; }
};

bool report(const char *what, const Dev &d, double tol) {
  const bool ok = d.rel() <= tol;
  std::printf("  %-34s max|diff| %.3e  scale %.3e  rel %.3e  (tol %.0e) %s\n", what, d.maxdiff, d.scale, d.rel(), tol,
              ok ? "ok" : "FAIL");
  return ok;
}

// The pair style's record of the rows pair comm moves (PairSezm::sent_rows): a width-1 forward
// comm in which only the recorded owned rows hold numbers (each atom's ID; the others NaN) must
// fill every ghost with its atom's ID. Sums over ranks: {ranks without a record, ghosts wrong,
// recorded rows}.
void check_sent_rows(LAMMPS *lmp, long out[3]) {
  auto *pair = dynamic_cast<PairSezm *>(lmp->force->pair);
  const int nlocal = lmp->atom->nlocal, nall = nlocal + lmp->atom->nghost;
  const std::vector<int> *sent = pair ? pair->sent_rows(nlocal, nall) : nullptr;
  std::vector<double> rows(nall, std::nan(""));
  if (sent) {
    for (int i : *sent)
      if (i < nlocal) rows[i] = static_cast<double>(lmp->atom->tag[i]);
  } else {
    for (int i = 0; i < nlocal; i++) rows[i] = static_cast<double>(lmp->atom->tag[i]);
  }
  long loc[3] = {sent ? 0 : 1, 0, sent ? static_cast<long>(sent->size()) : 0};
  if (pair) pair->exchange_forward(rows.data(), 1);  // collective: every rank takes part
  for (int g = nlocal; g < nall; g++) loc[1] += rows[g] != static_cast<double>(lmp->atom->tag[g]);
  MPI_Allreduce(loc, out, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
}

// The edge layer's compact geometry (graph/graph.h), which a device engine uploads instead of
// vec: every edge's vec from it bit for bit, on every rank. Sums over ranks: {ranks whose graph
// has none or disagrees, edges}; a rank's error is printed. A rank without atoms (an open cluster
// on several ranks) has no positions and no edges: nothing to check.
void check_compact_geometry(LAMMPS *lmp, long out[2]) {
  auto *pair = dynamic_cast<PairSezm *>(lmp->force->pair);
  const sezm::Graph *g = pair ? pair->edge_graph() : nullptr;
  long loc[2] = {1, g ? static_cast<long>(g->src.size()) : 0};
  try {
    const bool empty = g && lmp->atom->nlocal + lmp->atom->nghost == 0 && g->src.empty();
    loc[0] = g && (empty || sezm::compact_geometry(*g, 0)) ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("  rank %d: %s\n", me, e.what());
  }
  MPI_Allreduce(loc, out, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
}

int run_ref(int argc, char **argv) {
  const std::string json_path = argv[2], name = argv[3];
  int px = 0, py = 0, pz = 0;
  bool tric = false, expect_empty = false, tiled = false;
  double tilt[3] = {0, 0, 0}, tol_engine = 1e-10, tol_ref = 1e-9;
  std::string out, model_override, head, types_arg;
  for (int i = 4; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--procs") {
      px = std::atoi(argv[++i]); py = std::atoi(argv[++i]); pz = std::atoi(argv[++i]);
    } else if (a == "--triclinic") {
      tric = true;
      for (double &t : tilt) t = std::atof(argv[++i]);
    } else if (a == "--model") {
      model_override = argv[++i];
    } else if (a == "--head") {
      head = argv[++i];
    } else if (a == "--types") {
      types_arg = argv[++i];
    } else if (a == "--out") {
      out = argv[++i];
    } else if (a == "--comm-tiled") {
      tiled = true;
    } else if (a == "--expect-empty-rank") {
      expect_empty = true;
    } else if (a == "--tol-engine") {
      tol_engine = std::atof(argv[++i]);
    } else if (a == "--tol-ref") {
      tol_ref = std::atof(argv[++i]);
    } else {
      if (me == 0) std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::ifstream js(json_path);
  const nlohmann::json ref = nlohmann::json::parse(js);
  const std::string model = !model_override.empty()
                                ? model_override
                                : json_path.substr(0, json_path.rfind('/') + 1) + ref["model"].get<std::string>();
  const nlohmann::json *cfgp = nullptr;
  for (const auto &c : ref["configs"])
    if (c["name"] == name && (head.empty() || c.value("head", "") == head)) cfgp = &c;
  if (!cfgp) {
    if (me == 0) std::fprintf(stderr, "no config %s in %s\n", name.c_str(), json_path.c_str());
    return 2;
  }
  const auto &cfg = *cfgp;
  const int n = cfg["natoms"];
  std::vector<double> pos = cfg["coords"].get<std::vector<double>>();
  const std::vector<int> types = cfg["types"].get<std::vector<int>>();
  const std::vector<std::string> tmap = ref["type_map"].get<std::vector<std::string>>();
  const bool periodic = cfg["periodic"];
  // LAMMPS atom types: element per type, and each atom's type (model types stay as they are for
  // the engine and the reference values).
  std::vector<std::string> ltypes;
  if (types_arg.empty()) {
    ltypes = tmap;
  } else {
    std::istringstream ss(types_arg);
    for (std::string e; std::getline(ss, e, ',');) ltypes.push_back(e);
  }
  std::vector<int> atom_ltype(n);
  {
    std::vector<std::vector<int>> of_elem(tmap.size());  // model type -> LAMMPS types (0-based)
    for (size_t j = 0; j < ltypes.size(); j++) {
      const auto it = std::find(tmap.begin(), tmap.end(), ltypes[j]);
      if (it == tmap.end()) {
        if (me == 0) std::fprintf(stderr, "--types: element %s is not in the type_map\n", ltypes[j].c_str());
        return 2;
      }
      of_elem[it - tmap.begin()].push_back(static_cast<int>(j));
    }
    std::vector<size_t> dealt(tmap.size(), 0);
    for (int i = 0; i < n; i++) {
      const auto &choices = of_elem[types[i]];
      if (choices.empty()) {
        if (me == 0) std::fprintf(stderr, "--types: no LAMMPS type for element %s\n", tmap[types[i]].c_str());
        return 2;
      }
      atom_ltype[i] = choices[dealt[types[i]]++ % choices.size()];
    }
  }
  std::vector<double> cell;
  if (periodic) {
    cell = cfg["cell"].get<std::vector<double>>();
    if (cell[1] != 0 || cell[2] != 0 || cell[5] != 0) {
      if (me == 0) std::fprintf(stderr, "config %s: cell is not lower-triangular\n", name.c_str());
      return 2;
    }
    if (tric) {
      // Keep fractional coordinates, add the tilts: b += xy*a_hat, c += (xz, yz).
      std::vector<double> nc = cell;
      nc[3] += tilt[0];
      nc[6] += tilt[1];
      nc[7] += tilt[2];
      for (int i = 0; i < n; i++) {
        double *r = &pos[3 * i];
        const double s[3] = {r[0] / cell[0], r[1] / cell[4], r[2] / cell[8]};  // cubic input
        for (int k = 0; k < 3; k++) r[k] = s[0] * nc[k] + s[1] * nc[3 + k] + s[2] * nc[6 + k];
      }
      cell = nc;
    }
  } else if (tric) {
    if (me == 0) std::fprintf(stderr, "--triclinic needs a periodic config\n");
    return 2;
  }

  // A frame with a charge/spin (docs/model.md §10) runs with `pair_style ... charge_spin Q S`;
  // without one, both sides use the model's default_chg_spin.
  std::optional<sezm::ChargeSpin> cs;
  std::string cs_args;
  if (cfg.contains("charge_spin") && !cfg["charge_spin"].is_null()) {
    cs = sezm::ChargeSpin{cfg["charge_spin"][0].get<double>(), cfg["charge_spin"][1].get<double>()};
    cs_args = " charge_spin " + std::to_string(cs->charge) + " " + std::to_string(cs->spin);
  }
  // Engine on the same coordinates (every rank computes it; it is small).
  const sezm::Potential pot = sezm::Potential::load(model, {}, head, cs);
  const sezm::Evaluation ev = pot.evaluate(pos.data(), types.data(), n, periodic ? cell.data() : nullptr, true, true);

  // Data file written by rank 0; read_data wraps atoms outside the periodic box.
  std::string data_path = out.empty() ? ("sezm_check_" + name + ".data") : (out + ".data");
  if (me == 0) {
    FILE *fp = std::fopen(data_path.c_str(), "w");
    std::fprintf(fp, "sezm check %s\n\n%d atoms\n%zu atom types\n\n", name.c_str(), n, ltypes.size());
    if (periodic) {
      std::fprintf(fp, "0 %.17g xlo xhi\n0 %.17g ylo yhi\n0 %.17g zlo zhi\n", cell[0], cell[4], cell[8]);
      if (tric || cell[3] != 0 || cell[6] != 0 || cell[7] != 0)
        std::fprintf(fp, "%.17g %.17g %.17g xy xz yz\n", cell[3], cell[6], cell[7]);
    } else {
      double lo[3] = {1e30, 1e30, 1e30}, hi[3] = {-1e30, -1e30, -1e30};
      for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
          lo[k] = std::min(lo[k], pos[3 * i + k]);
          hi[k] = std::max(hi[k], pos[3 * i + k]);
        }
      // Room on +x so that a processors grid along x leaves ranks without atoms.
      std::fprintf(fp, "%.17g %.17g xlo xhi\n%.17g %.17g ylo yhi\n%.17g %.17g zlo zhi\n", lo[0] - 2, hi[0] + 40,
                   lo[1] - 2, hi[1] + 2, lo[2] - 2, hi[2] + 2);
    }
    std::fprintf(fp, "\nMasses\n\n");
    for (size_t t = 0; t < ltypes.size(); t++) std::fprintf(fp, "%zu 1.0\n", t + 1);
    std::fprintf(fp, "\nAtoms # atomic\n\n");
    for (int i = 0; i < n; i++)
      std::fprintf(fp, "%d %d %.17g %.17g %.17g\n", i + 1, atom_ltype[i] + 1, pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]);
    std::fclose(fp);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // With a head, the log must name it (pair_style's settings() writes which head and why).
  const std::string log = !out.empty() ? out + ".log" : head.empty() ? "none" : "sezm_check_" + name + "_" + head + ".log";
  LAMMPS *lmp = open_lammps(log);
  cmd(lmp, "units metal");
  cmd(lmp, periodic ? "boundary p p p" : "boundary f f f");
  if (px > 0) cmd(lmp, "processors " + std::to_string(px) + " " + std::to_string(py) + " " + std::to_string(pz));
  cmd(lmp, "read_data " + data_path);
  if (tiled) cmd(lmp, "comm_style tiled");
  cmd(lmp, "pair_style sezm " + model + (head.empty() ? "" : " head " + head) + cs_args);
  std::string pc = "pair_coeff * *";
  for (const auto &e : ltypes) pc += " " + e;
  cmd(lmp, pc);
  cmd(lmp, "compute pea all pe/atom pair");
  cmd(lmp, "compute sa all stress/atom NULL pair");
  cmd(lmp, "compute spe all reduce sum c_pea");
  cmd(lmp, "compute ssa all reduce sum c_sa[1] c_sa[2] c_sa[3]");
  cmd(lmp, "compute pv all pressure NULL virial");
  cmd(lmp, "thermo_style custom step pe press c_spe c_ssa[1] c_pv[1] c_pv[2] c_pv[3] c_pv[4] c_pv[5] c_pv[6]");
  cmd(lmp, "thermo_modify format float %.16g");
  cmd(lmp, "run 0");

  const double pe = lammps_get_thermo(lmp, "pe");
  const double press = lammps_get_thermo(lmp, "press");
  Compute *pv = lmp->modify->compute[lmp->modify->find_compute("pv")];
  const double vol = lmp->domain->xprd * lmp->domain->yprd * lmp->domain->zprd;
  double W[6];
  for (int k = 0; k < 6; k++) W[k] = pv->vector[k] * vol / lmp->force->nktv2p;
  int nl = lmp->atom->nlocal, nl_min = 0, nl_max = 0;
  MPI_Allreduce(&nl, &nl_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&nl, &nl_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  const auto atoms = gather_atoms(lmp);
  const double nktv2p = lmp->force->nktv2p;
  long sent_stats[3], compact_stats[2];
  check_sent_rows(lmp, sent_stats);
  check_compact_geometry(lmp, compact_stats);
  delete lmp;

  int rc = 0;
  if (me == 0) {
    std::printf("%s/%s on %d rank(s) (atoms per rank %d..%d)%s: pe %.12f\n", ref["model"].get<std::string>().c_str(),
                name.c_str(), nprocs, nl_min, nl_max, tric ? " triclinic" : "", pe);
    if (!types_arg.empty()) {
      std::printf("  %s; atoms per LAMMPS type:", pc.c_str());
      for (size_t j = 0; j < ltypes.size(); j++)
        std::printf(" %zu:%ld", j + 1, static_cast<long>(std::count(atom_ltype.begin(), atom_ltype.end(), static_cast<int>(j))));
      std::printf("\n");
    }
    bool ok = static_cast<int>(atoms.size()) == n;
    if (!ok) std::printf("  gathered %zu atoms, expected %d FAIL\n", atoms.size(), n);
    if (!head.empty()) {
      std::ifstream lg(log);
      const std::string text((std::istreambuf_iterator<char>(lg)), std::istreambuf_iterator<char>());
      const std::string want = "pair sezm: multi-task model: head " + head;
      const bool named = text.find(want) != std::string::npos;
      std::printf("  log names the head ('%s'): %s\n", want.c_str(), named ? "yes" : "no FAIL");
      ok = ok && named;
    }
    // A device engine moves only the recorded rows: from them alone every ghost must be filled.
    const bool sent_ok = sent_stats[0] == 0 && sent_stats[1] == 0;
    std::printf("  sent rows recorded: %ld (all ranks); ranks without a record %ld, ghosts not filled from them %ld%s\n",
                sent_stats[2], sent_stats[0], sent_stats[1], sent_ok ? "" : " FAIL");
    ok = ok && sent_ok;
    std::printf("  compact geometry is vec bit for bit: %ld edges, ranks without it or wrong %ld%s\n", compact_stats[1],
                compact_stats[0], compact_stats[0] == 0 ? "" : " FAIL");
    ok = ok && compact_stats[0] == 0;
    if (expect_empty && nl_min != 0) {
      std::printf("  expected a rank without atoms, min atoms per rank %d FAIL\n", nl_min);
      ok = false;
    }
    const int vmap[6] = {0, 4, 8, 3, 6, 7};  // LAMMPS xx yy zz xy xz yz from W[3k+j]
    // vs the CPU engine
    Dev de, df, dea, dv, dva, dp;
    de.add(pe, ev.energy);
    double sum_e = 0;
    for (const auto &kv : atoms) {
      const int i = static_cast<int>(kv.first) - 1;
      for (int k = 0; k < 3; k++) df.add(kv.second.f[k], ev.forces[3 * i + k]);
      dea.add(kv.second.e, ev.atom_energy[i]);
      for (int k = 0; k < 6; k++) dva.add(kv.second.v[k], ev.atom_virial[9 * i + vmap[k]]);
      sum_e += kv.second.e;
    }
    for (int k = 0; k < 6; k++) dv.add(W[k], ev.virial[vmap[k]]);
    ok &= report("energy vs engine", de, tol_engine);
    ok &= report("forces vs engine", df, tol_engine);
    ok &= report("per-atom energy vs engine", dea, tol_engine);
    ok &= report("virial vs engine", dv, tol_engine);
    ok &= report("per-atom virial vs engine", dva, tol_engine);
    Dev dsum;
    dsum.add(sum_e, pe);
    ok &= report("sum of per-atom energies vs pe", dsum, tol_engine);
    if (periodic) {
      // Zero velocities: press is the virial pressure (trace / 3V).
      const double p_engine = (ev.virial[0] + ev.virial[4] + ev.virial[8]) / (3 * vol) * nktv2p;
      dp.add(press, p_engine);
      ok &= report("thermo press vs engine virial", dp, 1e-8);
    }
    if (!tric) {
      Dev re, rf, rea, rv;
      re.add(pe, cfg["energy"].get<double>());
      const auto rfor = cfg["forces"].get<std::vector<double>>();
      const auto rae = cfg["atom_energy"].get<std::vector<double>>();
      const auto rvir = cfg["virial"].get<std::vector<double>>();
      for (const auto &kv : atoms) {
        const int i = static_cast<int>(kv.first) - 1;
        for (int k = 0; k < 3; k++) rf.add(kv.second.f[k], rfor[3 * i + k]);
        rea.add(kv.second.e, rae[i]);
      }
      const int rmap[6] = {0, 4, 8, 1, 2, 5};  // reference W_ab = sum r_a F_b
      for (int k = 0; k < 6; k++) rv.add(W[k], rvir[rmap[k]]);
      ok &= report("energy vs deepmd-kit", re, tol_ref);
      ok &= report("forces vs deepmd-kit", rf, tol_ref);
      ok &= report("per-atom energy vs deepmd-kit", rea, tol_ref);
      ok &= report("virial vs deepmd-kit", rv, tol_ref);
      if (cfg.contains("atom_virial")) {  // tests/data/recipes: the engine's layout, W[3k+j]
        Dev rva;
        const auto rav = cfg["atom_virial"].get<std::vector<double>>();
        for (const auto &kv : atoms) {
          const int i = static_cast<int>(kv.first) - 1;
          for (int k = 0; k < 6; k++) rva.add(kv.second.v[k], rav[9 * i + vmap[k]]);
        }
        ok &= report("per-atom virial vs deepmd-kit", rva, tol_ref);
      }
    }
    if (!out.empty()) {
      FILE *fp = std::fopen(out.c_str(), "w");
      std::fprintf(fp, "energy %.17g\nvirial", pe);
      for (double w : W) std::fprintf(fp, " %.17g", w);
      std::fprintf(fp, "\n");
      for (const auto &kv : atoms) {
        std::fprintf(fp, "%ld %.17g", kv.first, kv.second.e);
        for (double f : kv.second.f) std::fprintf(fp, " %.17g", f);
        for (double v : kv.second.v) std::fprintf(fp, " %.17g", v);
        std::fprintf(fp, "\n");
      }
      std::fclose(fp);
    }
    std::printf("%s\n", ok ? "PASS" : "FAIL");
    rc = ok ? 0 : 1;
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

// Files written by `ref --out`: energy, virial, then one line per atom ID.
int run_compare(char **argv) {
  if (me != 0) return 0;
  auto load = [](const char *path, std::vector<std::vector<double>> &rows) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string first;
      ss >> first;
      std::vector<double> r;
      if (first != "energy" && first != "virial") r.push_back(std::stod(first));
      double v;
      while (ss >> v) r.push_back(v);
      rows.push_back(r);
    }
    return !rows.empty();
  };
  std::vector<std::vector<double>> a, b;
  if (!load(argv[2], a) || !load(argv[3], b) || a.size() != b.size()) {
    std::printf("cannot compare %s and %s FAIL\n", argv[2], argv[3]);
    return 1;
  }
  const double tol = std::atof(argv[4]);
  Dev de, dv, dea, df, dva;
  de.add(a[0][0], b[0][0]);
  for (int k = 0; k < 6; k++) dv.add(a[1][k], b[1][k]);
  for (size_t r = 2; r < a.size(); r++) {
    if (a[r][0] != b[r][0]) {
      std::printf("atom IDs differ FAIL\n");
      return 1;
    }
    dea.add(a[r][1], b[r][1]);
    for (int k = 0; k < 3; k++) df.add(a[r][2 + k], b[r][2 + k]);
    for (int k = 0; k < 6; k++) dva.add(a[r][5 + k], b[r][5 + k]);
  }
  std::printf("%s vs %s\n", argv[2], argv[3]);
  bool ok = report("energy", de, tol);
  ok &= report("forces", df, tol);
  ok &= report("per-atom energy", dea, tol);
  ok &= report("virial", dv, tol);
  ok &= report("per-atom virial", dva, tol);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int run_nve(char **argv) {
  const std::string model = argv[2], elem = argv[3], lattice = argv[4], a0 = argv[5], ncell = argv[6];
  const int steps = std::atoi(argv[7]);
  const double dt = std::atof(argv[8]);
  const std::string temp = argv[9];
  const double max_dev = std::atof(argv[10]);
  LAMMPS *lmp = open_lammps("none");
  cmd(lmp, "units metal");
  cmd(lmp, "lattice " + lattice + " " + a0);
  cmd(lmp, "region box block 0 " + ncell + " 0 " + ncell + " 0 " + ncell);
  cmd(lmp, "create_box 1 box");
  cmd(lmp, "create_atoms 1 box");
  cmd(lmp, std::string("mass 1 ") + (elem == "C" ? "12.011" : "63.546"));
  cmd(lmp, "pair_style sezm " + model);
  cmd(lmp, "pair_coeff * * " + elem);
  cmd(lmp, "velocity all create " + temp + " 4928459 mom yes rot yes dist gaussian");
  cmd(lmp, "timestep " + std::to_string(dt));
  cmd(lmp, "fix 1 all nve");
  cmd(lmp, "thermo 1");
  const int chunk = std::max(1, steps / 20);
  std::vector<double> t, e;
  cmd(lmp, "run 0");
  const double natoms = static_cast<double>(lmp->atom->natoms);
  t.push_back(0);
  e.push_back(lammps_get_thermo(lmp, "etotal"));
  for (int s = chunk; s <= steps; s += chunk) {
    cmd(lmp, "run " + std::to_string(chunk) + " pre no post no");
    t.push_back(s * dt);
    e.push_back(lammps_get_thermo(lmp, "etotal"));
  }
  const double temp_end = lammps_get_thermo(lmp, "temp");
  delete lmp;
  // Least-squares slope of E_total(t).
  double mt = 0, me_ = 0;
  for (size_t k = 0; k < t.size(); k++) mt += t[k], me_ += e[k];
  mt /= t.size();
  me_ /= e.size();
  double sxy = 0, sxx = 0, spread = 0;
  for (size_t k = 0; k < t.size(); k++) {
    sxy += (t[k] - mt) * (e[k] - me_);
    sxx += (t[k] - mt) * (t[k] - mt);
    spread = std::max(spread, std::fabs(e[k] - e[0]));
  }
  const double slope = sxx > 0 ? sxy / sxx / natoms : 0;
  int rc = 0;
  if (me == 0) {
    std::printf("NVE %s %s %s cells, %.0f atoms, %d steps of %g ps (%g ps), T_end %.1f K: E0 %.10f eV, "
                "max|E-E0| %.3e eV/atom (limit %.1e), drift %.3e eV/atom/ps %s\n",
                elem.c_str(), lattice.c_str(), ncell.c_str(), natoms, steps, dt, steps * dt, temp_end, e[0],
                spread / natoms, max_dev, slope, spread / natoms <= max_dev ? "PASS" : "FAIL");
    rc = spread / natoms <= max_dev ? 0 : 1;
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  int rc = 2;
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "ref" && argc >= 4) rc = run_ref(argc, argv);
    else if (mode == "compare" && argc >= 5) rc = run_compare(argv);
    else if (mode == "nve" && argc >= 11) rc = run_nve(argv);
    else if (me == 0) std::fprintf(stderr, "usage: see the comment at the top of sezm_lammps_check.cpp\n");
  } catch (std::exception &e) {
    std::fprintf(stderr, "sezm_lammps_check: %s\n", e.what());
    rc = 2;
  }
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}
