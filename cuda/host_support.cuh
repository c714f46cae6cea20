#pragma once
// Host-side helpers of the CUDA engine's orchestration: per-phase timing (SEZM_CUDA_TIMING=1)
// and the page-locked staging of the ghost exchange.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cuda_common.cuh"
#include "engine/sezm_model.h"

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

// Page-locked host staging (grow-only) for the ghost exchange's device<->host copies: measured in
// LAMMPS at 4096 atoms the engine's share of a step fell from 0.41 s to 0.31 s (~15 ms of that from
// kernel changes of the same revision), the ghost rows crossing twice per block. (The
// per-edge gradient goes straight to the caller's vector: staging it cost a host copy as long as
// the saved transfer time.)
template <class T>
struct PinnedBuf {
  T* p = nullptr;
  size_t cap = 0;
  T* get(size_t n) {
    if (n > cap) {
      if (p) cudaFreeHost(p);
      p = nullptr;
      SEZM_CUDA(cudaMallocHost(&p, n * sizeof(T)));
      cap = n;
    }
    return p;
  }
  ~PinnedBuf() {
    if (p) cudaFreeHost(p);
  }
};

// Node rows of `w` floats through the caller's FeatureExchange (double on the host side).
class GhostStaging {
 public:
  // Refresh the ghost rows [N, NT) from the owned rows [0, N).
  void forward(float* rows, size_t w, int NT, int N, FeatureExchange<double>* ex, cudaStream_t s) {
    const size_t n = static_cast<size_t>(NT) * w, own = static_cast<size_t>(N) * w;
    float* hf = pin_.get(n);
    SEZM_CUDA(cudaMemcpyAsync(hf, rows, own * sizeof(float), cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    rows_.assign(n, 0.0);
    for (size_t i = 0; i < own; ++i) rows_[i] = hf[i];
    ex->forward(rows_.data(), static_cast<int>(w));
    for (size_t i = own; i < n; ++i) hf[i] = static_cast<float>(rows_[i]);
    SEZM_CUDA(cudaMemcpyAsync(rows + own, hf + own, (n - own) * sizeof(float), cudaMemcpyHostToDevice, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
  }
  // Fold the ghost rows' gradients back onto their owners (all NT rows cross).
  void reverse(float* rows, size_t w, int NT, FeatureExchange<double>* ex, cudaStream_t s) {
    const size_t n = static_cast<size_t>(NT) * w;
    float* hf = pin_.get(n);
    SEZM_CUDA(cudaMemcpyAsync(hf, rows, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
    rows_.assign(hf, hf + n);
    ex->reverse(rows_.data(), static_cast<int>(w));
    for (size_t i = 0; i < n; ++i) hf[i] = static_cast<float>(rows_[i]);
    SEZM_CUDA(cudaMemcpyAsync(rows, hf, n * sizeof(float), cudaMemcpyHostToDevice, s));
    SEZM_CUDA(cudaStreamSynchronize(s));
  }

 private:
  PinnedBuf<float> pin_;
  std::vector<double> rows_;
};

}  // namespace sezm::cuda
