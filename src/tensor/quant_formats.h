// GGML block layouts (byte-exact with the GGUF format), the block-size table of every dtype, and
// the int8 activation block the integer dot kernels consume.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/tensor.h"

namespace rapid::tensor {

constexpr int kQK = 32;    // elements per block of the legacy formats
constexpr int kQKK = 256;  // elements per K-quant super-block

#pragma pack(push, 1)
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };
// MXFP4 (tensor/mxfp4.h) as GGML stores it: the E8M0 scale e, then element j in the low nibble of
// qs[j] and j + 16 in the high one (Q4_0's order; DType::MXFP4 pairs elements 2j, 2j + 1 instead).
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };
// IQ4_NL: Q4_0's layout, element j of a block is d·kIq4Values[nibble j] (Q4_0's nibble order).
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
// IQ4_XS: sub-block s (32 elements, qs[16s..16s+15] in Q4_0's nibble order) has the 6-bit scale
// ls = (scales_l[s / 2] >> 4·(s % 2)) & 15 | ((scales_h >> 2s) & 3) << 4 and is d·(ls − 32)·kIq4Values[q].
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
// IQ1 / IQ2 / IQ3 (super-blocks of 256): groups of 8 (IQ1, IQ2) or 4 (IQ3) weights are rows of a
// fixed lattice (tensor/iq_grids.h), times sign bits, times a sub-block scale from the f16 d.
// IQ2_XXS: per 32 elements two uint32 words (qs[4s], qs[4s + 1] as uint16 pairs): the first holds
// four 8-bit grid indices, the second four 7-bit sign groups (bits 7g..) and the 4-bit scale
// (bits 28..31); element scale d·(0.5 + scale)·0.25.
struct BlockIQ2_XXS { uint16_t d; uint16_t qs[32]; };
// IQ2_XS: per 8 elements a uint16, 9-bit grid index then 7 sign bits; 4-bit scales per 16 elements.
struct BlockIQ2_XS { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; };
// IQ2_S: per 8 elements an index of 8 + 2 (qh) bits and a whole sign byte; scales as IQ2_XS.
struct BlockIQ2_S { uint16_t d; uint8_t qs[32]; uint8_t signs[32]; uint8_t qh[8]; uint8_t scales[8]; };
// IQ3_XXS: per 4 elements an 8-bit grid index; per 32 a uint32 of four 7-bit sign groups and a
// 4-bit scale (bits 28..31), element scale d·(0.5 + scale)·0.5.
struct BlockIQ3_XXS { uint16_t d; uint8_t qs[64]; uint8_t scales_signs[32]; };
// IQ3_S: per 4 elements an index of 8 + 1 (qh) bits; one sign bit per element; 4-bit scales per 32
// elements, element scale d·(1 + 2·scale).
struct BlockIQ3_S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; };
// IQ1_S: per 8 elements an index of 8 + 3 (qh) bits into the ±1 / 0 lattice; per 32 elements qh[s]
// also holds a 3-bit scale (bits 12..14) and the sign of a ±0.125 shift (bit 15).
struct BlockIQ1_S { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; };
// IQ1_M: IQ1_S's indices with 3 + 1 (shift sign) high bits per 8 elements in qh nibbles, 3-bit
// scales per 16 elements, and the f16 d spread over the top nibbles of the four scale words.
struct BlockIQ1_M { uint8_t qs[32]; uint8_t qh[16]; uint16_t scales[4]; };
#pragma pack(pop)

// The 16 values an IQ4_NL / IQ4_XS nibble stands for (the format's table).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// IQ4_XS sub-block s's scale minus 32 (−32..31).
inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
  return (((b.scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((b.scales_h >> (2 * s)) & 3) << 4)) - 32;
}
// The lattice types' 4-bit scale j (IQ2_XS, IQ2_S: per 16 elements; IQ3_S: per 32), low nibble first.
inline int iq_scale4(const uint8_t* scales, int j) { return (scales[j / 2] >> (4 * (j % 2))) & 15; }
// IQ1_M's f16 d (the top nibbles of its four scale words) and its 3-bit scale j (per 16 elements).
inline uint16_t iq1_m_d(const BlockIQ1_M& b) {
  const uint16_t* sc = b.scales;
  return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0xf0) | ((sc[2] >> 4) & 0xf00) | (sc[3] & 0xf000));
}
inline int iq1_m_scale(const BlockIQ1_M& b, int j) { return (b.scales[j / 4] >> (3 * (j % 4))) & 7; }

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ2_K) == 84 &&
              sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292 && sizeof(BlockMXFP4) == 17 &&
              sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockIQ2_XXS) == 66 &&
              sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82 && sizeof(BlockIQ3_XXS) == 98 &&
              sizeof(BlockIQ3_S) == 110 && sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);

// One activation block: 32 values as int8 with scale d (x ≈ d*q) and the integer sum of q,
// which the kernels need for the weight offsets (Q4_1 min, Q4_0's -8, Q8_0's +128 bias trick).
struct alignas(8) ActQ8 {
  float d;
  int32_t sum;
  int8_t qs[32];
};
static_assert(sizeof(ActQ8) == 40);

// What the integer kernels of the 32-element formats need besides each block's unsigned values
// (which every ISA unpacks its own way): a signed offset taken off exactly in integers as
// kOffset·Σx (Q4_0 stores q + 8, Q5_0 q + 16; Q8_0 only in kernels that bias its signed bytes by
// +128), or a per-block min m added as m·dx·Σx (Q4_1, Q5_1).
template <class B>
struct LegacyFormat;
template <>
struct LegacyFormat<BlockQ4_0> { static constexpr int kOffset = -8; static constexpr bool kMin = false; };
template <>
struct LegacyFormat<BlockQ4_1> { static constexpr int kOffset = 0; static constexpr bool kMin = true; };
template <>
struct LegacyFormat<BlockQ5_0> { static constexpr int kOffset = -16; static constexpr bool kMin = false; };
template <>
struct LegacyFormat<BlockQ5_1> { static constexpr int kOffset = 0; static constexpr bool kMin = true; };
template <>
struct LegacyFormat<BlockQ8_0> { static constexpr int kOffset = -128; static constexpr bool kMin = false; };

// Pair j (0..7) of the eight 6-bit (scale, min) pairs packed in the 12 `scales` bytes of a Q4_K /
// Q5_K super-block. `static` on purpose: the SIMD kernel files include this header with their own
// ISA flags, and an inline function with external linkage could be merged across them.
static inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The one table of block sizes: elements and bytes per block of every fixed-size dtype (1 and the
// element size for F32/F16/BF16/ints; MXFP4: 32 elements in 16 nibble bytes, its scales apart).
// block_bytes throws Error for MLX_AFFINE, whose packing depends on the tensor's bits
// (tensor/mlx_affine.h).
int64_t block_elems(DType t);
size_t block_bytes(DType t);
// Bytes of one row of `cols` elements; throws Error if cols is not a whole number of blocks.
size_t row_bytes(DType t, int64_t cols);
bool is_ggml_quant(DType t);  // GGML block formats, MXFP4_GGML included (not MXFP4, whose scales are apart)

}  // namespace rapid::tensor
