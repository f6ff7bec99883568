// MXFP4 (OCP microscaling FP4): per block of 32 elements along a row, one E8M0 scale byte
// (2^(e-127)) and 32 E2M1 values (sign, 2 exponent bits, 1 mantissa bit: ±{0, .5, 1, 1.5, 2, 3, 4,
// 6}) packed two per byte, element 2j in the low nibble of byte j, 2j+1 in the high one. Both
// layouts that ship it keep the nibbles and the scales in separate arrays with that order: MLX's
// `mode: "mxfp4"` (uint32 words of 8 nibbles, LSB first, plus uint8 `scales`) and gpt-oss's
// Hugging Face `*_blocks` [.., rows, cols/32, 16] + `*_scales` [.., rows, cols/32].
#pragma once
#include <cstdint>
#include <cstring>

namespace rapid::tensor::mxfp4 {

constexpr int kBlock = 32;       // elements per scale
constexpr int kBlockBytes = 16;  // packed nibble bytes per block (the scale is in its own array)

// 2·E2M1: every value as an exact integer (the kernels' int8 weights); halve to get the value.
inline constexpr int8_t kTwiceE2M1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e-127) exactly (e = 0 is the subnormal 2^-127; e = 255, NaN in the OCP spec, reads as +inf as in
// MLX). `static` on purpose: SIMD files include this with their own ISA flags.
static inline float e8m0_to_f32(uint8_t e) {
  const uint32_t bits = e == 0 ? 0x00400000u : uint32_t(e) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Dequantizes one row of `cols` elements (a multiple of 32): `packed` cols/2 bytes, `scales`
// cols/32 bytes.
void dequantize_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out);

}  // namespace rapid::tensor::mxfp4
