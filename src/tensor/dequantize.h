// Scalar dequantization of one row to f32: the reference every fast kernel is tested against,
// and the fallback path for formats without an integer kernel.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace rapid {

// `row` points at the row's first block; `cols` elements are written to `out`.
void dequantize_row_raw(DType t, const void* row, int64_t cols, float* out);

// MLX affine: `packed` is the row's uint32 words, scales/biases the row's groups.
void dequantize_mlx_row(const uint32_t* packed, const void* scales, const void* biases,
                        DType group_dtype, int bits, int group_size, int64_t cols, float* out);

// Any Tensor (2-D view: rows × cols), row `r`.
void dequantize_tensor_row(const Tensor& t, int64_t r, float* out);

}  // namespace rapid
