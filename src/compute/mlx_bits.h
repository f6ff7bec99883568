// MLX affine 2-, 3-, 5- and 6-bit rows for the lane kernels of both ISAs: a 32-element block is
// 4·bits bytes of an LSB-first bit stream (element l at bits [l·bits, (l + 1)·bits) of the row),
// unpacked here into its 32 values as bytes, element order. Internal linkage: each ISA's translation
// unit keeps its own copy, compiled with its own flags. Include only from TUs built with -mavx2 or
// above.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace rapid::compute {
namespace {

// Where mlx_block_values loads a block's lane 1 (elements 16..31): the dword at or below byte 2·bits.
constexpr int mlx_lane1_byte(int bits) { return 2 * bits / 4 * 4; }

// The 32 values of the block at p. Lane h (elements 16h..16h+15) reads 16 bytes from the dword
// at or below byte 2·bits·h, where its elements start (kShift bytes on, for 3 and 5 bits), so both
// lanes find element i's bits at offset 8·kShift·h + i·bits: a byte shuffle gives each even (odd)
// element the 16-bit window from its first byte, a multiply by 2^(8 − offset % 8) moves its bits to
// the window's high byte, and the low bytes of the even and odd words interleave back. kMasked: the
// loads take only the block's own dwords (a block is `bits` dwords), for the row's last blocks;
// otherwise they read up to 12 bytes past the block.
template <int kBits, bool kMasked>
inline __m256i mlx_block_values(const uint8_t* p) {
  constexpr int kLane1 = mlx_lane1_byte(kBits), kShift = 2 * kBits - kLane1;  // lane 1's load, its first byte
  struct Tables {
    alignas(32) int8_t even[32], odd[32];
    alignas(32) int16_t mul_even[16], mul_odd[16];
  };
  static constexpr Tables t = [] {
    Tables r{};
    for (int lane = 0; lane < 2; ++lane)
      for (int w = 0; w < 8; ++w)
        for (int parity = 0; parity < 2; ++parity) {
          const int o = 8 * kShift * lane + (2 * w + parity) * kBits;  // bit offset in the lane's 16 bytes
          int8_t* idx = parity ? r.odd : r.even;
          idx[16 * lane + 2 * w] = static_cast<int8_t>(o / 8);
          idx[16 * lane + 2 * w + 1] = static_cast<int8_t>(o / 8 + 1);
          (parity ? r.mul_odd : r.mul_even)[8 * lane + w] = static_cast<int16_t>(1 << (8 - o % 8));
        }
    return r;
  }();
  __m128i lo, hi;
  if constexpr (kMasked) {  // dword d of a load kept while it lies inside the block's `bits` dwords
    const __m128i d = _mm_setr_epi32(0, 1, 2, 3);
    lo = _mm_maskload_epi32(reinterpret_cast<const int*>(p), _mm_cmpgt_epi32(_mm_set1_epi32(kBits), d));
    hi = _mm_maskload_epi32(reinterpret_cast<const int*>(p + kLane1),
                            _mm_cmpgt_epi32(_mm_set1_epi32(kBits - kLane1 / 4), d));
  } else {
    lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kLane1));
  }
  const __m256i v = _mm256_set_m128i(hi, lo);
  auto pick = [&](const int8_t* idx, const int16_t* mul) {
    const __m256i w = _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(idx)));
    return _mm256_srli_epi16(_mm256_mullo_epi16(w, _mm256_load_si256(reinterpret_cast<const __m256i*>(mul))), 8);
  };
  const __m256i even = pick(t.even, t.mul_even), odd = pick(t.odd, t.mul_odd);
  return _mm256_and_si256(_mm256_or_si256(even, _mm256_slli_epi16(odd, 8)), _mm256_set1_epi8((1 << kBits) - 1));
}

// Blocks [8g, 8g + 8) of a row of nb blocks as R[k] = block k's values (blocks past the row: zeros).
// Only the row's last blocks, whose plain loads would pass its end, take the masked loads.
template <int kBits>
inline void mlx_group_values(const uint8_t* row, int64_t nb, int64_t g, __m256i* R) {
  constexpr int kBlock = 4 * kBits;
  // Trailing blocks whose plain loads (ending mlx_lane1_byte + 16 bytes on) pass their end.
  constexpr int kOver = (mlx_lane1_byte(kBits) + 15) / kBlock;
  const uint8_t* p = row + g * 8 * kBlock;
  if (8 * (g + 1) + kOver <= nb) {
    for (int k = 0; k < 8; ++k) R[k] = mlx_block_values<kBits, false>(p + k * kBlock);
    return;
  }
  for (int k = 0; k < 8; ++k) {
    const int64_t b = 8 * g + k;
    R[k] = b >= nb          ? _mm256_setzero_si256()
           : b + kOver < nb ? mlx_block_values<kBits, false>(p + k * kBlock)
                            : mlx_block_values<kBits, true>(p + k * kBlock);
  }
}

}  // namespace
}  // namespace rapid::compute
