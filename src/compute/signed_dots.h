// Signed int8 weights against int8 activations without VNNI's unsigned operand: |w| against x
// with w's sign, by maddubs (AVX2; also compiled into the AVX-512 TU). For the lane kernels whose
// weights are signed (Q3_K, Q6_K, the IQ1-IQ3 lattice types). Internal linkage, AVX2 TUs only.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace rapid::compute {
namespace {

// One 16-element half (vectors v0..v0+3 of the transposed weights S, their absolute values A)
// against one token's packed activations xg: kWiden sums each maddubs in 32 bits (|w| ≤ 127),
// otherwise the four in 16 bits (|w| ≤ 32 keeps 4·2·32·127 in range).
template <bool kWiden>
[[gnu::always_inline]] inline __m256i signed_half(const __m256i* A, const __m256i* S, const int32_t* xg, int v0) {
  __m256i s = _mm256_setzero_si256();
  for (int v = v0; v < v0 + 4; ++v) {
    const __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg + 8 * v)), S[v]);
    const __m256i p = _mm256_maddubs_epi16(A[v], xv);
    s = kWiden ? _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1))) : _mm256_add_epi16(s, p);
  }
  return s;
}

}  // namespace
}  // namespace rapid::compute
