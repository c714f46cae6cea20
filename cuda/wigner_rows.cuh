#pragma once
// A few real rows |m'| <= R of the Wigner block D^l(q), l = 2 or 3, with every table index fixed
// at compile time (CPU twin: engine/wigner_d.h wigner_d, whose Cayley–Klein and Re(U Dc U†)
// tables are walked here in the same term order). The coefficients are read from the device
// tables (WignerTablesDev: ck, rt), the indices are not: the power tables pa, pb and the complex
// rows stay in registers (the table-driven loop of geometry.cu's legacy kernels indexed them at
// run time, i.e. from an 848-byte local-memory frame per thread).
//
// The forward needs the rows |m'| <= 1 (the compact rows the value path reads), the tilt-formula
// backward the rows |m'| <= 2: the real generators J_x, J_y couple |m| to |m| +- 1 only (U mixes
// m' with -m', the complex J_x, J_y shift m' by one), so (J D)_i for |m_i| <= 1 reads D rows
// |m_k| <= 2.
#include <type_traits>

#include "model_dev.cuh"

namespace sezm::cuda::wrows {

constexpr int kPow = 13;  // exponent stride of the CPU tables (2 * kWignerMaxL + 1)

struct Cx { float re, im; };
__host__ __device__ __forceinline__ Cx cmul(Cx a, Cx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }

__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int iabs(int a) { return a < 0 ? -a : a; }
// Cayley–Klein terms of complex entry (mp, m) of block l: rho = lo..hi (wigner_d.cpp BlockStore).
__host__ __device__ constexpr int ck_lo(int mp, int m) { return imax(0, mp - m); }
__host__ __device__ constexpr int ck_hi(int l, int mp, int m) { return imin(l + mp, l - m); }
__host__ __device__ constexpr int ck_count(int l, int mp, int m) {
  return ck_hi(l, mp, m) >= ck_lo(mp, m) ? ck_hi(l, mp, m) - ck_lo(mp, m) + 1 : 0;
}
// Index of the entry's first term in block l's list (entries row-major, mp then m).
__host__ __device__ constexpr int ck_first(int l, int mp, int m) {
  int t = 0;
  for (int a = -l; a <= l; ++a)
    for (int b = -l; b <= l; ++b) {
      if (a == mp && b == m) return t;
      t += ck_count(l, a, b);
    }
  return t;
}
// Non-zero columns of row m of U^l (complex -> real), ascending: {l} for m = 0, else l -+ |m|.
__host__ __device__ constexpr int u_count(int m) { return m == 0 ? 1 : 2; }
__host__ __device__ constexpr int u_col(int l, int m, int x) { return m == 0 ? l : (x == 0 ? l - iabs(m) : l + iabs(m)); }

// Compile-time loop: f(std::integral_constant<int, I>) for I = B..E-1.
template <int B, int E, class F>
__host__ __device__ __forceinline__ void static_for(F&& f) {
  if constexpr (B < E) {
    f(std::integral_constant<int, B>{});
    static_for<B + 1, E>(f);
  }
}

// Powers pa[i] = Ra^i, pb[i] = Rb^i (i <= 2L) of the normalised quaternion q, as wigner_d.
template <int NP>
__host__ __device__ __forceinline__ void powers(const float q[4], Cx (&pa)[NP], Cx (&pb)[NP]) {
  pa[0] = pb[0] = Cx{1.0f, 0.0f};
  const Cx ra{q[0], -q[3]}, rb{q[2], -q[1]};
#pragma unroll
  for (int i = 1; i < NP; ++i) {
    pa[i] = cmul(pa[i - 1], ra);
    pb[i] = cmul(pb[i - 1], rb);
  }
}

// Real rows m = -R..R of block l, handed to f(std::integral_constant<int, m>, float (&row)[2l+1])
// in the order m = 0, -1, 1, -2, 2. ck, rt: block l's coefficient lists (wt.ck + wt.ck_off[l],
// wt.rt + wt.rt_off[l]). Each entry is summed in the tables' term order.
template <int l, int R, int NP, class F>
__host__ __device__ __forceinline__ void rows_each(const Cx (&pa)[NP], const Cx (&pb)[NP],
                                                   const CkTermF* __restrict__ ck, const RealTermF* __restrict__ rt,
                                                   F&& f) {
  static_assert(2 * l + 1 <= NP && R <= l, "rows: powers up to 2l, rows inside the block");
  constexpr int n = 2 * l + 1;
  // By |m| = am: the complex rows m' = -am, +am (x = 0, 1; one row for am = 0), then the real rows
  // m = -am, +am, which read only those (fewer live registers than all complex rows at once).
  static_for<0, R + 1>([&](auto AM) {
    constexpr int am = decltype(AM)::value, nx = am == 0 ? 1 : 2;
    Cx Dc[nx][n];
    static_for<0, nx>([&](auto X) {
      constexpr int mp = decltype(X)::value == 0 ? -am : am;
      static_for<-l, l + 1>([&](auto M) {
        constexpr int m = decltype(M)::value;
        constexpr int t0 = ck_first(l, mp, m), lo = ck_lo(mp, m);
        float re = 0.0f, im = 0.0f;
        static_for<0, ck_count(l, mp, m)>([&](auto T) {
          constexpr int rho = lo + decltype(T)::value;
          const Cx A = cmul(pa[l + mp - rho], Cx{pa[l - m - rho].re, -pa[l - m - rho].im});
          const Cx B = cmul(pb[m - mp + rho], Cx{pb[rho].re, -pb[rho].im});
          const Cx p = cmul(A, B);
          const float coef = ck[t0 + decltype(T)::value].coef;
          re += coef * p.re;
          im += coef * p.im;
        });
        Dc[decltype(X)::value][m + l] = Cx{re, im};
      });
    });
    static_for<0, nx>([&](auto XI) {
      constexpr int mi = decltype(XI)::value == 0 ? -am : am;
      float row[n];
      static_for<0, n>([&](auto J) {
        constexpr int j = decltype(J)::value, mj = j - l;
        const RealTermF* tm = rt + 4 * ((mi + l) * n + j);
        float acc = 0.0f;
        // Row mi of U has columns l - am, l + am (x = 0, 1), i.e. the complex rows -am, +am.
        static_for<0, u_count(mi)>([&](auto X) {
          static_for<0, u_count(mj)>([&](auto Y) {
            constexpr int k = decltype(X)::value * u_count(mj) + decltype(Y)::value;
            static_assert(u_col(l, mi, decltype(X)::value) - l == (decltype(X)::value == 0 ? -am : am), "U columns");
            const Cx z = Dc[decltype(X)::value][u_col(l, mj, decltype(Y)::value)];
            acc += tm[k].cre * z.re - tm[k].cim * z.im;
          });
        });
        row[j] = acc;
      });
      f(std::integral_constant<int, mi>{}, row);
    });
  });
}

// The rows m = -R..R of block l into Dr[m + R][0..2l].
template <int l, int R, int NP>
__host__ __device__ __forceinline__ void rows(const Cx (&pa)[NP], const Cx (&pb)[NP], const CkTermF* __restrict__ ck,
                                              const RealTermF* __restrict__ rt, float (&Dr)[2 * R + 1][2 * l + 1]) {
  rows_each<l, R>(pa, pb, ck, rt, [&](auto MI, const float(&row)[2 * l + 1]) {
#pragma unroll
    for (int j = 0; j < 2 * l + 1; ++j) Dr[decltype(MI)::value + R][j] = row[j];
  });
}

// Tilt-formula share of block l (docs/model.md §7.5): G_a += sum_{i compact, k} J_a[i][k] <Dbar_i, D_k>
// over Dbar's three compact rows (m = -1, 0, 1) at db (3 x (2l+1)) and the rows m_k = -Rk..Rk
// (Rk = min(l, 2)) of D, with J_a densified over (i, m_k + 2) in jd[a * 15 + ri * 5 + m_k + 2]
// (zero where the generator has no entry). The dots are formed as each D row arrives (dot(ri,
// k)); G then sums them in the sparse loop's (i, k) order (the legacy kernel's, bit for bit: the
// zeros add exact zeros).
struct TiltDots {
  float v[3][5];
};
template <int l, int MK>
__host__ __device__ __forceinline__ void tilt_dots(const float* db, const float (&row)[2 * l + 1], TiltDots& t) {
#pragma unroll
  for (int ri = 0; ri < 3; ++ri) {
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < 2 * l + 1; ++j) dot += db[ri * (2 * l + 1) + j] * row[j];
    t.v[ri][MK + 2] = dot;
  }
}
template <int l>
__host__ __device__ __forceinline__ void tilt_sum(const TiltDots& t, const float* jd, float (&G)[2]) {
  constexpr int Rk = imin(l, 2);
#pragma unroll
  for (int ri = 0; ri < 3; ++ri)
#pragma unroll
    for (int mk = -Rk; mk <= Rk; ++mk) {
      G[0] += jd[ri * 5 + mk + 2] * t.v[ri][mk + 2];
      G[1] += jd[15 + ri * 5 + mk + 2] * t.v[ri][mk + 2];
    }
}
// Block l >= 2 from the powers: rows |m| <= 2 formed and consumed one at a time.
template <int l, int NP>
__host__ __device__ __forceinline__ void tilt_block(const Cx (&pa)[NP], const Cx (&pb)[NP],
                                                    const CkTermF* __restrict__ ck, const RealTermF* __restrict__ rt,
                                                    const float* db, const float* jd, float (&G)[2]) {
  TiltDots t;
  rows_each<l, imin(l, 2)>(pa, pb, ck, rt,
                           [&](auto MK, const float(&row)[2 * l + 1]) { tilt_dots<l, decltype(MK)::value>(db, row, t); });
  tilt_sum<l>(t, jd, G);
}
// Block 1 from D^1 (3 x 3, row-major).
__host__ __device__ __forceinline__ void tilt_block1(const float (&D1)[9], const float* db, const float* jd,
                                                     float (&G)[2]) {
  TiltDots t;
  static_for<-1, 2>([&](auto MK) {
    constexpr int mk = decltype(MK)::value;
    const float row[3] = {D1[3 * (mk + 1)], D1[3 * (mk + 1) + 1], D1[3 * (mk + 1) + 2]};
    tilt_dots<1, mk>(db, row, t);
  });
  tilt_sum<1>(t, jd, G);
}

}  // namespace sezm::cuda::wrows
