#include "model/potential.h"

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/weights.h"
#include "neighbor/neighbor_list.h"

namespace sezm {

Potential Potential::load(const std::string& path) {
  const Checkpoint ckpt = read_checkpoint(path);
  const ModelConfig cfg = parse_model_config(ckpt.model_params, path);
  Potential p;
  p.path_ = path;
  // float32 checkpoints run in double: the reference engine, within 1e-5 of deepmd-kit's fp32.
  p.engine_ = std::make_shared<const SezmEngine<double>>(load_weights<double>(ckpt, cfg));
  return p;
}

int Potential::type_index(const std::string& element) const {
  const auto& tm = config().type_map;
  for (size_t i = 0; i < tm.size(); ++i)
    if (tm[i] == element) return static_cast<int>(i);
  std::string known;
  for (const auto& s : tm) known += (known.empty() ? "" : " ") + s;
  throw Error(path_ + ": element '" + element + "' is not in the model's type_map (" + known + ")");
}

GraphView graph_view(const EdgeList& el, const int* types) {
  GraphView g;
  g.n_nodes = g.n_total = el.n_nodes;
  g.E = static_cast<int>(el.size());
  g.src = el.src.data();
  g.dst = el.dst.data();
  g.dst_offsets = el.dst_offsets.data();
  g.vec = el.vec.data();
  g.types = types;
  return g;
}

Evaluation make_evaluation(const GraphView& g, const EngineResult& r, bool forces, bool atom_virial) {
  Evaluation ev;
  ev.energy = r.energy;
  ev.atom_energy = r.atom_energy;
  ev.n_edges = static_cast<size_t>(g.E);
  if (forces) {
    ev.forces.assign(3 * static_cast<size_t>(g.n_total), 0.0);
    ev.virial.assign(9, 0.0);
    if (atom_virial) ev.atom_virial.assign(9 * static_cast<size_t>(g.n_total), 0.0);
    assemble_forces_virial(g, r.edge_grad.data(), ev.forces.data(), ev.virial.data(),
                           atom_virial ? ev.atom_virial.data() : nullptr);
  }
  return ev;
}

Evaluation Potential::evaluate(const double* positions, const int* types, int n, const double* cell, bool forces,
                               bool atom_virial) const {
  const EdgeList el = build_edge_list(positions, n, cell, config().rcut);
  const GraphView g = graph_view(el, types);
  return make_evaluation(g, engine_->compute(g, forces), forces, atom_virial);
}

}  // namespace sezm
