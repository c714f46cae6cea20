// The Wigner-D construction tables (engine/wigner_d.cpp's, per degree l <= 3) converted to float and
// uploaded once for the kernels (WignerTablesDev, model_dev.cuh): DeviceWeights::upload's last step
// (device_weights.cpp). A C++ file, as device_weights.cpp (cuda/CMakeLists.txt).
#include <vector>

#include "device_weights.cuh"
#include "engine/wigner_d.h"

namespace sezm::cuda {

void DeviceWeights::upload_wigner(MemCounter* mem, cudaStream_t s) {
  std::vector<int> ckb;
  std::vector<CkTermF> ck;
  std::vector<RealTermF> rt;
  std::vector<GenNzF> jnz;
  for (int l = 0; l <= 3; ++l) {
    const auto& tb = detail::wigner_block_tables(l);
    wt.ck_begin_off[l] = static_cast<int>(ckb.size());
    wt.ck_off[l] = static_cast<int>(ck.size());
    wt.rt_off[l] = static_cast<int>(rt.size());
    for (int e = 0; e <= tb.n_entries; ++e) ckb.push_back(tb.ck_begin[e]);
    for (int t = 0; t < tb.ck_begin[tb.n_entries]; ++t)
      ck.push_back(CkTermF{static_cast<float>(tb.ck[t].coef), tb.ck[t].a, tb.ck[t].b});
    for (int e = 0; e < 4 * tb.n_entries; ++e)
      rt.push_back(RealTermF{tb.rt[e].idx, static_cast<float>(tb.rt[e].cre), static_cast<float>(tb.rt[e].cim)});
    for (int a = 0; a < 2; ++a) {
      wt.jnz_off[l][a] = static_cast<int>(jnz.size());
      wt.jnz_n[l][a] = tb.J_nnz[a];
      for (int z = 0; z < tb.J_nnz[a]; ++z)
        jnz.push_back(GenNzF{tb.J_nz[a][z].i, tb.J_nz[a][z].k, static_cast<float>(tb.J_nz[a][z].val)});
    }
  }
  wt_ckb_.set_counter(mem);
  wt_ck_.set_counter(mem);
  wt_rt_.set_counter(mem);
  wt_jnz_.set_counter(mem);
  wt_ckb_.upload(ckb.data(), ckb.size(), s);
  wt_ck_.upload(ck.data(), ck.size(), s);
  wt_rt_.upload(rt.data(), rt.size(), s);
  wt_jnz_.upload(jnz.data(), jnz.size(), s);
  wt.ck_begin = wt_ckb_.data();
  wt.ck = wt_ck_.data();
  wt.rt = wt_rt_.data();
  wt.jnz = wt_jnz_.data();
}

}  // namespace sezm::cuda
