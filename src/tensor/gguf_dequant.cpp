#include "tensor/gguf_dequant.h"

#include <cstring>

#include "common/error.h"
#include "tensor/fp16.h"
#include "tensor/quant_formats.h"

namespace rapid::ggml {
namespace {

float h(const uint8_t* p) {  // little-endian f16 at p
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

// Block sizes in bytes: Q4_0 18, Q4_1 20, Q5_0 22, Q5_1 24, Q8_0 34 (32 elements);
// Q2_K 84, Q3_K 110, Q4_K 144, Q5_K 176, Q6_K 210, Q8_K 292 (256 elements).

void q4_0(const uint8_t* b, float* y) {  // d | qs[16]: low nibbles = first 16, high = last 16
  float d = h(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * ((qs[j] & 0x0F) - 8);
    y[j + 16] = d * ((qs[j] >> 4) - 8);
  }
}

void q4_1(const uint8_t* b, float* y) {  // d | m | qs[16]
  float d = h(b), m = h(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * (qs[j] & 0x0F) + m;
    y[j + 16] = d * (qs[j] >> 4) + m;
  }
}

// 5-bit: the 5th bit of element j lives in bit j of the 32-bit little-endian qh.
void q5(const uint8_t* qh_p, const uint8_t* qs, float d, float m, int offset, float* y) {
  uint32_t qh = uint32_t(qh_p[0]) | uint32_t(qh_p[1]) << 8 | uint32_t(qh_p[2]) << 16 |
                uint32_t(qh_p[3]) << 24;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
    int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = d * (lo - offset) + m;
    y[j + 16] = d * (hi - offset) + m;
  }
}

void q5_0(const uint8_t* b, float* y) { q5(b + 2, b + 6, h(b), 0.0f, 16, y); }
void q5_1(const uint8_t* b, float* y) { q5(b + 4, b + 8, h(b), h(b + 2), 0, y); }

void q8_0(const uint8_t* b, float* y) {
  float d = h(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * qs[j];
}

// Q2_K: scales[16] (low nibble scale, high nibble min) | qs[64] | d | dmin.
// 2-bit values: 4 planes (shift 0,2,4,6) over each 32-byte half; 16 sub-blocks of 16.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* q = b + 16;
  float d = h(b + 80), dmin = h(b + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        uint8_t s = sc[is++];
        float dl = d * (s & 0x0F), ml = dmin * (s >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[part * 16 + l] >> shift) & 3) - ml;
      }
    }
  }
}

// Q3_K: hmask[32] | qs[64] | scales[12] (16 signed 6-bit scales, offset 32) | d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* s = b + 96;
  float d = h(b + 108);
  // 6-bit scale i: low 4 bits from s[i % 8] (nibble i / 8), high 2 bits from s[8 + i % 4]
  // (bit pair i / 4).
  int scales[16];
  for (int i = 0; i < 16; ++i) {
    int lo = (i < 8) ? (s[i] & 0x0F) : (s[i - 8] >> 4);
    int hi = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    scales[i] = (lo | (hi << 4)) - 32;
  }
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int part = 0; part < 2; ++part) {
        float dl = d * scales[is++];
        for (int l = 0; l < 16; ++l) {
          int idx = part * 16 + l;
          int v = ((q[idx] >> shift) & 3) - ((hm[idx] & m) ? 0 : 4);
          *y++ = dl * v;
        }
      }
    }
  }
}

// Q4_K: d | dmin | scales[12] | qs[128]; 4 chunks of 64 (low nibbles then high nibbles of 32 bytes).
void q4_k(const uint8_t* b, float* y) {
  float d = h(b), dmin = h(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* q = b + 16;
  for (int c = 0; c < 4; ++c, q += 32) {
    int sc, mn;
    scale_min_k4(2 * c, s, sc, mn);
    float d1 = d * sc, m1 = dmin * mn;
    scale_min_k4(2 * c + 1, s, sc, mn);
    float d2 = d * sc, m2 = dmin * mn;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
  }
}

// Q5_K: d | dmin | scales[12] | qh[32] | qs[128]; qh bit (2c) / (2c+1) is the 5th bit.
void q5_k(const uint8_t* b, float* y) {
  float d = h(b), dmin = h(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48;
  for (int c = 0; c < 4; ++c, q += 32) {
    int sc, mn;
    scale_min_k4(2 * c, s, sc, mn);
    float d1 = d * sc, m1 = dmin * mn;
    scale_min_k4(2 * c + 1, s, sc, mn);
    float d2 = d * sc, m2 = dmin * mn;
    uint8_t u1 = uint8_t(1u << (2 * c)), u2 = uint8_t(2u << (2 * c));
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
  }
}

// Q6_K: ql[128] | qh[64] | scales[16] (int8) | d; two halves of 128 elements.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  float d = h(b + 208);
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int v1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int v2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int v3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int v4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * v1;
      y[l + 32] = d * sc[is + 2] * v2;
      y[l + 64] = d * sc[is + 4] * v3;
      y[l + 96] = d * sc[is + 6] * v4;
    }
  }
}

void q8_k(const uint8_t* b, float* y) {  // f32 d | qs[256] | bsums[16]
  float d;
  std::memcpy(&d, b, 4);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 4);
  for (int j = 0; j < 256; ++j) y[j] = d * qs[j];
}

}  // namespace

void dequantize(DType t, const uint8_t* src, int64_t n, float* out) {
  void (*fn)(const uint8_t*, float*) = nullptr;
  switch (t) {
    case DType::Q4_0: fn = q4_0; break;
    case DType::Q4_1: fn = q4_1; break;
    case DType::Q5_0: fn = q5_0; break;
    case DType::Q5_1: fn = q5_1; break;
    case DType::Q8_0: fn = q8_0; break;
    case DType::Q2_K: fn = q2_k; break;
    case DType::Q3_K: fn = q3_k; break;
    case DType::Q4_K: fn = q4_k; break;
    case DType::Q5_K: fn = q5_k; break;
    case DType::Q6_K: fn = q6_k; break;
    case DType::Q8_K: fn = q8_k; break;
    default: throw Error(std::string("ggml::dequantize: not a block type: ") + dtype_name(t));
  }
  int64_t be = dtype_block_elems(t);
  size_t bb = dtype_block_bytes(t);
  if (n % be) throw Error("ggml::dequantize: element count is not a whole number of blocks");
  for (int64_t i = 0; i < n / be; ++i) fn(src + i * bb, out + i * be);
}

}  // namespace rapid::ggml
