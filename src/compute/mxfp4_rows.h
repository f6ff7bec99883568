// The MXFP4 per-block kernels (Kernels::dot_mxfp4 on DType::MXFP4 rows, dot_mxfp4_ggml on GGML's
// blocks read in place), shared by the AVX2 and AVX-512 translation units so that both layouts on
// both ISAs go through the same operations: per block, one pshufb maps each 4-bit code to 2·E2M1
// as int8, the Q8_0 sign trick (|w| as u8, w's sign moved onto x) feeds an exact u8·s8 dot into 8
// int32 lanes (|2·E2M1| <= 12 cannot saturate maddubs), then acc += lanes·(2^(e-128)·dx) and one
// hsum256 per token. The two layouts put the same elements in the same lanes (GgmlMxfp4Row), so a
// row's result does not depend on which one it was stored in. Include only from TUs built with
// -mavx2 or above (internal linkage: each keeps its own copy, compiled with its own flags).
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

}  // namespace
}  // namespace rapid::compute
