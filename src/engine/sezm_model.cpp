#include "engine/sezm_model.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "common/error.h"
#include "engine/bridging.h"
#include "engine/zbl.h"
#include "model/charge_spin.h"

namespace sezm {

template <class T>
SezmEngine<T>::SezmEngine(ModelW<T> w)
    : w_(std::move(w)), grid_(w_.cfg.lmax, w_.cfg.any_so3_grid() ? w_.cfg.kmax : -1) {
  require_charge_spin_applied(w_);  // docs/model.md §10: the frame's (Q, S) is part of the weights
}

template <class T>
EngineResult SezmEngine<T>::compute(const Graph& g, bool gradients, FeatureExchange<T>* ex,
                                    const GeometryIn<T>& geo) const {
  MemoryStep step;
  try {
    return compute_steps(g, gradients, ex, step, geo);
  } catch (const std::bad_alloc&) {
    throw Error(out_of_memory_message("CPU engine", step, g, w_.cfg.rcut));
  }
}

template <class T>
EngineResult SezmEngine<T>::compute_steps(const Graph& g, bool gradients, FeatureExchange<T>* ex,
                                          MemoryStep& step, const GeometryIn<T>& gin) const {
  const ModelConfig& cfg = w_.cfg;
  const int L = cfg.lmax, C = cfg.channels, D = cfg.n_coeff(), N = g.n_nodes, NT = g.n_total, E = g.n_edges();
  if (NT > N && ex == nullptr) throw Error("SezmEngine: a graph with ghost nodes needs a feature exchange");
  for (int i = 0; i < NT; ++i)
    if (g.types[i] < 0 || g.types[i] >= w_.ntypes)
      throw Error("SezmEngine: atom type index " + std::to_string(g.types[i]) + " outside the model's type_map");
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  const Graph& t = g;
  const std::vector<int> tiles = make_edge_tiles(t);
  // What each phase allocates, for the out-of-memory error (engine/out_of_memory.h).
  const double sb = sizeof(T), per_edge_rad = sb * E * (2.0 * (L + 1) * C + C);
  int largest_tile = 0;
  for (size_t k = 0; k + 1 < tiles.size(); ++k) largest_tile = std::max(largest_tile, tiles[k + 1] - tiles[k]);
  const double tile_bytes = so2_tile_bytes_per_edge(cfg, sizeof(T)) * largest_tile;
  const int threads = std::max(1, std::min(engine_threads(), static_cast<int>(tiles.size()) - 1));  // busy ones
  const auto tile_step = [&](int b, bool backward) {
    // The backward adds, per thread, two tiles' rotated-feature and logit adjoints (the source-side
    // sums' inputs, interaction_block.h), and the source-side sum H_bar (n_total x D x Cw) once.
    const double slots = 2.0 * sb * largest_tile * (cfg.n_reduced() * cfg.wide() + cfg.n_focus);
    step.at("block " + std::to_string(b) + (backward ? " backward" : " forward") +
                ": SO(2) value path scratch of the largest edge tile (" + std::to_string(largest_tile) +
                " edges; whole destination segments) in each of " + std::to_string(threads) + " threads" +
                (backward ? ", and the source-side adjoints" : ""),
            threads * (tile_bytes + (backward ? slots : 0.0)) + (backward ? sb * NT * D * cfg.wide() : 0.0));
  };

  // ---- geometry and initial embedding ----
  // A committee follower reads its leader's geometry (Engine::compute_like checked the key and
  // the graph); this check only keeps a misuse from reading out of bounds.
  const EdgeGeometry<T>* lg = gin.leader;
  if (lg && (cfg.zbl || lg->E != E || lg->L != L || (!gin.own_radial_basis && lg->nr != cfg.n_radial)))
    throw Error("SezmEngine: a committee leader's edge geometry must be of this graph and model, without bridging");
  const double geo_bytes = sb * E * (wigner_size(L) + cfg.n_radial + 6.0);
  BridgingState br;
  std::shared_ptr<EdgeGeometry<T>> own;
  if (!lg) {
    step.at("edge geometry (" + std::to_string(E) + " edges: lengths, radial basis, Wigner-D blocks)", geo_bytes);
    own = std::make_shared<EdgeGeometry<T>>();
    // Bridging (docs/model.md §9): the descriptor sees the clamped edge vectors and the source gate.
    if (cfg.zbl) bridging_clamp_forward(cfg, g, br);
    edge_geometry_forward(w_, cfg.zbl ? br.vc.data() : g.vec.data(), E, *own);
    if (cfg.zbl) bridging_gate_forward(g, br, ex, own->gate);
  } else if (gin.own_radial_basis) {
    step.at("edge geometry (" + std::to_string(E) +
                " edges: the committee leader's, copied, with this model's radial basis)",
            geo_bytes);
    own = std::make_shared<EdgeGeometry<T>>();
    edge_geometry_from(w_, *lg, *own);
  }
  if (own && gin.keep) *gin.keep = own;
  const EdgeGeometry<T>& geo = own ? *own : *lg;
  std::vector<T> isd;
  degree_forward(t, geo, isd);
  Mat<T> tf;
  edge_type_features(w_, t, tf);
  step.at("radial features (" + std::to_string(E) + " edges x " + std::to_string(L + 1) + " degrees x " +
              std::to_string(C) + " channels, two copies)",
          per_edge_rad);
  // rho = env M: the MLP's output M and hidden layer are dropped once rho is formed and computed
  // again for the backward (the same product on the same rows: the same bits), so that they do
  // not sit beside the blocks' state; the blocks' R = rho + tf is formed per edge tile
  // (BlockRadial). Per edge that keeps 2 (L+1) C + C values fewer through the blocks than
  // keeping M, its hidden layer and R (docs/performance.md, CPU engine memory).
  std::vector<T> rho(static_cast<size_t>(E) * (L + 1) * C);  // enveloped radial features (version 1.1)
  {
    std::vector<T> Mrad(rho.size()), hrad(static_cast<size_t>(E) * C);
    radial_mlp_forward(w_, geo.rbf.data(), E, Mrad.data(), hrad.data());
    for (int e = 0; e < E; ++e)
      for (int i = 0; i < (L + 1) * C; ++i)
        rho[static_cast<size_t>(e) * (L + 1) * C + i] = geo.env[e] * Mrad[static_cast<size_t>(e) * (L + 1) * C + i];
  }

  const size_t width = static_cast<size_t>(D) * C;
  step.at("node features (" + std::to_string(cfg.n_blocks + 1) + " x " + std::to_string(NT) + " atoms x " +
              std::to_string(width) + ")",
          sb * (cfg.n_blocks + 1.0) * NT * width);
  std::vector<std::vector<T>> X(cfg.n_blocks + 1, std::vector<T>(static_cast<size_t>(NT) * width, T(0)));
  EnvSeedCache<T> esc;
  {
    std::vector<T> x0(static_cast<size_t>(N) * C);
    env_seed_forward(w_, t, geo, isd, x0.data(), esc);
    gie_forward(t, geo, isd, rho.data(), C, X[0].data());
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) X[0][n * width + c] = x0[static_cast<size_t>(n) * C + c];
  }
  // Block radial features R = rho + tf (the type term on every degree), formed per edge tile.
  const BlockRadial<T> R(rho.data(), &tf);

  // ---- blocks ----
  std::vector<BlockCache<T>> caches(cfg.n_blocks);
  for (int b = 0; b < cfg.n_blocks; ++b) {
    if (ex) ex->forward(X[b].data(), static_cast<int>(width));
    tile_step(b, false);
    block_forward(w_, w_.blocks[b], grid_, t, geo, tiles, X[b].data(), R, X[b + 1].data(), caches[b]);
  }

  // ---- read-out and fitting ----
  step.at("read-out and fitting (" + std::to_string(N) + " atoms)", 0);
  Mat<T> desc;
  readout_forward(w_, grid_, X[cfg.n_blocks].data(), N, desc);
  EngineResult res;
  res.atom_energy.resize(N);
  FittingCache<T> fc;
  fitting_forward(w_, desc, g.types.data(), res.atom_energy.data(), fc);
  if (cfg.zbl) {  // the ZBL pair energy on the raw edges (docs/model.md §9.3)
    res.edge_grad.assign(gradients ? 3 * static_cast<size_t>(E) : 0, 0.0);
    zbl_forward_backward(g, w_.zbl_z, res.atom_energy.data(), gradients ? res.edge_grad.data() : nullptr);
  }
  for (double e : res.atom_energy) res.energy += e;
  const auto t_forward = clock::now();
  res.seconds_forward = std::chrono::duration<double>(t_forward - t_start).count();
  if (!gradients) return res;

  // ---- backward ----
  step.at("backward of the read-out and fitting (" + std::to_string(N) + " atoms)", 0);
  Mat<T> desc_bar;
  fitting_backward(w_, fc, desc_bar);
  std::vector<T> Xb(static_cast<size_t>(NT) * width, T(0)), Xb_prev(Xb.size());
  readout_backward(w_, grid_, X[cfg.n_blocks].data(), N, desc_bar, Xb.data());
  EdgeGeometryGrad<T> gb;
  gb.reset(geo);
  std::vector<T> rho_bar(rho.size(), T(0));
  for (int b = cfg.n_blocks - 1; b >= 0; --b) {
    tile_step(b, true);
    block_backward(w_, w_.blocks[b], grid_, t, geo, tiles, R, caches[b], Xb.data(), Xb_prev.data(),
                   rho_bar.data(), gb);
    caches[b] = BlockCache<T>();  // read by this block's backward only
    if (ex) ex->reverse(Xb_prev.data(), static_cast<int>(width));
    std::swap(Xb, Xb_prev);
  }
  // Xb is now dE/dX0 on the centres.
  step.at("backward of the embedding and edge geometry (" + std::to_string(E) + " edges)", per_edge_rad);
  std::vector<T> isd_bar(N, T(0)), x0_bar(static_cast<size_t>(N) * C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) x0_bar[static_cast<size_t>(n) * C + c] = Xb[n * width + c];
  env_seed_backward(w_, t, geo, isd, esc, x0_bar.data(), isd_bar, gb);
  gie_backward(t, geo, isd, rho.data(), C, X[0].data(), Xb.data(), isd_bar, rho_bar.data(), gb);
  degree_backward(t, geo, isd, isd_bar, gb.env);
  // rho = env * M, M and the hidden layer computed again (above); M_bar = rho_bar env in place.
  std::vector<T>().swap(rho);
  std::vector<T> Mrad(rho_bar.size()), hrad(static_cast<size_t>(E) * C);
  radial_mlp_forward(w_, geo.rbf.data(), E, Mrad.data(), hrad.data());
  for (int e = 0; e < E; ++e) {
    T acc = 0;
    for (int i = 0; i < (L + 1) * C; ++i) {
      const size_t k = static_cast<size_t>(e) * (L + 1) * C + i;
      acc += rho_bar[k] * Mrad[k];
      rho_bar[k] = rho_bar[k] * geo.env[e];
    }
    gb.env[e] += acc;
  }
  radial_mlp_backward(w_, hrad.data(), E, rho_bar.data(), gb.rbf.data());
  std::vector<double> learned_grad(3 * static_cast<size_t>(E));
  edge_geometry_backward(w_, geo, gb, learned_grad.data());
  if (cfg.zbl) bridging_backward(g, br, gb.gate, ex, learned_grad.data());  // d/d(clamped v) -> d/dv
  if (res.edge_grad.empty()) res.edge_grad = std::move(learned_grad);
  else
    for (size_t i = 0; i < learned_grad.size(); ++i) res.edge_grad[i] += learned_grad[i];
  res.seconds_backward = std::chrono::duration<double>(clock::now() - t_forward).count();
  return res;
}

EngineResult CpuEngine::run(const Graph& g, bool gradients, FeatureExchange<double>* ex,
                            std::shared_ptr<const EdgeGeometry<double>> leader, GeometryShare share) {
  kept_.reset();  // the previous call's geometry is not held while this one makes its own
  stamp_ = GraphStamp();
  shared_ = leader ? share : GeometryShare::kNone;
  // Kept for followers: the leader's geometry where this call used it as it is, else this call's.
  std::shared_ptr<const EdgeGeometry<double>> geo = share == GeometryShare::kAll ? leader : nullptr;
  GeometryIn<double> gin;
  gin.leader = leader.get();
  gin.own_radial_basis = share == GeometryShare::kExceptRadialBasis;
  gin.keep = keep_ ? &geo : nullptr;
  EngineResult r = engine_.compute(g, gradients, ex, gin);
  if (keep_) kept_ = std::move(geo);
  stamp_ = GraphStamp::of(g);
  return r;
}

EngineResult CpuEngine::compute_like(const Engine& leader, const Graph& g, bool gradients,
                                     FeatureExchange<double>* ex) {
  const auto* l = dynamic_cast<const CpuEngine*>(&leader);
  const GeometryShare share = l && l != this && l->kept_ && l->stamp_ == GraphStamp::of(g)
                                  ? geometry_share(l->key_, key_)
                                  : GeometryShare::kNone;
  return run(g, gradients, ex, share == GeometryShare::kNone ? nullptr : l->kept_, share);
}

std::string CpuEngine::description() const {
  return "cpu, float64, " + std::to_string(engine_threads()) + " threads";
}

template class SezmEngine<double>;
template class SezmEngine<float>;

}  // namespace sezm
