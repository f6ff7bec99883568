// MLX affine quantization ("mlx_lm.convert -q" checkpoints): per group of `group_size` elements
// along a row, w ≈ scale * q + bias with q an unsigned `bits`-bit integer. The q values of a row
// form one little-endian bit stream (element j occupies bits [j*bits, (j+1)*bits)), stored as
// uint32 words; for 2/4/8 bits this is "element j in word j/(32/bits) at bit (j%(32/bits))*bits",
// for 3/5/6 bits it is MLX's 8-values-in-3/5-bytes and 4-values-in-3-bytes packing.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace rapid::tensor::mlx {

bool valid_bits(int bits);
bool valid_group_size(int g);

// Packed bytes of one row of `cols` elements (a whole number of uint32 words).
int64_t packed_row_bytes(int64_t cols, int bits);

// Reads element j of a packed row.
uint32_t unpack(const uint8_t* row, int64_t j, int bits);

// Quantizes one row like mlx.core.quantize (same rounding, same zero-exact edge handling).
// `packed` receives packed_row_bytes(cols, bits) bytes; scales/biases cols/group_size floats.
void quantize_row(const float* w, int64_t cols, int bits, int group_size, uint8_t* packed,
                  float* scales, float* biases);

// Dequantizes one packed row of `cols` elements; scales/biases are the row's cols/group_size
// values in `group_dtype` (F32/F16/BF16). Tensor-level checks are in tensor/dequantize.h.
void dequantize_row(const uint8_t* packed, const void* scales, const void* biases, DType group_dtype,
                    int bits, int group_size, int64_t cols, float* out);

}  // namespace rapid::tensor::mlx
