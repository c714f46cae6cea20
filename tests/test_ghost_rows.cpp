// The host side of moving only an exchange's sent rows (src/engine/ghost_rows.h), without a GPU:
// the plan's checks, and the staged route of cuda/host_support.cuh (GhostStaging) replayed on host
// arrays (the "device" rows a float vector, the gathers plain loops) against the full route, with
// the two fake exchanges of ghost_graph.h: the same float rows to the bit, on a cell whose inner
// atoms are nobody's image (owned rows that never cross) and with multi-hop ghosts. The CUDA
// engine's own check of the route is tests/test_cuda_ghost_rows.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/ghost_rows.h"
#include "ghost_graph.h"
#include "neighbor/neighbor_list.h"

namespace {

using sezm::GhostRowPlan;

TEST(GhostRowPlan, KeepsTheOwnedRowsAndNamesBadLists) {
  GhostRowPlan p;
  EXPECT_TRUE(p.set({1, 4, 7, 9, 12}, 8, 14));
  EXPECT_EQ(p.owned(), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(p.n_ghosts(), 6u);
  EXPECT_EQ(p.forward_bytes(10), (3 + 6) * 10 * sizeof(float));
  EXPECT_EQ(p.reverse_bytes(10), (6 + 6) * 10 * sizeof(float));
  EXPECT_FALSE(p.set({1, 4, 7, 13}, 8, 14));  // other ghost rows, the same owned rows: no re-upload
  EXPECT_TRUE(p.set({1, 4, 7}, 8, 15));       // other sizes
  EXPECT_TRUE(p.set({1, 5, 7}, 8, 15));
  EXPECT_TRUE(p.set({}, 8, 15));
  EXPECT_TRUE(p.owned().empty());
  const auto message = [&](const std::vector<int>& sent) {
    try {
      p.set(sent, 8, 14);
    } catch (const sezm::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({1, 14}).find("sent row 14 outside the graph's 14 rows"), std::string::npos) << message({1, 14});
  EXPECT_NE(message({-1, 3}).find("sent row -1 outside"), std::string::npos);
  EXPECT_NE(message({3, 2}).find("not sorted and unique (row 2 after row 3)"), std::string::npos);
  EXPECT_NE(message({3, 3}).find("not sorted and unique (row 3 after row 3)"), std::string::npos);
}

// The conversions at a rank's sizes (4,096 diamond atoms: 3,475 sent rows, 8,899 ghosts, rows of
// 512), where they run on the OpenMP threads (ghost_rows.cpp): every element against its own
// conversion, the skipped owned rows untouched, rounding to float as static_cast does.
TEST(GhostRowPlan, ConversionsAtRankSizesMatchElementwise) {
  const int N = 4096, G = 8899, S = 3475;
  const size_t w = 512;
  std::vector<int> sent;
  for (int i = 0; i < S; ++i) sent.push_back(static_cast<int>(static_cast<long>(i) * N / S));
  for (int g = N; g < N + G; ++g) sent.push_back(g);
  GhostRowPlan p;
  p.set(sent, N, N + G);
  ASSERT_EQ(p.owned().size(), static_cast<size_t>(S));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  std::vector<float> compact(S * w);
  for (float& x : compact) x = static_cast<float>(u(rng));
  std::vector<double> rows(static_cast<size_t>(N + G) * w, -1.0);
  p.unpack(compact.data(), w, rows.data());
  std::vector<char> is_sent(N, 0);
  for (int i = 0; i < S; ++i) is_sent[p.owned()[i]] = 1;
  size_t bad = 0;
  for (int i = 0; i < S; ++i)
    for (size_t k = 0; k < w; ++k) bad += rows[p.owned()[i] * w + k] != static_cast<double>(compact[i * w + k]);
  for (int r = 0; r < N; ++r)
    if (!is_sent[r])
      for (size_t k = 0; k < w; ++k) bad += rows[r * w + k] != -1.0;
  EXPECT_EQ(bad, 0u) << "unpack";
  for (double& x : rows) x = u(rng);
  std::vector<float> back(S * w);
  p.pack(rows.data(), w, back.data());
  bad = 0;
  for (int i = 0; i < S; ++i)
    for (size_t k = 0; k < w; ++k) bad += back[i * w + k] != static_cast<float>(rows[p.owned()[i] * w + k]);
  EXPECT_EQ(bad, 0u) << "pack";
  const size_t n = static_cast<size_t>(G) * w;
  std::vector<float> f(n), f2(n);
  std::vector<double> d(n);
  for (float& x : f) x = static_cast<float>(u(rng));
  sezm::widen(f.data(), n, d.data());
  bad = 0;
  for (size_t i = 0; i < n; ++i) bad += d[i] != static_cast<double>(f[i]);
  EXPECT_EQ(bad, 0u) << "widen";
  for (double& x : d) x = u(rng);
  sezm::narrow(d.data(), n, f2.data());
  bad = 0;
  for (size_t i = 0; i < n; ++i) bad += f2[i] != static_cast<float>(d[i]);
  EXPECT_EQ(bad, 0u) << "narrow";
}

// GhostStaging's two routes on host arrays: `dev` (n_total x w floats) stands for the device rows.
struct Staging {
  GhostRowPlan plan;
  std::vector<double> rows;
  std::vector<float> compact;
  size_t w;
  explicit Staging(size_t width) : w(width) {}
  std::vector<float>& gather(const std::vector<float>& dev) {
    compact.resize(plan.owned().size() * w);
    for (size_t i = 0; i < plan.owned().size(); ++i)
      std::memcpy(&compact[i * w], &dev[plan.owned()[i] * w], w * sizeof(float));
    return compact;
  }
  void adopt(sezm::FeatureExchange<double>& ex, int N, int NT) {
    if (plan.set(*ex.sent_rows(), N, NT)) sezm::poison_owned_rows(rows, N, NT, w);
  }
  void forward_staged(std::vector<float>& dev, sezm::FeatureExchange<double>& ex, int N, int NT) {
    adopt(ex, N, NT);
    plan.unpack(gather(dev).data(), w, rows.data());
    ex.forward(rows.data(), static_cast<int>(w));
    sezm::narrow(rows.data() + N * w, (NT - N) * w, dev.data() + N * w);
  }
  void reverse_staged(std::vector<float>& dev, sezm::FeatureExchange<double>& ex, int N, int NT) {
    adopt(ex, N, NT);
    plan.unpack(gather(dev).data(), w, rows.data());
    sezm::widen(dev.data() + N * w, (NT - N) * w, rows.data() + N * w);
    ex.reverse(rows.data(), static_cast<int>(w));
    plan.pack(rows.data(), w, compact.data());
    for (size_t i = 0; i < plan.owned().size(); ++i)
      std::memcpy(&dev[plan.owned()[i] * w], &compact[i * w], w * sizeof(float));
    std::fill(dev.begin() + N * w, dev.end(), 0.0f);
  }
  void forward_full(std::vector<float>& dev, sezm::FeatureExchange<double>& ex, int N, int NT) {
    std::vector<double> r(NT * w, 0.0);
    sezm::widen(dev.data(), N * w, r.data());
    ex.forward(r.data(), static_cast<int>(w));
    sezm::narrow(r.data() + N * w, (NT - N) * w, dev.data() + N * w);
  }
  void reverse_full(std::vector<float>& dev, sezm::FeatureExchange<double>& ex, int NT) {
    std::vector<double> r(NT * w);
    sezm::widen(dev.data(), NT * w, r.data());
    ex.reverse(r.data(), static_cast<int>(w));
    sezm::narrow(r.data(), NT * w, dev.data());
  }
};

// A simple cubic lattice, 8 x 8 x 8 sites 1 A apart (jittered by up to 0.05 A) with a cutoff of
// 1.5 A: only sites with a coordinate 0 or 7 have images within the cutoff of an atom, so the
// atoms of the inner 6 x 6 x 6 sites are nobody's image.
sezm_test::GhostGraph lattice_ghost_graph() {
  const int m = 8, n = m * m * m;
  std::vector<double> pos;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> jitter(-0.05, 0.05);
  for (int a = 0; a < m; ++a)
    for (int b = 0; b < m; ++b)
      for (int c = 0; c < m; ++c)
        for (double x : {a + 0.0, b + 0.0, c + 0.0}) pos.push_back(x + jitter(rng));
  const std::vector<int> types(n, 0);
  const double cell[9] = {m, 0, 0, 0, m, 0, 0, 0, m};
  const sezm::Graph el = sezm::build_graph(pos.data(), types.data(), n, cell, 1.5);
  return sezm_test::make_ghost_graph(el, pos.data(), types.data());
}

std::vector<float> random_rows(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

template <class Ex>
void expect_staged_equals_full(const sezm_test::GhostGraph& gg, Ex& named, Ex& unnamed) {
  const size_t w = 7;
  const int N = gg.n_nodes, NT = gg.n_total;
  Staging st(w), full(w);
  for (int step = 0; step < 3; ++step) {  // repeated calls reuse the plan and the host rows
    std::vector<float> a = random_rows(NT * w, 11 + step), b = a;
    st.forward_staged(a, named, N, NT);
    full.forward_full(b, unnamed, N, NT);
    ASSERT_EQ(a, b) << "forward, call " << step;  // NaN anywhere would fail too
    std::vector<float> ga = random_rows(NT * w, 50 + step), gb = ga;
    st.reverse_staged(ga, named, N, NT);
    full.reverse_full(gb, unnamed, NT);
    ASSERT_EQ(ga, gb) << "reverse, call " << step;
  }
}

TEST(GhostRows, StagedRouteEqualsFullRoute) {
  const sezm_test::GhostGraph gg = lattice_ghost_graph();
  sezm_test::OwnerExchange<double> named(gg), unnamed(gg, false);
  ASSERT_EQ(unnamed.sent_rows(), nullptr);
  const int n_sent = static_cast<int>(named.sent.size());
  EXPECT_EQ(n_sent, 512 - 6 * 6 * 6);  // the inner sites never cross
  expect_staged_equals_full(gg, named, unnamed);
}

TEST(GhostRows, StagedRouteEqualsFullRouteWithMultiHopGhosts) {
  const sezm_test::GhostGraph gg = lattice_ghost_graph();
  sezm_test::ChainExchange<double> named(gg), unnamed(gg, false);
  ASSERT_GT(named.forwarded_ghosts(), 0);  // a corner atom has 7 images: chains of ghost rows
  expect_staged_equals_full(gg, named, unnamed);
}

// A sent list that misses a row the exchange reads: the ghosts of that atom come out NaN (the
// engine's energy turns non-finite and the front ends stop), never a stale number.
TEST(GhostRows, MissingSentRowGivesNaNGhosts) {
  const sezm_test::GhostGraph gg = lattice_ghost_graph();
  sezm_test::OwnerExchange<double> ex(gg);
  const int dropped = ex.sent[3];
  ex.sent.erase(ex.sent.begin() + 3);
  const size_t w = 5;
  Staging st(w);
  std::vector<float> dev = random_rows(gg.n_total * w, 3);
  st.forward_staged(dev, ex, gg.n_nodes, gg.n_total);
  for (size_t k = 0; k < gg.owner.size(); ++k)
    for (size_t c = 0; c < w; ++c)
      EXPECT_EQ(std::isnan(dev[(gg.n_nodes + k) * w + c]), gg.owner[k] == dropped) << "ghost " << k;
}

}  // namespace
