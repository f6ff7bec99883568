#include "tensor/tensor.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "tensor/fp16.h"
#include "tensor/gguf_dequant.h"
#include "tensor/mlx_affine.h"

namespace rapid {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::Q8_0: return "Q8_0";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::Q8_K: return "Q8_K";
    case DType::MLX_AFFINE: return "MLX_AFFINE";
    case DType::I32: return "I32";
    case DType::U32: return "U32";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
  }
  return "?";
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::I8: case DType::U8: return 1;
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q8_0: return 34;
    case DType::Q2_K: return 84;
    case DType::Q3_K: return 110;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    case DType::Q8_K: return 292;
    case DType::MLX_AFFINE: return 0;
  }
  return 0;
}

int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
      return 32;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::Q8_K:
      return 256;
    default: return 1;
  }
}

void dequantize_row(const Tensor& t, int64_t row, float* out) {
  int64_t rows = t.rows(), cols = t.cols();
  if (row < 0 || row >= rows)
    throw Error("dequantize_row: row " + std::to_string(row) + " out of range for '" + t.name + "'");
  if (t.dtype == DType::MLX_AFFINE) {
    mlx::dequantize_row(t, row, out);
    return;
  }
  int64_t be = dtype_block_elems(t.dtype);
  if (cols % be)
    throw Error("dequantize_row: '" + t.name + "' row is not a whole number of blocks");
  size_t rb = size_t(cols / be) * dtype_block_bytes(t.dtype);
  if (t.data == nullptr || rb * size_t(rows) > t.nbytes)
    throw Error("dequantize_row: '" + t.name + "' has fewer bytes than its shape needs");
  const uint8_t* p = static_cast<const uint8_t*>(t.data) + size_t(row) * rb;
  switch (t.dtype) {
    case DType::F32: std::memcpy(out, p, size_t(cols) * 4); return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = t.dtype == DType::F16 ? f16_to_f32(v) : bf16_to_f32(v);
      }
      return;
    case DType::I32:
      for (int64_t i = 0; i < cols; ++i) {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = float(v);
      }
      return;
    case DType::U32:
      for (int64_t i = 0; i < cols; ++i) {
        uint32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = float(v);
      }
      return;
    case DType::I8:
      for (int64_t i = 0; i < cols; ++i) out[i] = float(int8_t(p[i]));
      return;
    case DType::U8:
      for (int64_t i = 0; i < cols; ++i) out[i] = float(p[i]);
      return;
    default: ggml::dequantize(t.dtype, p, cols, out);
  }
}

}  // namespace rapid
