// Lane kernels (Kernels::QDotV) of GGML's IQ1-IQ3 lattice types, for the TUs built with -mavx2 or
// above (kernels_avx2_lanes.cpp, kernels_avx512.cpp): both compile this same code, so a token's
// result is bitwise the same on AVX2 and AVX-512 machines. Internal linkage, as qdotv_dispatch.h.
//
// A super-block is one lane group (sub-block k of 32 elements in lane k, Q4_K's scheme). Every
// lattice type is, per element, a small signed integer q times an odd integer scale per 16 or 32
// elements times one float per super-block (tensor/iq_grids.h):
//   IQ2_XXS / IQ2_XS / IQ2_S  grid · sign,            (2s + 1) · d/8;
//   IQ3_XXS                   grid · sign,            (2s + 1) · d/4;
//   IQ3_S                     grid · sign,            (2s + 1) · d;
//   IQ1_S / IQ1_M             8·grid ± 1 (the ±1/8 shift), (2s + 1) · d/8.
// So a super-block is decoded once per row and call into 8 vectors of int8 (|q| ≤ 62), transposed
// into the lanes, and each token's dot is integer up to one conversion per super-block: |q|
// against x with q's sign, one maddubs per vector (2·62·127 fits in 16 bits) widened at once, the
// two 16-element halves times their scales in 32 bits.
#pragma once
#include <immintrin.h>

#include <cstring>
#include <string>

#include "common/error.h"

#include "compute/avx2_transpose.h"
#include "compute/kernels.h"
#include "compute/qdotv_dispatch.h"
#include "compute/signed_dots.h"
#include "tensor/iq_grids.h"
#include "tensor/quant_formats.h"

namespace rapid::compute {
namespace {
namespace lattice {

// A decoded super-block: R[k] = sub-block k's 32 values, lo / hi[k] = the integer scales of its
// first / last 16 elements, d the float they all share.
struct Block {
  __m256i R[8];
  alignas(32) int32_t lo[8], hi[8];
  float d;
};

inline uint32_t u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Byte j = 0xff where bit j of `bits` is set.
inline __m256i bit_bytes(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread), bit), bit);
}
// Magnitudes negated where the byte mask m is 0xff.
inline __m256i negate_where(__m256i mag, __m256i m) { return _mm256_sub_epi8(_mm256_xor_si256(mag, m), m); }
// Magnitudes negated where `signs` has a bit set.
inline __m256i signed_values(__m256i mag, uint32_t signs) { return negate_where(mag, bit_bytes(signs)); }
// Lattice rows by index: four 8-byte rows by scalar loads (4-lane gathers measured no faster on
// AMD EPYC, bench/README.md), or eight 4-byte ones by one gather (indices in int32 lanes).
inline __m256i rows64(const uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_set_epi64x(static_cast<int64_t>(grid[i3]), static_cast<int64_t>(grid[i2]), static_cast<int64_t>(grid[i1]),
                           static_cast<int64_t>(grid[i0]));
}
inline __m256i rows32(const uint32_t* grid, __m256i idx) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(grid), idx, 4);
}
// Eight index bytes at p as int32.
inline __m256i bytes8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
// Magnitudes negated by four 7-bit sign groups, through the byte masks of Grids::sign_bytes.
inline __m256i signed_by_groups(const tensor::iq::Grids& G, __m256i mag, int s0, int s1, int s2, int s3) {
  return negate_where(mag, rows64(G.sign_bytes, s0, s1, s2, s3));
}
// The same with the four groups in bits 0..27 of `aux`.
inline __m256i signed_by_groups(const tensor::iq::Grids& G, __m256i mag, uint32_t aux) {
  return signed_by_groups(G, mag, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
}
inline void same_scale(Block& o, int k, int s) { o.lo[k] = o.hi[k] = s; }
// IQ2_XS / IQ2_S: sub-block k's two 4-bit scales, 2k and 2k + 1.
inline void nibble_scales(Block& o, int k, const uint8_t* scales) {
  o.lo[k] = 2 * tensor::iq_scale4(scales, 2 * k) + 1;
  o.hi[k] = 2 * tensor::iq_scale4(scales, 2 * k + 1) + 1;
}
// IQ1: 8·v ± 1 per 8-element group, v the int8 −1 / 0 / 1 rows, `shift` the ±1 bytes.
inline __m256i iq1_values(__m256i v, __m256i shift) {
  const __m256i v2 = _mm256_add_epi8(v, v), v4 = _mm256_add_epi8(v2, v2);
  return _mm256_add_epi8(_mm256_add_epi8(v4, v4), shift);
}

inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ2_XXS& b, Block& o) {
  const auto& g = G.iq2xxs;
  for (int k = 0; k < 8; ++k) {
    const uint32_t idx = u32(b.qs + 4 * k), aux = u32(b.qs + 4 * k + 2);
    o.R[k] = signed_by_groups(G, rows64(g, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24), aux);
    same_scale(o, k, static_cast<int>(2 * (aux >> 28) + 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
}
inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ2_XS& b, Block& o) {
  const auto& g = G.iq2xs;
  for (int k = 0; k < 8; ++k) {
    const uint16_t* q = b.qs + 4 * k;
    o.R[k] = signed_by_groups(G, rows64(g, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511), q[0] >> 9, q[1] >> 9, q[2] >> 9,
                              q[3] >> 9);
    nibble_scales(o, k, b.scales);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
}
inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ2_S& b, Block& o) {
  const auto& g = G.iq2s;
  for (int k = 0; k < 8; ++k) {
    const uint8_t* q = b.qs + 4 * k;
    const int h = b.qh[k];  // index l: qs byte | bits 2l, 2l + 1 of qh[k] << 8
    o.R[k] = signed_values(rows64(g, q[0] | (h & 3) << 8, q[1] | (h >> 2 & 3) << 8, q[2] | (h >> 4 & 3) << 8, q[3] | (h >> 6) << 8),
                           u32(b.signs + 4 * k));
    nibble_scales(o, k, b.scales);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
}
inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ3_XXS& b, Block& o) {
  const auto& g = G.iq3xxs;
  for (int k = 0; k < 8; ++k) {
    const uint32_t aux = u32(b.scales_signs + 4 * k);
    o.R[k] = signed_by_groups(G, rows32(g, bytes8(b.qs + 8 * k)), aux);
    same_scale(o, k, static_cast<int>(2 * (aux >> 28) + 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.25f;
}
inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ3_S& b, Block& o) {
  const auto& g = G.iq3s;
  for (int k = 0; k < 8; ++k) {
    // Index i: qs byte | bit i of qh[k] << 8.
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.qh[k]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                        _mm256_set1_epi32(1));
    o.R[k] = signed_values(rows32(g, _mm256_or_si256(bytes8(b.qs + 8 * k), _mm256_slli_epi32(hi, 8))), u32(b.signs + 4 * k));
    same_scale(o, k, 2 * tensor::iq_scale4(b.scales, k) + 1);
  }
  o.d = _cvtsh_ss(b.d);
}
inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ1_S& b, Block& o) {
  const auto& g = G.iq1s;
  for (int k = 0; k < 8; ++k) {
    const int qh = b.qh[k];
    const uint8_t* q = b.qs + 4 * k;
    const __m256i v = rows64(g, q[0] | (qh & 7) << 8, q[1] | (qh >> 3 & 7) << 8, q[2] | (qh >> 6 & 7) << 8, q[3] | (qh >> 9 & 7) << 8);
    o.R[k] = iq1_values(v, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1));
    same_scale(o, k, 2 * ((qh >> 12) & 7) + 1);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
}
inline void decode(const tensor::iq::Grids& G, const tensor::BlockIQ1_M& b, Block& o) {
  const auto& g = G.iq1s;
  o.d = _cvtsh_ss(tensor::iq1_m_d(b)) * 0.125f;
  for (int k = 0; k < 8; ++k) {
    // Groups 4k..4k+3: nibbles of qh[2k], qh[2k + 1], low first; 3 index bits and the shift's sign.
    const uint32_t h = b.qh[2 * k] | static_cast<uint32_t>(b.qh[2 * k + 1]) << 8;
    const uint8_t* q = b.qs + 4 * k;
    const __m256i v = rows64(g, q[0] | (h & 7) << 8, q[1] | (h >> 4 & 7) << 8, q[2] | (h >> 8 & 7) << 8, q[3] | (h >> 12 & 7) << 8);
    // Bit 3 of nibble l set: the 8 bytes of group l shift by −1, else +1.
    const uint32_t neg = (h >> 3 & 1) * 0xffu | (h >> 7 & 1) * 0xff00u | (h >> 11 & 1) * 0xff0000u | (h >> 15 & 1) * 0xff000000u;
    o.R[k] = iq1_values(v, _mm256_or_si256(bit_bytes(neg), _mm256_set1_epi8(1)));
    o.lo[k] = 2 * tensor::iq1_m_scale(b, 2 * k) + 1;
    o.hi[k] = 2 * tensor::iq1_m_scale(b, 2 * k + 1) + 1;
  }
}

// NT tokens' dots with a decoded, transposed super-block (S[v] lane k = values 4v..4v+3 of
// sub-block k), lo / hi its scales, d its float.
template <int NT>
[[gnu::always_inline]] inline void dots(const __m256i* S, __m256i lo, __m256i hi, float d, const ActLanes& x, int64_t g,
                                        __m256* acc) {
  __m256i A[8];
  for (int v = 0; v < 8; ++v) A[v] = _mm256_sign_epi8(S[v], S[v]);
  const __m256 dw = _mm256_set1_ps(d);
  const int32_t* xq = x.q + g * x.ld * 64;
  const float* xd = x.d + g * x.ld * 8;
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const int32_t* xg = xq + t * 64;
    const __m256i p = _mm256_add_epi32(_mm256_mullo_epi32(signed_half<true>(A, S, xg, 0), lo),
                                       _mm256_mullo_epi32(signed_half<true>(A, S, xg, 4), hi));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_loadu_ps(xd + t * 8)), acc[t]);
  }
}

template <int NT, class B>
[[gnu::always_inline]] inline void group(const tensor::iq::Grids& G, const B* w, const ActLanes& x, int64_t g, __m256* acc) {
  Block b;
  decode(G, w[g], b);
  __m256i S[8];
  transpose8x8_inline(b.R, S);
  dots<NT>(S, _mm256_load_si256(reinterpret_cast<const __m256i*>(b.lo)),
           _mm256_load_si256(reinterpret_cast<const __m256i*>(b.hi)), b.d, x, g, acc);
}

// A super-block decoded for many token tiles (Kernels::decode_iq): the transposed vectors of
// group() as signed q, the scales as int8 (odd, below 32), c = 128·(lo·Σq over the first halves +
// hi·Σq over the last), per lane. Against activations biased to unsigned (x + 128, as dpbusd takes
// them) a half's dot is Σ(x + 128)·q, and subtracting c gives dots()'s integer exactly.
struct Decoded {
  __m256i S[8];
  alignas(32) int32_t c[8];
  int8_t lo[8], hi[8];
  float d;
};
static_assert(sizeof(Decoded) == Kernels::kIqDecodedBytes && alignof(Decoded) == 32);

// acc + Σ over 4-byte groups of unsigned u times signed q, exactly (|q| ≤ 62: a maddubs pair stays
// within int16, 2·255·62).
inline __m256i dp_u8s8(__m256i acc, __m256i u, __m256i q) {
#ifdef __AVX512VNNI__
  return _mm256_dpbusd_epi32(acc, u, q);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1)));
#endif
}

template <class B>
void decode_rows(const Kernels::Rows& m, int64_t nb, uint8_t* out) {
  const tensor::iq::Grids& G = tensor::iq::grids();
  auto* o = reinterpret_cast<Decoded*>(out);
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t r = 0; r < m.rows; ++r) {
    const auto* w = reinterpret_cast<const B*>(m.w + r * m.stride);
    for (int64_t g = 0; g < nb; ++g, ++o) {
      Block b;
      decode(G, w[g], b);
      transpose8x8_inline(b.R, o->S);
      const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.lo));
      const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.hi));
      __m256i sum_lo = _mm256_setzero_si256(), sum_hi = _mm256_setzero_si256();
      for (int v = 0; v < 4; ++v) {
        sum_lo = dp_u8s8(sum_lo, ones, o->S[v]);
        sum_hi = dp_u8s8(sum_hi, ones, o->S[v + 4]);
      }
      const __m256i c = _mm256_add_epi32(_mm256_mullo_epi32(sum_lo, lo), _mm256_mullo_epi32(sum_hi, hi));
      _mm256_store_si256(reinterpret_cast<__m256i*>(o->c), _mm256_slli_epi32(c, 7));
      for (int k = 0; k < 8; ++k) o->lo[k] = static_cast<int8_t>(b.lo[k]), o->hi[k] = static_cast<int8_t>(b.hi[k]);
      o->d = b.d;
    }
  }
}

inline __m256i widen8(const int8_t* s) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s))); }

// dots() over a Decoded super-block, xb the activations biased to unsigned: the same integer, so
// the same float operations give the same bits.
template <int NT>
[[gnu::always_inline]] inline void decoded_dots(const Decoded& b, const ActLanes& xb, int64_t g, __m256* acc) {
  const __m256i lo = widen8(b.lo), hi = widen8(b.hi);
  const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.c));
  const __m256 dw = _mm256_set1_ps(b.d);
  const int32_t* xq = xb.q + g * xb.ld * 64;
  const float* xd = xb.d + g * xb.ld * 8;
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const int32_t* xg = xq + t * 64;
    __m256i s_lo = _mm256_setzero_si256(), s_hi = _mm256_setzero_si256();
    for (int v = 0; v < 4; ++v) {
      s_lo = dp_u8s8(s_lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(xg + 8 * v)), b.S[v]);
      s_hi = dp_u8s8(s_hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(xg + 8 * v + 32)), b.S[v + 4]);
    }
    const __m256i p = _mm256_sub_epi32(_mm256_add_epi32(_mm256_mullo_epi32(s_lo, lo), _mm256_mullo_epi32(s_hi, hi)), c);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_loadu_ps(xd + t * 8)), acc[t]);
  }
}

}  // namespace lattice

// The QDotV entry points (nb super-blocks a row).
template <class B>
void lattice_v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  // Once per call: an opaque call per super-block would also spill the decoded vectors.
  const tensor::iq::Grids& G = tensor::iq::grids();
  kv_lanes<B>(rows, x, nb, nt, out, ldo,
              [&G]<int NT>(const B* w, const ActLanes& xa, int64_t g, __m256* acc)
                  __attribute__((always_inline)) { lattice::group<NT>(G, w, xa, g, acc); });
}

inline void decode_iq(tensor::DType t, const Kernels::Rows& m, int64_t nb, uint8_t* out) {
  using D = tensor::DType;
  switch (t) {
    case D::IQ2_XXS: return lattice::decode_rows<tensor::BlockIQ2_XXS>(m, nb, out);
    case D::IQ2_XS: return lattice::decode_rows<tensor::BlockIQ2_XS>(m, nb, out);
    case D::IQ2_S: return lattice::decode_rows<tensor::BlockIQ2_S>(m, nb, out);
    case D::IQ3_XXS: return lattice::decode_rows<tensor::BlockIQ3_XXS>(m, nb, out);
    case D::IQ3_S: return lattice::decode_rows<tensor::BlockIQ3_S>(m, nb, out);
    case D::IQ1_S: return lattice::decode_rows<tensor::BlockIQ1_S>(m, nb, out);
    case D::IQ1_M: return lattice::decode_rows<tensor::BlockIQ1_M>(m, nb, out);
    default: throw Error(std::string("decode_iq: not a lattice type: ") + tensor::dtype_name(t));
  }
}
void iq_decodedv(const Kernels::Rows& rows, const ActLanes& xb, int64_t nb, int nt, float* out, int64_t ldo) {
  kv_lanes<lattice::Decoded>(rows, xb, nb, nt, out, ldo,
                             []<int NT>(const lattice::Decoded* w, const ActLanes& xa, int64_t g, __m256* acc)
                                 __attribute__((always_inline)) { lattice::decoded_dots<NT>(w[g], xa, g, acc); });
}

// Fills k's lattice kernels.
[[maybe_unused]] inline void fill_lattice_kernels(Kernels& k) {
  k.dot_iq2_xxsv = lattice_v<tensor::BlockIQ2_XXS>;
  k.dot_iq2_xsv = lattice_v<tensor::BlockIQ2_XS>;
  k.dot_iq2_sv = lattice_v<tensor::BlockIQ2_S>;
  k.dot_iq3_xxsv = lattice_v<tensor::BlockIQ3_XXS>;
  k.dot_iq3_sv = lattice_v<tensor::BlockIQ3_S>;
  k.dot_iq1_sv = lattice_v<tensor::BlockIQ1_S>;
  k.dot_iq1_mv = lattice_v<tensor::BlockIQ1_M>;
  k.decode_iq = decode_iq;
  k.dot_iq_decodedv = iq_decodedv;
}

}  // namespace
}  // namespace rapid::compute
