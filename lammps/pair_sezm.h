/* pair_style sezm: thin LAMMPS glue over the SeZM engine (sezm_core) and the Kokkos edge layer.
 *
 * The engine computes node features of owned atoms only; between interaction blocks the ghost
 * rows are refreshed by LAMMPS pair forward communication, and in the backward pass ghost-row
 * gradients are reverse-communicated to their owners. The same path serves 1 rank (periodic
 * self-images are ghosts) and N ranks.
 */
#ifdef PAIR_CLASS
// clang-format off
PairStyle(sezm,LAMMPS_NS::PairSezm)
// clang-format on
#else

#ifndef LMP_PAIR_SEZM_H
#define LMP_PAIR_SEZM_H

#include <memory>
#include <string>
#include <vector>

#include "pair.h"

namespace sezm {
class Engine;
struct Graph;
struct ModelConfig;
}
namespace sezm_kk {
class EdgeBuffers;
}

namespace LAMMPS_NS {

class SezmCommittee;

class PairSezm : public Pair {
 public:
  explicit PairSezm(class LAMMPS *);
  ~PairSezm() override;

  void compute(int, int) override;
  void settings(int, char **) override;
  void coeff(int, char **) override;
  void init_style() override;
  double init_one(int, int) override;

  int pack_forward_comm(int, int *, double *, int, int *) override;
  void unpack_forward_comm(int, int, double *) override;
  int pack_reverse_comm(int, int, double *) override;
  void unpack_reverse_comm(int, int *, double *) override;
  double memory_usage() override;
  void write_restart(FILE *) override {}  // nothing: pair_style and pair_coeff are re-issued
  void read_restart(FILE *) override { is_restart_ = true; }  // the deviation file is appended to

  const sezm::ModelConfig &model_config() const;  // model 1's
  const sezm::Engine &engine() const { return *engine_; }  // model 1's: a committee's geometry leader
  // The latest force call's graph (model 1's), or nullptr before the first.
  const sezm::Graph *edge_graph() const;

  // Called by the engine's feature exchange (see pair_sezm.cpp).
  void exchange_forward(double *rows, int width);
  void exchange_reverse(double *rows, int width, int nlocal, int nall);
  void find_ghost_owners(int nlocal, int nall);
  // The rows pair forward comm packs on this rank (sorted, unique; FeatureExchange::sent_rows),
  // recorded at the latest neighbour-list build; nullptr where that record is not of these
  // nlocal/nall (the engine then moves every row).
  const std::vector<int> *sent_rows(int nlocal, int nall) const;

 private:
  std::string model_path_;
  std::unique_ptr<sezm::Engine> engine_;  // from sezm::make_engine: CPU, or CUDA with `device cuda`
  // `pair_style sezm M1 M2 ...`: models 2..M and the model-deviation file (pair_sezm_devi.h).
  std::unique_ptr<SezmCommittee> committee_;
  bool is_restart_ = false;  // set by read_restart: the deviation file is appended to
  std::unique_ptr<sezm_kk::EdgeBuffers> edges_;
  std::vector<int> type_map_;  // LAMMPS type -> model type index
  int comm_width_ = 0;         // per-atom doubles of one exchange (set before comm->init)
  int timing_every_ = 0;       // `timing N`: also log the breakdown every N force calls
  bool use_cuda_ = false;      // `device cuda`
  int gpu_ = -1;               // `gpu N`; -1: the rank's local index modulo the visible GPUs
  std::string mode_ = "lean";  // `mode lean|fast` of the CUDA engine
  int chunk_ = 0;              // `chunk N`: edges per chunk of the CUDA value path (0: the mode's default)
  std::string precision_ = "default";  // `precision default|tf32` of the CUDA engine

  // Current exchange payload, read by the pack/unpack callbacks.
  double *cur_rows_ = nullptr;
  // One rank: the owned atom each ghost is an image of (found each step with a one-column forward
  // comm; the edge layer maps edge sources onto them, see find_ghost_owners).
  std::vector<int> ghost_owner_;
  std::vector<double> owner_probe_;
  bool owners_valid_ = false, warned_owners_ = false;
  int cur_width_ = 0;
  // Rows that forward comm packs (= those reverse comm adds into), recorded by a width-1 forward
  // comm whenever the neighbour lists were rebuilt (record_sent_rows). Between records every packed
  // or unpacked row is checked against sent_flag_, so a stale record stops the run.
  std::vector<int> sent_rows_;
  std::vector<char> sent_flag_;  // nall: row was packed in the recording
  bigint sent_build_ = -1;       // neighbor->ncalls of the record
  int sent_nlocal_ = -1, sent_nall_ = -1;
  bool recording_ = false, sent_valid_ = false;
  void begin_record(int nall);
  void end_record(int nlocal, int nall);
  void record_sent_rows(int nlocal, int nall);
  void check_sent(int n, const int *list, const char *what) const;

  std::vector<double> forces_, virial_atom_;  // scratch, nall x 3 / nall x 9

  // Cumulative per-run timing (seconds) and counters.
  double t_edges_ = 0, t_forward_ = 0, t_backward_ = 0, t_comm_fwd_ = 0, t_comm_rev_ = 0, t_total_ = 0;
  // The engine's ghost staging (EngineResult::seconds_exchange, exchange_bytes; CUDA only).
  double t_stage_ = 0, stage_bytes_ = 0;
  long n_calls_ = 0;
  double n_edges_sum_ = 0;
  void reset_timing();
  void log_timing(const char *when);

  void allocate();
  [[noreturn]] void fail(const std::string &msg);
};

}  // namespace LAMMPS_NS

#endif
#endif
