/* The committee of pair_style sezm (`pair_style sezm M1 M2 ... out_freq N out_file F`): models
 * 2..M, evaluated on output steps only, and the model-deviation file in deepmd-kit's pair-style
 * layout (docs/lammps.md, "Model deviation"). The deviation arithmetic is sezm's
 * (src/api/model_deviation.h); this file is the LAMMPS side: the shared edge list, the ghost
 * forces, the reductions over ranks and rank 0's file.
 *
 * Shared by all models on an output step: the neighbour list, the ghost-owner map (one rank),
 * the non-finite position check and the edge list of every model whose cutoff equals model 1's
 * (models of another cutoff get one more edge list per distinct cutoff, from the same neighbour
 * list). A model on model 1's edge list takes model 1's per-edge geometry (on CUDA also its
 * uploaded graph) where the two agree (same cutoff, radial basis and envelopes, no ZBL bridging:
 * sezm::Engine::compute_like); otherwise each engine computes its own.
 */
#ifndef LMP_PAIR_SEZM_DEVI_H
#define LMP_PAIR_SEZM_DEVI_H

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/model_deviation.h"
#include "engine/engine.h"
#include "model/charge_spin.h"
#include "pointers.h"

namespace sezm_kk {
class EdgeBuffers;
struct ListInput;
}  // namespace sezm_kk

namespace LAMMPS_NS {

class PairSezm;

// The committee keywords of pair_style sezm, with deepmd-kit's defaults.
struct CommitteeSettings {
  int out_freq = 100;                    // `out_freq N` (0: never write, model 1 only)
  std::string out_file = "model_devi.out";  // `out_file F`
  bool atomic = false;                   // `atomic`: each atom's force deviation, by atom ID
  sezm::DeviationOptions opt;            // `relative E`, `relative_v E` (per component, as pair_style deepmd)
  bool given = false;                    // any of them was given
};

class SezmCommittee : protected Pointers {
 public:
  // True for out_freq, out_file, relative, relative_v, atomic.
  static bool is_keyword(const std::string &key);
  // Parses the committee keyword at arg[i]; returns the number of arguments it took.
  static int parse(LAMMPS *lmp, CommitteeSettings &s, int narg, char **arg, int i);

  // Every model of pair_style sezm (the committee's and model 1), through the one factory with the
  // same options (a committee shares the device); head and charge_spin apply to each; cs: the
  // charge/spin use (the same for every model). Collective: a device that fails on one rank is
  // an error on all. Load errors are LAMMPS errors naming the file.
  static std::vector<std::unique_ptr<sezm::Engine>> make_engines(LAMMPS *lmp, const std::vector<std::string> &paths,
                                                                 const std::string &head,
                                                                 const std::optional<sezm::ChargeSpin> &charge_spin,
                                                                 const sezm::EngineOptions &opt,
                                                                 sezm::ChargeSpinUse *cs);

  // models: engines of models 2..M (model 1 is the pair style's own); paths: all M checkpoints.
  // Rank 0 opens the file: appended to after read_restart (`append`), else truncated and the
  // header written, as pair_style deepmd does.
  SezmCommittee(LAMMPS *lmp, PairSezm *pair, std::vector<std::unique_ptr<sezm::Engine>> models,
                std::vector<std::string> paths, const CommitteeSettings &s, bool append);
  ~SezmCommittee() override;

  // pair_coeff: each model must give every mapped element the type index model 1 gives it (one
  // graph, one node type per atom, serves all); otherwise an error naming both models.
  void check_type_maps(const sezm::ModelConfig &first, char **elements, int ntypes);
  double max_rcut() const;
  int max_comm_width() const;  // doubles per atom of the widest exchange (features, forces)
  bool due(bigint step) const { return s_.out_freq > 0 && step % s_.out_freq == 0; }

  // On an output step, after model 1 ran on graph g: models 2..M on g (or on their own edge list
  // where their cutoff differs, from `in`), each model's forces folded onto owned atoms (reverse
  // communication when the graph has ghosts, i.e. ex != nullptr), the deviations reduced over
  // ranks, and rank 0 writes the row. Collective. Throws sezm::Error / sezm::AtomError (local
  // indices) for a failed model evaluation; the pair style reports them.
  void evaluate(const sezm::Graph &g, const sezm::EngineResult &first, const sezm_kk::ListInput &in,
                sezm::FeatureExchange<double> *ex, int nlocal, int nall);

  // Collective: logs, per output step and as the maximum over ranks, the time of models 2..M
  // (engines and edge lists) and of the deviation (forces, communication, file); then resets.
  void log_timing(const char *when, bool reset);
  double bytes() const;

 private:
  PairSezm *pair_;
  std::vector<std::unique_ptr<sezm::Engine>> models_;
  std::vector<std::string> paths_;
  CommitteeSettings s_;
  std::FILE *fp_ = nullptr;  // rank 0
  // One edge list per distinct cutoff other than model 1's; edges_of_[m]: index into it or -1.
  std::vector<std::unique_ptr<sezm_kk::EdgeBuffers>> own_edges_;
  std::vector<double> own_rcut_;
  std::vector<int> edges_of_;
  std::vector<double> rows_, scratch_, virials_, devi_;
  std::vector<tagint> tags_all_;
  std::vector<double> devi_all_;
  double t_models_ = 0, t_devi_ = 0;
  long n_steps_ = 0;
  int n_models() const { return static_cast<int>(models_.size()) + 1; }
  void add_model_forces(int m, const sezm::Graph &g, const sezm::EngineResult &r, int nall);
  void write_row(bigint step, int nlocal);
};

}  // namespace LAMMPS_NS

#endif
