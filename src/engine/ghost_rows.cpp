// The conversions of the staged ghost exchange (ghost_rows.h), on the rank's OpenMP threads.
// Why: one core converts ~1 scalar per ns (0.7-0.9 ns measured on the development machine, an
// AMD EPYC; docs/multi-gpu.md), and a 4,096-atom rank of the diamond example converts ~29 M
// scalars per force call (two blocks, forward and reverse): 21-27 ms on one core, a third to a
// half of the GPU's call. Each element is converted on its own, so any thread count gives the
// same bits.
#include "engine/ghost_rows.h"

namespace sezm {
namespace {
// Below this many scalars the threads' start costs more than they save.
constexpr size_t kParallelScalars = size_t(1) << 16;
}  // namespace

void GhostRowPlan::unpack(const float* compact, size_t w, double* rows) const {
  const long n = static_cast<long>(owned_.size());
#pragma omp parallel for schedule(static) if (owned_.size() * w >= kParallelScalars)
  for (long i = 0; i < n; ++i) {
    const float* c = compact + static_cast<size_t>(i) * w;
    double* r = rows + static_cast<size_t>(owned_[static_cast<size_t>(i)]) * w;
    for (size_t k = 0; k < w; ++k) r[k] = c[k];
  }
}

void GhostRowPlan::pack(const double* rows, size_t w, float* compact) const {
  const long n = static_cast<long>(owned_.size());
#pragma omp parallel for schedule(static) if (owned_.size() * w >= kParallelScalars)
  for (long i = 0; i < n; ++i) {
    const double* r = rows + static_cast<size_t>(owned_[static_cast<size_t>(i)]) * w;
    float* c = compact + static_cast<size_t>(i) * w;
    for (size_t k = 0; k < w; ++k) c[k] = static_cast<float>(r[k]);
  }
}

void widen(const float* f, size_t n, double* d) {
  const long m = static_cast<long>(n);
#pragma omp parallel for schedule(static) if (n >= kParallelScalars)
  for (long i = 0; i < m; ++i) d[i] = f[i];
}

void narrow(const double* d, size_t n, float* f) {
  const long m = static_cast<long>(n);
#pragma omp parallel for schedule(static) if (n >= kParallelScalars)
  for (long i = 0; i < m; ++i) f[i] = static_cast<float>(d[i]);
}

}  // namespace sezm
