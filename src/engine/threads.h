#pragma once
// The CPU engine's OpenMP thread count and id (1 and 0 without OpenMP).
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
inline int engine_thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace sezm
