#include "api/model_deviation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace sezm {

void force_deviation(const double* forces, int n_models, size_t n_atoms, const DeviationOptions& opt, double* devi) {
  if (n_models < 1) throw Error("model deviation: needs at least one model");
  const size_t M = static_cast<size_t>(n_models);
  for (size_t i = 0; i < n_atoms; ++i) {
    const double* f = forces + i * M * 3;
    double mean[3] = {0.0, 0.0, 0.0};
    for (size_t m = 0; m < M; ++m)
      for (int k = 0; k < 3; ++k) mean[k] += f[3 * m + k];
    for (int k = 0; k < 3; ++k) mean[k] /= static_cast<double>(M);
    double ss = 0.0;  // sum over models of |F_m - Fbar|^2
    for (size_t m = 0; m < M; ++m)
      for (int k = 0; k < 3; ++k) {
        const double d = f[3 * m + k] - mean[k];
        ss += d * d;
      }
    double d = std::sqrt(ss / static_cast<double>(M));
    if (opt.relative_f)
      d /= std::sqrt(mean[0] * mean[0] + mean[1] * mean[1] + mean[2] * mean[2]) + *opt.relative_f;
    devi[i] = d;
  }
}

void put_model_forces(const double* f, int m, int n_models, size_t n_atoms, double* forces) {
  for (size_t i = 0; i < n_atoms; ++i)
    for (int k = 0; k < 3; ++k) forces[(i * n_models + m) * 3 + k] = f[3 * i + k];
}

void ForceDeviationSums::add(const double* devi, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    max = std::max(max, devi[i]);
    min = std::min(min, devi[i]);
    sum += devi[i];
  }
}

void ForceDeviationSums::merge(const ForceDeviationSums& other) {
  max = std::max(max, other.max);
  min = std::min(min, other.min);
  sum += other.sum;
}

void virial_deviation(const double* virials, int n_models, double n_atoms, const DeviationOptions& opt,
                      DeviationRow* row) {
  if (n_models < 1) throw Error("model deviation: needs at least one model");
  if (!(n_atoms > 0)) throw Error("model deviation: the virial deviation is per atom and needs atoms");
  const double M = n_models;
  double mean[9], s[9];
  for (int c = 0; c < 9; ++c) {
    mean[c] = 0.0;
    for (int m = 0; m < n_models; ++m) mean[c] += virials[9 * m + c] / n_atoms;
    mean[c] /= M;
    double ss = 0.0;
    for (int m = 0; m < n_models; ++m) {
      const double d = virials[9 * m + c] / n_atoms - mean[c];
      ss += d * d;
    }
    s[c] = std::sqrt(ss / M);
  }
  if (opt.relative_v) {
    double norm = 0.0;
    for (int c = 0; c < 9; ++c) norm += mean[c] * mean[c];
    norm = std::sqrt(norm);
    for (int c = 0; c < 9; ++c)
      s[c] /= (opt.relative_v_kind == RelativeVirial::kNorm ? norm : std::fabs(mean[c])) + *opt.relative_v;
  }
  double mx = 0.0, mn = std::numeric_limits<double>::max(), sq = 0.0;
  for (int c = 0; c < 9; ++c) {
    mx = std::max(mx, s[c]);
    mn = std::min(mn, s[c]);
    sq += s[c] * s[c];
  }
  row->max_v = mx;
  row->min_v = mn;
  row->avg_v = std::sqrt(sq / 9.0);
}

void finish_force_deviation(const ForceDeviationSums& sums, double n_atoms, DeviationRow* row) {
  if (!(n_atoms > 0)) throw Error("model deviation: the force deviation needs atoms");
  row->max_f = sums.max;
  row->min_f = sums.min;
  row->avg_f = sums.sum / n_atoms;
}

namespace {
void append(std::string& s, const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  s += buf;
}
}  // namespace

// deepmd-kit writes with iostreams: '#' << setw(11) "step" << setw(19) for each title; values
// `scientific` (6 digits) in setw(18) after one space. printf's %e gives the same characters.
std::string model_deviation_header(bool atomic) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "#%11s%19s%19s%19s%19s%19s%19s", "step", "max_devi_v", "min_devi_v", "avg_devi_v",
                "max_devi_f", "min_devi_f", "avg_devi_f");
  std::string s = buf;
  if (atomic) {
    std::snprintf(buf, sizeof buf, "%19s", "atm_devi_f(N)");
    s += buf;
  }
  return s;
}

std::string model_deviation_line(long long step, const DeviationRow& row, const double* atom_devi,
                                 size_t n_atom_devi) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%12lld", step);
  std::string s = buf;
  for (double v : {row.max_v, row.min_v, row.avg_v, row.max_f, row.min_f, row.avg_f}) append(s, " %18.6e", v);
  for (size_t i = 0; i < n_atom_devi; ++i) append(s, " %18.6e", atom_devi[i]);
  return s;
}

}  // namespace sezm
