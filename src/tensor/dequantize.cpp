#include "tensor/dequantize.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "tensor/fp16.h"
#include "tensor/iq_grids.h"
#include "tensor/lane_layout.h"
#include "tensor/mlx_affine.h"
#include "tensor/mxfp4.h"
#include "tensor/quant_formats.h"

namespace rapid::tensor {
namespace {

inline float h2f(uint16_t h) { return f16_to_f32(h); }

void deq_q4_0(const BlockQ4_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = h2f(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = ((b[i].qs[j] & 0x0f) - 8) * d;
      y[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void deq_q4_1(const BlockQ4_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (b[i].qs[j] & 0x0f) * d + m;
      y[j + 16] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}

void deq_q5_0(const BlockQ5_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = h2f(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = (((b[i].qs[j] & 0x0f) | h0) - 16) * d;
      y[j + 16] = (((b[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void deq_q5_1(const BlockQ5_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = h2f(b[i].d), m = h2f(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((b[i].qs[j] & 0x0f) | h0) * d + m;
      y[j + 16] = ((b[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void deq_q8_0(const BlockQ8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = h2f(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = b[i].qs[j] * d;
  }
}

void deq_q2_k(const BlockQ2_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d), mn = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          uint8_t sc = b[i].scales[is++];
          float dl = d * (sc & 0x0f), ml = mn * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

// The 16 elements of a Q4_0-order half block: nibble j is element j (low) or j + 16 (high).
void deq_iq4_half(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4Values[qs[j] & 0x0f];
    y[j + 16] = d * kIq4Values[qs[j] >> 4];
  }
}
void deq_iq4_nl(const BlockIQ4_NL* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) deq_iq4_half(b[i].qs, h2f(b[i].d), y);
}
void deq_iq4_xs(const BlockIQ4_XS* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i)
    for (int s = 0; s < 8; ++s, y += 32) deq_iq4_half(b[i].qs + 16 * s, h2f(b[i].d) * iq4_xs_scale(b[i], s), y);
}

void deq_q3_k(const BlockQ3_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float dall = h2f(b[i].d);
    // 16 six-bit scales: low 4 bits in bytes 0..7 (two per byte), high 2 bits in bytes 8..11.
    int8_t scales[16];
    for (int j = 0; j < 16; ++j) {
      int lo = j < 8 ? (b[i].scales[j] & 0x0f) : (b[i].scales[j - 8] >> 4);
      int hi = (b[i].scales[8 + (j % 4)] >> (2 * (j / 4))) & 3;
      scales[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
    const uint8_t* q = b[i].qs;
    const uint8_t* hm = b[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          float dl = dall * scales[is++];
          for (int l = 0; l < 16; ++l) {
            int k = l + 16 * half;
            *y++ = dl * (((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
          }
        }
        m <<= 1;
      }
      q += 32;
    }
  }
}

void deq_q4_k(const BlockQ4_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d), mn = h2f(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
      int sc, m;
      scale_min_k4(is, b[i].scales, sc, m);
      float d1 = d * sc, m1 = mn * m;
      scale_min_k4(is + 1, b[i].scales, sc, m);
      float d2 = d * sc, m2 = mn * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void deq_q5_k(const BlockQ5_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d), mn = h2f(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      int sc, m;
      scale_min_k4(is, b[i].scales, sc, m);
      float d1 = d * sc, m1 = mn * m;
      scale_min_k4(is + 1, b[i].scales, sc, m);
      float d2 = d * sc, m2 = mn * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

void deq_q6_k(const BlockQ6_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void deq_q8_k(const BlockQ8_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < 256; ++j) *y++ = b[i].d * b[i].qs[j];
}

// The same products as mxfp4::dequantize_row (so the same bits), in GGML's nibble order.
void deq_mxfp4_ggml(const BlockMXFP4* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float half_scale = 0.5f * mxfp4::e8m0_to_f32(b[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = half_scale * mxfp4::kTwiceE2M1[b[i].qs[j] & 0x0f];
      y[j + 16] = half_scale * mxfp4::kTwiceE2M1[b[i].qs[j] >> 4];
    }
  }
}

// Integers read as floats (index tensors and the like), element by element: rows of any dtype may
// sit at any byte offset in a safetensors file.
template <class T>
void ints_to_f32(const uint8_t* p, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + sizeof(T) * i, sizeof(T));
    out[i] = float(v);
  }
}

void dequantize_mlx(const Tensor& t, int64_t row, float* out) {
  int64_t cols = t.cols();
  if (!mlx::valid_bits(t.bits) || !mlx::valid_group_size(t.group_size) || cols % t.group_size)
    throw Error("'" + t.name + "': invalid MLX quantization (bits " + std::to_string(t.bits) +
                ", group_size " + std::to_string(t.group_size) + ", cols " + std::to_string(cols) + ")");
  int64_t rb = mlx::packed_row_bytes(cols, t.bits);
  if (!t.data || !t.scales || !t.biases || size_t(rb) * size_t(t.rows()) > t.nbytes)
    throw Error("'" + t.name + "': MLX tensor has fewer bytes than its shape needs");
  int64_t groups = cols / t.group_size;
  size_t gb = block_bytes(t.group_dtype);
  const uint8_t* packed = static_cast<const uint8_t*>(t.data) + row * rb;
  std::vector<uint8_t> plain;
  if (t.dtype == DType::MLX_LANES) {  // the row's blocks back in element order
    plain.resize(static_cast<size_t>(rb));
    mlx_lanes_row(t.bits, packed, cols / 32, plain.data());
    packed = plain.data();
  }
  mlx::dequantize_row(packed,
                      static_cast<const uint8_t*>(t.scales) + size_t(row * groups) * gb,
                      static_cast<const uint8_t*>(t.biases) + size_t(row * groups) * gb, t.group_dtype,
                      t.bits, t.group_size, cols, out);
}

void dequantize_mxfp4(const Tensor& t, int64_t row, float* out) {
  int64_t cols = t.cols();
  if (cols % mxfp4::kBlock)
    throw Error("'" + t.name + "': MXFP4 row of " + std::to_string(cols) + " is not a whole number of 32-element blocks");
  const int64_t nb = cols / mxfp4::kBlock;
  if (!t.data || !t.scales || size_t(nb * mxfp4::kBlockBytes) * size_t(t.rows()) > t.nbytes)
    throw Error("'" + t.name + "': MXFP4 tensor has fewer bytes than its shape needs");
  mxfp4::dequantize_row(static_cast<const uint8_t*>(t.data) + row * nb * mxfp4::kBlockBytes,
                        static_cast<const uint8_t*>(t.scales) + row * nb, cols, out);
}

// A lane-layout row (tensor/lane_layout.h): each block given back in GGUF's form, then its
// format's own dequantization.
template <class B>
void deq_lanes(const uint8_t* row, int64_t nb, float* y, B (*block)(const uint8_t*, int64_t, int64_t),
               void (*deq)(const B*, int64_t, float*)) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const B b = block(row, nb, i);
    deq(&b, 1, y);
  }
}

// The same for the K-quant lane layouts, a super-block at a time.
template <class B>
void deq_super_lanes(const void* row, int64_t nb, float* y, B (*back)(const B&), void (*deq)(const B*, int64_t, float*)) {
  const auto* b = static_cast<const B*>(row);
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const B q = back(b[i]);
    deq(&q, 1, y);
  }
}

}  // namespace

void dequantize_row_raw(DType t, const void* row, int64_t cols, float* out) {
  int64_t nb = cols / block_elems(t);
  if (cols % block_elems(t) != 0)
    throw Error(std::string("dequantize: ") + std::to_string(cols) +
                " columns is not a whole number of blocks");
  auto* p = static_cast<const uint8_t*>(row);
  switch (t) {
    case DType::F32: std::memcpy(out, row, cols * 4); return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = t == DType::F16 ? f16_to_f32(v) : bf16_to_f32(v);
      }
      return;
    case DType::I32: ints_to_f32<int32_t>(p, cols, out); return;
    case DType::U32: ints_to_f32<uint32_t>(p, cols, out); return;
    case DType::I8: ints_to_f32<int8_t>(p, cols, out); return;
    case DType::U8: ints_to_f32<uint8_t>(p, cols, out); return;
    case DType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0*>(row), nb, out); return;
    case DType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1*>(row), nb, out); return;
    case DType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0*>(row), nb, out); return;
    case DType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1*>(row), nb, out); return;
    case DType::Q8_0: deq_q8_0(static_cast<const BlockQ8_0*>(row), nb, out); return;
    case DType::Q2_K: deq_q2_k(static_cast<const BlockQ2_K*>(row), nb, out); return;
    case DType::Q3_K: deq_q3_k(static_cast<const BlockQ3_K*>(row), nb, out); return;
    case DType::Q4_K: deq_q4_k(static_cast<const BlockQ4_K*>(row), nb, out); return;
    case DType::Q5_K: deq_q5_k(static_cast<const BlockQ5_K*>(row), nb, out); return;
    case DType::Q6_K: deq_q6_k(static_cast<const BlockQ6_K*>(row), nb, out); return;
    case DType::Q8_K: deq_q8_k(static_cast<const BlockQ8_K*>(row), nb, out); return;
    case DType::MXFP4_GGML: deq_mxfp4_ggml(static_cast<const BlockMXFP4*>(row), nb, out); return;
    case DType::IQ4_NL: deq_iq4_nl(static_cast<const BlockIQ4_NL*>(row), nb, out); return;
    case DType::IQ4_XS: deq_iq4_xs(static_cast<const BlockIQ4_XS*>(row), nb, out); return;
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M:
      iq::dequantize(t, row, nb, out);
      return;
    case DType::Q8_0_LANES: deq_lanes(p, nb, out, q8_0_lanes_block, deq_q8_0); return;
    case DType::Q4_0_LANES: deq_lanes(p, nb, out, q4_0_lanes_block, deq_q4_0); return;
    case DType::Q4_1_LANES: deq_lanes(p, nb, out, q4_1_lanes_block, deq_q4_1); return;
    case DType::IQ4_NL_LANES: deq_lanes(p, nb, out, iq4_nl_lanes_block, deq_iq4_nl); return;
    case DType::Q4_K_LANES: deq_super_lanes(row, nb, out, q4_k_lanes_block, deq_q4_k); return;
    case DType::Q6_K_LANES: deq_super_lanes(row, nb, out, q6_k_lanes_block, deq_q6_k); return;
    case DType::IQ4_XS_LANES: deq_super_lanes(row, nb, out, iq4_xs_lanes_block, deq_iq4_xs); return;
    case DType::MLX_AFFINE: case DType::MXFP4: break;  // scales apart: dequantize_row(Tensor)
  }
  throw Error("dequantize: unsupported dtype for a weight row");
}

void dequantize_row(const Tensor& t, int64_t row, float* out) {
  int64_t rows = t.rows(), cols = t.cols();
  if (row < 0 || row >= rows)
    throw Error("dequantize_row: row " + std::to_string(row) + " out of range for '" + t.name + "'");
  if (t.dtype == DType::MLX_AFFINE || t.dtype == DType::MLX_LANES) return dequantize_mlx(t, row, out);
  if (t.dtype == DType::MXFP4) return dequantize_mxfp4(t, row, out);
  int64_t be = block_elems(t.dtype);
  if (cols % be)
    throw Error("dequantize_row: '" + t.name + "' row is not a whole number of blocks");
  size_t rb = size_t(cols / be) * block_bytes(t.dtype);
  if (t.data == nullptr || rb * size_t(rows) > t.nbytes)
    throw Error("dequantize_row: '" + t.name + "' has fewer bytes than its shape needs");
  dequantize_row_raw(t.dtype, static_cast<const uint8_t*>(t.data) + size_t(row) * rb, cols, out);
}

}  // namespace rapid::tensor
