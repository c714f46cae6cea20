#pragma once
// `precision tf32`'s stack input, output and output adjoint in binary16 rows (stack_in_f16,
// stack_out_f16, stack_adj_f16, stack.cuh): the input written by rotate_condition_w, read by the
// register-resident chained forward (stack_ws_chain_regs.cu), which writes the output, read by the
// destination sum (rotate_back_aggregate.cu) and its backward (aggregate_backward_w,
// aggregate_backward_warp.cuh), which writes the adjoint, read by the register-resident chained
// backward (stack_ws_chain_bwd_regs.cu). Why: per edge and pass these rows cross HBM seven times,
// 2560 B each in fp32 for C.pt; the kernels around the stack move mostly them. Each row (focus f,
// chunk edge i) keeps its ROW values as halves, scaled per |m| group (its m = 0 columns, the first
// 4 Cf; its |m| = 1 columns) by a power of two that brings the group's largest |value| into
// [2^14, 2^15): every value within 2^28 of the group's largest keeps ten fraction bits, the precision the
// TF32 pass gives the products' operands, and no model's scale overflows. The rows live in the fp32
// rows' buffer: the halves of row (f, i) at (f Ec + i) ROW halves from its base; from F Ec ROW / 2
// floats on, the rows' inverse scales, group-major (f16_scale_at: the 128 rows of an item's group
// are 512 contiguous bytes, one bulk copy). A value is its half times its group's inverse scale
// (exact).
#include <cuda_fp16.h>

#include "f16_rows_layout.h"

namespace sezm::cuda {

// The power of two mult that brings m (a group's largest |value|) into [2^14, 2^15), and 1 / mult
// (both exact; f16_scale_k says how m = 0, tiny, infinite or NaN fare).
__device__ __forceinline__ void f16_scale(float m, float& mult, float& inv) {
  const int k = f16_scale_k(__float_as_uint(m));
  mult = __uint_as_float(f16_pow2_bits(k));
  inv = __uint_as_float(f16_pow2_bits(-k));
}

}  // namespace sezm::cuda
