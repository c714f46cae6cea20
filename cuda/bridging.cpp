// ZBL bridging in the CUDA engine, host side (see bridging.cuh; CPU twins engine/bridging.h and
// engine/zbl.h, docs/model.md §9). A C++ file: the CPU functions it calls are compiled by the same
// compiler as in sezm_core, so both engines run the same host code for these steps.
#include "bridging.cuh"

#include "engine/zbl.h"

namespace sezm::cuda {

void BridgingHost::init(const ModelW<double>& w) {
  on_ = w.cfg.zbl;
  if (!on_) return;
  cfg_ = w.cfg;
  z_ = w.zbl_z;
}

void BridgingHost::forward(const Graph& g, FeatureExchange<double>* ex, DBuf<double>& vec, bool gradients,
                           MemCounter* mem, cudaStream_t s) {
  const size_t E = static_cast<size_t>(g.n_edges());
  // The previous call's uploads read the host arrays below; the caller synchronised the stream
  // at the end of that call, so they are free to change.
  bridging_clamp_forward(cfg_, g, br_);
  vec.upload(br_.vc.data(), 3 * E, s);
  bridging_gate_forward(g, br_, ex, gate_);  // the CPU engine's eta, ghost rows exchanged (width 1)
  gate_f_.assign(gate_.begin(), gate_.end());
  gate_d_.set_counter(mem);
  gate_d_.upload(gate_f_.data(), E, s);
  if (gradients) {
    gate_bar_d_.set_counter(mem);
    gate_bar_d_.resize(E);
    gate_bar_d_.zero(s);
  }
}

void BridgingHost::zbl_energy(const Graph& g, bool gradients, double* atom_energy) {
  zbl_grad_.assign(gradients ? 3 * static_cast<size_t>(g.n_edges()) : 0, 0.0);
  zbl_forward_backward(g, z_, atom_energy, gradients ? zbl_grad_.data() : nullptr);
}

void BridgingHost::backward(const Graph& g, FeatureExchange<double>* ex, std::vector<double>& edge_grad,
                            cudaStream_t s) {
  const size_t E = static_cast<size_t>(g.n_edges());
  gate_bar_f_.resize(E);
  if (E) SEZM_CUDA(cudaMemcpyAsync(gate_bar_f_.data(), gate_bar_d_.data(), E * sizeof(float), cudaMemcpyDeviceToHost, s));
  SEZM_CUDA(cudaStreamSynchronize(s));
  const std::vector<double> gate_bar(gate_bar_f_.begin(), gate_bar_f_.end());
  bridging_backward(g, br_, gate_bar, ex, edge_grad.data());  // d/d(clamped v) -> d/dv
  for (size_t i = 0; i < zbl_grad_.size(); ++i) edge_grad[i] += zbl_grad_[i];
}

}  // namespace sezm::cuda
