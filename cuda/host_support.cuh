#pragma once
// Host-side helpers of the CUDA engine's orchestration: per-phase timing (SEZM_CUDA_TIMING=1)
// and the page-locked staging of the ghost exchange (only the sent rows where the exchange names
// them: docs/multi-gpu.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cuda_common.cuh"
#include "engine/ghost_rows.h"
#include "engine/sezm_model.h"
#include "ghost_rows.cuh"

namespace sezm::cuda {

// CUDA events between named marks on one stream, summed per name over a call and printed to
// stderr. Disabled: mark() does nothing.
class PhaseTimer {
 public:
  bool enabled = false;
  ~PhaseTimer() {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  void mark(const char* name, cudaStream_t s) {
    if (!enabled) return;
    if (used_ == pool_.size()) {
      cudaEvent_t e;
      SEZM_CUDA(cudaEventCreate(&e));
      pool_.push_back(e);
    }
    cudaEvent_t e = pool_[used_++];
    SEZM_CUDA(cudaEventRecord(e, s));
    marks_.emplace_back(name, e);
  }
  void report(cudaStream_t s) {
    if (!enabled || marks_.empty()) return;
    SEZM_CUDA(cudaStreamSynchronize(s));
    std::vector<std::pair<std::string, double>> acc;
    for (size_t i = 0; i + 1 < marks_.size(); ++i) {
      float ms = 0;
      SEZM_CUDA(cudaEventElapsedTime(&ms, marks_[i].second, marks_[i + 1].second));
      auto it = std::find_if(acc.begin(), acc.end(), [&](const auto& p) { return p.first == marks_[i].first; });
      if (it == acc.end()) acc.emplace_back(marks_[i].first, ms);
      else it->second += ms;
    }
    double tot = 0;
    for (const auto& p : acc) tot += p.second;
    std::fprintf(stderr, "[sezm cuda timing] total %.2f ms\n", tot);
    for (const auto& p : acc)
      std::fprintf(stderr, "  %-28s %9.3f ms  %5.1f%%\n", p.first.c_str(), p.second, 100 * p.second / tot);
    marks_.clear();
    used_ = 0;
  }

 private:
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
};

// Node rows of `w` floats through the caller's FeatureExchange (double on the host side), with
// the host wall time and the bytes moved summed per call (EngineResult::seconds_exchange,
// exchange_bytes). Where the exchange names its sent rows (FeatureExchange::sent_rows) only those
// owned rows and the ghost rows cross, and only they are converted (docs/multi-gpu.md); otherwise
// every row that the exchange may read or write does.
class GhostStaging {
 public:
  double seconds = 0.0, bytes = 0.0;
  void reset_stats() { seconds = bytes = 0.0; }

  // Refresh the ghost rows [N, NT) from the owned rows [0, N).
  void forward(float* rows, size_t w, int NT, int N, FeatureExchange<double>* ex, MemCounter* mem, cudaStream_t s) {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t own = static_cast<size_t>(N) * w, gh = static_cast<size_t>(NT - N) * w;
    if (const float* c = staged(rows, ex, w, N, NT, mem, s)) {
      // The sent owned rows, gathered on the device; the other owned rows stay NaN on the host.
      const size_t nc = plan_.owned().size() * w;
      float* hf = pin_.get(std::max(nc, gh));
      copy(hf, c, nc, cudaMemcpyDeviceToHost, s);
      plan_.unpack(hf, w, rows_.data());
      ex->forward(rows_.data(), static_cast<int>(w));
      narrow(rows_.data() + own, gh, hf);
      copy(rows + own, hf, gh, cudaMemcpyHostToDevice, s);
      bytes += plan_.forward_bytes(w);
    } else {
      float* hf = pin_.get(own + gh);
      copy(hf, rows, own, cudaMemcpyDeviceToHost, s);
      rows_.assign(own + gh, 0.0);
      widen(hf, own, rows_.data());
      ex->forward(rows_.data(), static_cast<int>(w));
      narrow(rows_.data() + own, gh, hf + own);
      copy(rows + own, hf + own, gh, cudaMemcpyHostToDevice, s);
      bytes += (own + gh) * sizeof(float);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Fold the ghost rows' gradients back onto their owners and zero them.
  void reverse(float* rows, size_t w, int NT, int N, FeatureExchange<double>* ex, MemCounter* mem, cudaStream_t s) {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t own = static_cast<size_t>(N) * w, gh = static_cast<size_t>(NT - N) * w;
    if (float* c = staged(rows, ex, w, N, NT, mem, s)) {
      // The sent owned rows' own gradients cross too, so that the exchange adds into exactly the
      // numbers the full route would give it: the result is the full route's to the bit
      // (docs/multi-gpu.md). Rows the exchange adds into are its sent rows, so no other owned
      // row changes.
      const size_t nc = plan_.owned().size() * w;
      float* hf = pin_.get(nc + gh);
      if (gh) SEZM_CUDA(cudaMemcpyAsync(hf + nc, rows + own, gh * sizeof(float), cudaMemcpyDeviceToHost, s));
      copy(hf, c, nc, cudaMemcpyDeviceToHost, s);
      plan_.unpack(hf, w, rows_.data());
      widen(hf + nc, gh, rows_.data() + own);
      ex->reverse(rows_.data(), static_cast<int>(w));
      plan_.pack(rows_.data(), w, hf);
      copy(c, hf, nc, cudaMemcpyHostToDevice, s);
      launch_scatter_rows(RowCopyArgs{static_cast<int>(plan_.owned().size()), w, idx_.data(), rows, c}, s);
      if (gh) SEZM_CUDA(cudaMemsetAsync(rows + own, 0, gh * sizeof(float), s));
      SEZM_CUDA(cudaStreamSynchronize(s));  // the pinned block is reused by the next exchange
      bytes += plan_.reverse_bytes(w);
    } else {
      const size_t n = own + gh;
      float* hf = pin_.get(n);
      copy(hf, rows, n, cudaMemcpyDeviceToHost, s);
      rows_.resize(n);
      widen(hf, n, rows_.data());
      ex->reverse(rows_.data(), static_cast<int>(w));
      narrow(rows_.data(), n, hf);
      copy(rows, hf, n, cudaMemcpyHostToDevice, s);
      bytes += 2 * n * sizeof(float);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  // Synchronous copy of n floats on stream s.
  static void copy(float* dst, const float* src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    if (n) SEZM_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(float), k, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
  }
  // The staged route, where the exchange names its sent rows: adopts them (re-uploading the index
  // list and re-poisoning the host rows when they changed), gathers the sent owned rows of `rows`
  // into the compact device block and returns it (not yet synchronised); nullptr: the full route.
  float* staged(float* rows, FeatureExchange<double>* ex, size_t w, int N, int NT, MemCounter* mem, cudaStream_t s) {
    const std::vector<int>* sent = ex->sent_rows();
    if (!sent) {
      poisoned_w_ = 0;  // the full route writes every host row
      return nullptr;
    }
    if (plan_.set(*sent, N, NT)) {
      idx_.set_counter(mem);
      idx_.upload(plan_.owned().data(), plan_.owned().size(), s);
      poisoned_w_ = 0;
    }
    if (poisoned_w_ != w) {
      poison_owned_rows(rows_, N, NT, w);
      poisoned_w_ = w;
    }
    const int n = static_cast<int>(plan_.owned().size());
    compact_.set_counter(mem);
    float* c = compact_.resize(std::max<size_t>(1, static_cast<size_t>(n) * w));
    launch_gather_rows(RowCopyArgs{n, w, idx_.data(), rows, c}, s);
    return c;
  }

  PinnedBuf<float> pin_;
  std::vector<double> rows_;
  GhostRowPlan plan_;
  DBuf<int> idx_;        // plan_.owned() on the device
  DBuf<float> compact_;  // the sent owned rows, gathered
  size_t poisoned_w_ = 0;  // width of the rows that rows_ holds poisoned (0: none)
};

}  // namespace sezm::cuda
