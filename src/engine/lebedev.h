#pragma once
// S2 grid matrices of the block FFN (docs/model.md §5.9.1; the rules' values in lebedev.cpp).
//
// - Lebedev rules of precision 3 (6 points), 7 (26) and 9 (38): deepmd's packaged float64 values
//   (lebedev_rules.npz), points (x, y, z) and weights (normalised to sum ~1) in the packaged order.
// - Real SH Y_d in e3nn's convention: y is the polar axis, order m = -l..l, normalisation "norm"
//   (sum_m Y_lm(p)^2 = 1 for unit p, so the sphere mean of Y_d Y_d' is delta_dd'/(2l+1)),
//   normalize=True (the point is scaled to unit length first), no Condon–Shortley phase.
//   Packed index d = l^2 + l + m, closed forms for l <= 3 (e3nn convention, docs/model.md §5.9.1).
// - make_s2_grid(L): rule = smallest packaged precision >= 3L (L=0,1 -> 3, 2 -> 7, 3 -> 9), and
//     T[g,d] = Y_d(p_g) / sqrt(L+1)                     (G x D, row-major: grid <- coefficients)
//     P[d,g] = w_g sqrt(L+1) (2 l(d)+1) Y_d(p_g)         (D x G, row-major: coefficients <- grid)
//   with D = (L+1)^2, G = number of points, all in double (cast to the model dtype by the user).
//   Exactness (rule precision >= 2L): P T = I_D.

#include <vector>

namespace sezm {

struct LebedevRule {
  int precision = 0;
  int n = 0;
  const double (*xyz)[3] = nullptr;  // n points
  const double* w = nullptr;         // n weights
};

// precision in {3, 7, 9}; anything else -> sezm::Error.
LebedevRule lebedev_rule(int precision);

// e3nn real SH ("norm", normalize=True, y polar) of p (any non-zero vector), l = 0..L, L <= 3,
// packed d = l^2+l+m into Y[(L+1)^2].
void e3nn_real_sh(const double p[3], int L, double* Y);

struct S2Grid {
  int L = 0, G = 0, D = 0;
  std::vector<double> T /*G x D row-major*/, P /*D x G row-major*/;
};

// L in 0..3; otherwise sezm::Error.
S2Grid make_s2_grid(int L);

}  // namespace sezm
