// In-register 8×8 transpose of int32, shared by the AVX2 lane kernels and the AMX panels' unpacking.
// Internal linkage: each ISA's translation unit keeps its own copy, compiled with its own flags.
// Include only from TUs built with -mavx2 or above.
#pragma once
#include <immintrin.h>

namespace rapid::compute {
namespace {

// W[d] lane k = R[k] lane d. Always inlined: GCC left it a call in some kernels (Q6_K, Q3_K, Q2_K,
// MLX 2-bit on AVX2), its 16 vectors through memory: q6_k_big_1t 933 -> 698 us, mlx2_g64_big_1t
// 2154 -> 896 inlined, while Q4_K and Q5_K, where it was inlined already, lost 4 % when forced
// (transpose8x8 below, as before).
[[maybe_unused, gnu::always_inline]] inline void transpose8x8_inline(const __m256i* R, __m256i* W) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(R[2 * i], R[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(R[2 * i], R[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
    const __m256i* th = t + 4 * h;
    u[4 * h] = _mm256_unpacklo_epi64(th[0], th[2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(th[0], th[2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(th[1], th[3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(th[1], th[3]);
  }
  for (int d = 0; d < 4; ++d) {
    W[d] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x20);
    W[d + 4] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x31);
  }
}

[[maybe_unused]] inline void transpose8x8(const __m256i* R, __m256i* W) { transpose8x8_inline(R, W); }

}  // namespace
}  // namespace rapid::compute
