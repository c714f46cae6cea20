#pragma once
// What the CPU emulations of the warp-specialised tile's products share (tests/test_wgmma_ws_layout.cpp,
// TF32; tests/test_wgmma_f16_layout.cpp, FP16): the store of the consumers' accumulators.
#include <cmath>
#include <cstddef>
#include <vector>

#include "../cuda/wgmma_ws_layout.h"

namespace sezm_test {

// C (128 rows x N, row-major) from the 256 consumer threads' accumulators acc[ct] (N / 2 each) as
// wg_quad's stores place them: thread ct's quad (p, h) is row ws_row(ct, h), columns 16 p + 4 t ..
// + 3 (t = ct % 4), accumulators 8 p + 2 h, + 1, + 4, + 5. False unless every element of C is
// written exactly once.
inline bool ws_store_quads(const std::vector<std::vector<double>>& acc, int N, std::vector<double>& c) {
  using sezm::cuda::kWsRows;
  using sezm::cuda::ws_row;
  c.assign(static_cast<size_t>(kWsRows) * N, NAN);
  std::vector<int> hits(c.size(), 0);
  for (int ct = 0; ct < 256; ++ct)
    for (int p = 0; p < N / 16; ++p)
      for (int h = 0; h < 2; ++h) {
        const int row = ws_row(ct, h), col = 16 * p + 4 * (ct & 3);
        const int idx[4] = {8 * p + 2 * h, 8 * p + 2 * h + 1, 8 * p + 4 + 2 * h, 8 * p + 5 + 2 * h};
        for (int e = 0; e < 4; ++e) {
          c[static_cast<size_t>(row) * N + col + e] = acc[ct][idx[e]];
          ++hits[static_cast<size_t>(row) * N + col + e];
        }
      }
  for (int h : hits)
    if (h != 1) return false;
  return true;
}

}  // namespace sezm_test
