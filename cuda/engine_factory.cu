// The CUDA hooks of src/api/engine_factory.h (the factory reaches the CUDA engine only through
// these, so src/ never includes cuda/). cuda_device_count is defined with the engine (engine.cu).
#include <memory>
#include <string>

#include "api/engine_factory.h"
#include "sezm_cuda.h"

namespace sezm {

std::unique_ptr<Engine> make_cuda_engine(const ModelW<double>& weights, const EngineOptions& options) {
  auto e = std::make_unique<CudaEngine>(weights, options.gpu, options.mode);
  if (options.chunk_edges > 0) e->set_chunk_edges(options.chunk_edges);
  e->set_precision(options.precision);
  e->set_edge_state(options.edge_state);
  return e;
}

bool cuda_available(std::string* why) { return cuda_device_available(why); }

}  // namespace sezm
