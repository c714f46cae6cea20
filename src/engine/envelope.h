#pragma once
// C3 cutoff envelope of SeZM (docs/model.md §2.2), forward and derivative.
//
//   x = r / rcut, evaluated as deepmd does: u = clamp((rcut - r)/rcut, 0, 1), x = 1 - u,
//   E_p(x) = u^4 * sum_{k<p} C(k+3,3) x^k   (Horner in x)  -> 1 for r <= 0, 0 for r >= rcut.
//   dE_p/dr = -4 C(p+3,4) x^(p-1) (1-x)^3 / rcut   for 0 < r < rcut, 0 outside.
// E_p is the regularised incomplete beta I_{1-x}(4,p); E, E', E'', E''' vanish at x = 1.
// Uses: p = 5 for the edge envelope (edge_env), p = 7 inside the radial basis.

namespace sezm {

template <class T>
inline T envelope(T r, T rcut, int p) {
  T u = (rcut - r) / rcut;
  if (u <= T(0)) return T(0);
  if (u > T(1)) u = T(1);
  const T x = T(1) - u;
  T s = T(0);
  for (int k = p - 1; k >= 0; --k) s = s * x + T((k + 1) * (k + 2) * (k + 3) / 6);
  const T u2 = u * u;
  return u2 * u2 * s;
}

template <class T>
inline T envelope_dr(T r, T rcut, int p) {
  const T u = (rcut - r) / rcut;
  if (u <= T(0) || u >= T(1)) return T(0);
  const T x = T(1) - u;
  T xp = T(1);
  for (int k = 1; k < p; ++k) xp *= x;
  const T c4 = T((p + 3) * (p + 2) * (p + 1) * p / 24);  // C(p+3,4)
  return T(-4) * c4 * xp * u * u * u / rcut;
}

}  // namespace sezm
