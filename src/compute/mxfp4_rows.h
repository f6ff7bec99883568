// The MXFP4 per-block kernels (Kernels::dot_mxfp4 on DType::MXFP4 rows, dot_mxfp4_ggml on GGML's
// blocks read in place), shared by the AVX2 and AVX-512 translation units so that both layouts on
// both ISAs go through the same operations: per block, one pshufb maps each 4-bit code to 2·E2M1
// as int8, the Q8_0 sign trick (|w| as u8, w's sign moved onto x) feeds an exact u8·s8 dot into 8
// int32 lanes (|2·E2M1| <= 12 cannot saturate maddubs), then acc += lanes·(2^(e-128)·dx) and one
// hsum256 per token. The two layouts put the same elements in the same lanes (GgmlMxfp4Row), so a
// row's result does not depend on which one it was stored in. matmul's fast path takes the lane
// kernels instead on AVX2 and AVX-512 (their shared helpers are at the end); these per-block ones
// remain the Kernels table's QDot entries and the lane tests' per-block reference.
// Include only from TUs built with -mavx2 or above (internal linkage: each keeps its own copy,
// compiled with its own flags).
#pragma once
#include <immintrin.h>

#include "compute/avx2_hsum.h"
#include "compute/kernels.h"
#include "tensor/mxfp4.h"

namespace rapid::compute {
namespace {

// 16 bytes as [their low nibbles | their high nibbles].
inline __m256i mxfp4_nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
}

// A DType::MXFP4 row: byte j of block b (at q + 16b) holds elements 2j, 2j + 1, so its codes come
// out as [even elements | odd ones], the order of nibble-order activations (permute_act_for_mlx4).
struct Mxfp4Row {
  const uint8_t *q, *e;
  __m256i codes(int64_t b) const { return mxfp4_nibbles(q + b * tensor::mxfp4::kBlockBytes); }
  uint8_t scale(int64_t b) const { return e[b]; }
};

// A row of GGML blocks: byte j holds elements j (low nibble) and j + 16 (high). Even bytes twice in
// the low 128-bit half, odd bytes twice in the high half, the second copy shifted right by 4, give
// [0 2 .. 14, 16 18 .. 30 | 1 3 .. 15, 17 .. 31] = Mxfp4Row's order, for the same number of
// instructions as mxfp4_nibbles (a 128-bit broadcast is a plain load).
struct GgmlMxfp4Row {
  const tensor::BlockMXFP4* w;
  __m256i codes(int64_t b) const {
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14,
                                           1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs)));
    const __m256i halves = _mm256_srlv_epi64(_mm256_shuffle_epi8(v, split), _mm256_setr_epi64x(0, 4, 0, 4));
    return _mm256_and_si256(halves, _mm256_set1_epi8(0x0f));
  }
  uint8_t scale(int64_t b) const { return w[b].e; }
};

// dot(u, s): the 8 int32 sums of 4 adjacent u8·s8 products (the ISA's exact integer dot).
template <int NT, class Row, class Dot>
void mxfp4_nt(Row row, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out, Dot dot) {
  const __m128i lut128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tensor::mxfp4::kTwiceE2M1));
  const __m256i lut = _mm256_set_m128i(lut128, lut128);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i q = _mm256_shuffle_epi8(lut, row.codes(b));
    const __m256i aq = _mm256_sign_epi8(q, q);
    const float dw = 0.5f * tensor::mxfp4::e8m0_to_f32(row.scale(b));
    for (int t = 0; t < NT; ++t) {
      const tensor::ActQ8& a = x[t * xs + b];
      const __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)), q);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot(aq, xv)), _mm256_set1_ps(dw * a.d), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]);
}

template <class Row, class Dot>
void mxfp4_rows(Row row, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out, Dot dot) {
  switch (nt) {
    case 1: mxfp4_nt<1>(row, x, xs, nb, out, dot); break;
    case 2: mxfp4_nt<2>(row, x, xs, nb, out, dot); break;
    case 3: mxfp4_nt<3>(row, x, xs, nb, out, dot); break;
    default: mxfp4_nt<4>(row, x, xs, nb, out, dot); break;
  }
}

// ---- Lane kernels (Kernels::dot_mxfp4v, dot_mxfp4_ggmlv in kernels_avx2_lanes.cpp and
// kernels_avx512.cpp): eight blocks per group, block k in 32-bit lane k. Each code becomes
// 2·E2M1 + 16 (4..28: unsigned, as maddubs / vpdpbusd want its weight operand), and the bias leaves
// exactly in int32 with 16·Σx, Q5_0's form d·(q − 16) with d = 2^(e−128) per lane. Both ISAs take
// their lane scales from mxfp4_lane_scales, so these are the same floats bit for bit.

// The pshufb table code → 2·E2M1 + 16.
inline __m128i mxfp4_biased_lut() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tensor::mxfp4::kTwiceE2M1));
  return _mm_add_epi8(t, _mm_set1_epi8(16));
}

// The E8M0 bytes of a group's first m blocks (block k's at p + k·kStride) in lane k, zero past m.
template <size_t kStride, bool kFull>
inline __m256i mxfp4_scale_bytes(const uint8_t* p, int m) {
  if constexpr (kStride == 1) {
    uint64_t v = 0;
    __builtin_memcpy(&v, p, kFull ? 8 : static_cast<size_t>(m));
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(v)));
  } else {
    auto at = [&](int k) { return kFull || k < m ? static_cast<int>(p[k * kStride]) : 0; };
    return _mm256_setr_epi32(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
  }
}

// Lane k: 0.5·e8m0_to_f32(e_k) = 2^(e_k − 128), the factor of the biased 2·E2M1 integers; exact
// (a power of two; e = 0 the subnormal 2^-128), bitwise the per-block kernels' dw.
inline __m256 mxfp4_lane_scales(__m256i e) {
  const __m256i bits = _mm256_blendv_epi8(_mm256_slli_epi32(e, 23), _mm256_set1_epi32(0x00400000),
                                          _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
  return _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0.5f));
}

}  // namespace
}  // namespace rapid::compute
