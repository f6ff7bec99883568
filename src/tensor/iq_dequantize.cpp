// IQ1 / IQ2 / IQ3 super-blocks to floats (tensor/iq_grids.h), and the lattices' expansion.
#include <bit>
#include <cstring>

#include "common/error.h"
#include "tensor/fp16.h"
#include "tensor/iq_grids.h"
#include "tensor/quant_formats.h"

namespace rapid::tensor::iq {
namespace {

template <class Row, size_t N>
void expand(const uint16_t (&packed)[N], int width, const uint8_t* values, Row (&out)[N]) {
  const int bits = width == 8 ? 2 : 3;
  for (size_t r = 0; r < N; ++r) {
    Row row = 0;
    for (int j = 0; j < width; ++j) row |= Row(values[(packed[r] >> (bits * j)) & ((1 << bits) - 1)]) << (8 * j);
    out[r] = row;
  }
}

Grids make_grids() {
  Grids g;
  static const uint8_t kIq2[] = {0x08, 0x19, 0x2b}, kIq3xxs[] = {4, 12, 20, 28, 36, 44, 52, 62},
                       kIq3s[] = {1, 3, 5, 7, 9, 11, 13, 15}, kIq1[] = {0xff, 0x00, 0x01};  // int8 −1, 0, 1
  expand(kIq2xxsPacked, 8, kIq2, g.iq2xxs);
  expand(kIq2xsPacked, 8, kIq2, g.iq2xs);
  expand(kIq2sPacked, 8, kIq2, g.iq2s);
  expand(kIq1sPacked, 8, kIq1, g.iq1s);
  expand(kIq3xxsPacked, 4, kIq3xxs, g.iq3xxs);
  expand(kIq3sPacked, 4, kIq3s, g.iq3s);
  for (uint32_t i = 0; i < 128; ++i) {
    g.sign_bytes[i] = 0;
    for (int j = 0; j < 8; ++j)
      if ((signs_of_seven(i) >> j) & 1) g.sign_bytes[i] |= uint64_t{0xff} << (8 * j);
  }
  return g;
}

inline float h2f(uint16_t h) { return f16_to_f32(h); }
inline uint32_t u32_at(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// n elements: magnitude byte j of `row` times db, negated where bit j of `signs` is set (by the
// sign bit: the same float as −v, without a branch per element).
inline void put(uint64_t row, uint8_t signs, float db, int n, float* y) {
  for (int j = 0; j < n; ++j) {
    const float v = db * static_cast<float>((row >> (8 * j)) & 0xff);
    const uint32_t bits = std::bit_cast<uint32_t>(v) ^ (static_cast<uint32_t>((signs >> j) & 1) << 31);
    y[j] = std::bit_cast<float>(bits);
  }
}

void iq2_xxs(const BlockIQ2_XXS* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int s = 0; s < 8; ++s) {
      const uint32_t idx = u32_at(b[i].qs + 4 * s), aux = u32_at(b[i].qs + 4 * s + 2);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) put(g.iq2xxs[(idx >> (8 * l)) & 0xff], signs_of_seven((aux >> (7 * l)) & 127), db, 8, y);
    }
  }
}

// IQ2_XS and IQ2_S: scale k (4 bits) covers groups 2k and 2k + 1 of 8.
inline float iq2_scale(float d, const uint8_t* scales, int k) {
  return d * (0.5f + static_cast<float>(iq_scale4(scales, k))) * 0.25f;
}

void iq2_xs(const BlockIQ2_XS* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int gr = 0; gr < 32; ++gr, y += 8) {
      const uint16_t q = b[i].qs[gr];
      put(g.iq2xs[q & 511], signs_of_seven(q >> 9), iq2_scale(d, b[i].scales, gr / 2), 8, y);
    }
  }
}

void iq2_s(const BlockIQ2_S* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int gr = 0; gr < 32; ++gr, y += 8) {
      const int idx = b[i].qs[gr] | ((b[i].qh[gr / 4] >> (2 * (gr % 4))) & 3) << 8;
      put(g.iq2s[idx], b[i].signs[gr], iq2_scale(d, b[i].scales, gr / 2), 8, y);
    }
  }
}

void iq3_xxs(const BlockIQ3_XXS* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int s = 0; s < 8; ++s) {
      const uint32_t aux = u32_at(b[i].scales_signs + 4 * s);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint8_t sg = signs_of_seven((aux >> (7 * l)) & 127);
        const uint8_t* q = b[i].qs + 8 * s + 2 * l;
        put(g.iq3xxs[q[0]], sg, db, 4, y);
        put(g.iq3xxs[q[1]], sg >> 4, db, 4, y + 4);
      }
    }
  }
}

void iq3_s(const BlockIQ3_S* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int s = 0; s < 8; ++s) {
      const float db = d * static_cast<float>(1 + 2 * iq_scale4(b[i].scales, s));
      for (int q = 8 * s; q < 8 * s + 8; ++q, y += 4) {
        const int idx = b[i].qs[q] | ((b[i].qh[q / 8] >> (q % 8)) & 1) << 8;
        put(g.iq3s[idx], b[i].signs[q / 2] >> (4 * (q % 2)), db, 4, y);
      }
    }
  }
}

// IQ1: dl·(lattice value + δ), δ = ±0.125.
inline void put_iq1(uint64_t row, float dl, float delta, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(static_cast<int8_t>(row >> (8 * j))) + delta);
}

void iq1_s(const BlockIQ1_S* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(b[i].d);
    for (int s = 0; s < 8; ++s) {
      const uint16_t qh = b[i].qh[s];
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1), delta = qh & 0x8000 ? -0.125f : 0.125f;
      for (int l = 0; l < 4; ++l, y += 8) put_iq1(g.iq1s[b[i].qs[4 * s + l] | ((qh >> (3 * l)) & 7) << 8], dl, delta, y);
    }
  }
}

void iq1_m(const BlockIQ1_M* b, int64_t nb, float* y) {
  const Grids& g = grids();
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(iq1_m_d(b[i]));
    for (int gr = 0; gr < 32; ++gr, y += 8) {
      const float dl = d * static_cast<float>(2 * iq1_m_scale(b[i], gr / 2) + 1);  // scale k covers groups 2k, 2k + 1
      const int h = (b[i].qh[gr / 2] >> (4 * (gr % 2))) & 15;
      put_iq1(g.iq1s[b[i].qs[gr] | (h & 7) << 8], dl, h & 8 ? -0.125f : 0.125f, y);
    }
  }
}

}  // namespace

const Grids& grids() {
  static const Grids g = make_grids();
  return g;
}

void dequantize(DType t, const void* blocks, int64_t nb, float* y) {
  switch (t) {
    case DType::IQ2_XXS: return iq2_xxs(static_cast<const BlockIQ2_XXS*>(blocks), nb, y);
    case DType::IQ2_XS: return iq2_xs(static_cast<const BlockIQ2_XS*>(blocks), nb, y);
    case DType::IQ2_S: return iq2_s(static_cast<const BlockIQ2_S*>(blocks), nb, y);
    case DType::IQ3_XXS: return iq3_xxs(static_cast<const BlockIQ3_XXS*>(blocks), nb, y);
    case DType::IQ3_S: return iq3_s(static_cast<const BlockIQ3_S*>(blocks), nb, y);
    case DType::IQ1_S: return iq1_s(static_cast<const BlockIQ1_S*>(blocks), nb, y);
    case DType::IQ1_M: return iq1_m(static_cast<const BlockIQ1_M*>(blocks), nb, y);
    default: throw Error(std::string("iq::dequantize: ") + dtype_name(t) + " is not a lattice format");
  }
}

}  // namespace rapid::tensor::iq
