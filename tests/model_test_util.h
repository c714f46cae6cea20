#pragma once
// Helpers for the model-level tests (reference, finite differences, invariance, close
// approach, validation): a per-process cache of loaded potentials, small geometry builders,
// rotations and error measures. Nothing here computes an expected value.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/potential.h"
#include "ref_data.h"
#include "test_util.h"

namespace sezm_test {

// Models of tests/data by file name; "shared:<path>" for ../shared; "repo:<path>" for the
// repository root (potentials/); a "#HEAD" suffix picks the head of a multi-task checkpoint.
// Returns nullptr when the file is absent (callers skip).
inline const sezm::Potential* model(const std::string& key) {
  static std::map<std::string, std::unique_ptr<sezm::Potential>> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  const size_t hash = key.find('#');
  const std::string name = key.substr(0, hash);
  const std::string head = hash == std::string::npos ? "" : key.substr(hash + 1);
  std::string path;
  if (name.rfind("shared:", 0) == 0)
    path = shared_path(name.substr(7));
  else if (name.rfind("repo:", 0) == 0)
    path = data_path("../../" + name.substr(5));
  else
    path = data_path(name);
  std::unique_ptr<sezm::Potential> p;
  if (sezm::test::file_exists(path)) p = std::make_unique<sezm::Potential>(sezm::Potential::load(path, {}, head));
  return cache.emplace(key, std::move(p)).first->second.get();
}

// A model of tests/data conditioned on the frame charge and spin (docs/model.md §10), cached per value.
inline const sezm::Potential* model_with_charge_spin(const std::string& name, double charge, double spin) {
  static std::map<std::string, std::unique_ptr<sezm::Potential>> cache;
  const std::string key = name + "@" + std::to_string(charge) + "," + std::to_string(spin);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  const std::string path = data_path(name);
  std::unique_ptr<sezm::Potential> p;
  if (sezm::test::file_exists(path))
    p = std::make_unique<sezm::Potential>(sezm::Potential::load(path, {}, "", sezm::ChargeSpin{charge, spin}));
  return cache.emplace(key, std::move(p)).first->second.get();
}

inline const char* kWaterModel = "shared:reference/models/water_pretrained.pt";

struct System {
  std::vector<double> pos;   // 3N
  std::vector<int> types;    // N
  std::vector<double> cell;  // 9 (rows = lattice vectors) or empty for an open system
  int n() const { return static_cast<int>(types.size()); }
  const double* cell_ptr() const { return cell.empty() ? nullptr : cell.data(); }
};

inline sezm::Evaluation evaluate(const sezm::Potential& p, const System& s, bool forces = true,
                                 bool atom_virial = false) {
  return p.evaluate(s.pos.data(), s.types.data(), s.n(), s.cell_ptr(), forces, atom_virial);
}

// Fourth-order central difference of f at 0 with step h.
inline double fd4(const std::function<double(double)>& f, double h) {
  return (f(-2 * h) - 8 * f(-h) + 8 * f(h) - f(2 * h)) / (12 * h);
}

// dE/d eps_kj of the homogeneous deformation (I + eps) applied to positions and cell rows, by fd4:
// minus the virial W[3k + j] (LAMMPS sign).
inline double strain_derivative(const System& s0, int k, int j, double h,
                                const std::function<double(const System&)>& energy) {
  return fd4(
      [&](double d) {
        System s = s0;
        auto strain = [&](std::vector<double>& rows) {
          for (size_t r = 0; r < rows.size(); r += 3) rows[r + k] += d * rows[r + j];
        };
        strain(s.pos);
        strain(s.cell);
        return energy(s);
      },
      h);
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}
inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

using Mat3 = std::array<double, 9>;  // row-major

inline Mat3 random_rotation(std::mt19937& g) {
  std::normal_distribution<double> nd;
  double q[4] = {nd(g), nd(g), nd(g), nd(g)};
  const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  for (double& c : q) c /= n;
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  return {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
          2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
          2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
}

// v (n x 3 rows) -> rows R v.
inline std::vector<double> rotate_rows(const Mat3& R, const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i + 2 < v.size(); i += 3)
    for (int a = 0; a < 3; ++a) out[i + a] = R[3 * a] * v[i] + R[3 * a + 1] * v[i + 1] + R[3 * a + 2] * v[i + 2];
  return out;
}

// R W R^T for a 3x3 row-major W.
inline std::vector<double> conjugate(const Mat3& R, const std::vector<double>& W) {
  std::vector<double> out(9, 0.0);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 3; ++j) out[3 * a + b] += R[3 * a + k] * W[3 * k + j] * R[3 * b + j];
  return out;
}

// Fractional coordinates -> Cartesian (rows of cell), plus a uniform rattle of +-amp.
inline System periodic_system(const std::vector<double>& cell, const std::vector<double>& frac,
                              const std::vector<int>& types, double amp, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-amp, amp);
  System s;
  s.cell = cell;
  s.types = types;
  for (size_t i = 0; i < types.size(); ++i)
    for (int a = 0; a < 3; ++a) {
      double x = 0;
      for (int k = 0; k < 3; ++k) x += frac[3 * i + k] * cell[3 * k + a];
      s.pos.push_back(x + u(g));
    }
  return s;
}

// n atoms at random in a ball, rejecting pairs closer than dmin.
inline System open_cluster(const std::vector<int>& types, double radius, double dmin, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-radius, radius);
  System s;
  s.types = types;
  while (s.pos.size() < 3 * types.size()) {
    const double p[3] = {u(g), u(g), u(g)};
    bool ok = p[0] * p[0] + p[1] * p[1] + p[2] * p[2] <= radius * radius;
    for (size_t j = 0; ok && j < s.pos.size(); j += 3) {
      const double dx = p[0] - s.pos[j], dy = p[1] - s.pos[j + 1], dz = p[2] - s.pos[j + 2];
      ok = dx * dx + dy * dy + dz * dz >= dmin * dmin;
    }
    if (ok) s.pos.insert(s.pos.end(), p, p + 3);
  }
  return s;
}

}  // namespace sezm_test
