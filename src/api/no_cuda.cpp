// The CUDA hooks of api/engine_factory.h in a build without the CUDA engine (no CUDA compiler at
// configure time, or SEZM_ENABLE_CUDA=OFF): device cuda is refused with the reason.
#include "api/engine_factory.h"
#include "common/error.h"

namespace sezm {

namespace {
const char* kNoCuda = "this build has no CUDA engine (no CUDA compiler was found at configure time)";
}

std::unique_ptr<Engine> make_cuda_engine(const ModelW<double>&, const EngineOptions&) {
  throw Error(std::string("device cuda: ") + kNoCuda);
}

bool cuda_available(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

int cuda_device_count() { return 0; }

}  // namespace sezm
