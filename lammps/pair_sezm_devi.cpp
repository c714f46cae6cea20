#include "pair_sezm_devi.h"

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>

#include "atom.h"
#include "comm.h"
#include "error.h"
#include "update.h"
#include "utils.h"

#include "api/engine_factory.h"
#include "api/potential.h"
#include "common/error.h"
#include "engine/engine.h"
#include "pair_sezm.h"
#include "sezm_edge_buffers.h"

using namespace LAMMPS_NS;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

bool SezmCommittee::is_keyword(const std::string &key) {
  return key == "out_freq" || key == "out_file" || key == "relative" || key == "relative_v" || key == "atomic";
}

int SezmCommittee::parse(LAMMPS *lmp, CommitteeSettings &s, int narg, char **arg, int i) {
  const std::string key = arg[i];
  s.given = true;
  if (key == "atomic") {
    s.atomic = true;
    return 1;
  }
  if (i + 1 >= narg) lmp->error->all(FLERR, "pair_style sezm: keyword '" + key + "' needs a value");
  const char *val = arg[i + 1];
  if (key == "out_freq") {
    s.out_freq = utils::inumeric(FLERR, val, false, lmp);
    if (s.out_freq < 0) lmp->error->all(FLERR, "pair_style sezm: out_freq needs a non-negative step count");
  } else if (key == "out_file") {
    s.out_file = val;
  } else {  // relative, relative_v: the level E added to the force / virial magnitude
    const double e = utils::numeric(FLERR, val, false, lmp);
    if (!(e >= 0.0)) lmp->error->all(FLERR, "pair_style sezm: " + key + " needs a non-negative level");
    (key == "relative" ? s.opt.relative_f : s.opt.relative_v) = e;
  }
  return 2;
}

std::vector<std::unique_ptr<sezm::Engine>> SezmCommittee::make_engines(
    LAMMPS *lmp, const std::vector<std::string> &paths, const std::string &head,
    const std::optional<sezm::ChargeSpin> &charge_spin, const sezm::EngineOptions &opt, sezm::ChargeSpinUse *cs) {
  std::vector<std::unique_ptr<sezm::Engine>> engines;
  for (const std::string &path : paths) {
    std::string why;
    try {
      sezm::ModelW<double> weights = sezm::load_model_weights(path, head);
      *cs = sezm::apply_charge_spin(weights, charge_spin, path);  // docs/model.md §10
      try {
        engines.push_back(sezm::make_engine(std::move(weights), opt));
      } catch (std::exception &e) {
        why = e.what();
      }
    } catch (std::exception &e) {
      lmp->error->all(FLERR, std::string("pair_style sezm: cannot use model: ") + e.what());
    }
    // Every rank learns whether all could start their engine (a device may fail on one rank
    // only), so nobody is left waiting.
    int ok = why.empty() ? 1 : 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, lmp->world);
    if (!all_ok) {
      if (ok)
        lmp->error->all(FLERR, "pair_style sezm: device " + std::string(sezm::device_name(opt.device)) +
                                   " could not start on another rank");
      lmp->error->all(FLERR, "pair_style sezm: " + why);
    }
  }
  return engines;
}

SezmCommittee::SezmCommittee(LAMMPS *lmp, PairSezm *pair, std::vector<std::unique_ptr<sezm::Engine>> models,
                             std::vector<std::string> paths, const CommitteeSettings &s, bool append)
    : Pointers(lmp), pair_(pair), models_(std::move(models)), paths_(std::move(paths)), s_(s) {
  s_.opt.relative_v_kind = sezm::RelativeVirial::kPerComponent;  // pair_style deepmd's
  // Model 1 drives the graph; each other cutoff gets one edge list of its own.
  const double rc1 = pair_->model_config().rcut;
  for (const auto &m : models_) {
    const double rc = m->config().rcut;
    if (rc == rc1) {
      edges_of_.push_back(-1);
      continue;
    }
    auto it = std::find(own_rcut_.begin(), own_rcut_.end(), rc);
    if (it == own_rcut_.end()) {
      own_rcut_.push_back(rc);
      own_edges_.push_back(std::make_unique<sezm_kk::EdgeBuffers>());
      it = own_rcut_.end() - 1;
    }
    edges_of_.push_back(static_cast<int>(it - own_rcut_.begin()));
  }
  if (comm->me == 0) {
    utils::logmesg(lmp, "pair sezm: committee of {} models (model 1 drives the dynamics), {}\n", n_models(),
                   s_.out_freq > 0 ? "deviations every " + std::to_string(s_.out_freq) + " steps to " + s_.out_file +
                                         (append ? " (appended to: restart)" : "")
                                   : std::string("out_freq 0: model 1 only"));
    for (size_t m = 0; m < models_.size(); ++m) {
      const auto &c = models_[m]->config();
      utils::logmesg(lmp, "pair sezm: model {} {}: rcut {} A, {} blocks, lmax {}, {} channels; {}\n", m + 2,
                     paths_[m + 1], c.rcut, c.n_blocks, c.lmax, c.channels,
                     edges_of_[m] < 0 ? "model 1's edge list" : "its own edge list (another cutoff)");
    }
  }
  if (s_.out_freq == 0) return;
  int ok = 1, err = 0;
  if (comm->me == 0) {
    fp_ = std::fopen(s_.out_file.c_str(), append ? "a" : "w");
    err = errno;
    ok = fp_ != nullptr;
    if (fp_ && !append) std::fprintf(fp_, "%s\n", sezm::model_deviation_header(s_.atomic).c_str());
    if (fp_) std::fflush(fp_);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, world);
  if (!ok)
    error->all(FLERR, "pair_style sezm: cannot open the model deviation file '" + s_.out_file + "' for writing: " +
                          std::strerror(err));  // rank 0's reason: only rank 0 prints
}

SezmCommittee::~SezmCommittee() {
  if (fp_) std::fclose(fp_);
}

void SezmCommittee::check_type_maps(const sezm::ModelConfig &first, char **elements, int ntypes) {
  const auto list = [](const sezm::ModelConfig &c) {
    std::string s;
    for (const auto &e : c.type_map) s += (s.empty() ? "" : " ") + e;
    return s;
  };
  for (size_t m = 0; m < models_.size(); ++m) {
    const auto &cfg = models_[m]->config();
    for (int t = 1; t <= ntypes; ++t) {
      const std::string el = elements[t - 1];
      const int i1 = sezm::model_type_index(first, el, paths_[0]);
      int im = -1;
      try {
        im = sezm::model_type_index(cfg, el, paths_[m + 1]);
      } catch (std::exception &e) {
        error->all(FLERR, "pair_style sezm: atom type " + std::to_string(t) + ", model " + std::to_string(m + 2) +
                              ": " + e.what());
      }
      if (im != i1)
        error->all(FLERR, "pair_style sezm: the models disagree on the type_map: element '" + el + "' (atom type " +
                              std::to_string(t) + ") is type " + std::to_string(i1) + " of model 1 " + paths_[0] +
                              " (type_map " + list(first) + ") but type " + std::to_string(im) + " of model " +
                              std::to_string(m + 2) + " " + paths_[m + 1] + " (type_map " + list(cfg) +
                              "); the models of a committee share one graph and must give every element of "
                              "pair_coeff the same index");
    }
  }
}

double SezmCommittee::max_rcut() const {
  double rc = pair_->model_config().rcut;
  for (const auto &m : models_) rc = std::max(rc, m->config().rcut);
  return rc;
}

int SezmCommittee::max_comm_width() const {
  int w = 3 * n_models();  // the forces of all models on one row (ghost folding)
  for (const auto &m : models_) w = std::max(w, m->config().n_coeff() * m->config().channels);
  return w;
}

// Forces of model m (0-based) into column m of the rows (nall x M x 3), its virial into virials_.
void SezmCommittee::add_model_forces(int m, const sezm::Graph &g, const sezm::EngineResult &r, int nall) {
  const size_t M = n_models();
  scratch_.assign(3 * static_cast<size_t>(nall), 0.0);
  if (nall > 0) sezm::add_forces_virial(g, r, scratch_.data(), &virials_[9 * m], nullptr);
  sezm::put_model_forces(scratch_.data(), m, static_cast<int>(M), static_cast<size_t>(nall), rows_.data());
}

void SezmCommittee::evaluate(const sezm::Graph &g, const sezm::EngineResult &first, const sezm_kk::ListInput &in,
                             sezm::FeatureExchange<double> *ex, int nlocal, int nall) {
  const auto t0 = Clock::now();
  const int M = n_models();
  rows_.assign(static_cast<size_t>(nall) * M * 3, 0.0);
  virials_.assign(9 * static_cast<size_t>(M), 0.0);
  add_model_forces(0, g, first, nall);
  double t_devi = seconds_since(t0);
  const auto t1 = Clock::now();
  for (int m = 1; m < M; ++m) {
    const int own = edges_of_[m - 1];
    const sezm::Graph *gm = &g;
    if (own >= 0) {  // another cutoff: its own edges from the same neighbour list
      sezm_kk::ListInput in_m = in;
      in_m.rcut = own_rcut_[own];
      gm = &own_edges_[own]->build(in_m);
    }
    sezm::EngineResult r;
    try {
      // On model 1's graph, its geometry where the two models' geometry agrees (compute_like).
      r = own >= 0 ? models_[m - 1]->compute_forces(*gm, false, ex)
                   : models_[m - 1]->compute_forces_like(pair_->engine(), g, false, ex);
      sezm::require_finite_result(*gm, r);
    } catch (sezm::AtomError &e) {
      throw sezm::AtomError("model " + paths_[m], e.reason() + " (model " + std::to_string(m + 1) + ", " +
                                                      paths_[m] + ")", e.atom(), e.other());
    } catch (std::exception &e) {
      throw sezm::Error("model " + std::to_string(m + 1) + " (" + paths_[m] + "): " + e.what());
    }
    add_model_forces(m, *gm, r, nall);
  }
  t_models_ += seconds_since(t1);
  const auto t2 = Clock::now();
  // Ghost rows hold forces on images of atoms owned elsewhere: fold them into their owners, as
  // LAMMPS does for model 1's forces after compute() (pair_style deepmd does the same).
  if (ex) pair_->exchange_reverse(rows_.data(), 3 * M, nlocal, nall);
  write_row(update->ntimestep, nlocal);
  t_devi_ += t_devi + seconds_since(t2);
  n_steps_++;
}

void SezmCommittee::write_row(bigint step, int nlocal) {
  const int M = n_models();
  devi_.resize(nlocal);
  sezm::force_deviation(rows_.data(), M, nlocal, s_.opt, devi_.data());
  sezm::ForceDeviationSums loc, all;
  loc.add(devi_.data(), nlocal);
  MPI_Reduce(&loc.max, &all.max, 1, MPI_DOUBLE, MPI_MAX, 0, world);
  MPI_Reduce(&loc.min, &all.min, 1, MPI_DOUBLE, MPI_MIN, 0, world);
  MPI_Reduce(&loc.sum, &all.sum, 1, MPI_DOUBLE, MPI_SUM, 0, world);
  std::vector<double> vir(9 * static_cast<size_t>(M));
  MPI_Reduce(virials_.data(), vir.data(), 9 * M, MPI_DOUBLE, MPI_SUM, 0, world);
  // `atomic`: every atom's deviation on rank 0, written in atom-ID order.
  std::vector<double> ordered;
  if (s_.atomic) {
    const int np = comm->nprocs;
    std::vector<int> counts(np), displs(np, 0);
    MPI_Gather(&nlocal, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world);
    const int total = std::accumulate(counts.begin(), counts.end(), 0);
    for (int p = 1; p < np; ++p) displs[p] = displs[p - 1] + counts[p - 1];
    tags_all_.resize(comm->me == 0 ? total : 0);
    devi_all_.resize(comm->me == 0 ? total : 0);
    MPI_Gatherv(atom->tag, nlocal, MPI_LMP_TAGINT, tags_all_.data(), counts.data(), displs.data(), MPI_LMP_TAGINT, 0,
                world);
    MPI_Gatherv(devi_.data(), nlocal, MPI_DOUBLE, devi_all_.data(), counts.data(), displs.data(), MPI_DOUBLE, 0,
                world);
    if (comm->me == 0) {
      std::vector<int> order(total);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return tags_all_[a] < tags_all_[b]; });
      ordered.resize(total);
      for (int k = 0; k < total; ++k) ordered[k] = devi_all_[order[k]];
    }
  }
  if (comm->me != 0) return;
  const double n = static_cast<double>(atom->natoms);
  sezm::DeviationRow row;
  sezm::virial_deviation(vir.data(), M, n, s_.opt, &row);
  sezm::finish_force_deviation(all, n, &row);
  const std::string line =
      sezm::model_deviation_line(static_cast<long long>(step), row, ordered.data(), ordered.size());
  std::fprintf(fp_, "%s\n", line.c_str());
  std::fflush(fp_);
}

void SezmCommittee::log_timing(const char *when, bool reset) {
  double loc[2] = {t_models_, t_devi_}, mx[2];
  MPI_Allreduce(loc, mx, 2, MPI_DOUBLE, MPI_MAX, world);
  if (comm->me == 0 && n_steps_ > 0)
    utils::logmesg(lmp,
                   "pair sezm committee ({}): {} output steps of {} models, seconds per output step (max over ranks):\n"
                   "  models 2..{} {:10.4f} s (engines, exchanges, own edge lists)\n"
                   "  deviation {:12.4f} s (forces, ghost folding, reductions, file)\n",
                   when, n_steps_, n_models(), n_models(), mx[0] / n_steps_, mx[1] / n_steps_);
  if (reset) {
    t_models_ = t_devi_ = 0;
    n_steps_ = 0;
  }
}

double SezmCommittee::bytes() const {
  double b = sizeof(double) * (rows_.capacity() + scratch_.capacity() + devi_.capacity() + devi_all_.capacity());
  for (const auto &e : own_edges_) b += e->bytes();
  return b;
}
