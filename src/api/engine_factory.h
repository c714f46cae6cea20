#pragma once
// The one engine factory: EngineOptions -> a sezm::Engine. Every front end (sezm-eval,
// sezm-bench, the pair style, Potential) calls make_engine; none names a device's engine class.
//
// The CUDA hooks below are declared here and defined in cuda/engine_factory.cu when the CUDA
// engine is built (CMake links sezm_cuda into sezm_api), or by api/no_cuda.cpp, which refuses
// with the reason, when it is not: nothing in src/ includes anything from cuda/.
#include <memory>
#include <string>

#include "engine/engine.h"
#include "model/weights.h"

namespace sezm {

// Throws sezm::Error when the device cannot be used (no CUDA engine in this build, no device,
// a bad ordinal). CUDA-only options (gpu, mode, chunk_edges, edge_state) are ignored on the CPU; front ends
// that take them from users refuse them there themselves, with their own wording.
std::unique_ptr<Engine> make_engine(ModelW<double> weights, const EngineOptions& options);

// The CUDA engine (fp32 on the device) for options.gpu, options.mode, options.chunk_edges,
// options.precision and options.edge_state.
std::unique_ptr<Engine> make_cuda_engine(const ModelW<double>& weights, const EngineOptions& options);
// True when a CUDA device can be used; otherwise `why` says what is missing (the build included).
bool cuda_available(std::string* why = nullptr);
// Number of visible CUDA devices (0 when none is usable or the build has no CUDA engine).
int cuda_device_count();

}  // namespace sezm
