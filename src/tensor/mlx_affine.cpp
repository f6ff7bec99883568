#include "tensor/mlx_affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/error.h"
#include "tensor/fp16.h"

namespace rapid::tensor::mlx {

bool valid_bits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}
bool valid_group_size(int g) { return g == 32 || g == 64 || g == 128; }

int64_t packed_row_bytes(int64_t cols, int bits) { return (cols * bits + 31) / 32 * 4; }

uint32_t unpack(const uint8_t* row, int64_t j, int bits) {
  int64_t bit = j * bits;
  const uint8_t* p = row + bit / 8;
  int shift = int(bit % 8);
  // At most 8 bits spanning 2 bytes (shift <= 7, bits <= 8): read 16 bits. The caller guarantees
  // the row is whole uint32 words, so the byte after the last element's first byte exists
  // whenever the element crosses a byte boundary.
  uint32_t v = p[0];
  if (shift + bits > 8) v |= uint32_t(p[1]) << 8;
  return (v >> shift) & ((1u << bits) - 1);
}

static float load_group_value(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::F32: {
      float f;
      std::memcpy(&f, static_cast<const uint8_t*>(base) + 4 * i, 4);
      return f;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, static_cast<const uint8_t*>(base) + 2 * i, 2);
      return dt == DType::F16 ? f16_to_f32(v) : bf16_to_f32(v);
    }
    default: throw Error(std::string("MLX scales/biases of unsupported dtype ") + dtype_name(dt));
  }
}

void dequantize_row(const uint8_t* packed, const void* scales, const void* biases, DType group_dtype,
                    int bits, int group_size, int64_t cols, float* out) {
  if (!valid_bits(bits) || group_size <= 0 || cols % group_size != 0)
    throw Error("MLX affine: bad bits/group_size for row of " + std::to_string(cols));
  int64_t groups = cols / group_size;
  for (int64_t g = 0; g < groups; ++g) {
    float s = load_group_value(scales, group_dtype, g);
    float b = load_group_value(biases, group_dtype, g);
    for (int64_t k = 0; k < group_size; ++k) {
      int64_t j = g * group_size + k;
      out[j] = s * float(unpack(packed, j, bits)) + b;
    }
  }
}

void quantize_row(const float* w, int64_t cols, int bits, int group_size, uint8_t* packed,
                  float* scales, float* biases) {
  const float n_bins = float((1 << bits) - 1);
  const float eps = 1e-7f;
  std::memset(packed, 0, size_t(packed_row_bytes(cols, bits)));
  for (int64_t g = 0; g < cols / group_size; ++g) {
    const float* x = w + g * group_size;
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int k = 0; k < group_size; ++k) {
      lo = std::min(lo, x[k]);
      hi = std::max(hi, x[k]);
    }
    // Anchor the grid on the extreme with the larger magnitude so that it is represented exactly
    // (scale may be negative); same choice as MLX's affine quantizer.
    bool neg_edge = std::fabs(lo) > std::fabs(hi);
    float scale = std::max((hi - lo) / n_bins, eps);
    if (!neg_edge) scale = -scale;
    float edge = neg_edge ? lo : hi;
    float q0 = std::rint(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    scales[g] = scale;
    biases[g] = bias;
    for (int k = 0; k < group_size; ++k) {
      float q = std::rint((x[k] - bias) / scale);
      q = std::min(std::max(q, 0.0f), n_bins);
      int64_t bit = (g * group_size + k) * bits;
      uint32_t v = uint32_t(q) << (bit % 8);
      uint8_t* p = packed + bit / 8;
      p[0] |= uint8_t(v);
      if ((bit % 8) + bits > 8) p[1] |= uint8_t(v >> 8);
    }
  }
}

}  // namespace rapid::tensor::mlx
