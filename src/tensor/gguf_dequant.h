// Reference dequantizers for the GGML block formats (layouts as in ggml's ggml-common.h).
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace rapid::ggml {

// Dequantizes `n` elements (a whole number of blocks) of block type `t` starting at `src`.
void dequantize(DType t, const uint8_t* src, int64_t n, float* out);

}  // namespace rapid::ggml
