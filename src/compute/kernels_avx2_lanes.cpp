// AVX2 lane kernels (Kernels::QDotV, MlxDotV) for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (and its repacked
// Q8_0_LANES), Q2_K-Q6_K, IQ4_NL, IQ4_XS, MLX affine 2- to 8-bit and MXFP4 (both layouts): eight
// blocks at a time with one block per 32-bit lane, over activations packed by pack_act_lanes (built
// with -mavx2 -mfma -mf16c). Q8_0's signed weights need a 32-bit widening per vector, so its lane
// form saves less than the 4-bit ones' (bench/README.md, "AVX2 Q8_0 lane kernels": prefill 1.3x,
// one-token decode within a few per cent of the per-block kernel it replaced).
//
// Why: the per-block kernels (kernels_avx2.cpp) pay an int→float conversion, a scale product, a
// broadcast and an FMA for every block and token; on AVX2 that, not DRAM, bounds a Q4 decode step
// and makes a batched or verification step cost several single ones. Here a group of 8 weight blocks
// is unpacked once per tile, each token's 8 block dots stay in 16-bit lanes (exact: 16 products of a
// 4-bit weight and an int8 ≤ 127 in magnitude sum to at most 30480), and the conversion and scaling
// happen once per 8 blocks. Integer sums are exact and a token's float operations never depend on
// the other tokens of its tile, so results do not depend on the tile (batch invariance).
//
// kernels_avx512.cpp's lane kernels repeat these kernels' float operations exactly, so that a token
// gets the same bits on either ISA (compute_test checks it): change both or neither.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "compute/avx2_hsum.h"
#include "compute/avx2_row_quad.h"
#include "compute/avx2_transpose.h"
#include "compute/k4_scales.h"
#include "compute/kernels.h"
#include "compute/mlx_bits.h"
#include "compute/mxfp4_rows.h"
#include "compute/qdotv_dispatch.h"
#include "compute/signed_dots.h"
#include "compute/iq_lattice_rows.h"

namespace rapid::compute {
namespace {

// In-lane 4×4 transpose of int32: out[d] = [y0[d] y1[d] y2[d] y3[d] | the same of the high halves].
inline void transpose4_lanes(const __m256i* y, __m256i* out) {
  __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
  __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// 16 bytes of blocks k and k+4 (qs: block 0's bytes; zero past the first m blocks) as
// [block k | block k+4].
template <bool kFull>
inline __m256i pair16(const uint8_t* qs, size_t stride, int k, int m) {
  __m128i lo = kFull || k < m ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + k * stride)) : _mm_setzero_si128();
  __m128i hi = kFull || k + 4 < m ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + (k + 4) * stride))
                                  : _mm_setzero_si128();
  return _mm256_set_m128i(hi, lo);
}

// Each block's leading dword (f16 d, then Q4_1's f16 m) for the first m blocks, zero past m:
// the partial last group of a row (whole groups load their scales as below).
template <class B, bool kFull>
inline __m256i heads(const B* w, int m) {
  auto head = [&](int k) {
    uint32_t v = 0;
    if (kFull || k < m) __builtin_memcpy(&v, &w[k], 4);
    return static_cast<int>(v);
  };
  return _mm256_setr_epi32(head(0), head(1), head(2), head(3), head(4), head(5), head(6), head(7));
}
// Q4_1's (d, m) dwords of a whole group: dword 5k of its 160 bytes. Five loads cover them exactly;
// blends gather one wanted dword per lane and one permute puts them in block order (a gather, or
// eight inserts, cost more on the shuffle ports that the unpacking already keeps busy).
template <>
inline __m256i heads<tensor::BlockQ4_1, true>(const tensor::BlockQ4_1* w, int) {
  const auto* p = reinterpret_cast<const __m256i*>(w);
  __m256i u = _mm256_loadu_si256(p);                                    // dwords 0, 5 in lanes 0, 5
  u = _mm256_blend_epi32(u, _mm256_loadu_si256(p + 1), 0b10000100);     // 10, 15 in lanes 2, 7
  u = _mm256_blend_epi32(u, _mm256_loadu_si256(p + 2), 0b00010000);     // 20 in lane 4
  u = _mm256_blend_epi32(u, _mm256_loadu_si256(p + 3), 0b01000010);     // 25, 30 in lanes 1, 6
  u = _mm256_blend_epi32(u, _mm256_loadu_si256(p + 4), 0b00001000);     // 35 in lane 3
  return _mm256_permutevar8x32_epi32(u, _mm256_setr_epi32(0, 5, 2, 7, 4, 1, 6, 3));
}
// Q4_0's f16 scales of a group's first m blocks as floats (zero past m). A whole group's sit at
// bytes 18k: within bytes 0..127, one in each 128-bit half of four loads (words 2j / 2j+1 of load j);
// three word blends keep them, one byte shuffle moves the low halves' words (blocks 0, 2, 4, 6) and
// the high halves' (1, 3, 5, 7) to the front, and one unpack interleaves them in block order.
template <bool kFull>
inline __m256 q4_0_scales(const tensor::BlockQ4_0* w, int m);
// The low / high f16 of each dword as floats.
inline __m256 f16_lo(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
}
inline __m256 f16_hi(__m256i v) {
  const __m256i hi = _mm256_srli_epi32(v, 16);
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
}

template <bool kFull>
inline __m256 q4_0_scales(const tensor::BlockQ4_0* w, int m) {
  if constexpr (!kFull) {
    return f16_lo(heads<tensor::BlockQ4_0, false>(w, m));
  } else {
    const auto* p = reinterpret_cast<const __m256i*>(w);
    __m256i u = _mm256_blend_epi16(_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1), 0b00001100);
    u = _mm256_blend_epi16(u, _mm256_loadu_si256(p + 2), 0b00110000);
    u = _mm256_blend_epi16(u, _mm256_loadu_si256(p + 3), 0b11000000);
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                          2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    u = _mm256_shuffle_epi8(u, pick);
    return _mm256_cvtph_ps(_mm_unpacklo_epi16(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)));
  }
}

// Unpacked nibbles of 8 blocks of 16 bytes (qs: the first block's, `stride` apart): W[d] lane k =
// elements 4d..4d+3 of block k, W[d+4] = 16+4d..16+4d+3 (byte j holds elements j and j + 16; MLX's
// LSB-first pairs are the same once the activations are in nibble order), as the lanes expect.
// y[k]: 16 packed bytes (one block) in each half; W[d] lane 4h + k: dword d of half h of y[k], its
// low nibbles (W[d + 4]: its high ones).
inline void nibbles_of(const __m256i* y, __m256i* W) {
  __m256i z[4];
  transpose4_lanes(y, z);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int d = 0; d < 4; ++d) {
    W[d] = _mm256_and_si256(z[d], m4);
    W[d + 4] = _mm256_and_si256(_mm256_srli_epi16(z[d], 4), m4);
  }
}
template <bool kFull>
inline void unpack_q4(const uint8_t* qs, size_t stride, int m, __m256i* W) {
  __m256i y[4];
  for (int k = 0; k < 4; ++k) y[k] = pair16<kFull>(qs, stride, k, m);
  nibbles_of(y, W);
}
template <class B, bool kFull>
inline void unpack_q4(const B* w, int m, __m256i* W) {
  unpack_q4<kFull>(reinterpret_cast<const uint8_t*>(w) + offsetof(B, qs), sizeof(B), m, W);
}

// Q4_0_LANES / Q4_1_LANES / IQ4_NL_LANES (tensor/lane_layout.h): a full group's 128 bytes are the
// dwords unpack_q4 gathers, already in its transposed order (byte 32·d: dword d of blocks 0-7), and
// its 8 heads are one load, where the file's blocks take 8 half loads, 4 inserts, a 4×4 transpose and
// a gather of the heads. A tail's quants are as stored (16 bytes apart) and its m heads one load
// (the row goes on past them: the tail's quants, then the full groups' heads). The weights and
// scales come out as the file kernels' do, so the bits are theirs.
inline void unpack_q4_lanes(const uint8_t* p, __m256i* W) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int d = 0; d < 4; ++d) {
    const __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * d));
    W[d] = _mm256_and_si256(z, m4);
    W[d + 4] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
  }
}

// Per-block integer dots (one block per lane) of 8 unpacked weight vectors with one token's group.
// 4-bit weights: 8 maddubs pairs of a lane sum to at most 8·2·15·127 = 30480, so they stay in 16
// bits (2- and 3-bit ones too); 5-bit ones (≤ 31) only 4 at a time (31496), 6-bit ones 2 (32004).
template <int kBits = 4>
inline __m256i lane_dots(const __m256i* W, const int32_t* xg) {
  constexpr int kRun = kBits <= 4 ? 8 : kBits == 5 ? 4 : 2;  // vectors summed in 16 bits
  auto x = [&](int d) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg + 8 * d)); };
  __m256i r = _mm256_setzero_si256();
  for (int h = 0; h < 8; h += kRun) {
    __m256i s = _mm256_maddubs_epi16(W[h], x(h));
    for (int d = h + 1; d < h + kRun; ++d) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(W[d], x(d)));
    r = h ? _mm256_add_epi32(r, _mm256_madd_epi16(s, _mm256_set1_epi16(1))) : _mm256_madd_epi16(s, _mm256_set1_epi16(1));
  }
  return r;
}

// Group g's integer sums on a row of 128-byte Q4 lane groups (unpack_q4_lanes), one token.
[[gnu::always_inline]] inline __m256i q4_lane_dots(const uint8_t* groups, int64_t g, const ActLanes& x) {
  __m256i W[8];
  unpack_q4_lanes(groups + 128 * g, W);
  return lane_dots(W, x.q + g * x.ld * 64);
}

// A row's tail group (kTail: its last, partial one) over token pairs (ActLanes::pq,
// qdotv_dispatch.h's paired_tail_loop): when the group has 1-4 blocks, each weight vector's lanes
// 0-3 go to both halves and meet one pair entry, so one pass of `dots(Wd, xg)` over the kVecs
// duplicated vectors serves two tokens (the AVX-512 kernels do the same). Returns how many tokens
// it did (all, or none when there are no pairs).
template <int NT, bool kTail, int kVecs = 8, class Dots, class Tail>
[[gnu::always_inline]] inline int paired_tail(const __m256i* W, const ActLanes& x, __m256* acc, Dots&& dots,
                                              Tail&& tail) {
  if constexpr (!kTail || NT < 2) {
    return 0;
  } else {
    if (!x.pq) return 0;
    __m256i Wd[kVecs];
    for (int d = 0; d < kVecs; ++d) Wd[d] = _mm256_permute2x128_si256(W[d], W[d], 0x00);
    paired_tail_loop<NT>(acc, [&](int t) { return dots(Wd, x.pq + t * 64); }, tail);
    return NT;
  }
}
template <int NT, bool kTail, int kBits, class Tail>
[[gnu::always_inline]] inline int paired_tail(const __m256i* W, const ActLanes& x, __m256* acc, Tail&& tail) {
  return paired_tail<NT, kTail>(W, x, acc, [](const __m256i* Wd, const int32_t* xg) { return lane_dots<kBits>(Wd, xg); },
                                tail);
}

// NT tokens' sums over one group of 8 blocks whose weights are d·q + m per block (Q4_1, Q4_K, MLX
// affine; Q5_1 with kBits = 5): d·dx·Σq·x + m·(dx·Σx), the second from the packed ds. kTail: the
// row's partial last group (paired_tail).
template <int NT, int kBits = 4, bool kTail = false>
[[gnu::always_inline]] inline void scaled_offset_dots(const __m256i* W, __m256 dw, __m256 mw, const ActLanes& x,
                                                      int64_t g, __m256* acc) {
  const int32_t* xq = x.q + g * x.ld * 64;
  const float *xd = x.d + g * x.ld * 8, *xds = x.ds + g * x.ld * 8;
  const __m256 dwd = _mm256_permute2f128_ps(dw, dw, 0x00), mwd = _mm256_permute2f128_ps(mw, mw, 0x00);
  const int t0 = paired_tail<NT, kTail, kBits>(W, x, acc, [&](int t, __m256i isum, __m256 c) {
    return scaled_offset_tail(isum, dwd, mwd, x.pd + t * 8, x.pds + t * 8, c);
  });
#pragma GCC unroll 16
  for (int t = t0; t < NT; ++t)
    acc[t] = scaled_offset_tail(lane_dots<kBits>(W, xq + t * 64), dw, mw, xd + t * 8, xds + t * 8, acc[t]);
}

// Group g (blocks [8g, 8g+m)) of a row for NT tokens; blocks past m contribute exact zeros.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q4_1v_group(const tensor::BlockQ4_1* w, const ActLanes& x, int64_t g, int m,
                                               __m256* acc) {
  w += 8 * g;
  __m256i W[8];
  unpack_q4<tensor::BlockQ4_1, kFull>(w, m, W);
  const __m256i dm = heads<tensor::BlockQ4_1, kFull>(w, m);
  scaled_offset_dots<NT, 4, !kFull>(W, f16_lo(dm), f16_hi(dm), x, g, acc);
}

// NT tokens' sums over one group of 8 blocks whose weights are d·(q − 2^kShift) with q stored
// unsigned (Q4_0, Q5_0): the offset leaves exactly in int32 with 2^kShift·Σx.
template <int NT, int kShift, int kBits, bool kTail = false>
[[gnu::always_inline]] inline void offset_dots(const __m256i* W, __m256 dw, const ActLanes& x, int64_t g, __m256* acc) {
  const int32_t* xq = x.q + g * x.ld * 64;
  const int32_t* xs = x.sum + g * x.ld * 8;
  const float* xd = x.d + g * x.ld * 8;
  const __m256 dwd = _mm256_permute2f128_ps(dw, dw, 0x00);
  const int t0 = paired_tail<NT, kTail, kBits>(W, x, acc, [&](int t, __m256i dots, __m256 c) {
    return offset_tail<kShift>(dots, x.psum + t * 8, dwd, x.pd + t * 8, c);
  });
#pragma GCC unroll 16
  for (int t = t0; t < NT; ++t)
    acc[t] = offset_tail<kShift>(lane_dots<kBits>(W, xq + t * 64), xs + t * 8, dw, xd + t * 8, acc[t]);
}

// Signed weight bytes (Q8_0, the IQ4 types, MLX 8-bit less 128) against one token's group: |w|
// against x with w's sign (SA: the 8 vectors W, then their absolute values), one maddubs per vector
// (2·128·127 fits 16 bits, two would not), each widened at once. Σw·x exactly, the integer part the
// AVX-512 kernels get with the weights biased to unsigned and the bias taken out.
[[gnu::always_inline]] inline __m256i signed_lane_dots(const __m256i* SA, const int32_t* xg) {
  const __m256i one = _mm256_set1_epi16(1);
  __m256i s = _mm256_setzero_si256();
  for (int d = 0; d < 8; ++d) {
    const __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg + 8 * d)), SA[d]);
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(SA[8 + d], xv), one));
  }
  return s;
}
// The 8 signed vectors W and their absolute values, as signed_lane_dots takes them.
inline void with_abs(const __m256i* W, __m256i* SA) {
  for (int d = 0; d < 8; ++d) SA[d] = W[d], SA[8 + d] = _mm256_sign_epi8(W[d], W[d]);
}
// NT tokens' sums over one group of 8 blocks of signed weights d·q (Q8_0, IQ4_NL, IQ4_XS): a +=
// Σq·x·(dw·dx), offset_dots' float operations (kTail: the row's partial last group, paired_tail).
template <int NT, bool kTail = false>
[[gnu::always_inline]] inline void signed_dots(const __m256i* W, __m256 dw, const ActLanes& x, int64_t g, __m256* acc) {
  __m256i SA[16];
  with_abs(W, SA);
  const int32_t* xq = x.q + g * x.ld * 64;
  const float* xd = x.d + g * x.ld * 8;
  const __m256 dwd = _mm256_permute2f128_ps(dw, dw, 0x00);
  const int t0 = paired_tail<NT, kTail, 16>(
      SA, x, acc, [](const __m256i* Wd, const int32_t* xg) { return signed_lane_dots(Wd, xg); },
      [&](int t, __m256i isum, __m256 c) { return scaled_tail(isum, dwd, x.pd + t * 8, c); });
#pragma GCC unroll 16
  for (int t = t0; t < NT; ++t) acc[t] = scaled_tail(signed_lane_dots(SA, xq + t * 64), dw, xd + t * 8, acc[t]);
}

// One token's partial last group of signed bytes (R: block k's 32 bytes, zero from m on; kTail
// of signed_dots, which needs them transposed). At 1-4 blocks, transpose4_lanes puts dwords d and
// d + 4 of blocks 0-3 in one vector, so four vectors meet the activations' matching halves and the
// two halves' sums add up in lanes 0-3 (4-7 stay zero): the 8-vector form's integer sums for half
// the work, where a 2-block tail (SmolLM2's rows) cost as much as a whole group.
template <int NT>
[[gnu::always_inline]] inline void signed_tail(const __m256i* R, int m, __m256 dw, const ActLanes& x, int64_t g,
                                               __m256* acc) {
  if (NT == 1 && m <= 4) {
    const int32_t* xg = x.q + g * x.ld * 64;
    __m256i F[4];
    transpose4_lanes(R, F);
    const __m256i one = _mm256_set1_epi16(1);
    __m256i s = _mm256_setzero_si256();
    for (int d = 0; d < 4; ++d) {
      const __m256i xv = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(xg + 8 * (d + 4)),
                                             reinterpret_cast<const __m128i*>(xg + 8 * d));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(F[d], F[d]), _mm256_sign_epi8(xv, F[d])), one));
    }
    const __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(s, s, 0x80), _mm256_permute2x128_si256(s, s, 0x81));
    acc[0] = scaled_tail(isum, dw, x.d + g * x.ld * 8, acc[0]);
    return;
  }
  __m256i W[8];
  transpose8x8_inline(R, W);
  signed_dots<NT, true>(W, dw, x, g, acc);
}

// Q8_0: the quants are the signed weights. A group's 8 blocks of 32 bytes, one 8×8 dword transpose
// into the lanes (blocks past m: zero), the f16 scales from the blocks' heads.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q8_0v_group(const tensor::BlockQ8_0* w, const ActLanes& x, int64_t g, int m,
                                               __m256* acc) {
  w += 8 * g;
  __m256i R[8];
  for (int k = 0; k < 8; ++k)
    R[k] = kFull || k < m ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[k].qs)) : _mm256_setzero_si256();
  // The f16 scales (34 bytes apart) word by word into one xmm: fewer operations than heads().
  __m128i h = _mm_setzero_si128();
  auto word = [&]<int k>() { h = _mm_insert_epi16(h, kFull || k < m ? w[k].d : 0, k); };
  [&]<int... k>(std::integer_sequence<int, k...>) { (word.template operator()<k>(), ...); }(std::make_integer_sequence<int, 8>{});
  const __m256 dw = _mm256_cvtph_ps(h);
  if constexpr (kFull) {
    __m256i W[8];
    transpose8x8_inline(R, W);
    signed_dots<NT>(W, dw, x, g, acc);
  } else {
    signed_tail<NT>(R, m, dw, x, g, acc);
  }
}
// Q8_0_LANES (tensor/lane_layout.h): a full group is W as stored, biased by +128 (the AVX-512
// operand); the tail's quants as stored and its heads before them (qdotv_dispatch.h's LaneRow).
inline void q8_0_lanes_group(const uint8_t* p, __m256i* W) {
  for (int d = 0; d < 8; ++d)
    W[d] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * d)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
}
// A tail group's activations (one token) in the lanes the tails meet them in (act: act_low2 or
// act_low4).
struct TailActs {
  alignas(32) int32_t q[64], sum[8];
  alignas(32) float d[8], ds[8];
  template <class Act>
  void set(const ActLanes& x, int64_t g, Act act) {
    auto put = [&](void* to, const void* from) {
      _mm256_store_si256(static_cast<__m256i*>(to), act(_mm256_loadu_si256(static_cast<const __m256i*>(from))));
    };
    for (int v = 0; v < 8; ++v) put(q + 8 * v, x.q + g * x.ld * 64 + 8 * v);
    put(sum, x.sum + g * x.ld * 8);
    put(d, x.d + g * x.ld * 8);
    put(ds, x.ds + g * x.ld * 8);
  }
};

// One token over a repacked row's `full` groups: the integer sums of up to 16 groups first
// (dots(g)), then scale(g, isum) for each in order. Read with each group, the scales (stored after
// the quants, or in arrays of their own) cost a decode step: Q8_0_LANES' were a miss ahead of the
// row's stream on every row (Qwen3.5's LM head ran at 0.71-0.80x of the per-block kernel), MLX
// 8-bit's ~15 % of the step, 4096-wide Q4_0 / IQ4_NL rows 0.8x of the file layout.
template <class Dots, class Scale>
[[gnu::always_inline]] inline void sums_then_scales(int64_t full, Dots&& dots, Scale&& scale) {
  constexpr int64_t kRun = 16;
  for (int64_t g0 = 0; g0 < full; g0 += kRun) {
    const int64_t n = std::min(kRun, full - g0);
    __m256i isum[kRun];
    for (int64_t i = 0; i < n; ++i) isum[i] = dots(g0 + i);
    for (int64_t i = 0; i < n; ++i) scale(g0 + i, isum[i]);
  }
}
// sums_then_scales over four rows: dots(i, g) and scale(i, g, isum) for row i. A row's scale steps
// are one chain of dependent FMAs (MLX 8-bit's two a group): alone, the row waited on it; four
// rows' chains side by side overlap. Each row's operations keep their order, so the same bits.
template <class Dots, class Scale>
[[gnu::always_inline]] inline void quad_sums_then_scales(int64_t full, Dots&& dots, Scale&& scale) {
  constexpr int64_t kRun = 16;
  for (int64_t g0 = 0; g0 < full; g0 += kRun) {
    const int64_t n = std::min(kRun, full - g0);
    __m256i isum[4][kRun];
    for (int i = 0; i < 4; ++i)
      for (int64_t k = 0; k < n; ++k) isum[i][k] = dots(i, g0 + k);
    for (int64_t k = 0; k < n; ++k)
      for (int i = 0; i < 4; ++i) scale(i, g0 + k, isum[i][k]);
  }
}
// Group g's integer sums on a row of 256-byte groups in lane order biased by +128 (Q8_0_LANES,
// MLX 8-bit MLX_LANES), one token.
[[gnu::always_inline]] inline __m256i biased8_lane_dots(const uint8_t* groups, int64_t g, const ActLanes& x) {
  __m256i W[8], SA[16];
  q8_0_lanes_group(groups + 256 * g, W);
  with_abs(W, SA);
  return signed_lane_dots(SA, x.q + g * x.ld * 64);
}
// The tail scales of a lane layout whose block head is one f16 d (Q8_0_LANES, Q4_0_LANES, IQ4_NL's
// Q4_0 form): lane k = block k's d, zero past m (16 bytes from the m heads on stay in the row: the
// tail's quants follow them).
template <class B>
inline __m256 f16_tail_scales(const LaneRow<B>& r, int m) {
  static_assert(LaneRow<B>::kHead == 2, "one f16 head per block");
  const __m128i keep = _mm_cmpgt_epi16(_mm_set1_epi16(static_cast<short>(m)), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_cvtph_ps(_mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r.tail)), keep));
}
template <int NT>
[[gnu::always_inline]] inline void q8_0_lanes_tail(const LaneRow<tensor::BlockQ8_0>& r, const ActLanes& x, int64_t g,
                                                   int m, __m256* acc) {
  __m256i R[8];
  for (int k = 0; k < 8; ++k)
    R[k] = k < m ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.tail_qs + 32 * k)) : _mm256_setzero_si256();
  signed_tail<NT>(R, m, f16_tail_scales(r, m), x, g, acc);
}
// Four rows' 1-2 block tails of signed bytes dotted in one pass (blk(i, k): row i's block k, k <
// m) against the tail activations in act_low2 order (TailActs): the sums land in RowQuad's low2
// lanes [a0 a1 c0 c1 | b0 b1 d0 d1], where a row's tail alone took a pass of its own. Integer sums
// are exact, so each lane holds what the row's own tail pass gives it.
template <class Block>
[[gnu::always_inline]] inline __m256i signed_quad_tail(int m, const TailActs& xt, Block&& blk) {
  auto b1 = [&](int i) { return m == 2 ? blk(i, 1) : _mm256_setzero_si256(); };
  const __m256i T[8] = {blk(0, 0), b1(0), blk(2, 0), b1(2), blk(1, 0), b1(1), blk(3, 0), b1(3)};
  __m256i W[8], SA[16];
  transpose8x8_inline(T, W);
  with_abs(W, SA);
  return signed_lane_dots(SA, xt.q);
}
// One token (decode) on the rows of a lane layout (*_LANES of B, kGroupBytes a full group):
// sums_then_scales over the full groups (dots(groups, g); flt(r, g, isum, acc) their heads' float
// operations), then tail(r, g, m, acc) for the partial group; the tiled path's operations in its
// order, so the same bits. Rows go four at a time (quad_sums_then_scales).
// (lane_row_groups: a row's full groups alone.)
template <class B, class Dots, class Float>
[[gnu::always_inline]] inline void lane_row_groups(const LaneRow<B>& r, int64_t full, Dots& dots, Float& flt,
                                                   __m256* acc) {
  sums_then_scales(
      full, [&](int64_t g) { return dots(r.groups, g); }, [&](int64_t g, __m256i isum) { *acc = flt(r, g, isum, *acc); });
}
// quad_tail(rw, x01), where given: four rows' 1-2 block tails at once (signed_quad_tail), added to
// their accumulators' low2() lanes x01.
struct NoQuadTail {};
template <class B, int kGroupBytes, class Dots, class Float, class Tail, class QuadTail = NoQuadTail>
void lane_rows_one(const Kernels::Rows& rows, int64_t nb, float* out, Dots&& dots, Float&& flt, Tail&& tail,
                   QuadTail&& quad_tail = {}) {
  const int64_t full = nb / 8;
  const int m = static_cast<int>(nb % 8);
  auto row_at = [&](int64_t r) { return LaneRow<B>(rows.w + r * rows.stride, nb, kGroupBytes); };
  int64_t r0 = 0;
  for (; r0 + 4 <= rows.rows; r0 += 4) {
    const LaneRow<B> rw[4] = {row_at(r0), row_at(r0 + 1), row_at(r0 + 2), row_at(r0 + 3)};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    quad_sums_then_scales(
        full, [&](int i, int64_t g) { return dots(rw[i].groups, g); },
        [&](int i, int64_t g, __m256i isum) { acc[i] = flt(rw[i], g, isum, acc[i]); });
    if constexpr (!std::is_same_v<std::decay_t<QuadTail>, NoQuadTail>) {
      if (low2_tail(m)) {
        const RowQuad q(acc);
        _mm_storeu_ps(out + r0, q.sums(quad_tail(rw, q.low2())));
        continue;
      }
    }
    if (m)
      for (int i = 0; i < 4; ++i) tail(rw[i], full, m, &acc[i]);
    const RowQuad q(acc);
    _mm_storeu_ps(out + r0, q.sums(q.low2()));
  }
  for (int64_t row = r0; row < rows.rows; ++row) {
    const LaneRow<B> r = row_at(row);
    __m256 acc = _mm256_setzero_ps();
    lane_row_groups(r, full, dots, flt, &acc);
    if (m) tail(r, full, m, &acc);
    out[row] = hsum256(acc);
  }
}
// Rows [r, rows.rows) of a call.
inline Kernels::Rows rows_from(const Kernels::Rows& rows, int64_t r) {
  Kernels::Rows s = rows;
  s.w += r * rows.stride;
  s.rows -= r;
  if (rows.scales) s.scales = static_cast<const uint8_t*>(rows.scales) + r * rows.group_stride;
  if (rows.biases) s.biases = static_cast<const uint8_t*>(rows.biases) + r * rows.group_stride;
  return s;
}
void q8_0_lanes_one(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out) {
  using B = tensor::BlockQ8_0;
  const int tail = static_cast<int>(nb % 8);
  TailActs xt;
  if (low2_tail(tail)) xt.set(x, nb / 8, [](__m256i v) { return act_low2(v); });
  lane_rows_one<B, 256>(
      rows, nb, out, [&](const uint8_t* groups, int64_t g) { return biased8_lane_dots(groups, g, x); },
      [&](const LaneRow<B>& r, int64_t g, __m256i isum, __m256 acc) {
        return scaled_tail(isum, f16x8(r.heads + 16 * g), x.d + g * x.ld * 8, acc);
      },
      [&](const LaneRow<B>& r, int64_t g, int m, __m256* acc) { q8_0_lanes_tail<1>(r, x, g, m, acc); },
      [&](const LaneRow<B>* rw, __m256 x01) {
        const __m256 dw[4] = {f16_tail_scales(rw[0], tail), f16_tail_scales(rw[1], tail),
                              f16_tail_scales(rw[2], tail), f16_tail_scales(rw[3], tail)};
        const __m256i isum = signed_quad_tail(tail, xt, [&](int i, int k) {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rw[i].tail_qs + 32 * k));
        });
        return scaled_tail(isum, RowQuad(dw).low2(), xt.d, x01);
      });
}
void q8_0_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  if (nt == 1) return q8_0_lanes_one(rows, x, nb, out);
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const LaneRow<tensor::BlockQ8_0> r(w, nb, 256);
    if constexpr (kFull) {
      __m256i W[8];
      q8_0_lanes_group(r.groups + 256 * g, W);
      signed_dots<NT>(W, f16x8(r.heads + 16 * g), x, g, acc);
    } else {
      q8_0_lanes_tail<NT>(r, x, g, m, acc);
    }
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}

// Q4_0: w = d·(q − 8).
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q4_0v_group(const tensor::BlockQ4_0* w, const ActLanes& x, int64_t g, int m,
                                               __m256* acc) {
  w += 8 * g;
  __m256i W[8];
  unpack_q4<tensor::BlockQ4_0, kFull>(w, m, W);
  offset_dots<NT, 3, 4, !kFull>(W, q4_0_scales<kFull>(w, m), x, g, acc);
}

// Q5_0 / Q5_1 are Q4_0 / Q4_1 with a 5th bit per element from the block's 32-bit qh (bit e ↔
// element e). A block's first 8 bytes hold its scale(s) and qh: [d, qh, 2 bytes of qs] (Q5_0),
// [d, m, qh] (Q5_1); lo / hi get their low / high dwords, lane k from block k (zero past m).
template <class B, bool kFull>
inline void q5_heads(const B* w, int m, __m256i& lo, __m256i& hi) {
  auto head = [&](int k) {
    long long v = 0;
    if (kFull || k < m) __builtin_memcpy(&v, &w[k], 8);
    return v;
  };
  // Blocks (0, 1, 4, 5) and (2, 3, 6, 7), so that the in-lane shuffles leave them in order.
  const __m256 a = _mm256_castsi256_ps(_mm256_setr_epi64x(head(0), head(1), head(4), head(5)));
  const __m256 b = _mm256_castsi256_ps(_mm256_setr_epi64x(head(2), head(3), head(6), head(7)));
  lo = _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
  hi = _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
// The 5th bits (H: block k's qh in lane k) into W as unpack_q4 leaves it: W[d] byte j of lane k is
// element 4d + j, so it takes bit j of nibble d & 1 of qh byte d / 2, moved to bit 4.
inline void add_fifth_bits(__m256i H, __m256i* W) {
  const __m256i bit = _mm256_set1_epi32(static_cast<int>(0x80402010u));  // byte j: 0x10 << j
  const __m256i b16 = _mm256_set1_epi8(0x10);
  for (int b = 0; b < 4; ++b) {
    const int spread = 0x01010101 * b;  // byte b of each dword in all four of its bytes
    const __m256i s = _mm256_shuffle_epi8(H, _mm256_setr_epi32(spread, spread + 0x04040404, spread + 0x08080808,
                                                               spread + 0x0c0c0c0c, spread, spread + 0x04040404,
                                                               spread + 0x08080808, spread + 0x0c0c0c0c));
    // Low nibble: bits 0-3 up to 4-7 (the bits shifted in from the byte below fall outside `bit`).
    const __m256i lo = _mm256_and_si256(_mm256_slli_epi16(s, 4), bit), hi = _mm256_and_si256(s, bit);
    W[2 * b] = _mm256_or_si256(W[2 * b], _mm256_min_epu8(lo, b16));
    W[2 * b + 1] = _mm256_or_si256(W[2 * b + 1], _mm256_min_epu8(hi, b16));
  }
}

// Q5_0: w = d·(q − 16), Q4_0's form.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q5_0v_group(const tensor::BlockQ5_0* w, const ActLanes& x, int64_t g, int m,
                                               __m256* acc) {
  w += 8 * g;
  __m256i W[8], lo, hi;
  unpack_q4<tensor::BlockQ5_0, kFull>(w, m, W);
  q5_heads<tensor::BlockQ5_0, kFull>(w, m, lo, hi);
  add_fifth_bits(_mm256_or_si256(_mm256_srli_epi32(lo, 16), _mm256_slli_epi32(hi, 16)), W);  // qh at byte 2
  offset_dots<NT, 4, 5, !kFull>(W, f16_lo(lo), x, g, acc);
}
// Q5_1: w = d·q + m, Q4_1's form.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q5_1v_group(const tensor::BlockQ5_1* w, const ActLanes& x, int64_t g, int m,
                                               __m256* acc) {
  w += 8 * g;
  __m256i W[8], dm, qh;
  unpack_q4<tensor::BlockQ5_1, kFull>(w, m, W);
  q5_heads<tensor::BlockQ5_1, kFull>(w, m, dm, qh);
  add_fifth_bits(qh, W);
  scaled_offset_dots<NT, 5, !kFull>(W, f16_lo(dm), f16_hi(dm), x, g, acc);
}
// The 32 values of each sub-block k (R[k], byte l = element l) of a Q4_K / Q5_K super-block.
inline void k4_subblocks(const uint8_t* qs, __m256i* R) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int i = 0; i < 4; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * i));
    R[2 * i] = _mm256_and_si256(q, m4);
    R[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
  }
}
// A Q4_K / Q5_K super-block's dots for NT tokens from the transposed values W: w = (d·sc)·q + (−dmin·mn), Q4_1's form per
// sub-block (kBits 5 for Q5_K's values up to 31).
template <int NT, int kBits, class B>
[[gnu::always_inline]] inline void k4_dots(const B& b, const __m256i* W, const ActLanes& x, int64_t g, __m256* acc) {
  __m256 sc, mn;
  k4_scales(b.scales, sc, mn);
  scaled_offset_dots<NT, kBits>(W, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.d)), sc),
                                _mm256_mul_ps(_mm256_set1_ps(-_cvtsh_ss(b.dmin)), mn), x, g, acc);
}
// Q4_K: a super-block's 8 sub-blocks of 32 are one lane group (sub-block k ↔ activation block k,
// lane k). Sub-block k holds nibble half k & 1 of qs[32·(k/2) ..]; w = d·sc·q − dmin·mn per
// sub-block, with the 6-bit sc / mn unpacked once per super-block.
template <int NT>
[[gnu::always_inline]] inline void q4_kv_group(const tensor::BlockQ4_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  __m256i R[8], W[8];
  k4_subblocks(w[g].qs, R);
  transpose8x8(R, W);
  k4_dots<NT, 4>(w[g], W, x, g, acc);
}
// v in each byte of h whose bit k is set, zero elsewhere (Q5_K's and Q3_K's high bits).
inline __m256i where_bit(__m256i h, int k, __m256i v) {
  const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << k));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), v);
}
// Q5_K: Q4_K with element l of sub-block k adding 16 where bit k of qh[l] is set; the same float
// operations as the AVX-512 kernel, so the same bits.
template <int NT>
[[gnu::always_inline]] inline void q5_kv_group(const tensor::BlockQ5_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ5_K& b = w[g];
  __m256i R[8], W[8];
  k4_subblocks(b.qs, R);
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)), b16 = _mm256_set1_epi8(0x10);
  for (int k = 0; k < 8; ++k) R[k] = _mm256_or_si256(R[k], where_bit(qh, k, b16));
  transpose8x8(R, W);
  k4_dots<NT, 5>(b, W, x, g, acc);
}

// A Q6_K / Q3_K super-block's dots for NT tokens from its signed values S (lane k dword d), its 16
// int8 scales (one per 16 elements, an xmm) and its f16 d: |w| ≤ 32 goes through maddubs with the
// sign on x (four vectors of pairs still fit 16 bits), each 16-element half scaled in integers by
// madd against its scale, one conversion per token and group.
// Lane k's two 16-bit halves of lo / hi: entry 2k / 2k + 1 of the 16 int16 in s, a super-block's
// per-16-element scales in its sub-blocks' lanes (Q6_K, Q3_K, Q2_K).
inline void sub_block_lanes(__m256i s, __m256i& lo, __m256i& hi) {
  const __m256i even = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                        0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  lo = _mm256_shuffle_epi8(s, even);
  hi = _mm256_shuffle_epi8(s, _mm256_add_epi8(even, _mm256_set1_epi8(2)));
}
template <int NT>
[[gnu::always_inline]] inline void k16_dots(const __m256i* S, __m128i scales, uint16_t d, const ActLanes& x, int64_t g,
                                            __m256* acc) {
  __m256i A[8];
  for (int v = 0; v < 8; ++v) A[v] = _mm256_sign_epi8(S[v], S[v]);
  __m256i sc_lo, sc_hi;  // scale 2k (first 16 elements) / 2k + 1 (last 16)
  sub_block_lanes(_mm256_cvtepi8_epi16(scales), sc_lo, sc_hi);
  const __m256 dw = _mm256_set1_ps(_cvtsh_ss(d));
  const int32_t* xq = x.q + g * x.ld * 64;
  const float* xd = x.d + g * x.ld * 8;
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const int32_t* xg = xq + t * 64;
    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(signed_half<false>(A, S, xg, 0), sc_lo),
                                       _mm256_madd_epi16(signed_half<false>(A, S, xg, 4), sc_hi));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_loadu_ps(xd + t * 8)), acc[t]);
  }
}
// Q6_K: like Q4_K, a super-block is one lane group (sub-block k = 32-element block k % 4 of half
// k / 4). Values are 6-bit (ql nibble | 2 qh bits << 4) with offset 32, and every 16 elements have
// their own int8 scale (k16_dots).
template <int NT>
[[gnu::always_inline]] inline void q6_kv_group(const tensor::BlockQ6_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ6_K& b = w[g];
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  __m256i R[8], S[8];
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
    const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    // Block j's two high bits are bits 2j, 2j+1 of qh; 16-bit shifts, the mask drops what crosses.
    R[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
    R[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
    R[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
    R[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
  }
  transpose8x8_inline(R, S);
  for (int d = 0; d < 8; ++d) S[d] = _mm256_sub_epi8(S[d], _mm256_set1_epi8(32));
  k16_dots<NT>(S, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), b.d, x, g, acc);
}
// Q3_K: Q6_K's shape with 3-bit values − 4: element l of 32-element block k takes bits 2·(k % 4)
// of qs[32·(k / 4) + l] and, as +4, bit k of hmask[l]. The AVX-512 kernel's float operations.
// Block k's 32 two-bit values (bits 2·(k % 4) of qs[32·(k / 4) + l]) as R[k]: Q2_K's values,
// Q3_K's low bits. 16-bit shifts: what crosses from the byte above lands outside the mask.
inline void k2_low_bits(const uint8_t* qs, __m256i* R) {
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int n = 0; n < 2; ++n) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * n));
    for (int j = 0; j < 4; ++j) R[4 * n + j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
  }
}
template <int NT>
[[gnu::always_inline]] inline void q3_kv_group(const tensor::BlockQ3_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ3_K& b = w[g];
  const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)), b4 = _mm256_set1_epi8(4);
  __m256i R[8], S[8];
  k2_low_bits(b.qs, R);
  for (int k = 0; k < 8; ++k) R[k] = _mm256_sub_epi8(_mm256_or_si256(R[k], where_bit(hm, k, b4)), b4);
  transpose8x8_inline(R, S);
  k16_dots<NT>(S, q3_k_scales(b.scales), b.d, x, g, acc);
}

// Q2_K: Q3_K's low two bits alone (unsigned: maddubs' operand as they are), per 16-element sub-block
// a 4-bit scale and a 4-bit min, w = d·sc·q − dmin·m. Four vectors of pairs fit 16 bits for the dots
// (8·3·127) and the activation sums (8·127); both are scaled by madd in integers, then the AVX-512
// kernel's two FMAs per token and group.
template <int NT>
[[gnu::always_inline]] inline void q2_kv_group(const tensor::BlockQ2_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ2_K& b = w[g];
  __m256i R[8], S[8];
  k2_low_bits(b.qs, R);
  transpose8x8_inline(R, S);
  // Lane k's two 16-bit halves both hold sub-block 2k's scale (min), or 2k + 1's in the *_hi vector.
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), m4 = _mm_set1_epi8(0x0f);
  __m256i sc_lo, sc_hi, mn_lo, mn_hi;
  sub_block_lanes(_mm256_cvtepu8_epi16(_mm_and_si128(s, m4)), sc_lo, sc_hi);
  sub_block_lanes(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4)), mn_lo, mn_hi);
  // The mins meet the activations' half sums (pack_act_lanes' hs: first half low, last half high)
  // in one pmaddwd: lane k holds 2k's min low, 2k + 1's high.
  const __m256i low16 = _mm256_set1_epi32(0xffff);
  const __m256i mn = _mm256_or_si256(_mm256_and_si256(mn_lo, low16), _mm256_slli_epi32(mn_hi, 16));
  const __m256 dw = _mm256_set1_ps(_cvtsh_ss(b.d)), mw = _mm256_set1_ps(-_cvtsh_ss(b.dmin));
  const int32_t* xq = x.q + g * x.ld * 64;
  const int32_t* xh = x.hs + g * x.ld * 8;
  const float* xd = x.d + g * x.ld * 8;
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const int32_t* xg = xq + t * 64;
    __m256i dots[2];
    for (int h = 0; h < 2; ++h) {
      dots[h] = _mm256_setzero_si256();
      for (int v = 4 * h; v < 4 * h + 4; ++v) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg + 8 * v));
        dots[h] = _mm256_add_epi16(dots[h], _mm256_maddubs_epi16(S[v], xv));
      }
    }
    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(dots[0], sc_lo), _mm256_madd_epi16(dots[1], sc_hi));
    const __m256i q = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + t * 8)), mn);
    const __m256 d = _mm256_loadu_ps(xd + t * 8);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, d), acc[t]);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), _mm256_mul_ps(mw, d), acc[t]);
  }
}

RAPID_KV_LANES(q2_kv, tensor::BlockQ2_K)
RAPID_KV_LANES(q4_kv, tensor::BlockQ4_K)
RAPID_KV_LANES(q5_kv, tensor::BlockQ5_K)
RAPID_KV_LANES(q6_kv, tensor::BlockQ6_K)
RAPID_KV_LANES(q3_kv, tensor::BlockQ3_K)

// One token on repacked MLX rows (decode): sums_then_scales over the full groups (dots(w, g): a
// group's integer sums), then flt(isum, dw, mw, xd, xds, acc) with its scales and biases widened as
// mlx_group does and the group's activation scales and sums: the tiled path's operations in its
// order, so the same bits; the tail as there. Rows go four at a time (quad_sums_then_scales), and
// their 1-2 block tails in one pass (signed_quad_tail; tail_block(p): the 32 weight bytes at p as
// the group's signed values).
template <tensor::DType D, class Group, class Dots, class Float, class TailBlock>
void mlx_lanes_one(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out, Group& group, Dots& dots,
                   Float& flt, TailBlock& tail_block) {
  const MlxGroupScales gs(rows.group_size);
  const int64_t full = nb / 8;
  const int m = static_cast<int>(nb - 8 * full);
  TailActs xt;
  if (low2_tail(m)) xt.set(x, full, [](__m256i v) { return act_low2(v); });
  int64_t r0 = 0;
  for (; r0 + 4 <= rows.rows; r0 += 4) {
    const uint8_t *w[4], *sc[4], *bi[4];
    __m256 acc[4];
    for (int i = 0; i < 4; ++i) {
      w[i] = rows.w + (r0 + i) * rows.stride;
      sc[i] = static_cast<const uint8_t*>(rows.scales) + (r0 + i) * rows.group_stride;
      bi[i] = static_cast<const uint8_t*>(rows.biases) + (r0 + i) * rows.group_stride;
      acc[i] = _mm256_setzero_ps();
    }
    quad_sums_then_scales(
        full, [&](int i, int64_t g) { return dots(w[i], g); },
        [&](int i, int64_t g, __m256i isum) {
          __m256 dw, mw;
          gs.at<D>(sc[i], bi[i], g, dw, mw);
          acc[i] = flt(isum, dw, mw, x.d + g * x.ld * 8, x.ds + g * x.ld * 8, acc[i]);
        });
    if (low2_tail(m)) {  // the four rows' tails in one pass (signed_quad_tail)
      __m256 dw[4], mw[4];
      for (int i = 0; i < 4; ++i) gs.at<D>(sc[i], bi[i], full, dw[i], mw[i]);
      const __m256i isum = signed_quad_tail(m, xt, [&](int i, int k) { return tail_block(w[i] + full * 256 + 32 * k); });
      const RowQuad q(acc);
      _mm_storeu_ps(out + r0, q.sums(flt(isum, RowQuad(dw).low2(), RowQuad(mw).low2(), xt.d, xt.ds, q.low2())));
      continue;
    }
    if (m)
      for (int i = 0; i < 4; ++i) mlx_group<1, false, D>(w[i], sc[i], bi[i], gs, full, m, &acc[i], group);
    const RowQuad q(acc);
    _mm_storeu_ps(out + r0, q.sums(q.low2()));
  }
  for (int64_t r = r0; r < rows.rows; ++r) {
    const uint8_t* w = rows.w + r * rows.stride;
    const uint8_t* sc = static_cast<const uint8_t*>(rows.scales) + r * rows.group_stride;
    const uint8_t* bi = static_cast<const uint8_t*>(rows.biases) + r * rows.group_stride;
    __m256 acc = _mm256_setzero_ps();
    sums_then_scales(
        full, [&](int64_t g) { return dots(w, g); },
        [&](int64_t g, __m256i isum) {
          __m256 dw, mw;
          gs.at<D>(sc, bi, g, dw, mw);
          acc = flt(isum, dw, mw, x.d + g * x.ld * 8, x.ds + g * x.ld * 8, acc);
        });
    if (m) mlx_group<1, false, D>(w, sc, bi, gs, full, m, &acc, group);
    out[r] = hsum256(acc);
  }
}
template <class Group, class Dots, class Float, class TailBlock>
void mlx_lanes_one(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out, Group& group, Dots&& dots,
                   Float&& flt, TailBlock&& tail_block) {
  switch (rows.group_dtype) {
    case tensor::DType::F32: return mlx_lanes_one<tensor::DType::F32>(rows, x, nb, out, group, dots, flt, tail_block);
    case tensor::DType::F16: return mlx_lanes_one<tensor::DType::F16>(rows, x, nb, out, group, dots, flt, tail_block);
    default: return mlx_lanes_one<tensor::DType::BF16>(rows, x, nb, out, group, dots, flt, tail_block);
  }
}

// 16 bytes at lo in the low half and at hi in the high one; zeros when !load.
inline __m256i halves16(const uint8_t* lo, const uint8_t* hi, bool load) {
  return load ? _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(hi), reinterpret_cast<const __m128i*>(lo))
              : _mm256_setzero_si256();
}

// One token (decode) over rows of unsigned 4-bit blocks (16 packed bytes, nibble order: MLX
// 4-bit, Q4_1, Q4_0), rows four at a time (RowQuad): a 1-2 block tail (576-wide rows) is dotted
// for all four rows in one pass and a 3-4 block one (640, 896) for two rows a pass, where each
// row's took a whole group's vector work, and the four sums are reduced together (rows with no tail
// or a longer one gain nothing from it: callers keep them on their per-row loops). row(r, acc) adds
// row r's whole groups into acc and returns its tail's quants; tail_scales(r, dw, mw) gives that
// tail's scales (and offsets) in lanes 0..m-1; flt(isum, dw, mw, xt, acc) is the per-row kernel's
// float tail with the tail activations xt. Every lane gets the per-row kernel's operations, so the
// same bits. Returns the rows done: a multiple of 4.
template <class Row, class TailScales, class Float>
[[gnu::always_inline]] inline int64_t q4_quads(int64_t rows, const ActLanes& x, int64_t nb, float* out, Row&& row,
                                               TailScales&& tail_scales, Float&& flt) {
  const int64_t full = nb / 8;
  const int m = static_cast<int>(nb % 8);
  const bool quad_tail = low2_tail(m);  // else 3-4 blocks, a pair a vector
  TailActs xt;
  if (quad_tail) xt.set(x, full, [](__m256i v) { return act_low2(v); });
  else xt.set(x, full, [](__m256i v) { return act_low4(v); });
  const int64_t n = rows / 4 * 4;
  for (int64_t r0 = 0; r0 < n; r0 += 4) {
    __m256 acc[4], dw[4], mw[4];
    const uint8_t* tq[4];
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm256_setzero_ps();
      tq[j] = row(r0 + j, &acc[j]);
      tail_scales(r0 + j, dw[j], mw[j]);
    }
    // The scales and offsets take the accumulators' lanes (the unused halves compile away).
    RowQuad q(acc);
    const RowQuad qd(dw), qm(mw);
    __m256i W[8];
    if (quad_tail) {
      const __m256i y[4] = {halves16(tq[0], tq[1], true), halves16(tq[0] + 16, tq[1] + 16, m == 2),
                            halves16(tq[2], tq[3], true), halves16(tq[2] + 16, tq[3] + 16, m == 2)};
      nibbles_of(y, W);
      _mm_storeu_ps(out + r0, q.sums(flt(lane_dots(W, xt.q), qd.low2(), qm.low2(), xt, q.low2())));
      continue;
    }
    for (int p = 0; p < 2; ++p) {
      __m256i y[4];
      for (int k = 0; k < 4; ++k) y[k] = halves16(tq[2 * p] + 16 * k, tq[2 * p + 1] + 16 * k, k < m);
      nibbles_of(y, W);
      __m256& lo = p ? q.lo_cd : q.lo_ab;
      lo = flt(lane_dots(W, xt.q), p ? qd.lo_cd : qd.lo_ab, p ? qm.lo_cd : qm.lo_ab, xt, lo);
    }
    _mm_storeu_ps(out + r0, q.sums(q.low2()));
  }
  return n;
}
// q4_quads' float tail for weights d·q + m (scaled_offset_dots').
constexpr auto kAffineTail = [](__m256i isum, __m256 dw, __m256 mw, const TailActs& xt, __m256 acc) {
  return scaled_offset_tail(isum, dw, mw, xt.d, xt.ds, acc);
};

// MLX 4-bit's q4_quads: the rows' scales and biases as stored (D).
template <tensor::DType D, class Group>
[[gnu::noinline]] int64_t mlx4_quads(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out,
                                     Group& group) {
  const MlxGroupScales gs(rows.group_size);
  const int64_t full = nb / 8;
  auto sc = [&](int64_t r) { return static_cast<const uint8_t*>(rows.scales) + r * rows.group_stride; };
  auto bi = [&](int64_t r) { return static_cast<const uint8_t*>(rows.biases) + r * rows.group_stride; };
  return q4_quads(
      rows.rows, x, nb, out,
      [&](int64_t r, __m256* acc) {
        const uint8_t* w = rows.w + r * rows.stride;
        for (int64_t g = 0; g < full; ++g) mlx_group<1, true, D>(w, sc(r), bi(r), gs, g, 8, acc, group);
        return w + full * 8 * 16;
      },
      [&](int64_t r, __m256& dw, __m256& mw) { gs.at<D>(sc(r), bi(r), full, dw, mw); }, kAffineTail);
}

// MLX affine 4-bit (Kernels::MlxDotV): 16 packed bytes per block, the row's scales and biases per
// group as stored (qdotv_dispatch.h's mlx_lanes_rows widens them and gives each lane its own).
// kLanes: DType::MLX_LANES, whose full groups hold the dwords unpack_q4 gathers in its order (the
// Q4 lane layouts' place, see unpack_q4_lanes); its tail blocks are as stored.
template <bool kLanes>
void mlx4v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256 dw, __m256 mw, __m256* acc)
                   __attribute__((always_inline)) {
    __m256i W[8];
    if constexpr (kLanes && kFull) unpack_q4_lanes(w + g * 8 * 16, W);
    else unpack_q4<kFull>(w + g * 8 * 16, 16, m, W);
    scaled_offset_dots<NT, 4, !kFull>(W, dw, mw, x, g, acc);
  };
  // (Not mlx_lanes_one at one token, as MLX 8-bit: SmolLM2's MLX 4-bit decode ran 0.85x.)
  int64_t done = 0;
  if (nt == 1 && short_tail(nb)) {
    switch (rows.group_dtype) {
      case tensor::DType::F32: done = mlx4_quads<tensor::DType::F32>(rows, x, nb, out, group); break;
      case tensor::DType::F16: done = mlx4_quads<tensor::DType::F16>(rows, x, nb, out, group); break;
      default: done = mlx4_quads<tensor::DType::BF16>(rows, x, nb, out, group);
    }
    if (done == rows.rows) return;
  }
  mlx_lanes_rows(rows_from(rows, done), nb, nt, out + done, ldo, group);
}

// MLX affine 8-bit (Kernels::MlxDotV): a lane group's 256 bytes are its 8 blocks in order, one 8×8
// dword transpose puts them in the lanes (kLanes: DType::MLX_LANES, whose full groups are stored so
// already; its tail blocks are as stored). The values q (0..255) would overflow maddubs' int16
// pairs, so they go in as q − 128 with its sign moved onto x (|q − 128| ≤ 128 fits u8, a pair sums
// to at most 2·128·127) and each vector's pairs widen to int32 at once: Σ(q − 128)·x exactly, the
// AVX-512 kernel's integer part, then its float operations (w = s·(q − 128) + (b + 128·s)), so the
// same bits. Per token and group that is 8 sign / maddubs / madd triples against the per-block
// kernel's 8 conversions, products and FMAs in one dependency chain; and the scales are read as
// stored, with no per-row f32 copy.
template <bool kLanes>
void mlx8v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256 dw, __m256 mw, __m256* acc)
                   __attribute__((always_inline)) {
    const uint8_t* p = w + g * 8 * 32;
    __m256i W[8];
    if constexpr (kLanes && kFull) {
      for (int d = 0; d < 8; ++d) W[d] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * d));
    } else {
      __m256i R[8];
      // Blocks past m: q = 0, i.e. −128 against activations that are zero there.
      for (int k = 0; k < 8; ++k)
        R[k] = kFull || k < m ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k))
                              : _mm256_setzero_si256();
      transpose8x8_inline(R, W);
    }
    for (int d = 0; d < 8; ++d) W[d] = _mm256_xor_si256(W[d], _mm256_set1_epi8(static_cast<char>(0x80)));  // q − 128
    __m256i SA[16];
    with_abs(W, SA);
    const int32_t* xq = x.q + g * x.ld * 64;
    const float *xd = x.d + g * x.ld * 8, *xds = x.ds + g * x.ld * 8;
    const __m256 mw128 = _mm256_fmadd_ps(dw, _mm256_set1_ps(128.0f), mw);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      acc[t] = scaled_tail(signed_lane_dots(SA, xq + t * 64), dw, xd + t * 8, acc[t]);
      acc[t] = _mm256_fmadd_ps(mw128, _mm256_loadu_ps(xds + t * 8), acc[t]);
    }
  };
  if (kLanes && nt == 1)
    return mlx_lanes_one(
        rows, x, nb, out, group, [&](const uint8_t* w, int64_t g) { return biased8_lane_dots(w, g, x); },
        [&](__m256i isum, __m256 dw, __m256 mw, const float* xd, const float* xds, __m256 acc) {
          const __m256 mw128 = _mm256_fmadd_ps(dw, _mm256_set1_ps(128.0f), mw);
          acc = scaled_tail(isum, dw, xd, acc);
          return _mm256_fmadd_ps(mw128, _mm256_loadu_ps(xds), acc);
        },
        [](const uint8_t* p) {  // q − 128, as the group's
          return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                  _mm256_set1_epi8(static_cast<char>(0x80)));
        });
  mlx_lanes_rows(rows, nb, nt, out, ldo, group);
}

// MLX affine 2-, 3-, 5- and 6-bit (mlx_bits.h): each block's values as bytes, transposed into the
// lanes, then MLX 4-bit's dots (plain-order activations).
template <int kBits>
void mlx_stream_v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int, __m256 dw, __m256 mw, __m256* acc)
                   __attribute__((always_inline)) {
    __m256i R[8], W[8];
    mlx_group_values<kBits>(w, nb, g, R);
    transpose8x8_inline(R, W);
    scaled_offset_dots<NT, kBits, !kFull>(W, dw, mw, x, g, acc);
  };
  mlx_lanes_rows(rows, nb, nt, out, ldo, group);
}

// MXFP4 (mxfp4_rows.h's lane scheme): the codes unpacked like any 4-bit nibbles, one pshufb per
// vector to 2·E2M1 + 16, then Q5_0's dots (values ≤ 28 take its 4-vector runs in 16 bits).
template <int NT, bool kTail>
[[gnu::always_inline]] inline void mxfp4v_dots(__m256i* W, __m256 dw, const ActLanes& x, int64_t g, __m256* acc) {
  const __m128i lut128 = mxfp4_biased_lut();
  const __m256i lut = _mm256_set_m128i(lut128, lut128);
  for (int d = 0; d < 8; ++d) W[d] = _mm256_shuffle_epi8(lut, W[d]);
  offset_dots<NT, 4, 5, kTail>(W, dw, x, g, acc);
}
// DType::MXFP4: 16 nibble bytes per block (MLX 4-bit's packing, nibble-order activations), the
// E8M0 bytes in their own array.
void mxfp4v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, const uint8_t* e, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    __m256i W[8];
    unpack_q4<kFull>(w + g * 8 * 16, 16, m, W);
    mxfp4v_dots<NT, !kFull>(W, mxfp4_lane_scales(mxfp4_scale_bytes<1, kFull>(e + 8 * g, m)), x, g, acc);
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}
// GGML's 17-byte blocks in place: Q4_0's nibble order, so plain-order activations.
void mxfp4_ggmlv(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* row, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const auto* w = reinterpret_cast<const tensor::BlockMXFP4*>(row);
    __m256i W[8];
    unpack_q4<tensor::BlockMXFP4, kFull>(w + 8 * g, m, W);
    const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g) + offsetof(tensor::BlockMXFP4, e);
    mxfp4v_dots<NT, !kFull>(W, mxfp4_lane_scales(mxfp4_scale_bytes<sizeof(tensor::BlockMXFP4), kFull>(p, m)), x, g, acc);
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}

// IQ4_NL / IQ4_XS: the nibbles unpacked as Q4_0's, one pshufb per vector to the table's signed
// values, then Q8_0's signed dots. The AVX-512 kernels' integer sums and float operations, so the
// same bits. kTail: IQ4_NL's partial last group (in token pairs).
[[gnu::always_inline]] inline void iq4_values(__m256i* W) {
  const __m128i lut128 = iq4_lut<0>();
  const __m256i lut = _mm256_set_m128i(lut128, lut128);
  for (int d = 0; d < 8; ++d) W[d] = _mm256_shuffle_epi8(lut, W[d]);
}
template <int NT, bool kTail = false>
[[gnu::always_inline]] inline void iq4_dots(__m256i* W, __m256 dw, const ActLanes& x, int64_t g, __m256* acc) {
  iq4_values(W);
  signed_dots<NT, kTail>(W, dw, x, g, acc);
}
// IQ4_NL's blocks are Q4_0's in layout: its unpacking and scales as they are.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void iq4_nlv_group(const tensor::BlockIQ4_NL* w, const ActLanes& x, int64_t g, int m,
                                                 __m256* acc) {
  const auto* q = reinterpret_cast<const tensor::BlockQ4_0*>(w + 8 * g);
  __m256i W[8];
  unpack_q4<tensor::BlockQ4_0, kFull>(q, m, W);  // blocks past m meet zero activations
  iq4_dots<NT, !kFull>(W, q4_0_scales<kFull>(q, m), x, g, acc);
}
// IQ4_XS: a super-block is one lane group (sub-block k in lane k), its 128 qs bytes Q4_0's 8 blocks'
// (kLanes: IQ4_XS_LANES, those bytes in a Q4_0_LANES group's order).
template <int NT, bool kLanes = false>
[[gnu::always_inline]] inline void iq4_xsv_group(const tensor::BlockIQ4_XS* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockIQ4_XS& b = w[g];
  __m256i W[8];
  if constexpr (kLanes) unpack_q4_lanes(b.qs, W);
  else unpack_q4<true>(b.qs, 16, 8, W);
  iq4_dots<NT>(W, iq4_xs_scales(b), x, g, acc);
}
template <int NT>
[[gnu::always_inline]] inline void iq4_xs_lanes_group(const tensor::BlockIQ4_XS* w, const ActLanes& x, int64_t g,
                                                      __m256* acc) {
  iq4_xsv_group<NT, true>(w, x, g, acc);
}
RAPID_KV_LANES(iq4_xsv, tensor::BlockIQ4_XS)
RAPID_KV_LANES(iq4_xs_lanes, tensor::BlockIQ4_XS)

// The group's weights and f16 scales (Q4_0's layout, IQ4_NL's too): lane k = block k, zero past m.
template <bool kFull>
[[gnu::always_inline]] inline __m256 q4_0_lanes_group(const uint8_t* w, int64_t nb, int64_t g, int m, __m256i* W) {
  const LaneRow<tensor::BlockQ4_0> r(w, nb, 128);
  if constexpr (kFull) {
    unpack_q4_lanes(r.groups + 128 * g, W);
    return f16x8(r.heads + 16 * g);
  } else {
    unpack_q4<false>(r.tail_qs, 16, m, W);
    return f16_tail_scales(r, m);
  }
}
// One token over a Q4 lane layout's rows (LaneRow<B>): q4_quads where the rows end in a short
// tail (whole groups as lane_rows_one adds them, the tail's scales from scales(r, dw, mw), its
// float tail tail_flt), lane_rows_one(dots, flt, tail) for the rest.
template <class B, class Dots, class Float, class Tail, class Scales, class TailFloat>
[[gnu::always_inline]] inline void q4_lanes_one(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out,
                                                Dots& dots, Float& flt, Tail& tail, Scales&& scales,
                                                TailFloat&& tail_flt) {
  const int64_t full = nb / 8;
  auto row = [&](int64_t i) { return LaneRow<B>(rows.w + i * rows.stride, nb, 128); };
  int64_t done = 0;
  if (short_tail(nb))
    done = q4_quads(
        rows.rows, x, nb, out,
        [&](int64_t i, __m256* acc) {
          const LaneRow<B> r = row(i);
          lane_row_groups(r, full, dots, flt, acc);
          return r.tail_qs;
        },
        [&](int64_t i, __m256& dw, __m256& mw) { scales(row(i), dw, mw); }, tail_flt);
  lane_rows_one<B, 128>(rows_from(rows, done), nb, out + done, dots, flt, tail);
}
// Q4_0_LANES, one token: the tail's f16 scales as q4_0_lanes_group reads them, offset_dots' float tail.
template <class Dots, class Float, class Tail>
[[gnu::noinline]] void q4_0_lanes_one(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out, Dots& dots,
                                      Float& flt, Tail& tail) {
  const int m = static_cast<int>(nb % 8);
  q4_lanes_one<tensor::BlockQ4_0>(
      rows, x, nb, out, dots, flt, tail,
      [&](const LaneRow<tensor::BlockQ4_0>& r, __m256& dw, __m256& mw) {
        dw = f16_tail_scales(r, m);
        mw = _mm256_setzero_ps();
      },
      [](__m256i isum, __m256 dw, __m256, const TailActs& xt, __m256 acc) {
        return offset_tail<3>(isum, xt.sum, dw, xt.d, acc);
      });
}
void q4_0_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    __m256i W[8];
    const __m256 dw = q4_0_lanes_group<kFull>(w, nb, g, m, W);
    offset_dots<NT, 3, 4, !kFull>(W, dw, x, g, acc);
  };
  if (nt == 1) {
    auto dots = [&](const uint8_t* groups, int64_t g) { return q4_lane_dots(groups, g, x); };
    auto flt = [&](const LaneRow<tensor::BlockQ4_0>& r, int64_t g, __m256i isum, __m256 acc) {
      return offset_tail<3>(isum, x.sum + g * x.ld * 8, f16x8(r.heads + 16 * g), x.d + g * x.ld * 8, acc);
    };
    auto tail = [&](const auto& r, int64_t g, int m, __m256* acc) { group.template operator()<1, false>(r.groups, g, m, acc); };
    return q4_0_lanes_one(rows, x, nb, out, dots, flt, tail);
  }
  group_lanes(rows, nb, nt, out, ldo, group);
}
void iq4_nl_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    __m256i W[8];
    const __m256 dw = q4_0_lanes_group<kFull>(w, nb, g, m, W);
    iq4_dots<NT, !kFull>(W, dw, x, g, acc);
  };
  if (nt == 1) {
    return lane_rows_one<tensor::BlockQ4_0, 128>(
        rows, nb, out,
        [&](const uint8_t* groups, int64_t g) {
          __m256i W[8], SA[16];
          unpack_q4_lanes(groups + 128 * g, W);
          iq4_values(W);
          with_abs(W, SA);
          return signed_lane_dots(SA, x.q + g * x.ld * 64);
        },
        [&](const LaneRow<tensor::BlockQ4_0>& r, int64_t g, __m256i isum, __m256 acc) {
          return scaled_tail(isum, f16x8(r.heads + 16 * g), x.d + g * x.ld * 8, acc);
        },
        [&](const auto& r, int64_t g, int m, __m256* acc) { group.template operator()<1, false>(r.groups, g, m, acc); });
  }
  group_lanes(rows, nb, nt, out, ldo, group);
}
// Q4_1_LANES, one token: the tail's heads (d, m) as q4_1_lanes' tail group reads them.
template <class Dots, class Float, class Tail>
[[gnu::noinline]] void q4_1_lanes_one(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out, Dots& dots,
                                      Float& flt, Tail& tail) {
  const int m = static_cast<int>(nb % 8);
  const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  q4_lanes_one<tensor::BlockQ4_1>(
      rows, x, nb, out, dots, flt, tail,
      [&](const LaneRow<tensor::BlockQ4_1>& r, __m256& dw, __m256& mw) {
        const __m256i dm = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.tail)), keep);
        dw = f16_lo(dm), mw = f16_hi(dm);
      },
      kAffineTail);
}
void q4_1_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const LaneRow<tensor::BlockQ4_1> r(w, nb, 128);
    __m256i W[8], dm;
    if constexpr (kFull) {
      unpack_q4_lanes(r.groups + 128 * g, W);
      dm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.heads + 32 * g));
    } else {
      unpack_q4<false>(r.tail_qs, 16, m, W);
      const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      dm = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.tail)), keep);
    }
    scaled_offset_dots<NT, 4, !kFull>(W, f16_lo(dm), f16_hi(dm), x, g, acc);
  };
  if (nt == 1) {
    auto dots = [&](const uint8_t* groups, int64_t g) { return q4_lane_dots(groups, g, x); };
    auto flt = [&](const LaneRow<tensor::BlockQ4_1>& r, int64_t g, __m256i isum, __m256 acc) {
      const __m256i dm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.heads + 32 * g));
      return scaled_offset_tail(isum, f16_lo(dm), f16_hi(dm), x.d + g * x.ld * 8, x.ds + g * x.ld * 8, acc);
    };
    auto tail = [&](const auto& r, int64_t g, int m, __m256* acc) { group.template operator()<1, false>(r.groups, g, m, acc); };
    return q4_1_lanes_one(rows, x, nb, out, dots, flt, tail);
  }
  group_lanes(rows, nb, nt, out, ldo, group);
}

RAPID_QDOTV(q4_0v, tensor::BlockQ4_0)
RAPID_QDOTV(q8_0v, tensor::BlockQ8_0)
RAPID_QDOTV(q4_1v, tensor::BlockQ4_1)
RAPID_QDOTV(q5_0v, tensor::BlockQ5_0)
RAPID_QDOTV(q5_1v, tensor::BlockQ5_1)
RAPID_QDOTV(iq4_nlv, tensor::BlockIQ4_NL)
#undef RAPID_QDOTV
#undef RAPID_KV_LANES

}  // namespace

void fill_lane_kernels_avx2(Kernels& k) {
  k.dot_q4_0v = q4_0v;
  k.dot_q8_0v = q8_0v;
  k.dot_q8_0_lanes = q8_0_lanes;
  k.dot_q4_0_lanes = q4_0_lanes;
  k.dot_q4_1_lanes = q4_1_lanes;
  k.dot_iq4_nl_lanes = iq4_nl_lanes;
  k.dot_iq4_xs_lanes = iq4_xs_lanes;
  k.dot_q4_1v = q4_1v;
  k.dot_q5_0v = q5_0v;
  k.dot_q5_1v = q5_1v;
  k.dot_q2_kv = q2_kv;
  k.dot_q3_kv = q3_kv;
  k.dot_q4_kv = q4_kv;
  k.dot_q5_kv = q5_kv;
  k.dot_q6_kv = q6_kv;
  k.dot_iq4_nlv = iq4_nlv;
  k.dot_iq4_xsv = iq4_xsv;
  fill_lattice_kernels(k);
  k.dot_mlx4v = mlx4v<false>;
  k.dot_mlx4_lanes = mlx4v<true>;
  k.dot_mlx8v = mlx8v<false>;
  k.dot_mlx8_lanes = mlx8v<true>;
  k.dot_mlx2v = mlx_stream_v<2>;
  k.dot_mlx3v = mlx_stream_v<3>;
  k.dot_mlx5v = mlx_stream_v<5>;
  k.dot_mlx6v = mlx_stream_v<6>;
  k.dot_mxfp4v = mxfp4v;
  k.dot_mxfp4_ggmlv = mxfp4_ggmlv;
}

}  // namespace rapid::compute
