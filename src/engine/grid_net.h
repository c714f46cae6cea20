#pragma once
// The SO(3) grid nets (docs/model.md §5.10-§5.13; backward §7.12), per node, forward and
// backward side by side. Three users, one core:
//   - message-node net (cross mode, §5.11): query = gated aggregate, context = pre_focus_mix(x);
//   - block FFN on the SO(3) grid (self mode, §5.12);
//   - read-out FFN, so3_readout "mlp" (self mode, §5.13).
//
// Framed operands are (J, c) row-major, row j = d K + p (packed degree row d, frame p), i.e. the
// (D, K c) frame-major channel packing of deepmd-kit viewed with one row per (d, p). Per node:
//   s = [X_L(row 0), X_R(row 0)]                   (the l = 0, k = 0 scalars, 2C)
//   glu:    P = B(A X_L (.) A X_R)
//   mlp:    U = Z W_L, V = Z W_R (Z = [X_L | X_R] per row in self mode; X_L / X_R in cross mode)
//           P = B(A U (.) A V) W_O
//   branch: U = X_L W_L, V = X_R W_R (n_br C wide); pi = softmax(s W_r);
//           O = sum_h pi_h (A U (.) A V)_h;  P = B(O) W_O
//   Y = P (.) sigmoid(s W_g);  Y(row 0) += silu(s_L) (.) s_R
// The backward recomputes the forward of each node (nothing is kept between the two passes but
// the caller's inputs), then runs the vector-Jacobian products of §7.12.
#include <vector>

#include "engine/linalg.h"
#include "engine/so3_grid.h"
#include "engine/threads.h"
#include "model/weights.h"

namespace sezm {

template <class T>
struct SO3GridMats {
  int K = 1, D = 1, J = 1, G = 1;
  Mat<T> A, B;  // (G, J), (J, G)
  SO3GridMats() = default;
  SO3GridMats(int L, int kmax) {
    const SO3Grid g = make_so3_grid(L, kmax);
    K = g.K; D = g.D; J = g.J; G = g.G;
    A.resize(G, J);
    B.resize(J, G);
    for (size_t i = 0; i < g.A.size(); ++i) {
      A.data()[i] = static_cast<T>(g.A[i]);
      B.data()[i] = static_cast<T>(g.B[i]);
    }
  }
};

// Per-node activations of the core (one per thread; reused across nodes).
template <class T>
struct GridNetWork {
  Mat<T> XL, XR, Zc, U, V, Fu, Fv, Hp, O, Pc, P, Y;
  RowVec<T> s, g, pi;
  // backward
  Mat<T> Pbar, Pcbar, Hbar, Obar, Fubar, Fvbar, Ubar, Vbar, Zbar, XLbar, XRbar;
  RowVec<T> sbar;
};

// ---- core (one node) ----------------------------------------------------------------------
// Inputs in wk.XL, wk.XR (J, C) and wk.s (2C); output wk.Y (J, C).
template <class T>
void grid_core_forward(const GridNetW<T>& w, const SO3GridMats<T>& gm, GridNetWork<T>& wk) {
  const int C = w.C;
  const Mat<T>* u = &wk.XL;
  const Mat<T>* v = &wk.XR;
  if (w.op == GridOp::MLP && !w.cross) {
    wk.Zc.resize(gm.J, 2 * C);
    wk.Zc.leftCols(C) = wk.XL;
    wk.Zc.rightCols(C) = wk.XR;
    wk.U.noalias() = wk.Zc * w.left;
    wk.V.noalias() = wk.Zc * w.right;
    u = &wk.U;
    v = &wk.V;
  } else if (w.op != GridOp::Product) {
    wk.U.noalias() = wk.XL * w.left;
    wk.V.noalias() = wk.XR * w.right;
    u = &wk.U;
    v = &wk.V;
  }
  wk.Fu.noalias() = gm.A * *u;
  wk.Fv.noalias() = gm.A * *v;
  wk.Hp = wk.Fu.cwiseProduct(wk.Fv);
  if (w.op == GridOp::Branch) {
    // Router softmax over branches from the invariant scalars (max-subtracted).
    wk.pi.noalias() = wk.s * w.router;
    const T mx = wk.pi.maxCoeff();
    wk.pi = (wk.pi.array() - mx).exp().matrix();
    wk.pi /= wk.pi.sum();
    wk.O = wk.pi[0] * wk.Hp.leftCols(C);
    for (int h = 1; h < w.n_br; ++h) wk.O += wk.pi[h] * wk.Hp.middleCols(h * C, C);
    wk.Pc.noalias() = gm.B * wk.O;
    wk.P.noalias() = wk.Pc * w.out;
  } else if (w.op == GridOp::MLP) {
    wk.Pc.noalias() = gm.B * wk.Hp;
    wk.P.noalias() = wk.Pc * w.out;
  } else {
    wk.P.noalias() = gm.B * wk.Hp;
  }
  // Scalar path (§5.10): gate every slot, SwiGLU of the scalars on the (l = 0, k = 0) slot.
  wk.g.noalias() = wk.s * w.scalar_gate;
  for (int c = 0; c < C; ++c) wk.g[c] = sigmoid(wk.g[c]);
  wk.Y = wk.P * wk.g.asDiagonal();
  for (int c = 0; c < C; ++c) wk.Y(0, c) += silu(wk.s[c]) * wk.s[C + c];
}

// Given wk.Y's adjoint `Ybar` (J, C), after grid_core_forward on the same inputs: wk.XLbar,
// wk.XRbar (J, C) and wk.sbar (2C), each overwritten.
template <class T>
void grid_core_backward(const GridNetW<T>& w, const SO3GridMats<T>& gm, const Mat<T>& Ybar, GridNetWork<T>& wk) {
  const int C = w.C;
  // Scalar path.
  wk.Pbar = Ybar * wk.g.asDiagonal();
  wk.sbar.resize(2 * C);
  RowVec<T> zbar(C);
  for (int c = 0; c < C; ++c) {
    const T gb = Ybar.col(c).dot(wk.P.col(c));
    zbar[c] = gb * wk.g[c] * (T(1) - wk.g[c]);
  }
  wk.sbar.noalias() = zbar * w.scalar_gate.transpose();
  for (int c = 0; c < C; ++c) {
    wk.sbar[c] += Ybar(0, c) * wk.s[C + c] * silu_grad(wk.s[c]);
    wk.sbar[C + c] += Ybar(0, c) * silu(wk.s[c]);
  }
  // Grid product.
  if (w.op == GridOp::Branch) {
    wk.Pcbar.noalias() = wk.Pbar * w.out.transpose();
    wk.Obar.noalias() = gm.B.transpose() * wk.Pcbar;
    wk.Hbar.resize(gm.G, w.n_br * C);
    RowVec<T> pibar(w.n_br);
    for (int h = 0; h < w.n_br; ++h) {
      wk.Hbar.middleCols(h * C, C) = wk.pi[h] * wk.Obar;
      pibar[h] = wk.Obar.cwiseProduct(wk.Hp.middleCols(h * C, C)).sum();
    }
    const T mean = wk.pi.dot(pibar);
    const RowVec<T> rbar = wk.pi.cwiseProduct((pibar.array() - mean).matrix());
    wk.sbar.noalias() += rbar * w.router.transpose();
  } else if (w.op == GridOp::MLP) {
    wk.Pcbar.noalias() = wk.Pbar * w.out.transpose();
    wk.Hbar.noalias() = gm.B.transpose() * wk.Pcbar;
  } else {
    wk.Hbar.noalias() = gm.B.transpose() * wk.Pbar;
  }
  wk.Fubar = wk.Hbar.cwiseProduct(wk.Fv);
  wk.Fvbar = wk.Hbar.cwiseProduct(wk.Fu);
  wk.Ubar.noalias() = gm.A.transpose() * wk.Fubar;
  wk.Vbar.noalias() = gm.A.transpose() * wk.Fvbar;
  if (w.op == GridOp::Product) {
    wk.XLbar = wk.Ubar;
    wk.XRbar = wk.Vbar;
  } else if (w.op == GridOp::MLP && !w.cross) {
    wk.Zbar.noalias() = wk.Ubar * w.left.transpose();
    wk.Zbar.noalias() += wk.Vbar * w.right.transpose();
    wk.XLbar = wk.Zbar.leftCols(C);
    wk.XRbar = wk.Zbar.rightCols(C);
  } else {
    wk.XLbar.noalias() = wk.Ubar * w.left.transpose();
    wk.XRbar.noalias() = wk.Vbar * w.right.transpose();
  }
}

// ---- self mode (FFN, read-out) ------------------------------------------------------------
// h (N, D, 2 K C): the caller's first linear, left operand in columns [0, KC), right in
// [KC, 2KC), frame-major inside each half. -> Y (N, D, K C).
template <class T>
void grid_self_load(const GridNetW<T>& w, const SO3GridMats<T>& gm, const T* hn, GridNetWork<T>& wk) {
  const int C = w.C, K = gm.K, KC = K * C;
  wk.XL.resize(gm.J, C);
  wk.XR.resize(gm.J, C);
  for (int d = 0; d < gm.D; ++d)
    for (int p = 0; p < K; ++p)
      for (int c = 0; c < C; ++c) {
        wk.XL(d * K + p, c) = hn[static_cast<size_t>(d) * 2 * KC + p * C + c];
        wk.XR(d * K + p, c) = hn[static_cast<size_t>(d) * 2 * KC + KC + p * C + c];
      }
  wk.s.resize(2 * C);
  wk.s << wk.XL.row(0), wk.XR.row(0);
}

template <class T>
void grid_self_forward(const GridNetW<T>& w, const SO3GridMats<T>& gm, const T* h, int N, T* Y) {
  const int C = w.C, KC = gm.K * C;
  ParallelErrors errors;  // nothing may leave the region (threads.h)
#pragma omp parallel
  {
    GridNetWork<T> wk;
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) errors.run([&] {
      grid_self_load(w, gm, h + static_cast<size_t>(n) * gm.D * 2 * KC, wk);
      grid_core_forward(w, gm, wk);
      view(Y + static_cast<size_t>(n) * gm.J * C, gm.J, C) = wk.Y;
    });
  }
  errors.rethrow();
}

// Y_bar (N, D, K C) -> h_bar (N, D, 2 K C), overwritten.
template <class T>
void grid_self_backward(const GridNetW<T>& w, const SO3GridMats<T>& gm, const T* h, int N, const T* Y_bar,
                        T* h_bar) {
  const int C = w.C, K = gm.K, KC = K * C;
  ParallelErrors errors;  // nothing may leave the region (threads.h)
#pragma omp parallel
  {
    GridNetWork<T> wk;
    Mat<T> Yb;
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) errors.run([&] {
      grid_self_load(w, gm, h + static_cast<size_t>(n) * gm.D * 2 * KC, wk);
      grid_core_forward(w, gm, wk);
      Yb = view(Y_bar + static_cast<size_t>(n) * gm.J * C, gm.J, C);
      grid_core_backward(w, gm, Yb, wk);
      wk.XLbar.row(0) += wk.sbar.leftCols(C);
      wk.XRbar.row(0) += wk.sbar.rightCols(C);
      T* hb = h_bar + static_cast<size_t>(n) * gm.D * 2 * KC;
      for (int d = 0; d < gm.D; ++d)
        for (int p = 0; p < K; ++p)
          for (int c = 0; c < C; ++c) {
            hb[static_cast<size_t>(d) * 2 * KC + p * C + c] = wk.XLbar(d * K + p, c);
            hb[static_cast<size_t>(d) * 2 * KC + KC + p * C + c] = wk.XRbar(d * K + p, c);
          }
    });
  }
  errors.rethrow();
}

// ---- cross mode (message-node, §5.11) -----------------------------------------------------
// Node n's core inputs in cross mode: X_L, X_R = its rows of u = q . E and v = x . E (J, C), and
// s = [q(row 0), x(row 0)], the raw l = 0 rows before the expansion.
template <class T>
void load_cross_operands(const SO3GridMats<T>& gm, int C, int n, const T* u, const T* v, const T* q, const T* x,
                         GridNetWork<T>& wk) {
  const size_t o = static_cast<size_t>(n) * gm.J * C;
  wk.XL = view(u + o, gm.J, C);
  wk.XR = view(v + o, gm.J, C);
  wk.s.resize(2 * C);
  wk.s << view(q + static_cast<size_t>(n) * gm.D * C, 1, C), view(x + static_cast<size_t>(n) * gm.D * C, 1, C);
}

// q, x (N, D, C) -> Z (N, D, C) = ((Y . Q) (.) rho) with Y the core output on X_L = q . E,
// X_R = x . E and s = [q(row 0), x(row 0)].
template <class T>
void grid_cross_forward(const GridNetW<T>& w, const SO3GridMats<T>& gm, int L, const T* q, const T* x, int N,
                        T* Z) {
  const int C = w.C, KC = gm.K * C;
  std::vector<T> u(static_cast<size_t>(N) * gm.D * KC), v(u.size()), Y(u.size());
  per_degree_linear(q, N, L, C, w.expand, u.data(), KC);
  per_degree_linear(x, N, L, C, w.expand, v.data(), KC);
  ParallelErrors errors;  // nothing may leave the region (threads.h)
#pragma omp parallel
  {
    GridNetWork<T> wk;
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) errors.run([&] {
      const size_t o = static_cast<size_t>(n) * gm.J * C;
      load_cross_operands(gm, C, n, u.data(), v.data(), q, x, wk);
      grid_core_forward(w, gm, wk);
      view(Y.data() + o, gm.J, C) = wk.Y;
    });
  }
  errors.rethrow();
  per_degree_linear(Y.data(), N, L, KC, w.contract, Z, C);
  auto Zm = view(Z, static_cast<Eigen::Index>(N) * gm.D, C);
  Zm = Zm * w.residual_scale.asDiagonal();
}

// Z_bar (N, D, C) -> accumulates q_bar and x_bar (N, D, C).
template <class T>
void grid_cross_backward(const GridNetW<T>& w, const SO3GridMats<T>& gm, int L, const T* q, const T* x, int N,
                         const T* Z_bar, T* q_bar, T* x_bar) {
  const int C = w.C, KC = gm.K * C;
  std::vector<T> u(static_cast<size_t>(N) * gm.D * KC), v(u.size()), Yb(u.size()), ub(u.size()), vb(u.size());
  per_degree_linear(q, N, L, C, w.expand, u.data(), KC);
  per_degree_linear(x, N, L, C, w.expand, v.data(), KC);
  {
    Mat<T> Zs = view(Z_bar, static_cast<Eigen::Index>(N) * gm.D, C) * w.residual_scale.asDiagonal();
    per_degree_linear(Zs.data(), N, L, C, w.contract, Yb.data(), KC, false, true);
  }
  std::vector<T> sb(static_cast<size_t>(N) * 2 * C);
  ParallelErrors errors;  // nothing may leave the region (threads.h)
#pragma omp parallel
  {
    GridNetWork<T> wk;
    Mat<T> Ybn;
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) errors.run([&] {
      const size_t o = static_cast<size_t>(n) * gm.J * C;
      load_cross_operands(gm, C, n, u.data(), v.data(), q, x, wk);
      grid_core_forward(w, gm, wk);
      Ybn = view(Yb.data() + o, gm.J, C);
      grid_core_backward(w, gm, Ybn, wk);
      view(ub.data() + o, gm.J, C) = wk.XLbar;
      view(vb.data() + o, gm.J, C) = wk.XRbar;
      view(sb.data() + static_cast<size_t>(n) * 2 * C, 1, 2 * C) = wk.sbar;
    });
  }
  errors.rethrow();
  per_degree_linear(ub.data(), N, L, KC, w.expand, q_bar, C, true, true);
  per_degree_linear(vb.data(), N, L, KC, w.expand, x_bar, C, true, true);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      q_bar[static_cast<size_t>(n) * gm.D * C + c] += sb[static_cast<size_t>(n) * 2 * C + c];
      x_bar[static_cast<size_t>(n) * gm.D * C + c] += sb[static_cast<size_t>(n) * 2 * C + C + c];
    }
}

}  // namespace sezm
