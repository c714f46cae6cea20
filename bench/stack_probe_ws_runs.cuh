#pragma once
// sezm-stack-probe part 1, the warp-specialised tile's schedules and epilogues (the kernels and
// launchers: stack_probe_ws.cuh): 106 / 107 / 108 with a store and a gated-kind epilogue, three
// identity layers through HBM (106) against 109 with the rows on chip, and the gated kind with
// the residual from A: 106, 110 with z by the consumers or by tensor-map bulk stores, 110's
// ring-depth curve and the footprint test. Each variant's output is compared to the bit with its reference's.
// Included by bench/stack_probe.cu only, after DevBuf and median_ms.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// Elements of a and b (same length) whose bits differ.
inline size_t bit_diffs(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

// A: rows x K of row stride lda (HBM); Bimg2: wgmma_b_image(B, K, K, K, 2); K = 128 or 192.
void probe_ws_schedules(int rows, int K, int lda, const float* A, const float* Bimg2, int R, std::mt19937& rng,
                        cudaStream_t s) {
  const size_t n = (size_t)rows * K;
  DevBuf Res(n, &rng, 1.0f), Z(n), C2(n);
  std::vector<float> c_ref(n), cv(n);
  const auto fetch = [&](std::vector<float>& h, const float* dev) {
    SEZM_CUDA(cudaMemcpy(h.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  };
  const auto poison = [&](float* dev) { SEZM_CUDA(cudaMemset(dev, 0x7F, n * sizeof(float))); };
  const auto tflops = [&](double ms, int layers) { return 2.0 * layers * rows * K * K / (ms * 1e9); };
  std::string info;
  // Schedules: 106 cooperative, 107 ping-pong, 108 ping-pong ordered; C against 106's.
  static const char* sched[] = {"cooperative (106)", "ping-pong (107)", "ping-pong ordered (108)"};
  for (bool gated : {false, true})
    for (int v : {106, 107, 108}) {
      poison(C2.p);
      const WsProbeArgs a{rows, Bimg2, C2.p, Res.p, Z.p};
      const double ms =
          median_ms(R, s, [&] { info = launch_wgws_probe_variant(v, gated ? kEpiGated : kEpiStore, a, K, K, A, lda, s); });
      fetch(v == 106 ? c_ref : cv, C2.p);
      const std::string cmp = v == 106 ? "" : "  " + std::to_string(bit_diffs(cv, c_ref)) + " elements differ from 106's";
      std::printf("  K = N = %3d, WS %-24s %-6s epilogue %8.3f ms  %6.2f TFLOP/s%s%s\n", K, sched[v - 106],
                  gated ? "gated" : "store", ms, tflops(ms, 1), cmp.c_str(), info.c_str());
    }
  // Three identity layers (X' = X + X B) through HBM, one 106 launch each (ping-pong buffers),
  // against 109: the three in one launch, the rows kept on chip between layers.
  constexpr int kLayers = 3;
  DevBuf P1(n), P2(n);
  const double ms_hbm = median_ms(R, s, [&] {
    const float* in = A;
    int ld = lda;
    for (int l = 0; l < kLayers; ++l) {
      float* out = l % 2 ? P2.p : P1.p;
      info = launch_wgws_probe_variant(106, kEpiResidual, WsProbeArgs{rows, Bimg2, out, in, nullptr, ld}, K, K, in, ld, s);
      in = out;
      ld = K;
    }
  });
  fetch(c_ref, kLayers % 2 ? P1.p : P2.p);
  std::printf("  K = N = %3d, %d identity layers, 106 through HBM      %8.3f ms  %6.2f TFLOP/s%s\n", K, kLayers, ms_hbm,
              tflops(ms_hbm, kLayers), info.c_str());
  poison(C2.p);
  const double ms_chip = median_ms(
      R, s, [&] { info = launch_wgchain_probe_variant(K, WsChainProbeArgs{rows, kLayers, A, lda, Bimg2, C2.p}, s); });
  fetch(cv, C2.p);
  std::printf("  K = N = %3d, %d identity layers, 109 rows on chip     %8.3f ms  %6.2f TFLOP/s  %zu elements differ%s\n", K,
              kLayers, ms_chip, tflops(ms_chip, kLayers), bit_diffs(cv, c_ref), info.c_str());
  // The gated kind with the residual from A (106), and 110 with z by the consumers or by TMA.
  const WsProbeArgs a{rows, Bimg2, C2.p, A, Z.p, lda};
  std::vector<float> z_ref(n), zv(n);
  static const char* names[] = {"106, residual from A", "110, shallow ring, z stored", "110, z by TMA stores"};
  for (int v = 0; v < 3; ++v) {
    poison(C2.p);
    poison(Z.p);
    const double ms = median_ms(R, s, [&] {
      info = v == 0 ? launch_wgws_probe_variant(106, kEpiGated, a, K, K, A, lda, s)
                    : launch_wgtma_probe_variant(K, v == 2, 0, a, A, lda, s);
    });
    fetch(v == 0 ? c_ref : cv, C2.p);
    fetch(v == 0 ? z_ref : zv, Z.p);
    const std::string cmp = v == 0 ? ""
                                   : "  C: " + std::to_string(bit_diffs(cv, c_ref)) +
                                         ", z: " + std::to_string(bit_diffs(zv, z_ref)) + " elements differ";
    std::printf("  K = N = %3d, gated kind, %-28s %8.3f ms  %6.2f TFLOP/s%s%s\n", K, names[v], ms, tflops(ms, 1),
                cmp.c_str(), info.c_str());
  }
  // The ring's depth (the same kernel, z by the consumers, residual from A).
  for (int st = 4; st <= (K > 128 ? 7 : 9); ++st) {
    const double ms = median_ms(R, s, [&] { info = launch_wgtma_probe_variant(K, false, st, a, A, lda, s); });
    std::printf("  K = N = %3d, gated kind, ring of %d stages            %8.3f ms  %6.2f TFLOP/s%s\n", K, st, ms,
                tflops(ms, 1), info.c_str());
  }
  // The footprint test: the engine-sized ring (192 KiB) with 32 KiB more reserved, and the
  // residual's loads plain, not allocated in L1, or L2-only; C and z against 110's ring above.
  static const char* loads[] = {"plain", "L1::no_allocate", "cg"};
  for (bool pad : {false, true})
    for (int load : {kLoadPlain, kLoadNoL1, kLoadCg}) {
      poison(C2.p);
      poison(Z.p);
      const double ms = median_ms(R, s, [&] { info = launch_wgtma_footprint(K, pad ? 32 : 0, load, a, A, lda, s); });
      fetch(cv, C2.p);
      fetch(zv, Z.p);
      std::printf("  K = N = %3d, gated kind, +%2d KiB unused, %-15s %8.3f ms  %6.2f TFLOP/s  C: %zu, z: %zu differ%s\n", K,
                  pad ? 32 : 0, loads[load], ms, tflops(ms, 1), bit_diffs(cv, c_ref), bit_diffs(zv, z_ref), info.c_str());
    }
}

}  // namespace
