#pragma once
// sezm-stack-probe part 1, variant 110 (stack_probe_ws.cuh has 106-109 and the helpers this uses):
// the warp-specialised tile with the gated-kind epilogue, z kept by the consumers or by tensor-map
// bulk stores; its ring-depth curve and the shared-memory footprint test. Included by
// bench/stack_probe.cu only, after stack_probe_ws.cuh.
#include <string>
#include <type_traits>

#include "stack_probe_ws.cuh"

namespace sezm::cuda {
namespace {

// 110: the cooperative tile with the gated-kind epilogue, its z kept either by the consumers' own
// stores (kTma false) or through shared memory by tensor-map bulk stores (kTma: each consumer
// warpgroup writes its 64 rows of z into a staging area, boxes of 16 columns x 64 rows, fences them
// to the async proxy and one thread issues the N / 16 stores; the staging is reused once those
// stores have read it), so that the TMA unit, not the consumers, moves z while the next item's
// products run. Both on a shallower ring (4 stages at N = 192, 6 at 128) to make room for the
// staging (2 x 64 x N floats). Question (docs/performance.md, 2026-12-04 second session): does
// moving an epilogue's stores off the consumers hide their traffic?
// kStages: the ring's depth (0: the depth that leaves room for the staging; without it, the depth
// curve of the gated kind: the engine's gated kernels run 5 stages beside their stash).
template <int N>
SEZM_WG_HD constexpr int tma_stages() { return N > 128 ? 4 : 6; }
template <int N, bool kTma, int kStages>
SEZM_WG_HD constexpr int tma_smem_bytes() { return (kStages * ws_stage_floats(N) + (kTma ? 2 * 64 * N : 0)) * 4; }

__device__ __forceinline__ void bulk_store_3d(const CUtensorMap* tm, int x, int y, int z, const float* src) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(tm)),
               "r"(ws_smem(src)), "r"(x), "r"(y), "r"(z)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
template <bool kRead>
__device__ __forceinline__ void bulk_wait0() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (kRead) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  else asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void fence_async_shared() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

template <int N, bool kTma, int kStages, int kLoad>
__global__ void __launch_bounds__(kWsThreads, 1) wgtma_probe_k(const __grid_constant__ WsProbeArgs p,
                                                               const __grid_constant__ CUtensorMap tmA,
                                                               const __grid_constant__ CUtensorMap tmZ) {
  constexpr int kStage = ws_stage_floats(N);
  extern __shared__ __align__(128) float tm_dsmem[];
  __shared__ uint64_t full[kStages], empty[kStages];
  float* const ring = tm_dsmem;
  ws_init(full, empty);
  const int n_items = (p.rows + kWsRows - 1) / kWsRows;
  WsPipe pp;
  if (probe_producer([&] {
        for (int i = blockIdx.x; i < n_items; i += ws_grid())
          ws_fill<N, N, kStages, kStage>(ring, full, empty, pp, &tmA, WsItem{0, i * kWsRows, 0, p.Bimg});
      }))
    return;
  ws_regs_inc<kWsConsumerRegs>();
  const int ct = threadIdx.x - 128, w = ct >> 7, lt = ct & 127;
  float* const sz = tm_dsmem + kStages * kStage + w * 64 * N;  // this warpgroup's z staging
  float acc[N / 2];
  for (int i = blockIdx.x; i < n_items; i += gridDim.x) {
    ws_product<N, N, kStages, kStage>(ring, full, empty, pp, ct, acc);
    const int r0 = i * kWsRows + ws_row(ct, 0), r1 = i * kWsRows + ws_row(ct, 1);
    float4 res[N / 8];
    probe_residual_load<N, kLoad>(p, r0, r1, res);
    if constexpr (kTma) {
      if (lt == 0) bulk_wait0<true>();  // the previous item's stores have read the staging
      wg_bar(1 + w);
#pragma unroll
      for (int q4 = 0; q4 < N / 16; ++q4)
#pragma unroll
        for (int h = 0; h < 2; ++h)  // box q4 (columns 16 q4 ..), row ws_row(lt, h), columns 4 t ..
          *reinterpret_cast<float4*>(sz + q4 * 64 * 16 + ws_row(lt, h) * 16 + 4 * (lt & 3)) = wg_quad(acc, q4, h);
      fence_async_shared();
      wg_bar(1 + w);
      if (lt == 0) {
#pragma unroll 1
        for (int q4 = 0; q4 < N / 16; ++q4) bulk_store_3d(&tmZ, 16 * q4, i * kWsRows + 64 * w, 0, sz + q4 * 64 * 16);
        bulk_commit();
      }
    }
    probe_epilogue_store<N, kEpiGated, !kTma>(p, r0, r1, acc, res);
  }
  if (kTma && lt == 0) bulk_wait0<false>();  // the staging stays valid until the stores are done
}

// pad_kib: shared memory reserved beside the kernel's and not used (the footprint test).
template <int N, bool kTma, int kStages, int kLoad = kLoadPlain>
std::string launch_wgtma_probe(const WsProbeArgs& args, const float* A, int lda, cudaStream_t s, int pad_kib = 0) {
  const int bytes = tma_smem_bytes<N, kTma, kStages>() + pad_kib * 1024;
  const auto k = wgtma_probe_k<N, kTma, kStages, kLoad>;
  const auto [sms, per_sm] = probe_prepare(reinterpret_cast<const void*>(k), bytes);
  const int grid = std::min(div_up(args.rows, kWsRows), sms);
  k<<<grid, kWsThreads, bytes, s>>>(args, probe_map(A, args.rows, N, lda, kWsRows), probe_map(args.Z, args.rows, N, N, 64));
  SEZM_LAUNCH("wgtma_probe");
  return probe_info(bytes, per_sm);
}
// 110 without TMA on a ring of `stages` (kS .. kMax), the instantiation picked at run time.
template <int N, int kS, int kMax>
std::string launch_wgtma_depth(int stages, const WsProbeArgs& args, const float* A, int lda, cudaStream_t s) {
  if constexpr (kS > kMax) {
    throw Error("the TMA-store probe's ring takes 4 .. 9 stages at N = 128, 4 .. 7 at 192");
  } else {
    if (stages == kS) return launch_wgtma_probe<N, false, kS>(args, A, lda, s);
    return launch_wgtma_depth<N, kS + 1, kMax>(stages, args, A, lda, s);
  }
}
// The footprint test (110 without TMA on ws_stages(N)'s ring, 192 KiB): with pad_kib of shared
// memory reserved and unused, and the residual loaded as `load` says (kLoad*). Question
// (docs/performance.md, 2026-12-04 second session): is a 224 KiB footprint's 7-8 % the L1 that the
// epilogue's loads in flight lose, and does a load that does not allocate in L1 avoid it?
std::string launch_wgtma_footprint(int N, int pad_kib, int load, const WsProbeArgs& args, const float* A, int lda,
                                   cudaStream_t s) {
  if (N != 192 && N != 128) throw Error("the footprint probe takes N = 128 or 192");
  const auto with = [&](auto ld) {
    constexpr int kLd = decltype(ld)::value;
    return N == 192 ? launch_wgtma_probe<192, false, ws_stages(192), kLd>(args, A, lda, s, pad_kib)
                    : launch_wgtma_probe<128, false, ws_stages(128), kLd>(args, A, lda, s, pad_kib);
  };
  if (load == kLoadNoL1) return with(std::integral_constant<int, kLoadNoL1>{});
  if (load == kLoadCg) return with(std::integral_constant<int, kLoadCg>{});
  return with(std::integral_constant<int, kLoadPlain>{});
}

// 110 with z by TMA (tma) or by the consumers on a ring of `stages` (0: tma_stages, the depth
// beside the staging; without TMA 4 .. 7 at N = 192, 4 .. 9 at 128).
std::string launch_wgtma_probe_variant(int N, bool tma, int stages, const WsProbeArgs& args, const float* A, int lda,
                                       cudaStream_t s) {
  if (N != 192 && N != 128) throw Error("the TMA-store probe takes N = 128 or 192");
  if (tma)
    return N == 192 ? launch_wgtma_probe<192, true, tma_stages<192>()>(args, A, lda, s)
                    : launch_wgtma_probe<128, true, tma_stages<128>()>(args, A, lda, s);
  return N == 192 ? launch_wgtma_depth<192, 4, 7>(stages == 0 ? tma_stages<192>() : stages, args, A, lda, s)
                  : launch_wgtma_depth<128, 4, 9>(stages == 0 ? tma_stages<128>() : stages, args, A, lda, s);
}

}  // namespace
}  // namespace sezm::cuda
