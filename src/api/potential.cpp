#include "api/potential.h"

#include "api/engine_factory.h"
#include "common/error.h"
#include "io/checkpoint.h"
#include "model/lora.h"
#include "model/multitask.h"
#include "neighbor/neighbor_list.h"

namespace sezm {

ModelW<double> load_model_weights(const std::string& path, const std::string& head) {
  HeadChoice choice;
  Checkpoint ckpt = read_checkpoint(path, [&](const nlohmann::json& params, const std::vector<std::string>& order) {
    choice = choose_head(params, order, head, path);
    return choice.branch;
  });
  if (ckpt.branch.empty() && !head.empty())
    throw Error(path + ": head '" + head + "' requested, but this is a single-task model (no model_dict)");
  ModelConfig cfg = parse_model_config(ckpt.model_params, ckpt.branch.empty() ? path : path + " (head " + ckpt.branch + ")");
  cfg.head = ckpt.branch;
  cfg.head_reason = choice.reason;
  fold_lora(ckpt, cfg);  // LoRA adapters into their base weights (no-op without `lora`)
  // float32 checkpoints run in double on the CPU: the reference engine, within 1e-5 of
  // deepmd-kit's fp32.
  return load_weights<double>(ckpt, cfg);
}

int model_type_index(const ModelConfig& cfg, const std::string& element, const std::string& path) {
  const auto& tm = cfg.type_map;
  for (size_t i = 0; i < tm.size(); ++i)
    if (tm[i] == element) return static_cast<int>(i);
  std::string known;
  for (const auto& s : tm) known += (known.empty() ? "" : " ") + s;
  throw Error(path + ": element '" + element + "' is not in the model's type_map (" + known + ")");
}

Potential Potential::load(const std::string& path, const EngineOptions& options, const std::string& head,
                          const std::optional<ChargeSpin>& charge_spin) {
  Potential p;
  p.path_ = path;
  ModelW<double> w = load_model_weights(path, head);
  p.charge_spin_ = apply_charge_spin(w, charge_spin, path);
  p.engine_ = make_engine(std::move(w), options);
  return p;
}

Evaluation make_evaluation(const Graph& g, const EngineResult& r, bool forces, bool atom_virial) {
  Evaluation ev;
  ev.energy = r.energy;
  ev.atom_energy = r.atom_energy;
  ev.n_edges = static_cast<size_t>(g.n_edges());
  if (forces) {
    ev.forces.assign(3 * static_cast<size_t>(g.n_total), 0.0);
    ev.virial.assign(9, 0.0);
    if (atom_virial) ev.atom_virial.assign(9 * static_cast<size_t>(g.n_total), 0.0);
    add_forces_virial(g, r, ev.forces.data(), ev.virial.data(), atom_virial ? ev.atom_virial.data() : nullptr);
  }
  return ev;
}

Evaluation Potential::evaluate(const double* positions, const int* types, int n, const double* cell, bool forces,
                               bool atom_virial) const {
  const Graph g = build_graph(positions, types, n, cell, config().rcut);
  const EngineResult r = forces ? engine_->compute_forces(g, atom_virial) : engine_->compute(g, false);
  require_finite_result(g, r);  // a NaN is an error naming the atom, never a printed number
  return make_evaluation(g, r, forces, atom_virial);
}

}  // namespace sezm
