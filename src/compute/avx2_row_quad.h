// Four rows of a one-token (decode) lane kernel reduced together (AVX2). A row's accumulator holds
// one 8-lane vector; reducing it alone (hsum256) and dotting its partial last group alone (a 1-4
// block tail costs a whole group's vector work) made a 576-wide row cost as much as a 768-wide one
// (bench/README.md, "Where an AVX2 one-token group's time goes"). RowQuad regroups four rows'
// lanes so that one vector operation serves several rows: the tails' lanes of 2-4 rows share a
// vector, and the four sums are one transposed reduction. Every lane keeps the operations it had,
// only its position moves, so the results are hsum256's bits. Include only from AVX2 (or above)
// translation units.
#pragma once
#include <immintrin.h>

namespace rapid::compute {
namespace {

// Rows a, b, c, d as halves: lo_ab = [a0..a3 | b0..b3], hi_ab = [a4..a7 | b4..b7], the same for
// c, d. A 3-4 block tail sits in lanes 0-3 of each row: lo_ab and lo_cd hold two rows' each. A 1-2
// block tail sits in lanes 0-1: low2() holds four rows' as [a0 a1 c0 c1 | b0 b1 d0 d1].
struct RowQuad {
  __m256 lo_ab, hi_ab, lo_cd, hi_cd;
  explicit RowQuad(const __m256* r)
      : lo_ab(_mm256_permute2f128_ps(r[0], r[1], 0x20)), hi_ab(_mm256_permute2f128_ps(r[0], r[1], 0x31)),
        lo_cd(_mm256_permute2f128_ps(r[2], r[3], 0x20)), hi_cd(_mm256_permute2f128_ps(r[2], r[3], 0x31)) {}
  __m256 low2() const { return _mm256_shuffle_ps(lo_ab, lo_cd, 0x44); }
  // hsum256 of each row, lanes 0-1 taken from x01 (low2(), or it after a tail): [a b c d]. hsum256
  // adds lane i to lane i + 4, then lanes 0 + 2 and 1 + 3, then those two; so does this, in the
  // same operand order, four rows a vector.
  __m128 sums(__m256 x01) const {
    const __m256 x23 = _mm256_shuffle_ps(lo_ab, lo_cd, 0xee);
    const __m256 y01 = _mm256_shuffle_ps(hi_ab, hi_cd, 0x44), y23 = _mm256_shuffle_ps(hi_ab, hi_cd, 0xee);
    const __m256 t = _mm256_add_ps(_mm256_add_ps(x01, y01), _mm256_add_ps(x23, y23));  // [a0' a1' c0' c1' | b.. d..]
    const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(t, t, 0x88), _mm256_shuffle_ps(t, t, 0xdd));  // [a c a c | b d b d]
    return _mm_unpacklo_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
  }
};

// Whether a row of nb blocks ends in a tail that RowQuad's lanes share (1-4 blocks).
inline bool short_tail(int64_t nb) { return nb % 8 >= 1 && nb % 8 <= 4; }
// Whether a tail of m blocks fits RowQuad's low2() lanes: four rows' in one vector (1-2 blocks).
inline bool low2_tail(int m) { return m == 1 || m == 2; }

// A tail group's activation lanes (one token) as the tails' lanes meet them: lanes 0-1 in every
// pair (low2()'s order) or lanes 0-3 in both halves (lo_ab's).
inline __m256i act_low2(__m256i v) { return _mm256_broadcastq_epi64(_mm256_castsi256_si128(v)); }
inline __m256i act_low4(__m256i v) { return _mm256_permute2x128_si256(v, v, 0x00); }

}  // namespace
}  // namespace rapid::compute
