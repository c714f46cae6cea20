// pair_style sezm's arguments (PairSezm::settings): models, keywords, the engines through the
// one factory (a committee's too: pair_sezm_devi.h), the log lines; apart from pair_sezm.cpp,
// which holds the force call and the communication. Keywords: docs/lammps.md.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm.h"
#include "error.h"
#include "pair_sezm.h"
#include "utils.h"

#include "api/engine_factory.h"
#include "common/error.h"
#include "engine/engine.h"
#include "model/charge_spin.h"
#include "pair_sezm_devi.h"

using namespace LAMMPS_NS;

// pair_style sezm MODEL1 [MODEL2 ...] [keyword value ...] (usage below; committees: pair_sezm_devi.h)
void PairSezm::settings(int narg, char **arg) {
  static const char *usage =
      " (usage: pair_style sezm MODEL1 [MODEL2 ...] [device cpu|cuda] [gpu N] [mode lean|fast] [chunk N] "
      "[precision default|tf32] [timing N] [head NAME] [charge_spin Q S] [out_freq N] [out_file F] [relative E] "
      "[relative_v E] [atomic])";
  static const std::string known_keys =
      "device, gpu, mode, chunk, precision, timing, head, charge_spin, out_freq, out_file, relative, relative_v, "
      "atomic";
  const auto is_key = [](const std::string &k) {
    return k == "device" || k == "gpu" || k == "mode" || k == "chunk" || k == "precision" || k == "timing" ||
           k == "head" || k == "charge_spin" || SezmCommittee::is_keyword(k);
  };
  int n_models = 0;  // the leading arguments that are not keywords: the models, model 1 first
  while (n_models < narg && !is_key(arg[n_models])) ++n_models;
  if (n_models < 1) fail(std::string("missing model file") + usage);
  for (int m = 1; m < n_models; ++m) {  // a misspelt keyword would read as a model: say both
    FILE *f = std::fopen(arg[m], "rb");
    if (!f)
      fail("unknown keyword '" + std::string(arg[m]) + "' (known: " + known_keys + "), and no model file of that name");
    std::fclose(f);
  }
  model_path_ = arg[0];
  timing_every_ = 0;
  use_cuda_ = false;
  gpu_ = -1;
  mode_ = "lean";
  chunk_ = 0;
  precision_ = "default";
  sezm::Precision precision = sezm::Precision::kDeviceDefault;
  std::string head;  // multi-task branch (or alias); empty: the one aliased "Default"
  std::optional<sezm::ChargeSpin> charge_spin;
  CommitteeSettings cs_opt;
  for (int i = n_models; i < narg; i += 2) {
    const std::string key = arg[i];
    if (SezmCommittee::is_keyword(key)) {
      i += SezmCommittee::parse(lmp, cs_opt, narg, arg, i) - 2;
      continue;
    }
    if (i + 1 >= narg) fail("keyword '" + key + "' needs a value");
    const std::string val = arg[i + 1];
    if (key == "charge_spin") {  // two values: the frame's total charge and spin multiplicity
      if (i + 2 >= narg) fail("charge_spin needs two values, the charge Q and the spin S");
      charge_spin = sezm::ChargeSpin{utils::numeric(FLERR, val.c_str(), false, lmp),
                                     utils::numeric(FLERR, arg[i + 2], false, lmp)};
      ++i;
    } else if (key == "device") {
      if (val != "cpu" && val != "cuda") fail("unknown device '" + val + "' (expected cpu or cuda)");
      use_cuda_ = val == "cuda";
    } else if (key == "gpu") {
      gpu_ = utils::inumeric(FLERR, val.c_str(), false, lmp);
      if (gpu_ < 0) fail("gpu needs a non-negative device index");
    } else if (key == "mode") {
      if (val != "lean" && val != "fast") fail("unknown mode '" + val + "' (expected lean or fast)");
      mode_ = val;
    } else if (key == "chunk") {
      chunk_ = utils::inumeric(FLERR, val.c_str(), false, lmp);
      if (chunk_ < 1) fail("chunk needs a positive number of edges");
    } else if (key == "precision") {  // CUDA only: tf32 = one TF32 pass (docs/performance.md)
      if (!sezm::parse_precision(val, &precision)) fail("unknown precision '" + val + "' (expected default or tf32)");
      precision_ = sezm::precision_name(precision);
    } else if (key == "timing") {
      timing_every_ = utils::inumeric(FLERR, val.c_str(), false, lmp);
      if (timing_every_ < 0) fail("timing needs a non-negative step count");
    } else if (key == "head") {
      head = val;
    } else {
      fail("unknown keyword '" + key + "' (known: " + known_keys + ")");
    }
  }
  if (!use_cuda_ && (gpu_ >= 0 || mode_ != "lean" || chunk_ > 0)) fail("gpu, mode and chunk apply to device cuda only");
  if (!use_cuda_ && precision != sezm::Precision::kDeviceDefault)
    fail("precision tf32 applies to device cuda only (the CPU engine computes in float64)");
  sezm::EngineOptions opt;
  opt.device = use_cuda_ ? sezm::Device::kCuda : sezm::Device::kCpu;
  opt.mode = mode_ == "fast" ? sezm::CudaMode::kFast : sezm::CudaMode::kLean;
  opt.chunk_edges = chunk_;
  opt.precision = precision;
  opt.gpu = gpu_;
  if (use_cuda_ && opt.gpu < 0) {
    // Default: one GPU per rank by the rank's index on its node.
    MPI_Comm node;
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm->me, MPI_INFO_NULL, &node);
    int local = 0;
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    const int n = sezm::cuda_device_count();
    opt.gpu = n > 0 ? local % n : 0;  // with none, the engine reports why
  }
  engine_.reset();
  committee_.reset();
  sezm::ChargeSpinUse cs;
  std::vector<std::unique_ptr<sezm::Engine>> engines =
      SezmCommittee::make_engines(lmp, std::vector<std::string>(arg, arg + n_models), head, charge_spin, opt, &cs);
  engine_ = std::move(engines.front());
  engines.erase(engines.begin());
  if (n_models > 1) {
    committee_ = std::make_unique<SezmCommittee>(lmp, this, std::move(engines),
                                                 std::vector<std::string>(arg, arg + n_models), cs_opt, is_restart_);
    // On output steps the other models of model 1's cutoff reuse its per-edge geometry
    // (Engine::compute_like); without output steps nothing is kept.
    engine_->keep_geometry(cs_opt.out_freq > 0);
  } else if (cs_opt.given && comm->me == 0) {
    error->warning(FLERR, "pair_style sezm: out_freq, out_file, relative, relative_v and atomic need two or more "
                          "models; ignored for one model");
  }
  if (use_cuda_) utils::logmesg(lmp, "pair sezm: rank {} uses {}\n", comm->me, engine_->description());
  if (use_cuda_ && comm->nprocs > 1) {
    // Only rank 0 writes the log: it lists every rank's GPU, so that a run shows whether its ranks
    // got one GPU each (docs/multi-gpu.md).
    std::vector<int> devs(comm->me == 0 ? comm->nprocs : 1);
    MPI_Gather(&opt.gpu, 1, MPI_INT, devs.data(), 1, MPI_INT, 0, world);
    if (comm->me == 0) {
      std::string list;
      for (int r = 0; r < comm->nprocs && r < 64; ++r) list += " " + std::to_string(devs[r]);
      if (comm->nprocs > 64) list += " ...";
      utils::logmesg(lmp, "pair sezm: CUDA device of each rank:{}\n", list);
    }
  }
  const auto &cfg = engine_->config();
  // Every exchange moves one row of D*C doubles per atom; LAMMPS sizes its comm buffers from
  // these maxima in comm->init(), which runs after this.
  comm_width_ = std::max(cfg.n_coeff() * cfg.channels, committee_ ? committee_->max_comm_width() : 0);
  comm_forward = comm_reverse = comm_reverse_off = comm_width_;
  if (comm->me == 0) {
    std::string tm;
    for (const auto &s : cfg.type_map) tm += " " + s;
    utils::logmesg(lmp,
                   "pair sezm: model {} (type_map{}, descriptor version {}), rcut {} A, {} blocks, lmax {}, "
                   "{} channels, {} doubles per exchanged row\n",
                   model_path_, tm, cfg.descriptor_version, cfg.rcut, cfg.n_blocks, cfg.lmax, cfg.channels,
                   comm_width_);
    if (!cfg.head.empty()) utils::logmesg(lmp, "pair sezm: {}\n", cfg.head_reason);
    if (cs.conditioned)
      utils::logmesg(lmp, "pair sezm: charge/spin condition Q = {}, S = {} ({})\n", cs.value.charge, cs.value.spin,
                     cs.from_default ? "the model's default_chg_spin; pair_style ... charge_spin Q S sets them"
                                     : "pair_style charge_spin");
    if (cfg.zbl)
      utils::logmesg(lmp, "pair sezm: ZBL bridging, inner clamp and source gate from {} to {} A\n",
                     cfg.bridging_r_inner, cfg.bridging_r_outer);
    if (comm->nprocs == 1)
      utils::logmesg(lmp, "pair sezm: one rank: periodic images are edges onto owned atoms (no feature exchange)\n");
  }
}
