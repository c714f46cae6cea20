#include "pair_sezm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>

#include "atom.h"
#include "comm.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

#ifndef LAMMPS_VERSION_NUMBER
#define LAMMPS_VERSION_NUMBER 20210929  // the oldest API this file supports
#endif
#if LAMMPS_VERSION_NUMBER < 20220324
#include "neigh_request.h"
#endif

#include "api/engine_factory.h"
#include "api/potential.h"
#include "common/error.h"
#include "engine/engine.h"
#include "pair_sezm_devi.h"
#include "sezm_edge_buffers.h"

using namespace LAMMPS_NS;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The two API spots that changed in LAMMPS 24Mar2022.
void fwd_comm(Comm *comm, Pair *p) {
#if LAMMPS_VERSION_NUMBER >= 20220324
  comm->forward_comm(p);
#else
  comm->forward_comm_pair(p);
#endif
}
void rev_comm(Comm *comm, Pair *p) {
#if LAMMPS_VERSION_NUMBER >= 20220324
  comm->reverse_comm(p);
#else
  comm->reverse_comm_pair(p);
#endif
}

// "atom ID 12" / "atoms ID 12 and ID 40": the local indices of a sezm::AtomError (edge layer,
// engine result) named by LAMMPS atom ID (docs/errors.md).
std::string atom_ids(const sezm::AtomError &e, const tagint *tag) {
  const auto id = [tag](int i) { return "ID " + std::to_string(static_cast<long long>(tag[i])); };
  return e.other() < 0 ? "atom " + id(e.atom()) : "atoms " + id(e.atom()) + " and " + id(e.other());
}

// A run-time error that one rank may find alone: error->one (an MPI abort) on several ranks; on
// one rank error->all, which ends the run cleanly (newer LAMMPS throws: lmp_sezm and Python catch).
void fail_run(LAMMPS *lmp, const std::string &msg) {
  if (lmp->comm->nprocs == 1) lmp->error->all(FLERR, msg);
  lmp->error->one(FLERR, msg);
}

// Feature exchange handed to the engine: it never sees LAMMPS, only these two hooks.
class LammpsExchange : public sezm::FeatureExchange<double> {
 public:
  LammpsExchange(PairSezm *pair, int nlocal, int nall) : pair_(pair), nlocal_(nlocal), nall_(nall) {}
  void forward(double *rows, int width) override { pair_->exchange_forward(rows, width); }
  void reverse(double *rows, int width) override { pair_->exchange_reverse(rows, width, nlocal_, nall_); }
  const std::vector<int> *sent_rows() const override { return pair_->sent_rows(nlocal_, nall_); }

 private:
  PairSezm *pair_;
  int nlocal_, nall_;
};
}  // namespace

PairSezm::PairSezm(LAMMPS *lmp) : Pair(lmp) {
  single_enable = 0;
  restartinfo = 1;  // nothing is stored; read_restart tells a committee to append to its file (deepmd-kit does)
  one_coeff = 1;
  manybody_flag = 1;
  reinitflag = 0;
  // The edge virial is exact (and per-rank additive); F.r over ghosts would work too, but the
  // explicit sum also serves `pair_modify nofdotr` and per-atom virial consistently.
  no_virial_fdotr_compute = 1;
  centroidstressflag = CENTROID_NOTAVAIL;
  try {
    edges_ = std::make_unique<sezm_kk::EdgeBuffers>();
  } catch (std::exception &e) {
    error->all(FLERR, std::string("pair_style sezm: cannot set up the Kokkos edge layer: ") + e.what());
  }
}

PairSezm::~PairSezm() {
  if (n_calls_ > 0) log_timing("pair sezm teardown");
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairSezm::fail(const std::string &msg) { error->all(FLERR, "pair_style sezm: " + msg); }

void PairSezm::allocate() {
  allocated = 1;
  const int n = atom->ntypes;
  memory->create(setflag, n + 1, n + 1, "pair:setflag");
  for (int i = 1; i <= n; i++)
    for (int j = i; j <= n; j++) setflag[i][j] = 0;
  memory->create(cutsq, n + 1, n + 1, "pair:cutsq");
}

// pair_coeff * * E1 E2 ... (one element per LAMMPS atom type)
void PairSezm::coeff(int narg, char **arg) {
  if (!engine_) fail("pair_coeff before a model was loaded");
  if (!allocated) allocate();
  const int ntypes = atom->ntypes;
  if (narg < 2 || strcmp(arg[0], "*") != 0 || strcmp(arg[1], "*") != 0)
    fail("pair_coeff must be 'pair_coeff * * E1 ... En' with one element per atom type");
  if (narg != 2 + ntypes)
    fail("pair_coeff needs one element per atom type: got " + std::to_string(narg - 2) + " elements for " +
         std::to_string(ntypes) + " atom types");
  type_map_.assign(ntypes + 1, -1);
  for (int t = 1; t <= ntypes; t++) {
    try {
      type_map_[t] = sezm::model_type_index(engine_->config(), arg[1 + t], model_path_);
    } catch (std::exception &e) {
      fail(std::string("atom type ") + std::to_string(t) + ": " + e.what());
    }
  }
  if (committee_) committee_->check_type_maps(engine_->config(), arg + 2, ntypes);
  for (int i = 1; i <= ntypes; i++)
    for (int j = i; j <= ntypes; j++) setflag[i][j] = 1;
}

void PairSezm::init_style() {
  if (!engine_) fail("no model loaded");
  if (force->newton_pair == 0)
    fail("requires newton pair on (ghost forces and feature gradients are reverse-communicated)");
  if (strcmp(update->unit_style, "metal") != 0)
    fail(std::string("requires units metal (the model works in eV and Angstrom), not units ") +
         update->unit_style);
#if LAMMPS_VERSION_NUMBER >= 20220324
  neighbor->add_request(this, NeighConst::REQ_FULL);
#else
  const int irequest = neighbor->request(this, instance_me);
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
#endif
  comm_forward = comm_reverse = comm_reverse_off = comm_width_;
  reset_timing();
  // Every run's init restarts neighbor->ncalls at 0 (Neighbor::init): the record of sent rows
  // is keyed on it, so the first force call of the run records afresh.
  sent_build_ = -1;
  sent_valid_ = false;
}

// The neighbour list serves every model of a committee: the largest cutoff.
double PairSezm::init_one(int, int) { return committee_ ? committee_->max_rcut() : engine_->config().rcut; }

const sezm::ModelConfig &PairSezm::model_config() const { return engine_->config(); }

void PairSezm::reset_timing() {
  t_edges_ = t_forward_ = t_backward_ = t_comm_fwd_ = t_comm_rev_ = t_total_ = 0;
  t_stage_ = stage_bytes_ = 0;
  n_calls_ = 0;
  n_edges_sum_ = 0;
}

void PairSezm::log_timing(const char *when) {
  // Max over ranks: the slowest rank sets the step time.
  const double rest = t_total_ - t_edges_ - t_forward_ - t_backward_ - t_comm_fwd_ - t_comm_rev_;
  double loc[10] = {t_edges_, t_forward_, t_backward_, t_comm_fwd_,   t_comm_rev_,
                    t_total_, n_edges_sum_, rest,        t_stage_, stage_bytes_};
  double mx[10], sum[10];
  MPI_Allreduce(loc, mx, 10, MPI_DOUBLE, MPI_MAX, world);
  MPI_Allreduce(loc, sum, 10, MPI_DOUBLE, MPI_SUM, world);
  if (committee_) committee_->log_timing(when, std::strcmp(when, "end of run") == 0);
  if (comm->me != 0 || n_calls_ == 0) return;
  const double n = static_cast<double>(n_calls_);
  const double other = mx[7];
  utils::logmesg(lmp,
                 "pair sezm timing ({}): {} force calls, {:.0f} edges/call (all ranks), seconds per call (max over {} ranks;\n"
                 "  communication includes waiting for the slowest rank):\n"
                 "  edge building {:10.4f} s\n  engine forward {:9.4f} s\n  engine backward {:8.4f} s\n"
                 "  comm forward {:11.4f} s\n  comm reverse {:11.4f} s\n  forces/virial {:10.4f} s\n"
                 "  total {:18.4f} s   ({:.1f} us per edge)\n",
                 when, n_calls_, sum[6] / n, comm->nprocs, mx[0] / n, mx[1] / n, mx[2] / n, mx[3] / n, mx[4] / n,
                 other / n, mx[5] / n, sum[6] > 0 ? 1e6 * mx[5] / (sum[6] / comm->nprocs) : 0.0);
  // The CUDA engine's ghost-row staging, inside engine forward + backward + comm above
  // (docs/multi-gpu.md): what a step pays per rank for the exchanges.
  if (mx[8] > 0)
    utils::logmesg(lmp,
                   "  ghost staging {:10.4f} s   (device<->host copies, conversion and the comm above; "
                   "{:.3f} MB moved per call, max over ranks)\n",
                   mx[8] / n, mx[9] / n / 1e6);
}

void PairSezm::exchange_forward(double *rows, int width) {
  if (width > comm_width_) error->one(FLERR, "pair_style sezm: exchange row wider than the comm buffers");
  const auto t0 = Clock::now();
  cur_rows_ = rows;
  cur_width_ = width;
  fwd_comm(comm, this);
  t_comm_fwd_ += seconds_since(t0);
}

void PairSezm::exchange_reverse(double *rows, int width, int nlocal, int nall) {
  if (width > comm_width_) error->one(FLERR, "pair_style sezm: exchange row wider than the comm buffers");
  const auto t0 = Clock::now();
  cur_rows_ = rows;
  cur_width_ = width;
  rev_comm(comm, this);
  // The engine's contract: ghost rows are consumed once folded into their owners.
  std::memset(rows + static_cast<size_t>(nlocal) * width, 0, sizeof(double) * width * (nall - nlocal));
  t_comm_rev_ += seconds_since(t0);
}

// On one rank every ghost is a periodic image of an owned atom, and a forward comm of each owned
// atom's own index tells which (corner images included: LAMMPS forwards them through the
// intermediate images). compute() then has the edge layer map every edge source to its owned
// atom: the standalone periodic graph (images as edges onto owned atoms, what
// test_exchange proves equal to the ghost route), with no ghost rows, no feature exchanges and
// no node work on ghosts. With more ranks some ghosts live elsewhere: the exchanges do it.
void PairSezm::find_ghost_owners(int nlocal, int nall) {
  owners_valid_ = false;
  ghost_owner_.clear();
  if (comm->nprocs != 1) return;
  owner_probe_.assign(nall, -1.0);
  for (int i = 0; i < nlocal; i++) owner_probe_[i] = i;
  begin_record(nall);  // the probe is a forward comm: it records the sent rows as well
  exchange_forward(owner_probe_.data(), 1);
  end_record(nlocal, nall);
  ghost_owner_.resize(nall - nlocal);
  for (int g = 0; g < nall - nlocal; g++) {
    const double v = owner_probe_[nlocal + g];
    if (!(v >= 0.0 && v < nlocal) || v != static_cast<double>(static_cast<int>(v))) {
      ghost_owner_.clear();  // not an image of an owned atom: keep the comm route
      if (!warned_owners_)
        error->warning(FLERR, "pair_style sezm: a ghost atom is not an image of an owned atom on this single "
                              "rank; using the feature exchange");
      warned_owners_ = true;
      return;
    }
    ghost_owner_[g] = static_cast<int>(v);
  }
  owners_valid_ = true;
}

// ---- the rows that pair comm moves (FeatureExchange::sent_rows; docs/multi-gpu.md) ----
// Forward comm packs, swap by swap, the rows of each swap's send list: owned rows, and in
// multi-hop swaps (a cutoff longer than a subdomain) ghost rows received in an earlier swap;
// reverse comm adds into the same rows. A width-1 forward comm with recording_ set collects them
// (CommBrick and CommTiled alike call pack_forward_comm with each list). Ghost sets change only
// with a neighbour-list build, so one record per build (neighbor->ncalls, the same on every rank:
// the record is collective; init_style forgets it, as each run's init restarts the count) serves
// every exchange until the next.
void PairSezm::begin_record(int nall) {
  sent_flag_.assign(nall, 0);
  sent_valid_ = false;
  recording_ = true;
}

void PairSezm::end_record(int nlocal, int nall) {
  recording_ = false;
  sent_rows_.clear();
  for (int i = 0; i < nall; i++)
    if (sent_flag_[i]) sent_rows_.push_back(i);
  sent_nlocal_ = nlocal;
  sent_nall_ = nall;
  sent_build_ = neighbor->ncalls;
  sent_valid_ = true;
}

void PairSezm::record_sent_rows(int nlocal, int nall) {
  owner_probe_.assign(nall, 0.0);
  begin_record(nall);
  exchange_forward(owner_probe_.data(), 1);
  end_record(nlocal, nall);
}

const std::vector<int> *PairSezm::sent_rows(int nlocal, int nall) const {
  return sent_valid_ && nlocal == sent_nlocal_ && nall == sent_nall_ ? &sent_rows_ : nullptr;
}

// A row outside the record would be one that a device engine did not move (stale on the host):
// stop, naming the cause. One byte read per packed row.
void PairSezm::check_sent(int n, const int *list, const char *what) const {
  if (!sent_valid_) return;
  const int nf = static_cast<int>(sent_flag_.size());
  for (int i = 0; i < n; i++)
    if (list[i] < 0 || list[i] >= nf || !sent_flag_[list[i]])
      error->one(FLERR, std::string("pair_style sezm: ") + what + " comm moves atom row " + std::to_string(list[i]) +
                            ", which the record of sent rows (taken at the latest neighbour-list build) lacks: "
                            "the ghost atoms changed without a neighbour-list build");
}

int PairSezm::pack_forward_comm(int n, int *list, double *buf, int, int *) {
  if (recording_) {
    for (int i = 0; i < n; i++) sent_flag_[list[i]] = 1;
  } else {
    check_sent(n, list, "forward");
  }
  const size_t w = cur_width_;
  for (int i = 0; i < n; i++) std::memcpy(buf + i * w, cur_rows_ + list[i] * w, w * sizeof(double));
  return n * cur_width_;
}

void PairSezm::unpack_forward_comm(int n, int first, double *buf) {
  const size_t w = cur_width_;
  std::memcpy(cur_rows_ + first * w, buf, n * w * sizeof(double));
}

int PairSezm::pack_reverse_comm(int n, int first, double *buf) {
  const size_t w = cur_width_;
  std::memcpy(buf, cur_rows_ + first * w, n * w * sizeof(double));
  return n * cur_width_;
}

void PairSezm::unpack_reverse_comm(int n, int *list, double *buf) {
  check_sent(n, list, "reverse");
  const size_t w = cur_width_;
  for (int i = 0; i < n; i++) {
    double *row = cur_rows_ + list[i] * w;
    const double *b = buf + i * w;
    for (size_t k = 0; k < w; k++) row[k] += b[k];
  }
}

void PairSezm::compute(int eflag, int vflag) {
  ev_init(eflag, vflag);
  const auto t_start = Clock::now();

  const int nlocal = atom->nlocal;
  const int nall = nlocal + atom->nghost;

  // A non-finite position fails every distance test, so the atom's edges would vanish and the
  // step return finite numbers for a broken state: stop, naming the atom (docs/errors.md).
  // LAMMPS itself checks coordinates only when it re-neighbours (Domain::pbc).
  for (int i = 0; i < nlocal; i++) {
    const double *xi = atom->x[i];
    if (!std::isfinite(xi[0]) || !std::isfinite(xi[1]) || !std::isfinite(xi[2])) {
      char pos[96];
      std::snprintf(pos, sizeof pos, "(%g, %g, %g)", xi[0], xi[1], xi[2]);
      fail_run(lmp, "pair_style sezm: atom ID " + std::to_string(static_cast<long long>(atom->tag[i])) +
                            " has a non-finite position " + pos + " at step " +
                            std::to_string(static_cast<long long>(update->ntimestep)) +
                            " (an unstable run: check the time step, the forces and the input)");
    }
  }

  find_ghost_owners(nlocal, nall);  // its comm time counts as comm forward, not edge or engine time
  // Several ranks: the rows pair comm moves, once per neighbour-list build (one rank: recorded by
  // find_ghost_owners's probe).
  if (comm->nprocs > 1 && neighbor->ncalls != sent_build_) record_sent_rows(nlocal, nall);
  const auto t_edges = Clock::now();

  // A rank without atoms still runs the engine (on an empty graph), so it makes the same
  // sequence of comm calls as every other rank.
  sezm_kk::ListInput in;
  in.inum = list->inum;
  in.ilist = list->ilist;
  in.numneigh = list->numneigh;
  in.firstneigh = list->firstneigh;
  in.neighmask = NEIGHMASK;
  in.x = nall > 0 ? &atom->x[0][0] : nullptr;
  in.type = atom->type;
  in.type_map = type_map_.data();
  in.nlocal = nlocal;
  in.nall = nall;
  in.rcut = engine_->config().rcut;
  in.ghost_owner = owners_valid_ ? ghost_owner_.data() : nullptr;
  try {
    edges_->build(in);
  } catch (sezm::AtomError &e) {  // coincident atoms
    fail_run(lmp, "pair_style sezm: " + atom_ids(e, atom->tag) + " " + e.reason());
  } catch (std::exception &e) {
    fail_run(lmp, std::string("pair_style sezm: edge building failed: ") + e.what());
  }
  const sezm::Graph &g = edges_->graph();
  t_edges_ += seconds_since(t_edges);

  const double comm_before = t_comm_fwd_ + t_comm_rev_, fwd_before = t_comm_fwd_;
  LammpsExchange lex(this, nlocal, nall);
  LammpsExchange *ex = owners_valid_ ? nullptr : &lex;  // a ghost-free graph has nothing to exchange
  sezm::EngineResult r;
  try {
    r = engine_->compute_forces(g, vflag_atom != 0, ex);
    sezm::require_finite_result(g, r);  // a NaN stops the run, naming the atom
  } catch (sezm::AtomError &e) {
    fail_run(lmp, "pair_style sezm: " + atom_ids(e, atom->tag) + " " + e.reason());
  } catch (std::exception &e) {
    fail_run(lmp, std::string("pair_style sezm: ") + e.what());
  }
  t_stage_ += r.seconds_exchange;
  stage_bytes_ += r.exchange_bytes;
  const double comm_fwd = t_comm_fwd_ - fwd_before;
  const double comm_rev = t_comm_fwd_ + t_comm_rev_ - comm_before - comm_fwd;
  t_forward_ += r.seconds_forward - comm_fwd;
  t_backward_ += r.seconds_backward - comm_rev;

  if (eflag_global) eng_vdwl += r.energy;
  if (eflag_atom)
    for (int i = 0; i < nlocal; i++) eatom[i] += r.atom_energy[i];

  // Forces land on owned and ghost rows; newton on folds ghosts into owners after compute().
  double W[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (vflag_atom) virial_atom_.assign(9 * static_cast<size_t>(nall), 0.0);
  if (nall > 0)
    sezm::add_forces_virial(g, r, &atom->f[0][0], W, vflag_atom ? virial_atom_.data() : nullptr);
  // W[3k+j] = sum over edges of del_j f_k with del = x_i - x_j: LAMMPS's xy is W[3], xz W[6], yz W[7].
  if (vflag_global) {
    virial[0] += W[0];
    virial[1] += W[4];
    virial[2] += W[8];
    virial[3] += W[3];
    virial[4] += W[6];
    virial[5] += W[7];
  }
  if (vflag_atom) {
    for (int k = 0; k < nall; k++) {
      const double *w = virial_atom_.data() + 9 * static_cast<size_t>(k);
      vatom[k][0] += w[0];
      vatom[k][1] += w[4];
      vatom[k][2] += w[8];
      vatom[k][3] += w[3];
      vatom[k][4] += w[6];
      vatom[k][5] += w[7];
    }
  }

  t_total_ += seconds_since(t_start);
  n_calls_++;
  // Output steps of a committee: models 2..M on the same graph, then the deviation row. Its own
  // timing (pair_sezm_devi.cpp); the breakdown above stays model 1's.
  if (committee_ && committee_->due(update->ntimestep)) {
    const double comm_fwd0 = t_comm_fwd_, comm_rev0 = t_comm_rev_;
    try {
      committee_->evaluate(g, r, in, ex, nlocal, nall);
    } catch (sezm::AtomError &e) {
      fail_run(lmp, "pair_style sezm: " + atom_ids(e, atom->tag) + " " + e.reason());
    } catch (std::exception &e) {
      fail_run(lmp, std::string("pair_style sezm: ") + e.what());
    }
    t_comm_fwd_ = comm_fwd0;
    t_comm_rev_ = comm_rev0;
  }
  n_edges_sum_ += g.n_edges();
  const bool last_of_run = update->ntimestep == update->laststep;
  if (last_of_run || (timing_every_ > 0 && n_calls_ % timing_every_ == 0)) {
    log_timing(last_of_run ? "end of run" : "running");
    if (last_of_run) reset_timing();
  }
}

const sezm::Graph *PairSezm::edge_graph() const { return edges_ ? &edges_->graph() : nullptr; }

double PairSezm::memory_usage() {
  double bytes = Pair::memory_usage();
  bytes += edges_ ? edges_->bytes() : 0.0;
  bytes += sizeof(double) * virial_atom_.capacity();
  bytes += committee_ ? committee_->bytes() : 0.0;
  return bytes;
}
