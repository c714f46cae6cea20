#pragma once
// The SO(3) Wigner-D grid of the grid nets (docs/model.md §5.10): built once per model from
// (L, kmax), nothing of it is in the checkpoint.
//
// - Frame set K = (0, -1, +1, ..., -kmax, +kmax), |K| = 2 kmax + 1; frame position p, order k_p.
// - Lebedev rule: the smallest packaged precision >= 3L (deepmd's packaged numbers, lebedev.cpp);
//   n_gamma = 1 (kmax = 0) or 3 kmax + 1 roll angles gamma_j = j 2pi / n_gamma; grid index
//   g = i n_gamma + j (point-major); G = P n_gamma.
// - Grid rotation q_g = r_j (x) q_i (Hamilton product): q_i = edge_quaternion(p_i, eps = 1e-14)
//   sends p_i to +z, r_j = (cos gamma_j/2, 0, 0, sin gamma_j/2) rolls about +z; D(q_g) = wigner_d
//   with its eps = 1e-7 re-normalisation (as deepmd's WignerDCalculator).
// - Framed coefficients: row j = d |K| + p (d = l^2 + l + m packed), J = D |K| rows;
//     A[g, j] = D^l(q_g)[k_p, m]   (|k_p| <= l, else 0: a dead slot)      (G x J, row-major)
//     B[j, g] = (2l + 1) omega_g A[g, j],   omega_g = w_i / n_gamma        (J x G, row-major)
//   so a framed field X (J, c) has grid values A X (G, c) and B F projects a grid field back.
//   The quadrature is exact for B(A u (.) A v) (docs/model.md §5.10), so B A = I on live slots.
#include <vector>

namespace sezm {

struct SO3Grid {
  int L = 0, kmax = 0, K = 0, D = 0, J = 0, G = 0, P = 0, n_gamma = 0, precision = 0;
  std::vector<int> frames;     // k_p
  std::vector<double> omega;   // G Haar weights
  std::vector<double> A, B;    // G x J, J x G (row-major)
};

// 1 <= L <= 3, 0 <= kmax <= L; otherwise sezm::Error.
SO3Grid make_so3_grid(int L, int kmax);

}  // namespace sezm
