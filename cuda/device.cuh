#pragma once
// Device queries of the CUDA engine (host side): which device, and whether the model's stack
// tile fits its shared memory. cuda_device_available and cuda_device_count (sezm_cuda.h) are
// defined with them, in device.cu.
#include "cuda_common.cuh"

namespace sezm::cuda {

// Makes device `dev` current for the calling thread and returns its properties; throws
// sezm::Error when no device is usable or `dev` does not exist.
cudaDeviceProp open_device(int dev);

// Throws sezm::Error when one stack CTA of a model of dimensions `d` needs more shared memory per
// block than the device offers.
void check_stack_fits(const Dims& d, const cudaDeviceProp& prop);
// Dims::wgmma for this device: 1 where the stack runs on the warpgroup tile (stack_tile.cuh).
int use_wgmma(const Dims& d, const cudaDeviceProp& prop);
// The stack's layers on the warp-specialised tile (Dims::stack_ws): on the warpgroup tile, for
// the shapes stack_ws.cu supports: 1 (every layer, the forward chained:
// stack_ws_chain.cu) unless SEZM_CUDA_STACK_WS says 0 (none), 2 (all but the gated backward) or 3
// (as 1 with a forward launch per layer).
int use_stack_ws(const Dims& d);
// Dims::stack_f16 (after Dims::stack_ws): 1 where both chained stack launches run (stack_ws_chain,
// stack_ws_chain_bwd) and the stack's largest |w| (weight_max, stack_weight_max) fits the FP16
// images (below kWsF16BMax), unless SEZM_CUDA_STACK_F16=0 (3xTF32 there too: tests, A/B); else 0.
int use_stack_f16(const Dims& d, float weight_max);

}  // namespace sezm::cuda
