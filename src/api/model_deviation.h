#pragma once
// Model deviation of a committee of potentials (active learning: DP-GEN, dpgen2), defined as
// deepmd-kit 3.2.0 defines it in its LAMMPS pair style (`pair_style deepmd m1 m2 ... out_freq N`,
// source/lmp/pair_deepmd.cpp) and in `dp model-devi` (deepmd/infer/model_devi.py); the same
// numbers on the same forces and virials (tests/data/model_devi/README.md). Knows nothing of LAMMPS
// or MPI: a caller with atoms spread over ranks computes its atoms' deviations, reduces the
// partial sums (ForceDeviationSums: max, min, sum) and the per-model virials (a sum), and lets
// one rank finish and format the row.
//
// For M models and N atoms of one frame:
//   force:  d_i = sqrt( (1/M) sum_m |F_mi - Fbar_i|^2 ),  Fbar_i = (1/M) sum_m F_mi;
//           `relative E`: d_i / (|Fbar_i| + E); max, min and mean of d_i over the N atoms.
//   virial: per component c of the 9, V_mc = W_mc / N (the model's global virial per atom),
//           s_c = sqrt( (1/M) sum_m (V_mc - Vbar_c)^2 ); `relative_v E`: s_c / (|Vbar_c| + E) in
//           the LAMMPS pair style, s_c / (|Vbar| + E) (norm of the 9-vector) in `dp model-devi`;
//           max and min of s_c and sqrt( (1/9) sum_c s_c^2 ).
#include <cstddef>
#include <limits>
#include <optional>
#include <string>

namespace sezm {

// How `relative_v E` scales the virial deviation (the two deepmd-kit front ends differ).
enum class RelativeVirial {
  kPerComponent,  // pair_style deepmd (DeepPotModelDevi::compute_relative_std, stride 1): / (|Vbar_c| + E)
  kNorm,          // dp model-devi (calc_model_devi_v): / (|Vbar| + E), |Vbar| over the 9 components
};

struct DeviationOptions {
  std::optional<double> relative_f;  // `relative E` (eV/A): force deviation relative to |Fbar_i| + E
  std::optional<double> relative_v;  // `relative_v E` (eV per atom)
  RelativeVirial relative_v_kind = RelativeVirial::kPerComponent;
};

// Per-atom force deviations of n_atoms atoms. Layout (one row per atom, what a caller
// communicates in one exchange): forces[(i * n_models + m) * 3 + k], component k of model m's
// force on atom i. devi: n_atoms values. n_models >= 1 (one model: all zero).
void force_deviation(const double* forces, int n_models, size_t n_atoms, const DeviationOptions& opt, double* devi);
// Model m's forces (f: n_atoms x 3) into that layout.
void put_model_forces(const double* f, int m, int n_models, size_t n_atoms, double* forces);

// Partial statistics of per-atom force deviations; partial results from several ranks combine
// by max, min and sum (merge, or MPI_MAX / MPI_MIN / MPI_SUM on the three fields). The start
// values are those of deepmd-kit's pair style for a rank without atoms (max 0, min the largest
// double, sum 0), so a reduction over ranks gives its numbers.
struct ForceDeviationSums {
  double max = 0.0;
  double min = std::numeric_limits<double>::max();
  double sum = 0.0;
  void add(const double* devi, size_t n);
  void merge(const ForceDeviationSums& other);
};

// One output row: the virial statistics over the 9 components and the force statistics over
// the atoms (avg = sum / n_atoms of the whole system).
struct DeviationRow {
  double max_v = 0.0, min_v = 0.0, avg_v = 0.0;
  double max_f = 0.0, min_f = 0.0, avg_f = 0.0;
};

// The virial half of a row. virials: n_models x 9, each model's global virial of the whole
// system (eV; summed over ranks), n_atoms: atoms in the system.
void virial_deviation(const double* virials, int n_models, double n_atoms, const DeviationOptions& opt,
                      DeviationRow* row);
// The force half of a row from the sums over every atom of the system.
void finish_force_deviation(const ForceDeviationSums& sums, double n_atoms, DeviationRow* row);

// deepmd-kit's pair-style file layout: the header line (with `atomic`, one more column title,
// "atm_devi_f(N)") and one line per output step, each without its newline: step in 12
// characters, then each value as " %18.6e"; with `atomic` the per-atom deviations follow in
// the same format (the caller orders them by atom ID).
std::string model_deviation_header(bool atomic);
std::string model_deviation_line(long long step, const DeviationRow& row, const double* atom_devi = nullptr,
                                 size_t n_atom_devi = 0);

}  // namespace sezm
