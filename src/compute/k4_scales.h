// The 8 six-bit scales and mins of a K-quant super-block (tensor::scale_min_k4's layout) as floats,
// shared by the AVX2 and AVX-512 lane kernels. Internal linkage: each ISA's translation unit keeps
// its own copy, compiled with its own flags. Include only from TUs built with -mavx2 or above.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace rapid::compute {
namespace {

// Four bytes at a time: the first four of each are the low 6 bits of bytes 0-3 / 4-7; the last four
// take their low 4 bits from bytes 8-11 (low / high nibble) and their top 2 from bytes 0-3 / 4-7.
[[maybe_unused]] inline void k4_scales(const uint8_t* q, __m256& sc, __m256& mn) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, q, 4);
  __builtin_memcpy(&w1, q + 4, 4);
  __builtin_memcpy(&w2, q + 8, 4);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
  const uint32_t sc_lo = w0 & low6, mn_lo = w1 & low6;
  const uint32_t sc_hi = (w2 & low4) | (((w0 >> 6) & top2) << 4);
  const uint32_t mn_hi = ((w2 >> 4) & low4) | (((w1 >> 6) & top2) << 4);
  const __m128i v = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), static_cast<int>(mn_lo),
                                   static_cast<int>(mn_hi));
  sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
  mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v, v)));
}

}  // namespace
}  // namespace rapid::compute
