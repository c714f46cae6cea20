#pragma once
// Shared pieces of the CUDA engine: error checks, growable device buffers with a byte counter,
// the model dimensions every kernel reads, and small device math.
//
// Layout contract (same names and layouts as the CPU engine, src/engine/*.h):
//  - node features X (n_total, D, C), H (n_total, D, Cw); packed p(l,m) = l^2 + l + m;
//  - per edge compact Wigner rows Dc (E, dc_size): block l = 0 is the scalar 1, block l >= 1 the
//    three edge-frame rows m = -1, 0, +1 (each 2l+1 global columns) at dc_off(l) = 1 + 3(l^2-1);
//  - SO(2) stack activations focus-major (F, Ec, ROW), ROW = Dm*Cf, reduced m-major rows;
//  - radial features rho/R (E, L+1, C), l-major.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"

namespace sezm::cuda {

inline void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
                "): " + cudaGetErrorString(e));
}
#define SEZM_CUDA(x) ::sezm::cuda::check((x), #x, __FILE__, __LINE__)
#define SEZM_LAUNCH(what) ::sezm::cuda::check(cudaGetLastError(), what, __FILE__, __LINE__)

// cudaMalloc found too little device memory. CudaEngine::compute adds the mode, the chunk size and
// the graph to the message and suggests `mode lean` or a smaller `chunk` (docs/errors.md).
class OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& what, size_t bytes, size_t held) : Error(what), bytes(bytes), held(held) {}
  size_t bytes, held;  // the failed request, and what the engine held at the time
};

// Byte accounting for the engine's own allocations (peak is what the benchmark reports).
struct MemCounter {
  size_t current = 0, peak = 0;
  void add(size_t b) {
    current += b;
    if (current > peak) peak = current;
  }
  void sub(size_t b) { current -= b; }
};

// A device array that only grows (amortised across MD steps).
template <class T>
class DBuf {
 public:
  DBuf() = default;
  explicit DBuf(MemCounter* m) : mem_(m) {}
  DBuf(const DBuf&) = delete;
  DBuf& operator=(const DBuf&) = delete;
  DBuf(DBuf&& o) noexcept { *this = std::move(o); }
  DBuf& operator=(DBuf&& o) noexcept {
    release();
    p_ = o.p_; n_ = o.n_; cap_ = o.cap_; mem_ = o.mem_;
    o.p_ = nullptr; o.n_ = o.cap_ = 0;
    return *this;
  }
  ~DBuf() { release(); }
  void set_counter(MemCounter* m) { mem_ = m; }
  // Resize (contents are not preserved when growing).
  T* resize(size_t n) {
    if (n > cap_) {
      release();
      const size_t cap = n + n / 32 + 16;  // slack for edge counts that drift between MD steps
      const cudaError_t e = cudaMalloc(&p_, cap * sizeof(T));
      if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        p_ = nullptr;
        char msg[320];
        const size_t held = mem_ ? mem_->current : 0;
        std::snprintf(msg, sizeof msg,
                      "device cuda: out of GPU memory allocating %.2f GiB (the engine holds %.2f GiB already); "
                      "use mode lean, a smaller chunk, or fewer atoms per GPU (more MPI ranks / GPUs)",
                      cap * sizeof(T) / 1073741824.0, held / 1073741824.0);
        throw OutOfMemory(msg, cap * sizeof(T), held);
      }
      SEZM_CUDA(e);
      cap_ = cap;
      if (mem_) mem_->add(cap_ * sizeof(T));
    }
    n_ = n;
    return p_;
  }
  void zero(cudaStream_t s = 0) {
    if (n_) SEZM_CUDA(cudaMemsetAsync(p_, 0, n_ * sizeof(T), s));
  }
  void upload(const T* h, size_t n, cudaStream_t s = 0) {
    resize(n);
    if (n) SEZM_CUDA(cudaMemcpyAsync(p_, h, n * sizeof(T), cudaMemcpyHostToDevice, s));
  }
  // The first n elements of another buffer on the same device (a committee's shared graph and
  // geometry, CudaEngine::compute_like), ordered on stream s.
  void copy_device(const DBuf& o, size_t n, cudaStream_t s) {
    resize(n);
    if (n) SEZM_CUDA(cudaMemcpyAsync(p_, o.p_, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  // Gives the memory back (a buffer whose call-sized use ended: CudaEngine's per-edge geometry
  // when a call switches to per-chunk edge state).
  void free() { release(); }

 private:
  void release() {
    if (p_) {
      cudaFree(p_);
      if (mem_) mem_->sub(cap_ * sizeof(T));
    }
    p_ = nullptr;
    n_ = cap_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
  MemCounter* mem_ = nullptr;
};

// Page-locked host staging, grow-only, by an eighth more than asked (in MD the graph's size drifts
// from step to step, and a cudaMallocHost of the ~21 MB of a 4,096-atom graph takes ~12 ms: the
// warm-up call's "call: buffers + graph upload", docs/performance.md). Users: the graph's upload
// (graph_upload.cu) and the ghost exchange's device<->host copies (measured in LAMMPS at 4096
// atoms, the engine's share of a step fell from 0.41 s to 0.31 s, ~15 ms of that from kernel
// changes of the same revision, the ghost rows crossing twice per block; the per-edge gradient
// goes straight to the caller's vector: staging it cost a host copy as long as the saved transfer
// time). Not copyable (it owns its allocation).
template <class T>
struct PinnedBuf {
  T* p = nullptr;
  size_t cap = 0;
  PinnedBuf() = default;
  PinnedBuf(const PinnedBuf&) = delete;
  PinnedBuf& operator=(const PinnedBuf&) = delete;
  T* get(size_t n) {
    if (n > cap) {
      if (p) cudaFreeHost(p);
      p = nullptr;
      const size_t grown = n + n / 8;
      SEZM_CUDA(cudaMallocHost(&p, grown * sizeof(T)));
      cap = grown;
    }
    return p;
  }
  ~PinnedBuf() {
    if (p) cudaFreeHost(p);
  }
};

// Model dimensions, passed by value to kernels.
struct Dims {
  int C, L, D, Dm, F, Cf, Cw, ROW, M0, M1, K, H, nr, ntypes, nL, ngated;
  int dc_size, wsize;
  int es_ro, es_td, es_emb, es_ax, es_gin, es_hid;
  int degree_mixer, has_rh, edge_norm;
  float rcut, eps;
  int p_rbf, p_edge;
  // SO(3) grid nets (cuda/grid_net.cu): frames of the FFN's hidden tensor (|K| with
  // ffn_so3_grid, else 1), and the grid-net scratch in floats per node (0: no grid net).
  int KF, grid_scratch;
  // `precision tf32`: the tile products (stack_tile.cuh) take one TF32 pass instead of FFMA.
  int tf32_one_pass;
  // The stack runs on Hopper's warpgroup tile (wgmma_tile.cuh: 3xTF32, or one pass with
  // tf32_one_pass): a CC 9.0 device, a build with sm_90a code, a supported shape (stack.cu) and
  // the weights' images uploaded (BlockWDev::*_wg). 0: the SIMT / mma.sync tile.
  int wgmma;
  // The stack's layers on the warp-specialised persistent tile (wgmma_ws.cuh, stack_ws.cu): every
  // forward and backward: 1, the default on wgmma with
  // Cf = 32, L = 3 (device.cu, use_stack_ws), the forward's layers chained in one launch per
  // chunk (stack_ws_chain.cu); 2 (SEZM_CUDA_STACK_WS=2): the same but the gated backward, which
  // stays on wg_tile; 3: as 1 with a forward launch per layer; 0: wg_tile for every layer. With
  // tf32_one_pass in one TF32 pass there.
  int stack_ws;
  // The chained stack launches' products in 3xFP16 (wgmma_ws_f16.cuh) instead of 3xTF32, the FP16
  // images uploaded (BlockWDev::*_f16): 1, the default where both chains run and the weights fit
  // binary16 under the images' scale (device.cu, use_stack_f16; SEZM_CUDA_STACK_F16=0: 3xTF32).
  // `precision tf32` keeps its one TF32 pass.
  int stack_f16;
  // The radial folds (with the degree mixer: the kernel values and logit bias from the radial MLP's
  // hidden layer, radial_tables.cu; the blocks' radial adjoint from the kernel and logit adjoints,
  // radial.cu): 1, or 0 with SEZM_CUDA_RADIAL_LEGACY=1 at the engine's construction (the route
  // through R and rho_bar).
  int radial_fold;
  // `precision tf32` on the register-resident chained forward: the stack's output kept as binary16
  // rows with per-row scales (stack_out_f16, f16_rows.cuh): 1, or 0 with SEZM_CUDA_F16_ROWS=0 at the
  // engine's construction (fp32 rows).
  int f16_rows;
  // With f16_rows, the gated layers' saved pre-activations z as binary16 rows too (stack_z_f16):
  // 1, or 0 with SEZM_CUDA_F16_Z=0 at the engine's construction (fp32 z).
  int f16_z;
};

__host__ __device__ inline int dc_off(int l) { return l == 0 ? 0 : 1 + 3 * (l * l - 1); }
__host__ __device__ inline int packed(int l, int m) { return l * l + l + m; }
__host__ __device__ inline int degree_of_packed(int p) {
  int l = 0;
  while ((l + 1) * (l + 1) <= p) ++l;
  return l;
}
// Packed row p >= 1's entry in an edge's compact Wigner row on the edge frame's m = 0 row of block
// l(p): what the GIE reads of the Wigner rows (gie.cu, gie_fold_backward.cu).
__host__ __device__ inline int dc_m0(int p) {
  const int l = degree_of_packed(p);
  return dc_off(l) + (2 * l + 1) + p - l * l;
}
// Reduced m-major row j: l and m (mmax = 1).
__host__ __device__ inline int red_l(int j, int L) { return j <= L ? j : (j <= 2 * L ? j - L : j - 2 * L); }
__host__ __device__ inline int red_m(int j, int L) { return j <= L ? 0 : (j <= 2 * L ? -1 : 1); }
// Row counts for lmax <= 3: reduced rows Dm = 3 L + 1, packed rows D = (L + 1)^2.
constexpr int kMaxDm = 10, kMaxD = 16;

// The sigmoid 1 / (1 + e^-x), the quotient by __fdividef (MUFU.RCP and a multiply, ~2 ulp; 0 once
// 1 + e^-x > 2^126, where the sigmoid is below 1e-38): IEEE division's slow-path branch made the 48
// sigmoids of a gated layer's item a ninth of its forward kernel's issue time (ncu,
// docs/performance.md, 2026-12-03). kApprox: e^-x from the exponential's approximation (ex2.approx:
// ~2^-22 relative, far inside the one TF32 pass's 2^-11), ~6 instructions fewer than expf's: only
// where the register-resident chains of `precision tf32` take it (their code must stay within the
// SM's instruction cache, docs/performance.md, 2026-12-06 twenty-second session). (Host compilers,
// which have neither __fdividef nor __expf, compile the plain quotient; it runs on the device only.)
template <bool kApprox>
__device__ inline float sigmoid_with_(float x) {
#ifdef __CUDA_ARCH__
  return __fdividef(1.0f, 1.0f + (kApprox ? __expf(-x) : expf(-x)));
#else
  return 1.0f / (1.0f + expf(-x));
#endif
}
__device__ inline float sigmoidf_(float x) { return sigmoid_with_<false>(x); }
__device__ inline float sigmoid_approxf_(float x) { return sigmoid_with_<true>(x); }
__device__ inline float siluf_(float x) { return x * sigmoidf_(x); }
__device__ inline float silu_gradf_(float x) {
  const float s = sigmoidf_(x);
  return s * (1.0f + x * (1.0f - s));
}
__device__ inline float rotate_back_scalef(int l) { return l <= 1 ? 1.0f : sqrtf((2.0f * l + 1.0f) / 3.0f); }

template <class T>
__device__ inline T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// An A/B switch of the environment: on when `name` is set and starts with '1'. Callers read it
// once (a function-local static): the kernels' choice stays fixed for the process.
inline bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '1';
}

inline int div_up(long a, long b) { return static_cast<int>((a + b - 1) / b); }

// The grid of a kernel whose CTAs loop over work tiles: as many CTAs as are resident on the current
// device at once (occupancy with `bytes` of dynamic shared memory, whose attribute it sets), at most
// `tiles`; 0 where `bytes` exceeds the device's opt-in limit (the caller's fallback then runs). The
// device queries are made once per host thread, device, kernel and size: they cost microseconds and
// the chunked calls launch once per chunk (radial.cuh's launch_tiles, env_seed_tiled.cuh).
inline int resident_grid(const void* fn, int threads, size_t bytes, int tiles) {
  struct Known {
    int dev;
    const void* fn;
    int threads;
    size_t bytes;
    int cap;
  };
  thread_local std::vector<Known> known;
  int dev = 0;
  SEZM_CUDA(cudaGetDevice(&dev));
  for (const Known& k : known)
    if (k.dev == dev && k.fn == fn && k.threads == threads && k.bytes == bytes) return std::min(tiles, k.cap);
  int optin = 0, sms = 0, per = 0;
  SEZM_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  // The opt-in limit covers the kernel's static shared memory too (the warp-specialised tile's
  // barriers): the dynamic part may take only the rest.
  cudaFuncAttributes fa{};
  SEZM_CUDA(cudaFuncGetAttributes(&fa, fn));
  const size_t room = static_cast<size_t>(optin) > fa.sharedSizeBytes ? optin - fa.sharedSizeBytes : 0;
  if (bytes <= room) {
    SEZM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    // The attribute is the kernel's, not the launch's: set to the device's limit (the same value
    // whoever sets it), so that a cached size of another model or thread still launches.
    if (bytes > 48 * 1024)
      SEZM_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(room)));
    SEZM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn, threads, bytes));
  }
  known.push_back({dev, fn, threads, bytes, bytes <= room ? std::max(per, 1) * sms : 0});
  return std::min(tiles, known.back().cap);
}

}  // namespace sezm::cuda
