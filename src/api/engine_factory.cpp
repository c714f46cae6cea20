#include "api/engine_factory.h"

#include "common/error.h"
#include "engine/sezm_model.h"
#include "model/charge_spin.h"

namespace sezm {

std::unique_ptr<Engine> make_engine(ModelW<double> weights, const EngineOptions& options) {
  require_charge_spin_applied(weights);  // the frame's (Q, S) is folded into the weights first
  switch (options.device) {
    case Device::kCpu:
      if (options.precision != Precision::kDeviceDefault)
        throw Error(std::string("precision ") + precision_name(options.precision) +
                    " applies to device cuda only (the CPU engine computes in float64)");
      return std::make_unique<CpuEngine>(std::move(weights));
    case Device::kCuda:
      return make_cuda_engine(weights, options);
  }
  throw Error("make_engine: unknown device");
}

}  // namespace sezm
