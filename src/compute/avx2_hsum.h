// The horizontal sum of eight floats, as every AVX2 kernel reduces a lane group: high half onto
// low, then pairs, then the last two. One order, so kernels that share it agree bitwise. Include
// only from translation units compiled with -mavx2 (or above: the AVX-512 lane kernels share it;
// internal linkage keeps each translation unit's copy, compiled with its own flags).
#pragma once
#include <immintrin.h>

namespace rapid::compute {
namespace {

[[maybe_unused]] inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace rapid::compute
