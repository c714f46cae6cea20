// SO(3) grid nets on the device (CPU twin: engine/grid_net.h; docs/model.md §5.10-§5.13,
// backward §7.12). Channel maps at coefficient resolution are the node steps' tiled linear
// (launch_per_degree_linear with one degree for the per-row maps W_L, W_R, W_O, W_g, W_r); the
// grid transforms are one thread per output element: the grid product O[n, g, c] (the to-grid
// sums over the J framed rows, the branch mix), the analysis Pc[n, j, c] = sum_g B[j, g] O[n, g, c]
// and their transposes, accumulated in double. Per-node scratch is carved by Scratch below
// (its size: grid_net_scratch_per_node, model_dev.cuh).
#include "grid_net.cuh"

#include <algorithm>

#include "node_steps.cuh"

namespace sezm::cuda {
namespace {

constexpr int kThreads = 256;
inline int blocks_for(long n) { return div_up(n, kThreads); }

// One batch's scratch (nb nodes), in the order grid_net_scratch_per_node counts it.
struct Scratch {
  float *in, *U, *V, *O, *Pc, *P, *s, *kz, *pil, *pi, *Y, *Zc;                      // forward
  float *Ybar, *Zs, *Pbar, *zbar, *sbar, *Pcbar, *Obar, *Fub, *Fvb, *prod, *Ubar, *Vbar, *Xbar, *pibar, *rbar;
  Scratch(const GridNetDev& g, const SO3GridDev& so3, int D, int nb, float* p) {
    const long J = so3.J, G = so3.G, C = g.C, Wm = grid_mid_width(g), Cp = grid_prod_width(g), n = nb;
    auto take = [&](long k) { float* r = p; p += n * k; return r; };
    in = take(J * 2 * C); U = take(J * Wm); V = take(J * Wm); O = take(G * Cp); Pc = take(J * Cp);
    P = take(J * C); s = take(2 * C); kz = take(C); pil = take(g.n_br); pi = take(g.n_br); Y = take(J * C);
    Zc = take(D * C);
    Ybar = take(J * C); Zs = take(D * C); Pbar = take(J * C); zbar = take(C); sbar = take(2 * C);
    Pcbar = take(J * Cp); Obar = take(G * Cp); Fub = take(G * Wm); Fvb = take(G * Wm); prod = take(G * Wm);
    Ubar = take(J * Wm); Vbar = take(J * Wm); Xbar = take(J * 2 * C); pibar = take(g.n_br); rbar = take(g.n_br);
  }
  // The two operands: one (nb, J, 2C) array for the self-mode MLP, else X_L then X_R (nb, J, C).
  float* XL(const GridNetDev& g, int nb, int J) const { (void)g; (void)nb; (void)J; return in; }
  float* XR(const GridNetDev& g, int nb, int J) const { return in + (long)nb * J * g.C; }
};
inline bool mlp_self(const GridNetDev& g) { return g.op == 1 && !g.cross; }

// ---- kernels ----
// Self-mode operands from h (nb, D, 2KC); s = the (0, 0) rows of both halves.
__global__ void gather_self_k(int nb, int J, int K, int C, int zcat, const float* __restrict__ h, float* in,
                              float* s) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * J * C) return;
  const int c = idx % C, j = (idx / C) % J, n = idx / ((long)C * J);
  const int d = j / K, p = j % K, KC = K * C, D = J / K;
  const float* hr = h + ((size_t)n * D + d) * 2 * KC;
  const float left = hr[p * C + c], right = hr[KC + p * C + c];
  if (zcat) {
    in[((size_t)n * J + j) * 2 * C + c] = left;
    in[((size_t)n * J + j) * 2 * C + C + c] = right;
  } else {
    in[((size_t)n * J + j) * C + c] = left;
    in[(size_t)nb * J * C + ((size_t)n * J + j) * C + c] = right;
  }
  if (j == 0) {
    s[(size_t)n * 2 * C + c] = left;
    s[(size_t)n * 2 * C + C + c] = right;
  }
}

// Cross-mode scalars: s = [q(l = 0), x(l = 0)] (raw rows, before the frame expansion).
__global__ void cross_scalars_k(int nb, int D, int C, const float* __restrict__ q, const float* __restrict__ x,
                                float* s) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * C) return;
  const int c = idx % C, n = idx / C;
  s[(size_t)n * 2 * C + c] = q[(size_t)n * D * C + c];
  s[(size_t)n * 2 * C + C + c] = x[(size_t)n * D * C + c];
}

// Router softmax over branches, per node (max-subtracted, as the CPU engine).
__global__ void softmax_rows_k(int nb, int nbr, const float* __restrict__ logit, float* pi) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= nb) return;
  const float* l = logit + (size_t)n * nbr;
  float mx = l[0];
  for (int h = 1; h < nbr; ++h) mx = fmaxf(mx, l[h]);
  double den = 0.0;
  for (int h = 0; h < nbr; ++h) den += exp((double)(l[h] - mx));
  for (int h = 0; h < nbr; ++h) pi[(size_t)n * nbr + h] = (float)(exp((double)(l[h] - mx)) / den);
}

// O[n, g, c] = sum_h pi_h (A U_h)(g, c) (A V_h)(g, c)  (one branch without a router: pi = 1).
__global__ void grid_product_k(int nb, int J, int G, int Wm, int Cp, int nbr, const float* __restrict__ A,
                               const float* __restrict__ U, const float* __restrict__ V,
                               const float* __restrict__ pi, float* O) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * G * Cp) return;
  const int c = idx % Cp, g = (idx / Cp) % G, n = idx / ((long)Cp * G);
  const float* a = A + (size_t)g * J;
  double o = 0.0;
  for (int h = 0; h < nbr; ++h) {
    const float* u = U + (size_t)n * J * Wm + h * Cp + c;
    const float* v = V + (size_t)n * J * Wm + h * Cp + c;
    double fu = 0.0, fv = 0.0;
    for (int j = 0; j < J; ++j) {
      fu += (double)a[j] * u[(size_t)j * Wm];
      fv += (double)a[j] * v[(size_t)j * Wm];
    }
    o += (pi ? (double)pi[(size_t)n * nbr + h] : 1.0) * fu * fv;
  }
  O[idx] = (float)o;
}

// Out[n, j, c] = sum_g M[j, g] In[n, g, c]: the analysis B (M = B, (J, G)) or, transposed, the
// synthesis adjoint A^T (M = A read as (G, J): pass transpose = 1).
__global__ void grid_contract_k(int nb, int Jo, int Gi, int W, const float* __restrict__ M, int transpose,
                                const float* __restrict__ In, float* Out) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * Jo * W) return;
  const int c = idx % W, j = (idx / W) % Jo, n = idx / ((long)W * Jo);
  const float* x = In + (size_t)n * Gi * W + c;
  double acc = 0.0;
  if (transpose)
    for (int g = 0; g < Gi; ++g) acc += (double)M[(size_t)g * Jo + j] * x[(size_t)g * W];
  else
    for (int g = 0; g < Gi; ++g) acc += (double)M[(size_t)j * Gi + g] * x[(size_t)g * W];
  Out[idx] = (float)acc;
}

// Y = P sigmoid(kz) + [row 0] silu(s_L) s_R.
__global__ void scalar_path_k(int nb, int J, int C, const float* __restrict__ P, const float* __restrict__ s,
                              const float* __restrict__ kz, float* Y) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * J * C) return;
  const int c = idx % C, j = (idx / C) % J, n = idx / ((long)C * J);
  float y = P[idx] * sigmoidf_(kz[(size_t)n * C + c]);
  if (j == 0) y += siluf_(s[(size_t)n * 2 * C + c]) * s[(size_t)n * 2 * C + C + c];
  Y[idx] = y;
}

// A[n, d, c] += Zc[n, d, c] rho[c] (the message-node residual with its scale).
__global__ void residual_scale_add_k(long total, int C, const float* __restrict__ Zc, const float* __restrict__ rho,
                                     float* A) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < total) A[idx] += Zc[idx] * rho[idx % C];
}
__global__ void scale_k(long total, int C, const float* __restrict__ Z, const float* __restrict__ rho, float* out) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < total) out[idx] = Z[idx] * rho[idx % C];
}

// Scalar path backward, per (node, channel): P_bar = Y_bar kappa; z_bar = (sum_j Y_bar P)
// kappa (1 - kappa); s_bar = the SwiGLU terms (the gate's W_g^T z_bar is added by a linear).
__global__ void scalar_path_backward_k(int nb, int J, int C, const float* __restrict__ Ybar,
                                       const float* __restrict__ P, const float* __restrict__ s,
                                       const float* __restrict__ kz, float* Pbar, float* zbar, float* sbar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * C) return;
  const int c = idx % C, n = idx / C;
  const float k = sigmoidf_(kz[idx]);
  double kb = 0.0;
  for (int j = 0; j < J; ++j) {
    const size_t i = ((size_t)n * J + j) * C + c;
    kb += (double)Ybar[i] * P[i];
    Pbar[i] = Ybar[i] * k;
  }
  zbar[idx] = (float)(kb * k * (1.0 - k));
  const float y0 = Ybar[(size_t)n * J * C + c], sl = s[(size_t)n * 2 * C + c], sr = s[(size_t)n * 2 * C + C + c];
  sbar[(size_t)n * 2 * C + c] = y0 * sr * silu_gradf_(sl);
  sbar[(size_t)n * 2 * C + C + c] = y0 * siluf_(sl);
}

// Grid product backward per (node, grid point, mid channel cm): F_u_bar = H_bar F_v,
// F_v_bar = H_bar F_u with H_bar = pi_h O_bar (branch) or O_bar; prod = O_bar F_u F_v for the
// router's adjoint.
__global__ void grid_product_backward_k(int nb, int J, int G, int Wm, int Cp, int branch,
                                        const float* __restrict__ A, const float* __restrict__ U,
                                        const float* __restrict__ V, const float* __restrict__ pi, int nbr,
                                        const float* __restrict__ Obar, float* Fub, float* Fvb, float* prod) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * G * Wm) return;
  const int cm = idx % Wm, g = (idx / Wm) % G, n = idx / ((long)Wm * G);
  const int h = branch ? cm / Cp : 0, c = branch ? cm % Cp : cm;
  const float* a = A + (size_t)g * J;
  const float* u = U + (size_t)n * J * Wm + cm;
  const float* v = V + (size_t)n * J * Wm + cm;
  double fu = 0.0, fv = 0.0;
  for (int j = 0; j < J; ++j) {
    fu += (double)a[j] * u[(size_t)j * Wm];
    fv += (double)a[j] * v[(size_t)j * Wm];
  }
  const double ob = Obar[((size_t)n * G + g) * Cp + c];
  const double hb = branch ? pi[(size_t)n * nbr + h] * ob : ob;
  Fub[idx] = (float)(hb * fv);
  Fvb[idx] = (float)(hb * fu);
  if (branch) prod[idx] = (float)(ob * fu * fv);
}

// pi_bar[n, h] = sum_{g, c} prod[n, g, h Cp + c]: one CTA per (node, branch), fixed order.
__global__ void branch_sum_k(int G, int Wm, int Cp, int nbr, const float* __restrict__ prod, float* pibar) {
  __shared__ double red[kThreads / 32];
  const int n = blockIdx.x / nbr, h = blockIdx.x % nbr;
  double v = 0.0;
  for (int i = threadIdx.x; i < G * Cp; i += blockDim.x)
    v += prod[((size_t)n * G + i / Cp) * Wm + h * Cp + i % Cp];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < (int)blockDim.x / 32; ++w) t += red[w];
    pibar[blockIdx.x] = (float)t;
  }
}

// Router softmax backward: r_bar = pi (pi_bar - pi . pi_bar).
__global__ void softmax_backward_k(int nb, int nbr, const float* __restrict__ pi, const float* __restrict__ pibar,
                                   float* rbar) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= nb) return;
  double m = 0.0;
  for (int h = 0; h < nbr; ++h) m += (double)pi[(size_t)n * nbr + h] * pibar[(size_t)n * nbr + h];
  for (int h = 0; h < nbr; ++h)
    rbar[(size_t)n * nbr + h] = (float)(pi[(size_t)n * nbr + h] * (pibar[(size_t)n * nbr + h] - m));
}

// Self-mode input adjoint into h_bar (nb, D, 2KC), with s_bar on the (0, 0) rows.
__global__ void scatter_self_k(int nb, int J, int K, int C, int zcat, const float* __restrict__ Xbar,
                               const float* __restrict__ sbar, float* hbar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * J * C) return;
  const int c = idx % C, j = (idx / C) % J, n = idx / ((long)C * J);
  const int d = j / K, p = j % K, KC = K * C, D = J / K;
  float left, right;
  if (zcat) {
    left = Xbar[((size_t)n * J + j) * 2 * C + c];
    right = Xbar[((size_t)n * J + j) * 2 * C + C + c];
  } else {
    left = Xbar[((size_t)n * J + j) * C + c];
    right = Xbar[(size_t)nb * J * C + ((size_t)n * J + j) * C + c];
  }
  if (j == 0) {
    left += sbar[(size_t)n * 2 * C + c];
    right += sbar[(size_t)n * 2 * C + C + c];
  }
  float* hr = hbar + ((size_t)n * D + d) * 2 * KC;
  hr[p * C + c] = left;
  hr[KC + p * C + c] = right;
}

// Cross-mode scalar adjoints into the raw l = 0 rows: q_bar += s_bar_L, x_bar += s_bar_R.
__global__ void cross_scalar_bar_k(int nb, int D, int C, const float* __restrict__ sbar, float* qbar, float* xbar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * C) return;
  const int c = idx % C, n = idx / C;
  qbar[(size_t)n * D * C + c] += sbar[(size_t)n * 2 * C + c];
  xbar[(size_t)n * D * C + c] += sbar[(size_t)n * 2 * C + C + c];
}

// ---- the core on one batch (docs/model.md §5.10.3) ----
// Operands already in sc.in (and sc.s); leaves P, kz, pi (and U, V) for the backward, Y the output.
void core_forward(const SO3GridDev& so3, const GridNetDev& g, int nb, Scratch& sc, float* Y, cudaStream_t s) {
  const int J = so3.J, G = so3.G, C = g.C, Wm = grid_mid_width(g), Cp = grid_prod_width(g);
  const long rows = (long)nb * J;
  const float* U = sc.XL(g, nb, J);
  const float* V = sc.XR(g, nb, J);
  if (mlp_self(g)) {
    launch_per_degree_linear((int)rows, 0, 2 * C, Wm, sc.in, g.left, sc.U, false, false, s);
    launch_per_degree_linear((int)rows, 0, 2 * C, Wm, sc.in, g.right, sc.V, false, false, s);
    U = sc.U; V = sc.V;
  } else if (g.op != 0) {
    launch_per_degree_linear((int)rows, 0, C, Wm, sc.XL(g, nb, J), g.left, sc.U, false, false, s);
    launch_per_degree_linear((int)rows, 0, C, Wm, sc.XR(g, nb, J), g.right, sc.V, false, false, s);
    U = sc.U; V = sc.V;
  }
  const float* pi = nullptr;
  if (g.op == 2) {
    launch_per_degree_linear(nb, 0, 2 * C, g.n_br, sc.s, g.router, sc.pil, false, false, s);
    softmax_rows_k<<<blocks_for(nb), kThreads, 0, s>>>(nb, g.n_br, sc.pil, sc.pi);
    SEZM_LAUNCH("grid router softmax");
    pi = sc.pi;
  }
  grid_product_k<<<blocks_for((long)nb * G * Cp), kThreads, 0, s>>>(nb, J, G, Wm, Cp, g.op == 2 ? g.n_br : 1,
                                                                    so3.A, U, V, pi, sc.O);
  SEZM_LAUNCH("grid product");
  grid_contract_k<<<blocks_for(rows * Cp), kThreads, 0, s>>>(nb, J, G, Cp, so3.B, 0, sc.O, sc.Pc);
  SEZM_LAUNCH("grid analysis");
  if (g.op == 0)
    SEZM_CUDA(cudaMemcpyAsync(sc.P, sc.Pc, rows * C * sizeof(float), cudaMemcpyDeviceToDevice, s));
  else
    launch_per_degree_linear((int)rows, 0, Cp, C, sc.Pc, g.out, sc.P, false, false, s);
  launch_per_degree_linear(nb, 0, 2 * C, C, sc.s, g.sg, sc.kz, false, false, s);
  scalar_path_k<<<blocks_for(rows * C), kThreads, 0, s>>>(nb, J, C, sc.P, sc.s, sc.kz, Y);
  SEZM_LAUNCH("grid scalar path");
}

// Y_bar (nb, J, C) -> sc.Xbar (the operands' adjoint, laid out as sc.in) and sc.sbar, after
// core_forward on the same operands.
void core_backward(const SO3GridDev& so3, const GridNetDev& g, int nb, Scratch& sc, const float* Ybar,
                   cudaStream_t s) {
  const int J = so3.J, G = so3.G, C = g.C, Wm = grid_mid_width(g), Cp = grid_prod_width(g);
  const long rows = (long)nb * J;
  scalar_path_backward_k<<<blocks_for((long)nb * C), kThreads, 0, s>>>(nb, J, C, Ybar, sc.P, sc.s, sc.kz, sc.Pbar,
                                                                       sc.zbar, sc.sbar);
  SEZM_LAUNCH("grid scalar path backward");
  launch_per_degree_linear(nb, 0, C, 2 * C, sc.zbar, g.sg, sc.sbar, true, true, s);
  const float* Pcbar = sc.Pbar;
  if (g.op != 0) {
    launch_per_degree_linear((int)rows, 0, C, Cp, sc.Pbar, g.out, sc.Pcbar, true, false, s);
    Pcbar = sc.Pcbar;
  }
  // O_bar = B^T Pc_bar: B read as (J, G), contracted over j.
  grid_contract_k<<<blocks_for((long)nb * G * Cp), kThreads, 0, s>>>(nb, G, J, Cp, so3.B, 1, Pcbar, sc.Obar);
  SEZM_LAUNCH("grid analysis backward");
  const bool branch = g.op == 2;
  const float* U = g.op == 0 ? sc.XL(g, nb, J) : sc.U;
  const float* V = g.op == 0 ? sc.XR(g, nb, J) : sc.V;
  grid_product_backward_k<<<blocks_for((long)nb * G * Wm), kThreads, 0, s>>>(
      nb, J, G, Wm, Cp, branch ? 1 : 0, so3.A, U, V, branch ? sc.pi : nullptr, g.n_br, sc.Obar, sc.Fub, sc.Fvb,
      sc.prod);
  SEZM_LAUNCH("grid product backward");
  if (branch) {
    branch_sum_k<<<nb * g.n_br, kThreads, 0, s>>>(G, Wm, Cp, g.n_br, sc.prod, sc.pibar);
    SEZM_LAUNCH("grid router sums");
    softmax_backward_k<<<blocks_for(nb), kThreads, 0, s>>>(nb, g.n_br, sc.pi, sc.pibar, sc.rbar);
    SEZM_LAUNCH("grid router backward");
    launch_per_degree_linear(nb, 0, g.n_br, 2 * C, sc.rbar, g.router, sc.sbar, true, true, s);
  }
  // U_bar = A^T F_u_bar: A read as (G, J), contracted over g.
  grid_contract_k<<<blocks_for(rows * Wm), kThreads, 0, s>>>(nb, J, G, Wm, so3.A, 1, sc.Fub, sc.Ubar);
  grid_contract_k<<<blocks_for(rows * Wm), kThreads, 0, s>>>(nb, J, G, Wm, so3.A, 1, sc.Fvb, sc.Vbar);
  SEZM_LAUNCH("grid synthesis backward");
  if (g.op == 0) {
    SEZM_CUDA(cudaMemcpyAsync(sc.Xbar, sc.Ubar, rows * C * sizeof(float), cudaMemcpyDeviceToDevice, s));
    SEZM_CUDA(cudaMemcpyAsync(sc.Xbar + rows * C, sc.Vbar, rows * C * sizeof(float), cudaMemcpyDeviceToDevice, s));
  } else if (mlp_self(g)) {
    launch_per_degree_linear((int)rows, 0, Wm, 2 * C, sc.Ubar, g.left, sc.Xbar, true, false, s);
    launch_per_degree_linear((int)rows, 0, Wm, 2 * C, sc.Vbar, g.right, sc.Xbar, true, true, s);
  } else {
    launch_per_degree_linear((int)rows, 0, Wm, C, sc.Ubar, g.left, sc.Xbar, true, false, s);
    launch_per_degree_linear((int)rows, 0, Wm, C, sc.Vbar, g.right, sc.Xbar + rows * C, true, false, s);
  }
}

void self_forward_batch(const SO3GridDev& so3, const GridNetDev& g, int D, int nb, const float* h, float* Y,
                        float* scratch, cudaStream_t s) {
  Scratch sc(g, so3, D, nb, scratch);
  gather_self_k<<<blocks_for((long)nb * so3.J * g.C), kThreads, 0, s>>>(nb, so3.J, so3.K, g.C, mlp_self(g), h,
                                                                       sc.in, sc.s);
  SEZM_LAUNCH("grid gather");
  core_forward(so3, g, nb, sc, Y, s);
}

void self_backward_batch(const SO3GridDev& so3, const GridNetDev& g, int D, int nb, const float* h,
                         const float* Ybar, float* hbar, float* scratch, cudaStream_t s) {
  Scratch sc(g, so3, D, nb, scratch);
  gather_self_k<<<blocks_for((long)nb * so3.J * g.C), kThreads, 0, s>>>(nb, so3.J, so3.K, g.C, mlp_self(g), h,
                                                                       sc.in, sc.s);
  SEZM_LAUNCH("grid gather");
  core_forward(so3, g, nb, sc, sc.Y, s);
  core_backward(so3, g, nb, sc, Ybar, s);
  scatter_self_k<<<blocks_for((long)nb * so3.J * g.C), kThreads, 0, s>>>(nb, so3.J, so3.K, g.C, mlp_self(g),
                                                                        sc.Xbar, sc.sbar, hbar);
  SEZM_LAUNCH("grid scatter");
}

// Cross-mode operands: X_L = q E, X_R = x E (per degree), s = raw l = 0 rows.
void cross_gather(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int nb, const float* q, const float* x,
                  Scratch& sc, cudaStream_t s) {
  const int KC = so3.K * g.C;
  launch_per_degree_linear(nb, d.L, g.C, KC, q, g.expand, sc.XL(g, nb, so3.J), false, false, s);
  launch_per_degree_linear(nb, d.L, g.C, KC, x, g.expand, sc.XR(g, nb, so3.J), false, false, s);
  cross_scalars_k<<<blocks_for((long)nb * g.C), kThreads, 0, s>>>(nb, d.D, g.C, q, x, sc.s);
  SEZM_LAUNCH("grid cross scalars");
}

}  // namespace

// ---- public launchers: batches of kGridBatch nodes ----
void launch_grid_self_forward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, const float* h,
                              float* Y, float* scratch, cudaStream_t s) {
  const size_t inW = (size_t)d.D * 2 * so3.K * g.C, outW = (size_t)d.D * so3.K * g.C;
  for (int n0 = 0; n0 < n; n0 += kGridBatch)
    self_forward_batch(so3, g, d.D, std::min(kGridBatch, n - n0), h + n0 * inW, Y + n0 * outW, scratch, s);
}

void launch_grid_self_backward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, const float* h,
                               const float* Y_bar, float* h_bar, float* scratch, cudaStream_t s) {
  const size_t inW = (size_t)d.D * 2 * so3.K * g.C, outW = (size_t)d.D * so3.K * g.C;
  for (int n0 = 0; n0 < n; n0 += kGridBatch)
    self_backward_batch(so3, g, d.D, std::min(kGridBatch, n - n0), h + n0 * inW, Y_bar + n0 * outW,
                        h_bar + n0 * inW, scratch, s);
}

void launch_grid_cross_forward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, float* A,
                               const float* x, float* scratch, cudaStream_t s) {
  const size_t W = (size_t)d.D * g.C;
  const int KC = so3.K * g.C;
  for (int n0 = 0; n0 < n; n0 += kGridBatch) {
    const int nb = std::min(kGridBatch, n - n0);
    float* An = A + n0 * W;
    Scratch sc(g, so3, d.D, nb, scratch);
    cross_gather(d, so3, g, nb, An, x + n0 * W, sc, s);
    core_forward(so3, g, nb, sc, sc.Y, s);
    launch_per_degree_linear(nb, d.L, KC, g.C, sc.Y, g.contract, sc.Zc, false, false, s);
    const long total = (long)nb * W;
    residual_scale_add_k<<<blocks_for(total), kThreads, 0, s>>>(total, g.C, sc.Zc, g.rscale, An);
    SEZM_LAUNCH("grid message-node residual");
  }
}

void launch_grid_cross_backward(const Dims& d, const SO3GridDev& so3, const GridNetDev& g, int n, const float* A,
                                const float* x, float* A_bar, float* x_bar, float* scratch, cudaStream_t s) {
  const size_t W = (size_t)d.D * g.C;
  const int KC = so3.K * g.C;
  for (int n0 = 0; n0 < n; n0 += kGridBatch) {
    const int nb = std::min(kGridBatch, n - n0);
    float* Ab = A_bar + n0 * W;
    float* xb = x_bar + n0 * W;
    Scratch sc(g, so3, d.D, nb, scratch);
    // Y_bar = (Z_bar rho) Q^T per degree; Z_bar is A_bar (read before A_bar is updated below).
    const long total = (long)nb * W;
    scale_k<<<blocks_for(total), kThreads, 0, s>>>(total, g.C, Ab, g.rscale, sc.Zs);
    SEZM_LAUNCH("grid message-node scale backward");
    launch_per_degree_linear(nb, d.L, g.C, KC, sc.Zs, g.contract, sc.Ybar, true, false, s);
    cross_gather(d, so3, g, nb, A + n0 * W, x + n0 * W, sc, s);
    core_forward(so3, g, nb, sc, sc.Y, s);
    core_backward(so3, g, nb, sc, sc.Ybar, s);
    const long rows = (long)nb * so3.J;
    launch_per_degree_linear(nb, d.L, KC, g.C, sc.Xbar, g.expand, Ab, true, true, s);
    launch_per_degree_linear(nb, d.L, KC, g.C, sc.Xbar + rows * g.C, g.expand, xb, true, false, s);
    cross_scalar_bar_k<<<blocks_for((long)nb * g.C), kThreads, 0, s>>>(nb, d.D, g.C, sc.sbar, Ab, xb);
    SEZM_LAUNCH("grid cross scalar backward");
  }
}

namespace {

// desc[n, o] = X[n, 0, o] + sum_i Y[n, 0, i] W2[0][i, o].
__global__ void readout_row0_k(int nb, int D, int C, int KH, const float* __restrict__ X, const float* __restrict__ Y,
                               const float* __restrict__ W2, float* desc) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * C) return;
  const int o = idx % C, n = idx / C;
  const float* y = Y + (size_t)n * D * KH;
  double acc = X[(size_t)n * D * C + o];
  for (int i = 0; i < KH; ++i) acc += (double)y[i] * W2[(size_t)i * C + o];
  desc[idx] = (float)acc;
}
// Y_bar[n, 0, i] = sum_o desc_bar[n, o] W2[0][i, o]; rows d > 0 zero.
__global__ void readout_row0_backward_k(int nb, int D, int C, int KH, const float* __restrict__ dbar,
                                        const float* __restrict__ W2, float* Ybar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * D * KH) return;
  const int i = idx % KH, d = (idx / KH) % D, n = idx / ((long)KH * D);
  double acc = 0.0;
  if (d == 0)
    for (int o = 0; o < C; ++o) acc += (double)dbar[(size_t)n * C + o] * W2[(size_t)i * C + o];
  Ybar[idx] = (float)acc;
}
__global__ void add_row0_k(int nb, int D, int C, const float* __restrict__ dbar, float* Xbar) {
  const long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)nb * C) return;
  const int c = idx % C, n = idx / C;
  Xbar[(size_t)n * D * C + c] += dbar[idx];
}

}  // namespace

// The read-out's own scratch (h, Y, Y_bar, h_bar: 6 D K H per node) comes first, the net's after.
void launch_grid_readout_forward(const Dims& d, const ModelWDev& mw, int n, const float* X, float* desc,
                                 float* scratch, cudaStream_t s) {
  const SO3GridDev& so3 = mw.so3;
  const GridNetDev& g = mw.ro_grid;
  const int KH = so3.K * g.C;
  for (int n0 = 0; n0 < n; n0 += kGridBatch) {
    const int nb = std::min(kGridBatch, n - n0);
    float* h = scratch;
    float* Y = h + (size_t)kGridBatch * d.D * 2 * KH;
    float* net = scratch + (size_t)kGridBatch * 6 * d.D * KH;
    const float* Xn = X + (size_t)n0 * d.D * d.C;
    launch_per_degree_linear(nb, d.L, d.C, 2 * KH, Xn, mw.ro3_w1, h, false, false, s);
    self_forward_batch(so3, g, d.D, nb, h, Y, net, s);
    readout_row0_k<<<blocks_for((long)nb * d.C), kThreads, 0, s>>>(nb, d.D, d.C, KH, Xn, Y, mw.ro3_w2,
                                                                   desc + (size_t)n0 * d.C);
    SEZM_LAUNCH("grid read-out");
  }
}

void launch_grid_readout_backward(const Dims& d, const ModelWDev& mw, int n, const float* X, const float* desc_bar,
                                  float* X_bar, float* scratch, cudaStream_t s) {
  const SO3GridDev& so3 = mw.so3;
  const GridNetDev& g = mw.ro_grid;
  const int KH = so3.K * g.C;
  for (int n0 = 0; n0 < n; n0 += kGridBatch) {
    const int nb = std::min(kGridBatch, n - n0);
    float* h = scratch;
    float* Ybar = h + (size_t)kGridBatch * d.D * 2 * KH + (size_t)kGridBatch * d.D * KH;
    float* hbar = Ybar + (size_t)kGridBatch * d.D * KH;
    float* net = scratch + (size_t)kGridBatch * 6 * d.D * KH;
    const float* Xn = X + (size_t)n0 * d.D * d.C;
    const float* db = desc_bar + (size_t)n0 * d.C;
    float* Xb = X_bar + (size_t)n0 * d.D * d.C;
    launch_per_degree_linear(nb, d.L, d.C, 2 * KH, Xn, mw.ro3_w1, h, false, false, s);
    readout_row0_backward_k<<<blocks_for((long)nb * d.D * KH), kThreads, 0, s>>>(nb, d.D, d.C, KH, db, mw.ro3_w2,
                                                                                 Ybar);
    SEZM_LAUNCH("grid read-out backward");
    self_backward_batch(so3, g, d.D, nb, h, Ybar, hbar, net, s);
    launch_per_degree_linear(nb, d.L, 2 * KH, d.C, hbar, mw.ro3_w1, Xb, true, false, s);
    add_row0_k<<<blocks_for((long)nb * d.C), kThreads, 0, s>>>(nb, d.D, d.C, db, Xb);
    SEZM_LAUNCH("grid read-out residual backward");
  }
}

}  // namespace sezm::cuda
