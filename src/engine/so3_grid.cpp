// The SO(3) Wigner-D grid (docs/model.md §5.10; engine/so3_grid.h).
#include "engine/so3_grid.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "engine/lebedev.h"
#include "engine/wigner_d.h"

namespace sezm {

SO3Grid make_so3_grid(int L, int kmax) {
  if (L < 1 || L > 3 || kmax < 0 || kmax > L)
    throw Error("make_so3_grid: L = " + std::to_string(L) + ", kmax = " + std::to_string(kmax) +
                " (supported: 1 <= L <= 3, 0 <= kmax <= L)");
  SO3Grid s;
  s.L = L;
  s.kmax = kmax;
  s.frames.push_back(0);
  for (int k = 1; k <= kmax; ++k) {
    s.frames.push_back(-k);
    s.frames.push_back(k);
  }
  s.K = static_cast<int>(s.frames.size());
  s.D = (L + 1) * (L + 1);
  s.J = s.D * s.K;
  // Smallest packaged Lebedev precision >= 3L (packaged: 3, 5, 7, 9, ...; 5 is never the
  // smallest for an integer L, so the rules of lebedev.cpp cover L <= 3).
  const int packaged[] = {3, 5, 7, 9};
  for (const int p : packaged)
    if (p >= 3 * L) { s.precision = p; break; }
  const LebedevRule rule = lebedev_rule(s.precision);
  s.P = rule.n;
  s.n_gamma = kmax == 0 ? 1 : 3 * kmax + 1;
  s.G = s.P * s.n_gamma;
  s.omega.resize(s.G);
  s.A.assign(static_cast<size_t>(s.G) * s.J, 0.0);
  s.B.assign(static_cast<size_t>(s.J) * s.G, 0.0);
  const double pi = std::acos(-1.0);
  std::vector<double> Dg(wigner_size(L));
  for (int i = 0; i < s.P; ++i) {
    double qi[4];
    edge_quaternion(rule.xyz[i], 1e-14, qi);
    for (int jg = 0; jg < s.n_gamma; ++jg) {
      const double half = 0.5 * (jg * (2.0 * pi / s.n_gamma));
      const double r[4] = {std::cos(half), 0.0, 0.0, std::sin(half)};
      // q_g = r (x) q_i (Hamilton product).
      const double q[4] = {r[0] * qi[0] - r[1] * qi[1] - r[2] * qi[2] - r[3] * qi[3],
                           r[0] * qi[1] + r[1] * qi[0] + r[2] * qi[3] - r[3] * qi[2],
                           r[0] * qi[2] - r[1] * qi[3] + r[2] * qi[0] + r[3] * qi[1],
                           r[0] * qi[3] + r[1] * qi[2] - r[2] * qi[1] + r[3] * qi[0]};
      wigner_d(q, L, Dg.data(), 1e-7);
      const int g = i * s.n_gamma + jg;
      s.omega[g] = rule.w[i] / s.n_gamma;
      for (int l = 0; l <= L; ++l) {
        const double* Dl = Dg.data() + wigner_offset(l);
        for (int m = -l; m <= l; ++m)
          for (int p = 0; p < s.K; ++p) {
            const int k = s.frames[p];
            if (std::abs(k) > l) continue;  // dead slot
            const int j = (l * l + l + m) * s.K + p;
            const double a = Dl[(k + l) * (2 * l + 1) + (m + l)];
            s.A[static_cast<size_t>(g) * s.J + j] = a;
            s.B[static_cast<size_t>(j) * s.G + g] = (2 * l + 1) * s.omega[g] * a;
          }
      }
    }
  }
  return s;
}

}  // namespace sezm
