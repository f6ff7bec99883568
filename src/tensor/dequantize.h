// Scalar dequantization of one row to f32, one implementation per format: the reference every
// fast kernel in compute/ is tested against (itself checked against gguf-py and mlx.core goldens
// in tests/model_loader_test.cpp), the loaders' and converter's row reader, and the fallback path
// for formats without an integer kernel.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace rapid::tensor {

// `row` points at the row's first byte; `cols` elements of a fixed-size dtype (floats, ints, GGML
// blocks) are written to `out`. Throws Error for MLX_AFFINE / MXFP4 (scales apart) or a row that is not whole blocks.
void dequantize_row_raw(DType t, const void* row, int64_t cols, float* out);

// Row `row` of the 2-D view rows() x cols() of any tensor, MLX_AFFINE and MXFP4 included. Throws Error
// naming the tensor when the row is out of range or the tensor is smaller than its shape needs.
void dequantize_row(const Tensor& t, int64_t row, float* out);

}  // namespace rapid::tensor
