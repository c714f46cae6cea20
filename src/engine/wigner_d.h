#pragma once
// Edge frames and real Wigner-D blocks of SeZM (docs/model.md §3, backward §7.5).
//
// Conventions
// - Quaternions are q = (w, x, y, z), scalar first, Hamilton product. R(q) is the ACTIVE
//   rotation matrix of §3.2, stored row-major (R[3*i + j]).
// - The edge quaternion q_e is global -> local: R(q_e) v/|v| = +z. Rows 0, 1, 2 of R(q_e) are
//   the local x axis a_e, local y axis b_e and the edge direction, in global coordinates.
// - Real SH basis inside a degree: m = -l..l, SeZM's convention (Condon–Shortley phase kept):
//   l = 1 is (y, z, -x). Racah normalisation C_lm (C_l0(z-hat) = 1), packed p(l,m) = l^2+l+m.
// - Packed Wigner layout per edge: block l (l = 0..L) is a (2l+1)x(2l+1) row-major matrix at
//   offset wigner_offset(l) = sum_{l'<l} (2l'+1)^2. Row index = local m (edge frame, m+l),
//   column index = global m' (m'+l). Total wigner_size(L) = sum_{l<=L} (2l+1)^2 (L=3: 84).
//   Defining property: D^l(q) C_l(u) = C_l(R(q) u); D^l orthogonal; D(q1 q2) = D(q1) D(q2).
// - D^0 = 1; D^1_ij = s_i s_j R_{pi_i pi_j} with pi = (1,2,0), s = (-1,-1,+1) (§3.5);
//   D^l, l >= 2, from the Cayley–Klein formula of §3.5 (R_a = w - i z, R_b = y - i x) and the
//   complex -> real transform D^l = Re(U^l D_c U^l†); tables are built once in wigner_d.cpp.
// - Backward (§7.5, "tilt" formula): with real generators J^l_a = d/dt D^l(q_a(t))|_0,
//   q_a(t) = (cos t/2, sin t/2 e_a), G_a = sum_l sum_ij Dbar^l_ij (J^l_a D^l)_ij and
//   v_bar += (G_x b - G_y a) / Lambda,  Lambda = sqrt(|v|^2 + 2 eps^2).
//   The roll component G_z is dropped, so it is exact only for roll-invariant consumers
//   (which the whole SeZM model is, §3.4). a and b are read from the D^1 block passed in,
//   so forward and backward use the very same frame.
// Numerics: the coefficient tables are double; T = double is the reference, T = float compiles.
// Per-edge functions allocate nothing.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace sezm {

constexpr int kWignerMaxL = 6;
constexpr int wigner_offset(int l) { return l * (2 * l - 1) * (2 * l + 1) / 3; }
constexpr int wigner_size(int L) { return wigner_offset(L + 1); }

namespace detail {

constexpr int kCkPow = 2 * kWignerMaxL + 1;  // stride of the power tables (exponents 0..2L)

// One term of the Cayley–Klein sum: coef * Ra^i conj(Ra)^j * Rb^k conj(Rb)^n with
// a = i*kCkPow + j and b = k*kCkPow + n.
struct CkTerm {
  double coef;
  int a, b;
};
// One term of Re(U Dc U†)[entry]: cre*Re(Dc[idx]) - cim*Im(Dc[idx]).
struct RealTerm {
  int idx;
  double cre, cim;
};
// Non-zero of a real generator: J[i][k] = val.
struct GenNz {
  int i, k;
  double val;
};

struct WignerBlockTables {
  int n_entries = 0;          // (2l+1)^2
  const int* ck_begin;        // n_entries + 1 offsets into ck
  const CkTerm* ck;
  const RealTerm* rt;         // 4 per real entry (zero-padded)
  const double* J[3];         // dense real generators J_x, J_y, J_z, (2l+1)^2 row-major
  const GenNz* J_nz[2];       // sparse J_x, J_y
  int J_nnz[2];
};

// Tables for l = 0..kWignerMaxL, built once (thread-safe static initialisation).
const WignerBlockTables& wigner_block_tables(int l);
// sqrt(2 (l-m)!/(l+m)!) for m > 0, 1 for m = 0; index l*(kWignerMaxL+1) + m.
const double* racah_norm_table();

template <class T>
struct Cx {
  T re, im;
};
template <class T>
inline Cx<T> cmul(Cx<T> a, Cx<T> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

// q / sqrt(|q|^2 + eps^2)
template <class T>
inline void quat_nrm(const T in[4], T eps, T out[4]) {
  const T s = T(1) / std::sqrt(in[0] * in[0] + in[1] * in[1] + in[2] * in[2] + in[3] * in[3] +
                               eps * eps);
  for (int i = 0; i < 4; ++i) out[i] = in[i] * s;
}

}  // namespace detail

// Real generator J^l_a (a = 0,1,2 for x,y,z) in SeZM's real basis: dense (2l+1)^2 row-major,
// real and antisymmetric; J^l_a = d/dt D^l(q_a(t)) at t = 0.
inline const double* wigner_generator(int l, int a) { return detail::wigner_block_tables(l).J[a]; }

// §3.3: two charts, C-infinity smooth-step blend, shortest-arc sign, nlerp, eps floors.
template <class T>
inline void edge_quaternion(const T v[3], T eps, T q[4]) {
  const T lam = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + T(2) * eps * eps);
  const T ux = v[0] / lam, uy = v[1] / lam, uz = v[2] / lam;
  const T qp_raw[4] = {T(1) + uz, uy, -ux, T(0)};  // "+Z chart", singular only at u = -z
  const T qn_raw[4] = {-ux, T(0), T(1) - uz, uy};  // "-Z chart", singular only at u = +z
  T qp[4], qn[4];
  detail::quat_nrm(qp_raw, eps, qp);
  detail::quat_nrm(qn_raw, eps, qn);
  const T t = std::min(std::max(T(0.5) * (uz + T(1)), T(0)), T(1));
  T b;
  if (t <= T(0)) {
    b = T(0);
  } else if (t >= T(1)) {
    b = T(1);
  } else {
    const T em = std::numeric_limits<T>::epsilon();
    const T e0 = std::exp(T(-1) / std::max(t, em));
    const T e1 = std::exp(T(-1) / std::max(T(1) - t, em));
    b = e0 / (e0 + e1);
  }
  const T dot = qn[0] * qp[0] + qn[1] * qp[1] + qn[2] * qp[2] + qn[3] * qp[3];
  const T sp = dot < T(0) ? -b : b;
  T blend[4];
  for (int i = 0; i < 4; ++i) blend[i] = (T(1) - b) * qn[i] + sp * qp[i];
  detail::quat_nrm(blend, eps, q);
}

// §3.2 active rotation matrix, row-major.
template <class T>
inline void quaternion_to_rotation(const T q[4], T R[9]) {
  const T w = q[0], x = q[1], y = q[2], z = q[3];
  R[0] = T(1) - T(2) * (y * y + z * z);
  R[1] = T(2) * (x * y - w * z);
  R[2] = T(2) * (x * z + w * y);
  R[3] = T(2) * (x * y + w * z);
  R[4] = T(1) - T(2) * (x * x + z * z);
  R[5] = T(2) * (y * z - w * x);
  R[6] = T(2) * (x * z - w * y);
  R[7] = T(2) * (y * z + w * x);
  R[8] = T(1) - T(2) * (x * x + y * y);
}

// All blocks l = 0..L (L <= kWignerMaxL) of D(q) into D[wigner_size(L)]. q is re-normalised with
// the eps floor first, as deepmd's WignerDCalculator does (its eps = config eps = 1e-7);
// eps = 0 normalises exactly. Cost at L = 3, double: ~0.5 us per edge including edge_quaternion.
template <class T>
inline void wigner_d(const T q_in[4], int L, T* D, T eps = T(1e-7)) {
  assert(L >= 0 && L <= kWignerMaxL);
  using C = detail::Cx<T>;
  T q[4];
  detail::quat_nrm(q_in, eps, q);
  D[0] = T(1);
  if (L < 1) return;
  T R[9];
  quaternion_to_rotation(q, R);
  static constexpr int perm[3] = {1, 2, 0};
  static constexpr int sgn[3] = {-1, -1, 1};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) D[1 + 3 * i + j] = T(sgn[i] * sgn[j]) * R[3 * perm[i] + perm[j]];
  if (L < 2) return;

  // Power tables A[i][j] = Ra^i conj(Ra)^j, B[k][n] = Rb^k conj(Rb)^n for exponents <= 2L.
  constexpr int P = detail::kCkPow;
  const int np = 2 * L + 1;
  C pa[P], pb[P];
  pa[0] = pb[0] = C{T(1), T(0)};
  const C ra{q[0], -q[3]}, rb{q[2], -q[1]};
  for (int i = 1; i < np; ++i) {
    pa[i] = detail::cmul(pa[i - 1], ra);
    pb[i] = detail::cmul(pb[i - 1], rb);
  }
  C A[P * P], B[P * P];
  for (int i = 0; i < np; ++i)
    for (int j = 0; j < np; ++j) {
      A[i * P + j] = detail::cmul(pa[i], C{pa[j].re, -pa[j].im});
      B[i * P + j] = detail::cmul(pb[i], C{pb[j].re, -pb[j].im});
    }

  C Dc[P * P];
  for (int l = 2; l <= L; ++l) {
    const detail::WignerBlockTables& tb = detail::wigner_block_tables(l);
    for (int e = 0; e < tb.n_entries; ++e) {
      T re = T(0), im = T(0);
      for (int t = tb.ck_begin[e]; t < tb.ck_begin[e + 1]; ++t) {
        const C p = detail::cmul(A[tb.ck[t].a], B[tb.ck[t].b]);
        const T c = T(tb.ck[t].coef);
        re += c * p.re;
        im += c * p.im;
      }
      Dc[e] = C{re, im};
    }
    T* Dl = D + wigner_offset(l);
    for (int e = 0; e < tb.n_entries; ++e) {
      const detail::RealTerm* rt = tb.rt + 4 * e;
      T acc = T(0);
      for (int k = 0; k < 4; ++k) acc += T(rt[k].cre) * Dc[rt[k].idx].re - T(rt[k].cim) * Dc[rt[k].idx].im;
      Dl[e] = acc;
    }
  }
}

// dE/dv from Dbar = dE/dD (packed like D) by the tilt formula of §7.5; accumulates into v_bar.
// D must be the forward output for q_e(v) (its D^1 block provides the local axes a, b): the
// forward stores D (needed by the blocks anyway) and the backward recomputes nothing from v but
// Lambda. Cost at L = 3, double: ~0.1 us per edge.
template <class T>
inline void wigner_d_backward(const T v[3], T eps, const T* D, int L, const T* Dbar, T v_bar[3]) {
  assert(L <= kWignerMaxL);
  if (L < 1) return;
  T G[2] = {T(0), T(0)};
  for (int l = 1; l <= L; ++l) {
    const detail::WignerBlockTables& tb = detail::wigner_block_tables(l);
    const int n = 2 * l + 1;
    const T* Dl = D + wigner_offset(l);
    const T* Bl = Dbar + wigner_offset(l);
    for (int a = 0; a < 2; ++a) {
      T g = T(0);
      for (int z = 0; z < tb.J_nnz[a]; ++z) {
        const detail::GenNz& nz = tb.J_nz[a][z];
        const T* bi = Bl + n * nz.i;
        const T* dk = Dl + n * nz.k;
        T dot = T(0);
        for (int j = 0; j < n; ++j) dot += bi[j] * dk[j];
        g += T(nz.val) * dot;
      }
      G[a] += g;
    }
  }
  // Local axes from D^1 (D^1_ij = s_i s_j R_{pi_i pi_j}): a = R row 0, b = R row 1.
  const T* D1 = D + 1;
  const T ax[3] = {D1[8], -D1[6], -D1[7]};
  const T bx[3] = {-D1[2], D1[0], D1[1]};
  const T inv_lam = T(1) / std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + T(2) * eps * eps);
  for (int i = 0; i < 3; ++i) v_bar[i] += (G[0] * bx[i] - G[1] * ax[i]) * inv_lam;
}

// Racah-normalised real SH C_lm(u) of §3.1 for a unit vector u, packed p(l,m) = l^2+l+m,
// l = 0..L (L <= kWignerMaxL). Uses C_lm = N_lm (-1)^m Q_l^m(z) Re/Im((x+iy)^m), where
// P_l^m(z) = (-1)^m (1-z^2)^{m/2} Q_l^m(z) (Condon–Shortley) and Q by the standard recurrence.
template <class T>
inline void real_sh_racah(const T u[3], int L, T* C) {
  assert(L >= 0 && L <= kWignerMaxL);
  constexpr int M = kWignerMaxL + 1;
  const double* norm = detail::racah_norm_table();
  const T x = u[0], y = u[1], z = u[2];
  T cm = T(1), sm = T(0);  // Re, Im of (x + i y)^m
  T qmm = T(1);            // Q_m^m = (2m-1)!!
  for (int m = 0; m <= L; ++m) {
    if (m > 0) {
      const T c = cm * x - sm * y;
      sm = cm * y + sm * x;
      cm = c;
      qmm *= T(2 * m - 1);
    }
    const T sign = (m % 2) ? T(-1) : T(1);
    T q_prev = T(0), q = qmm;  // Q_{l-1}^m, Q_l^m
    for (int l = m; l <= L; ++l) {
      if (l > m) {
        const T q_next = (T(2 * l - 1) * z * q - T(l + m - 1) * q_prev) / T(l - m);
        q_prev = q;
        q = q_next;
      }
      const T f = T(norm[l * M + m]) * sign * q;
      const int p0 = l * l + l;
      if (m == 0) {
        C[p0] = q;
      } else {
        C[p0 + m] = f * cm;
        C[p0 - m] = -f * sm;
      }
    }
  }
}

}  // namespace sezm
