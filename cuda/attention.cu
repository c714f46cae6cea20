// Attention on the device, forward and backward side by side (CPU twin: engine/attention.h;
// docs/model.md §5.7, backward §7.8): q/k projections and gate per (node, focus), the envelope softmax (one
// warp per centre and focus forward, one CTA per centre backward), the output gate.
#include "attention.cuh"
#include "cta_reduce.cuh"
#include "gate_warp.cuh"

namespace sezm::cuda {
namespace {

constexpr int kMaxCf = 64;

// The q/k projections, norms and gate per (node, focus) run a warp each (four per CTA). They ran
// a thread each, which walked Cf x Cf products alone with the normed row in local memory (8,192
// threads for 4,096 nodes, a few dozen CTAs). Now lane b takes the outputs b, b + 32 (the same
// serial sum over a, so the same bits), the normed row sits in the warp's shared row, and the
// norms' serial sums of Cf terms are formed by every lane alike (the old thread's bits).
constexpr int kNodeWarps = 4;

// y = x rho scale into the warp's shared row (each lane its elements c = lane (mod 32)); rho.
__device__ float scalar_rms_warp(const float* x, int n, const float* scale, float eps, float* y) {
  float s = 0.0f;
  for (int c = 0; c < n; ++c) s += x[c] * x[c];
  const float rho = rsqrtf(s / n + eps);
  for (int c = threadIdx.x % 32; c < n; c += 32) y[c] = x[c] * rho * scale[c];
  __syncwarp();
  return rho;
}
// xb += the norm's transpose of yb (the warp's shared row); each lane its elements of xb.
__device__ void scalar_rms_backward_warp(const float* x, int n, const float* scale, float rho, const float* yb,
                                         float* xb) {
  float dot = 0.0f;
  for (int c = 0; c < n; ++c) dot += yb[c] * scale[c] * x[c] * rho;
  for (int c = threadIdx.x % 32; c < n; c += 32) xb[c] += rho * (yb[c] * scale[c] - x[c] * rho * dot / n);
}

__global__ void __launch_bounds__(32 * kNodeWarps) attention_node_forward_k(Dims d, BlockWDev w, int N, int NT,
                                                                             const float* __restrict__ H, float* q,
                                                                             float* k, float* qk_rho, float* gate_rho,
                                                                             float* gamma) {
  __shared__ float hs[kNodeWarps][kMaxCf];
  const int wi = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long i = (long)blockIdx.x * kNodeWarps + wi;
  if (i >= (long)NT * d.F) return;  // whole warps
  const int n = i / d.F, f = i % d.F, Cf = d.Cf;
  const float* h0 = H + (size_t)n * d.D * d.Cw + f * Cf;
  float* hn = hs[wi];
  const float rq = scalar_rms_warp(h0, Cf, w.qk_norm + f * Cf, d.eps, hn);
  if (lane == 0) qk_rho[i] = rq;
  const float* Wq = w.Wq + (size_t)f * Cf * Cf;
  const float* Wk = w.Wk + (size_t)f * Cf * Cf;
  for (int b = lane; b < Cf; b += 32) {
    float sq = 0.0f, sk = 0.0f;
    for (int a = 0; a < Cf; ++a) {
      sq += hn[a] * Wq[a * Cf + b];
      sk += hn[a] * Wk[a * Cf + b];
    }
    q[(size_t)n * d.Cw + f * Cf + b] = sq;
    k[(size_t)n * d.Cw + f * Cf + b] = sk;
  }
  if (n < N) {
    __syncwarp();  // every lane has read hn
    const float rg = scalar_rms_warp(h0, Cf, w.gate_norm + f * Cf, d.eps, hn);
    if (lane == 0) gate_rho[i] = rg;
    float z = 0.0f;
    for (int a = 0; a < Cf; ++a) z += hn[a] * w.gate_w[a * d.F + f];
    if (lane == 0) gamma[i] = sigmoidf_(z);
  }
}

// One warp per (centre, focus), lanes over the centre's edges: logits, max, denominator, alpha
// (docs/model.md §5.7.2, shifted form). Warp reductions in a fixed tree: deterministic.
// kStaged: the warp copies each batch of 32 edges' key rows (gathered by source), then their
// radial rows, into its shared tile (rows padded by one float: conflict-free), lanes along the
// row, so that the global loads are coalesced; each lane walks its own edge's row in shared
// memory with the same serial sums (the same bits). Unstaged, each lane walked its rows in global
// memory, every warp load touching 32 lines (the L1's wavefronts set this kernel's time).
// kCf32 (staged, Cf = 32): the query row in registers (it was read from L1 once per product term),
// and a batch's source indices read one per lane and handed out by shuffles, so that its 32 key
// rows' loads are independent and in flight together; the same sums (the same bits). Measured
// (H200, 4,096 atoms, fast, kernel times per call): 394 -> 263 us in 10 launches.
template <bool kStaged, bool kCf32 = false>
__global__ void softmax_forward_k(Dims d, BlockWDev w, int N, const int* __restrict__ src, const int* __restrict__ off,
                                  const float* __restrict__ env, EdgeRadialIn R,
                                  const float* __restrict__ q, const float* __restrict__ k, float* alpha,
                                  const float* __restrict__ gate, const float* __restrict__ lbias, int lb_e0) {
  extern __shared__ float sm_rows[];  // kStaged: per warp 32 rows of max(Cf, C) + 1 floats
  const long gw = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (gw >= (long)N * d.F) return;  // whole warps leave together
  const int n = gw / d.F, f = gw % d.F, Cf = d.Cf;
  const float scale = rsqrtf((float)Cf);
  const float* qn = q + (size_t)n * d.Cw + f * Cf;
  const float* u = w.logit_u + (size_t)f * d.C;
  const float log_null = w.log_zeta[f];
  float mx = log_null;
  if constexpr (kStaged) {
    const int C = d.C, tp = max(Cf, C) + 1;
    float* ts = sm_rows + (size_t)(threadIdx.x / 32) * 32 * tp;
    float qv[kCf32 ? 32 : 1];
    if constexpr (kCf32) {
#pragma unroll
      for (int c = 0; c < 32; ++c) qv[c] = qn[c];
    }
    for (int base = off[n]; base < off[n + 1]; base += 32) {
      const int cnt = min(32, off[n + 1] - base), e = base + lane;
      const bool live = lane < cnt && env[e] > 0.0f && (!gate || gate[e] > 0.0f);
      __syncwarp();  // the previous batch's radial rows are read
      if constexpr (kCf32) {
        const int se = lane < cnt ? src[e] : 0;
        const float* kf = k + f * 32 + lane;
#pragma unroll 8
        for (int r = 0; r < 32; ++r) {
          const int sr = __shfl_sync(0xffffffffu, se, r);
          if (r < cnt) ts[r * tp + lane] = kf[(size_t)sr * d.Cw];
        }
      } else {
        for (int t = lane; t < cnt * Cf; t += 32) {
          const int r = t / Cf, c = t % Cf;
          ts[r * tp + c] = k[(size_t)src[base + r] * d.Cw + f * Cf + c];
        }
      }
      __syncwarp();
      float l = 0.0f;
      if (live) {
        if constexpr (kCf32) {
#pragma unroll
          for (int c = 0; c < 32; ++c) l += qv[c] * ts[lane * tp + c];
        } else {
          for (int c = 0; c < Cf; ++c) l += qn[c] * ts[lane * tp + c];
        }
        l *= scale;
      }
      if (lbias) {
        if (!live) continue;
        l += __ldg(lbias + (size_t)(e - lb_e0) * d.F + f);
      } else {
        __syncwarp();  // the key rows are read
        for (int t = lane; t < cnt * C; t += 32) {
          const int r = t / C, c = t % C;
          ts[r * tp + c] = __ldg(R.rho + (size_t)(base + r) * (d.L + 1) * C + c);  // R(e, 0, c)'s first term
        }
        __syncwarp();
        if (!live) continue;
        const float* Ts = R.T + (size_t)R.types[R.src[e]] * C;
        const float* Td = R.T + (size_t)R.types[R.dst[e]] * C;
        for (int c = 0; c < C; ++c) l += (ts[lane * tp + c] + __ldg(Ts + c) + __ldg(Td + c)) * u[c];  // R(e, 0, c) u[c]
      }
      float eff = l + 2.0f * logf(env[e]);
      if (gate) eff += logf(gate[e]);  // bridging: the mass times gate_e
      alpha[(size_t)e * d.F + f] = eff;  // stash the logit, normalised below
      mx = fmaxf(mx, eff);
    }
  } else {
    for (int e = off[n] + lane; e < off[n + 1]; e += 32) {
      if (!(env[e] > 0.0f) || (gate && !(gate[e] > 0.0f))) continue;
      const float* kn = k + (size_t)src[e] * d.Cw + f * Cf;
      float l = 0.0f;
      for (int c = 0; c < Cf; ++c) l += qn[c] * kn[c];
      l *= scale;
      if (lbias) l += __ldg(lbias + (size_t)(e - lb_e0) * d.F + f);
      else
        for (int c = 0; c < d.C; ++c) l += R(d, e, 0, c) * u[c];
      float eff = l + 2.0f * logf(env[e]);
      if (gate) eff += logf(gate[e]);  // bridging: the mass times gate_e
      alpha[(size_t)e * d.F + f] = eff;  // stash the logit, normalised below
      mx = fmaxf(mx, eff);
    }
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float part = 0.0f;
  for (int e = off[n] + lane; e < off[n + 1]; e += 32) {
    const bool live = env[e] > 0.0f && (!gate || gate[e] > 0.0f);
    const float a = live ? expf(alpha[(size_t)e * d.F + f] - mx) : 0.0f;
    alpha[(size_t)e * d.F + f] = a;
    part += a;
  }
  for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
  const float den = expf(log_null - mx) + part;
  for (int e = off[n] + lane; e < off[n + 1]; e += 32) alpha[(size_t)e * d.F + f] /= den;
}

__global__ void gate_post_k(Dims d, int N, const float* __restrict__ gamma, const float* __restrict__ P, float* A) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long)N * d.D * d.Cw) return;
  const int c = i % d.Cw, n = i / ((long)d.D * d.Cw);
  A[i] = gamma[(size_t)n * d.F + c / d.Cf] * P[i];
}

// ---------------------------------------------------------------------------------------------
// Backward.

// One warp per (centre, focus): P_bar = gamma A_bar, gamma_bar = <A_bar, P> (gate_warp.cuh; the
// last block runs this on one chunk's destinations at a time, or node_linear.cu behind the mix).
__global__ void gate_backward_k(Dims d, int N, const float* __restrict__ gamma, const float* __restrict__ P,
                                const float* __restrict__ A_bar, float* P_bar, float* gamma_bar) {
  const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  if (i >= (long)N * d.F) return;  // whole warps: blockDim is a multiple of 32
  gate_backward_warp(d, i / d.F, i % d.F, gamma, P, A_bar, P_bar, gamma_bar);
}

// One CTA of Cw x R threads per centre of the chunk: softmax backward over its segment, all foci.
// Edges are spread over all threads for the per-edge terms; for q_bar, x runs over the channels
// and the R thread rows over the edges, so no thread walks a whole segment (~150 in-edges) alone;
// the rows' partial sums are added in a fixed order (deterministic).
__global__ void softmax_backward_k(Dims d, BlockWDev w, int n0, int e0, const int* __restrict__ src,
                                   const int* __restrict__ off, const float* __restrict__ env,
                                   const float* __restrict__ alpha, const float* __restrict__ alpha_bar,
                                   const float* __restrict__ k, float* lbar, float* q_bar, float* env_bar,
                                   const float* __restrict__ gate, float* gate_bar) {
  __shared__ float red[32 * 8], dots[8];
  extern __shared__ float qpart[];  // (R - 1) x Cw
  const int n = n0 + blockIdx.x, c = threadIdx.x, y = threadIdx.y, R = blockDim.y;
  const int nt = blockDim.x * R, tid = y * blockDim.x + c;
  const int s0 = off[n], s1 = off[n + 1];
  float part[8];
#pragma unroll
  for (int f = 0; f < 8; ++f) part[f] = 0.0f;
  for (int e = s0 + tid; e < s1; e += nt)
    for (int f = 0; f < d.F; ++f) part[f] += alpha[(size_t)e * d.F + f] * alpha_bar[(size_t)(e - e0) * d.F + f];
  cta_sum<8>(part, red, dots);
  for (int e = s0 + tid; e < s1; e += nt) {
    float eb = 0.0f, gb = 0.0f;
    for (int f = 0; f < d.F; ++f) {
      const float lb = alpha[(size_t)e * d.F + f] * (alpha_bar[(size_t)(e - e0) * d.F + f] - dots[f]);
      const bool live = env[e] > 0.0f && (!gate || gate[e] > 0.0f);
      lbar[(size_t)(e - e0) * d.F + f] = live ? lb : 0.0f;
      if (live) eb += 2.0f * lb / env[e];
      if (live && gate) gb += lb / gate[e];
    }
    env_bar[e] += eb;
    if (gate) gate_bar[e] += gb;  // each edge belongs to one thread of one CTA: no race
  }
  __syncthreads();  // lbar of this segment is complete
  const int f = c / d.Cf;
  const float scale = rsqrtf((float)d.Cf);
  float qb = 0.0f;
#pragma unroll 4  // the gathers of four edges in flight at a time (same order of the sum)
  for (int e = s0 + y; e < s1; e += R) qb += lbar[(size_t)(e - e0) * d.F + f] * k[(size_t)src[e] * d.Cw + c];
  if (y > 0) qpart[(y - 1) * d.Cw + c] = qb;
  __syncthreads();
  if (y == 0) {
    for (int yy = 1; yy < R; ++yy) qb += qpart[(yy - 1) * d.Cw + c];
    q_bar[(size_t)n * d.Cw + c] += scale * qb;
  }
}

// A warp per (node, focus): q/k projections and norms, output gate -> H_bar[n, 0, :] (lane a
// takes the rows a, a + 32 of the projections' transposes, same serial sums).
__global__ void __launch_bounds__(32 * kNodeWarps) attention_node_backward_k(
    Dims d, BlockWDev w, int N, int NT, const float* __restrict__ H, const float* __restrict__ qk_rho,
    const float* __restrict__ gate_rho, const float* __restrict__ gamma, const float* __restrict__ q_bar,
    const float* __restrict__ k_bar, const float* __restrict__ gamma_bar, float* H_bar) {
  __shared__ float hs[kNodeWarps][kMaxCf];
  const int wi = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long i = (long)blockIdx.x * kNodeWarps + wi;
  if (i >= (long)NT * d.F) return;  // whole warps
  const int n = i / d.F, f = i % d.F, Cf = d.Cf;
  const float* h0 = H + (size_t)n * d.D * d.Cw + f * Cf;
  float* hb0 = H_bar + (size_t)n * d.D * d.Cw + f * Cf;
  // W_q[a][b] = WqT[b][a]: the transposed blocks keep a warp's loads in one line (rows of W_q
  // took a line per lane: 83 us per 4,096-atom block on an H100 against the forward's 17).
  const float* WqT = w.Wq_t + (size_t)f * Cf * Cf;
  const float* WkT = w.Wk_t + (size_t)f * Cf * Cf;
  float* hb = hs[wi];
  for (int a = lane; a < Cf; a += 32) {
    float s = 0.0f;
    for (int b = 0; b < Cf; ++b)
      s += (n < N ? q_bar[(size_t)n * d.Cw + f * Cf + b] : 0.0f) * WqT[b * Cf + a] +
           k_bar[(size_t)n * d.Cw + f * Cf + b] * WkT[b * Cf + a];
    hb[a] = s;
  }
  __syncwarp();
  scalar_rms_backward_warp(h0, Cf, w.qk_norm + f * Cf, qk_rho[i], hb, hb0);
  if (n < N) {
    __syncwarp();  // every lane has read hb
    const float g = gamma[i], tb = gamma_bar[i] * g * (1.0f - g);
    for (int a = lane; a < Cf; a += 32) hb[a] = tb * w.gate_w[a * d.F + f];
    __syncwarp();
    scalar_rms_backward_warp(h0, Cf, w.gate_norm + f * Cf, gate_rho[i], hb, hb0);
  }
}

constexpr int kT = 128;

}  // namespace

void launch_attention_node_forward(const Dims& d, const BlockWDev& w, const AttentionNodeArgs& a, cudaStream_t s) {
  if (a.NT == 0) return;
  attention_node_forward_k<<<div_up((long)a.NT * d.F, kNodeWarps), 32 * kNodeWarps, 0, s>>>(
      d, w, a.N, a.NT, a.H, a.q, a.k, a.qk_rho, a.gate_rho, a.gamma);
  SEZM_LAUNCH("attention_node_forward");
}
void launch_attention_softmax_forward(const Dims& d, const BlockWDev& w, const SoftmaxArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  const int grid = div_up((long)a.N * d.F * 32, kT);
  const size_t bytes = (size_t)(kT / 32) * 32 * (std::max(d.Cf, d.C) + 1) * sizeof(float);
  if (bytes <= 48 * 1024 && d.Cf == 32)
    softmax_forward_k<true, true><<<grid, kT, bytes, s>>>(d, w, a.N, a.src, a.off, a.env, a.R, a.q, a.k, a.alpha,
                                                          a.gate, a.lbias, a.lb_e0);
  else if (bytes <= 48 * 1024)  // Cf, C <= 95 (C.pt: 16.5 KiB)
    softmax_forward_k<true><<<grid, kT, bytes, s>>>(d, w, a.N, a.src, a.off, a.env, a.R, a.q, a.k, a.alpha, a.gate,
                                                    a.lbias, a.lb_e0);
  else
    softmax_forward_k<false><<<grid, kT, 0, s>>>(d, w, a.N, a.src, a.off, a.env, a.R, a.q, a.k, a.alpha, a.gate,
                                                 a.lbias, a.lb_e0);
  SEZM_LAUNCH("softmax_forward");
}
void launch_gate_post(const Dims& d, const OutputGateArgs& a, cudaStream_t s) {
  const long n = (long)a.N * d.D * d.Cw;
  if (n == 0) return;
  gate_post_k<<<div_up(n, 256), 256, 0, s>>>(d, a.N, a.gamma, a.P, a.A);
  SEZM_LAUNCH("gate_post");
}
void launch_gate_backward(const Dims& d, const OutputGateArgs& a, cudaStream_t s) {
  if (a.N == 0) return;
  static_assert(kT % 32 == 0, "gate_backward_k runs whole warps");
  gate_backward_k<<<div_up((long)a.N * d.F * 32, kT), kT, 0, s>>>(d, a.N, a.gamma, a.P, a.A_bar, a.P_bar, a.gamma_bar);
  SEZM_LAUNCH("gate_backward");
}
void launch_softmax_backward(const Dims& d, const BlockWDev& w, const SoftmaxBackwardArgs& a, cudaStream_t s) {
  if (a.n1 <= a.n0) return;
  const int rows = edge_rows(d);
  const dim3 block(d.Cw, rows);
  const size_t bytes = (size_t)(rows - 1) * d.Cw * sizeof(float);
  softmax_backward_k<<<a.n1 - a.n0, block, bytes, s>>>(d, w, a.n0, a.e0, a.src, a.off, a.env, a.alpha, a.alpha_bar,
                                                       a.k, a.lbar, a.q_bar, a.env_bar, a.gate, a.gate_bar);
  SEZM_LAUNCH("softmax_backward");
}
void launch_attention_node_backward(const Dims& d, const BlockWDev& w, const AttentionNodeArgs& a, cudaStream_t s) {
  if (a.NT == 0) return;
  attention_node_backward_k<<<div_up((long)a.NT * d.F, kNodeWarps), 32 * kNodeWarps, 0, s>>>(
      d, w, a.N, a.NT, a.H, a.qk_rho, a.gate_rho, a.gamma, a.q_bar, a.k_bar, a.gamma_bar, a.H_bar);
  SEZM_LAUNCH("attention_node_backward");
}

}  // namespace sezm::cuda
