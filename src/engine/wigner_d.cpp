// Constant tables behind engine/wigner_d.h: Cayley–Klein coefficient lists, the complex -> real
// transform U^l and the real generators J^l_a, for l = 0..kWignerMaxL (docs/model.md §3.5, §7.5).
// Complex matrices use row m' (index m'+l), column m (index m+l).

#include "engine/wigner_d.h"

#include <array>
#include <complex>
#include <vector>

namespace sezm {
namespace detail {
namespace {

using cd = std::complex<double>;

double factorial(int n) {
  double f = 1.0;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

double binomial(int n, int k) {
  if (k < 0 || k > n) return 0.0;
  return factorial(n) / (factorial(k) * factorial(n - k));
}

// U^l of §3.5 (complex -> real SH), dense (2l+1)^2 row-major.
std::vector<cd> complex_to_real(int l) {
  const int n = 2 * l + 1;
  const double h = 1.0 / std::sqrt(2.0);
  std::vector<cd> U(n * n, 0.0);
  for (int m = -l; m <= l; ++m) {
    const int r = m + l;
    const double par = (m % 2) ? -1.0 : 1.0;  // (-1)^m
    if (m == 0) {
      U[r * n + l] = 1.0;
    } else if (m > 0) {
      U[r * n + (m + l)] = h;
      U[r * n + (-m + l)] = par * h;
    } else {
      U[r * n + (-m + l)] = cd(0.0, -h);
      U[r * n + (m + l)] = cd(0.0, par * h);
    }
  }
  return U;
}

struct BlockStore {
  std::vector<int> ck_begin;
  std::vector<CkTerm> ck;
  std::vector<RealTerm> rt;
  std::vector<double> J[3];
  std::vector<GenNz> J_nz[2];
  WignerBlockTables view;

  explicit BlockStore(int l) {
    const int n = 2 * l + 1;
    // Cayley–Klein sum, entry (mp, m) of the complex D.
    ck_begin.push_back(0);
    for (int mp = -l; mp <= l; ++mp) {
      for (int m = -l; m <= l; ++m) {
        const double pref = std::sqrt(factorial(l + m) * factorial(l - m) /
                                      (factorial(l + mp) * factorial(l - mp)));
        for (int rho = std::max(0, mp - m); rho <= std::min(l + mp, l - m); ++rho) {
          const double c = ((rho % 2) ? -1.0 : 1.0) * binomial(l + mp, rho) *
                           binomial(l - mp, l - m - rho) * pref;
          ck.push_back(CkTerm{c, (l + mp - rho) * kCkPow + (l - m - rho),
                              (m - mp + rho) * kCkPow + rho});
        }
        ck_begin.push_back(static_cast<int>(ck.size()));
      }
    }
    // Re(U Dc U^dagger): four (zero-padded) terms per real entry.
    const std::vector<cd> U = complex_to_real(l);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        int k = 0;
        for (int a = 0; a < n; ++a) {
          for (int b = 0; b < n; ++b) {
            const cd c = U[i * n + a] * std::conj(U[j * n + b]);
            if (c == 0.0) continue;
            rt.push_back(RealTerm{a * n + b, c.real(), c.imag()});
            ++k;
          }
        }
        for (; k < 4; ++k) rt.push_back(RealTerm{0, 0.0, 0.0});
      }
    }
    // Generators in the complex basis (§7.5), then J_real = Re(U J U^dagger).
    std::array<std::vector<cd>, 3> Jc;
    for (auto& m : Jc) m.assign(n * n, 0.0);
    for (int mp = -l; mp <= l; ++mp) {
      const int r = mp + l;
      Jc[2][r * n + r] = cd(0.0, -mp);
      if (mp < l) {
        const double s = std::sqrt(double((l - mp) * (l + mp + 1)));
        Jc[0][r * n + r + 1] = cd(0.0, -0.5 * s);
        Jc[1][r * n + r + 1] = 0.5 * s;
      }
      if (mp > -l) {
        const double s = std::sqrt(double((l + mp) * (l - mp + 1)));
        Jc[0][r * n + r - 1] = cd(0.0, -0.5 * s);
        Jc[1][r * n + r - 1] = -0.5 * s;
      }
    }
    for (int ax = 0; ax < 3; ++ax) {
      J[ax].assign(n * n, 0.0);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          cd acc = 0.0;
          for (int a = 0; a < n; ++a)
            for (int b = 0; b < n; ++b) acc += U[i * n + a] * Jc[ax][a * n + b] * std::conj(U[j * n + b]);
          // Entries are sums of a few O(1) products; exact zeros may carry ~1e-17 rounding.
          J[ax][i * n + j] = std::abs(acc.real()) < 1e-12 ? 0.0 : acc.real();
        }
      if (ax < 2)
        for (int i = 0; i < n; ++i)
          for (int k = 0; k < n; ++k)
            if (J[ax][i * n + k] != 0.0) J_nz[ax].push_back(GenNz{i, k, J[ax][i * n + k]});
    }
    view.n_entries = n * n;
    view.ck_begin = ck_begin.data();
    view.ck = ck.data();
    view.rt = rt.data();
    for (int ax = 0; ax < 3; ++ax) view.J[ax] = J[ax].data();
    for (int ax = 0; ax < 2; ++ax) {
      view.J_nz[ax] = J_nz[ax].data();
      view.J_nnz[ax] = static_cast<int>(J_nz[ax].size());
    }
  }
};

struct AllTables {
  std::vector<BlockStore> blocks;
  std::array<double, (kWignerMaxL + 1) * (kWignerMaxL + 1)> racah{};
  AllTables() {
    blocks.reserve(kWignerMaxL + 1);
    for (int l = 0; l <= kWignerMaxL; ++l) blocks.emplace_back(l);
    for (int l = 0; l <= kWignerMaxL; ++l)
      for (int m = 0; m <= l; ++m)
        racah[l * (kWignerMaxL + 1) + m] =
            m == 0 ? 1.0 : std::sqrt(2.0 * factorial(l - m) / factorial(l + m));
  }
};

const AllTables& all_tables() {
  static const AllTables t;
  return t;
}

}  // namespace

const WignerBlockTables& wigner_block_tables(int l) { return all_tables().blocks[l].view; }

const double* racah_norm_table() { return all_tables().racah.data(); }

}  // namespace detail
}  // namespace sezm
