// Host-only check of cuda/wigner_rows.cuh (branch h-geomgie) against the legacy table-driven loop
// (transcribed from geometry.cu's wigner_full_d / geometry_backward_k) and the CPU double wigner_d.
// No GPU needed:
//   W=<repo root>; nvcc -std=c++17 -O2 -I $W/cuda -I $W/src -I /usr/include/eigen3 \
//     $W/tools/dev/check_wigner_rows.cu $W/src/engine/wigner_d.cpp -o /tmp/check && /tmp/check
// Expected: "table mismatches 0; rows vs legacy max |d| 0 (0 entries differ in bits); rows vs CPU
// double ~8e-07; G rel diff 0".
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "engine/wigner_d.h"
#include "wigner_rows.cuh"
using namespace sezm;
using namespace sezm::cuda;
int main() {
  std::vector<int> ckb; std::vector<CkTermF> ck; std::vector<RealTermF> rt; std::vector<GenNzF> jnz;
  WignerTablesDev wt{};
  for (int l = 0; l <= 3; ++l) {
    const auto& tb = detail::wigner_block_tables(l);
    wt.ck_begin_off[l] = ckb.size(); wt.ck_off[l] = ck.size(); wt.rt_off[l] = rt.size();
    for (int e = 0; e <= tb.n_entries; ++e) ckb.push_back(tb.ck_begin[e]);
    for (int t = 0; t < tb.ck_begin[tb.n_entries]; ++t) ck.push_back(CkTermF{(float)tb.ck[t].coef, tb.ck[t].a, tb.ck[t].b});
    for (int e = 0; e < 4 * tb.n_entries; ++e) rt.push_back(RealTermF{tb.rt[e].idx, (float)tb.rt[e].cre, (float)tb.rt[e].cim});
    for (int a = 0; a < 2; ++a) {
      wt.jnz_off[l][a] = jnz.size(); wt.jnz_n[l][a] = tb.J_nnz[a];
      for (int z = 0; z < tb.J_nnz[a]; ++z) jnz.push_back(GenNzF{tb.J_nz[a][z].i, tb.J_nz[a][z].k, (float)tb.J_nz[a][z].val});
    }
  }
  wt.ck_begin = ckb.data(); wt.ck = ck.data(); wt.rt = rt.data(); wt.jnz = jnz.data();
  int bad = 0;
  // (1) compile-time term indices equal the table's.
  for (int l = 2; l <= 3; ++l) {
    const int n = 2 * l + 1;
    for (int mp = -l; mp <= l; ++mp) for (int m = -l; m <= l; ++m) {
      const int e = (mp + l) * n + (m + l);
      const int t0 = wrows::ck_first(l, mp, m), c = wrows::ck_count(l, mp, m), lo = wrows::ck_lo(mp, m);
      const int* cb = wt.ck_begin + wt.ck_begin_off[l];
      if (cb[e] != t0 || cb[e + 1] - cb[e] != c) { ++bad; printf("ck range l%d (%d,%d)\n", l, mp, m); }
      for (int k = 0; k < c; ++k) {
        const int rho = lo + k; const CkTermF tm = ck[wt.ck_off[l] + t0 + k];
        if (tm.a != (l + mp - rho) * 13 + (l - m - rho) || tm.b != (m - mp + rho) * 13 + rho) { ++bad; printf("ck term\n"); }
      }
    }
    for (int i = 0; i < n; ++i) for (int j = 0; j < n; ++j) {
      const int mi = i - l, mj = j - l; int k = 0;
      for (int x = 0; x < wrows::u_count(mi); ++x) for (int y = 0; y < wrows::u_count(mj); ++y, ++k) {
        const RealTermF tm = rt[wt.rt_off[l] + 4 * (i * n + j) + k];
        if (tm.idx != wrows::u_col(l, mi, x) * n + wrows::u_col(l, mj, y) || (tm.cre == 0 && tm.cim == 0)) { ++bad; printf("rt l%d %d %d k%d\n", l, i, j, k); }
      }
      for (; k < 4; ++k) { const RealTermF tm = rt[wt.rt_off[l] + 4 * (i * n + j) + k]; if (tm.cre != 0 || tm.cim != 0) { ++bad; printf("rt pad\n"); } }
    }
  }
  // (2) generator pattern: compact rows i couple to |m_k| <= min(l, 2) only.
  for (int l = 1; l <= 3; ++l) for (int a = 0; a < 2; ++a) for (int t = 0; t < wt.jnz_n[l][a]; ++t) {
    const GenNzF z = jnz[wt.jnz_off[l][a] + t];
    const int ri = z.i - (l - 1), mk = z.k - l;
    if (ri >= 0 && ri <= 2 && (mk < -2 || mk > 2)) { ++bad; printf("jnz outside l%d i%d k%d\n", l, z.i, z.k); }
  }
  // (3) rows and tilt vs the legacy loop, random q.
  std::mt19937 rng(7); std::normal_distribution<float> N(0, 1);
  double maxd_rows = 0, maxd_cpu = 0, maxd_G = 0; int nbits = 0;
  for (int it = 0; it < 20000; ++it) {
    float q[4]; float s = 0; for (auto& x : q) { x = N(rng); s += x * x; } s = 1 / std::sqrt(s); for (auto& x : q) x *= s;
    // legacy full blocks (float, table-driven)
    float D[84];
    using wrows::Cx;
    Cx pa[7], pb[7]; wrows::powers(q, pa, pb);
    for (int l = 2; l <= 3; ++l) {
      const int n = (2 * l + 1) * (2 * l + 1); Cx Dc[49];
      const int* cb = wt.ck_begin + wt.ck_begin_off[l]; const CkTermF* ckl = wt.ck + wt.ck_off[l];
      for (int e = 0; e < n; ++e) { float re = 0, im = 0;
        for (int t = cb[e]; t < cb[e + 1]; ++t) { const CkTermF tm = ckl[t];
          const int ai = tm.a / 13, aj = tm.a % 13, bk = tm.b / 13, bn = tm.b % 13;
          const Cx A = wrows::cmul(pa[ai], Cx{pa[aj].re, -pa[aj].im}); const Cx B = wrows::cmul(pb[bk], Cx{pb[bn].re, -pb[bn].im});
          const Cx p = wrows::cmul(A, B); re += tm.coef * p.re; im += tm.coef * p.im; }
        Dc[e] = Cx{re, im}; }
      const RealTermF* rtl = wt.rt + wt.rt_off[l]; const int off = l * (2 * l - 1) * (2 * l + 1) / 3;
      for (int e = 0; e < n; ++e) { float acc = 0; for (int k = 0; k < 4; ++k) acc += rtl[4 * e + k].cre * Dc[rtl[4 * e + k].idx].re - rtl[4 * e + k].cim * Dc[rtl[4 * e + k].idx].im; D[off + e] = acc; }
    }
    double qd[4] = {q[0], q[1], q[2], q[3]}; double Dd[84]; wigner_d(qd, 3, Dd, 0.0);
    float R2[5][5], R3[5][7];
    wrows::rows<2, 2>(pa, pb, wt.ck + wt.ck_off[2], wt.rt + wt.rt_off[2], R2);
    wrows::rows<3, 2>(pa, pb, wt.ck + wt.ck_off[3], wt.rt + wt.rt_off[3], R3);
    float F3[3][7]; wrows::rows<3, 1>(pa, pb, wt.ck + wt.ck_off[3], wt.rt + wt.rt_off[3], F3);
    for (int r = 0; r < 5; ++r) for (int c = 0; c < 5; ++c) { const float o = D[10 + r * 5 + c]; maxd_rows = fmax(maxd_rows, fabs(o - R2[r][c])); nbits += o != R2[r][c]; maxd_cpu = fmax(maxd_cpu, fabs(Dd[10 + r * 5 + c] - R2[r][c])); }
    for (int r = 0; r < 5; ++r) for (int c = 0; c < 7; ++c) { const float o = D[35 + (r + 1) * 7 + c]; maxd_rows = fmax(maxd_rows, fabs(o - R3[r][c])); nbits += o != R3[r][c]; maxd_cpu = fmax(maxd_cpu, fabs(Dd[35 + (r + 1) * 7 + c] - R3[r][c])); }
    for (int r = 0; r < 3; ++r) for (int c = 0; c < 7; ++c) nbits += F3[r][c] != R3[r + 1][c];
    // tilt: legacy sparse loop on D (blocks 2, 3; block 1 from the CPU D) vs tilt_block
    for (int e = 1; e < 10; ++e) D[e] = (float)Dd[e];
    float db[46]; for (auto& x : db) x = N(rng);
    float G0[2] = {0, 0};
    for (int l = 1; l <= 3; ++l) { const int n = 2 * l + 1, off = l * (2 * l - 1) * (2 * l + 1) / 3;
      for (int a = 0; a < 2; ++a) { const GenNzF* nz = wt.jnz + wt.jnz_off[l][a];
        for (int t = 0; t < wt.jnz_n[l][a]; ++t) { const int ri = nz[t].i - (l - 1); if (ri < 0 || ri > 2) continue;
          float dot = 0; for (int j = 0; j < n; ++j) dot += db[dc_off(l) + ri * n + j] * D[off + nz[t].k * n + j];
          G0[a] += nz[t].val * dot; } } }
    float jd[3][30] = {};
    for (int l = 1; l <= 3; ++l) for (int a = 0; a < 2; ++a) for (int t = 0; t < wt.jnz_n[l][a]; ++t) {
      const GenNzF z = jnz[wt.jnz_off[l][a] + t]; const int ri = z.i - (l - 1), mk = z.k - l;
      if (ri >= 0 && ri <= 2 && mk >= -2 && mk <= 2) jd[l - 1][a * 15 + ri * 5 + mk + 2] = z.val; }
    float G1[2] = {0, 0}; float D1[9]; for (int i = 0; i < 9; ++i) D1[i] = D[1 + i];
    // legacy order is per l: all of block 1's (x, y), then block 2's ...; G[a] sums in the same order.
    wrows::tilt_block1(D1, db + dc_off(1), jd[0], G1);
    wrows::tilt_block<2>(pa, pb, wt.ck + wt.ck_off[2], wt.rt + wt.rt_off[2], db + dc_off(2), jd[1], G1);
    wrows::tilt_block<3>(pa, pb, wt.ck + wt.ck_off[3], wt.rt + wt.rt_off[3], db + dc_off(3), jd[2], G1);
    for (int a = 0; a < 2; ++a) { maxd_G = fmax(maxd_G, fabs(G0[a] - G1[a]) / (1e-6 + fabs(G0[a]))); }
  }
  printf("table mismatches %d; rows vs legacy max |d| %.3g (%d entries differ in bits); rows vs CPU double %.3g; G rel diff %.3g\n",
         bad, maxd_rows, nbits, maxd_cpu, maxd_G);
  return bad != 0;
}
