#pragma once
// The CPU engine's OpenMP thread count and id (1 and 0 without OpenMP), and the capture of
// exceptions thrown inside a parallel region.
#include <atomic>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sezm {

inline int engine_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
// The size of the current team (1 outside a parallel region): what a region really got, which
// can be fewer threads than engine_threads() asked for.
inline int engine_team_size() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}
inline int engine_thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// An exception must not leave an OpenMP region (the runtime calls std::terminate: a std::bad_alloc
// in an edge tile used to abort the process). Every region of the engine runs its work through
// run(), which keeps the first exception and makes later calls no-ops, so the region's loops drain
// quickly; rethrow() after the region hands it to the caller unchanged (std::bad_alloc stays
// std::bad_alloc, which SezmEngine::compute names; docs/errors.md).
class ParallelErrors {
 public:
  template <class F>
  void run(F&& f) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;
    try {
      f();
    } catch (...) {
#pragma omp critical(sezm_parallel_errors)
      {
        if (!first_) first_ = std::current_exception();
      }
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::exception_ptr first_;
  std::atomic<bool> failed_{false};
};

}  // namespace sezm
