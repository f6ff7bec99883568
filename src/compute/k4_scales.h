// The 8 six-bit scales and mins of a K-quant super-block (tensor::scale_min_k4's layout) as floats,
// Q3_K's 16 scales and IQ4_XS's 8, shared by the AVX2 and AVX-512 lane kernels. Internal linkage: each ISA's
// translation unit keeps its own copy, compiled with its own flags. Include only from TUs built
// with -mavx2 or above.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/quant_formats.h"

namespace rapid::compute {
namespace {

// The first four of each are the low 6 bits of bytes 0-3 / 4-7; the last four take their low 4 bits
// from bytes 8-11 (low / high nibble) and their top 2 from bytes 0-3 / 4-7. In one xmm (q is read
// 16 bytes wide: a super-block's scales are followed by its quants): dword lanes 0 and 1 carry
// the scales' and the mins' halves side by side, so each step serves both.
[[maybe_unused]] inline void k4_scales(const uint8_t* q, __m256& sc, __m256& mn) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));  // dwords w0 w1 w2 (·)
  const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x3f));                // [sc_lo, mn_lo]
  const __m128i w2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa), _mm_setr_epi32(0, 4, 0, 0));
  const __m128i top = _mm_and_si128(_mm_srli_epi16(v, 2), _mm_set1_epi8(0x30));  // bits 6-7 -> 4-5
  const __m128i hi = _mm_or_si128(_mm_and_si128(w2, _mm_set1_epi8(0x0f)), top);  // [sc_hi, mn_hi]
  const __m128i u = _mm_unpacklo_epi32(lo, hi);                                   // sc_lo sc_hi mn_lo mn_hi
  sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u));
  mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(u, u)));
}
// Q3_K's 16 six-bit scales minus 32, as int8 (lane i = scale i): scale i's low 4 bits are the low
// (i < 8) or high nibble of byte i % 8, its top 2 bits bits 2·(i / 4) of byte 8 + i % 4.
[[maybe_unused]] inline __m128i q3_k_scales(const uint8_t* s) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)), m4 = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
  int32_t h;
  __builtin_memcpy(&h, s + 8, 4);
  const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(h), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32));
}
// IQ4_XS: lane s = d·(scale s − 32) (tensor::iq4_xs_scale), exact in f32 (an f16 times |k| ≤ 32).
[[maybe_unused]] inline __m256 iq4_xs_scales(const tensor::BlockIQ4_XS& b) {
  int32_t l;
  __builtin_memcpy(&l, b.scales_l, 4);
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                      _mm256_set1_epi32(15));
  const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                      _mm256_set1_epi32(3));
  const __m256i s = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(_cvtsh_ss(b.d)));
}
// The IQ4 table (tensor::kIq4Values) as a pshufb table, plus kBias (0: the signed values; 128: as
// unsigned bytes, for vpdpbusd).
template <int kBias>
[[maybe_unused]] inline __m128i iq4_lut() {
  alignas(16) int8_t v[16];
  for (int i = 0; i < 16; ++i) v[i] = static_cast<int8_t>(tensor::kIq4Values[i] + kBias);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(v));
}
}  // namespace
}  // namespace rapid::compute
