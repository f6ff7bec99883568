// AVX-512 kernels (F, BW, VL, VNNI, BF16). Integer dots use vpdpbusd (u8 × s8 → s32), which
// needs unsigned weights: nibbles already are, Q8_0 weights are biased by +128 (xor 0x80) and the
// bias removed with the activation block's integer sum; the Q6_K lane kernel's signed values go
// as |w| with the sign moved onto the activation.
//
// Lane kernels (Kernels::QDotV / MlxDotV / Mxfp4DotV) for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K,
// MLX 4-bit and MXFP4 (the MXFP4 ones not measured on an AVX-512 machine yet): the AVX2 lane
// kernels' scheme (kernels_avx2_lanes.cpp) with 512-bit dpbusd pairs. Their float
// operations are the AVX2 kernels' exactly (per token and 8-block group: one conversion, the same
// fma / mul sequence, hsum256 at the end; only the exact integer part differs), so a token's result
// is bitwise the same on AVX2 and AVX-512 machines and for every tile size (compute_test checks
// both). Measured on a Sapphire Rapids core (1 thread, 1024 x 1024 rows in L2), against the
// per-block VNNI kernels they replace: 1.5-2.7x at 1 token row, 2.4-3.6x at 8, 2.4-3.9x at 16;
// against the AVX2 lane kernels on the same core: 1.0-1.3x at 1 row, 1.2-1.7x at 8 and 16
// (bench/README.md, "AVX-512 lane kernels").
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "compute/avx2_hsum.h"
#include "compute/avx512_exp.h"
#include "compute/k4_scales.h"
#include "compute/kernels.h"
#include "compute/mlx_bits.h"
#include "compute/mxfp4_rows.h"
#include "compute/qdotv_dispatch.h"
#include "compute/iq_lattice_rows.h"

namespace rapid::compute {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_bf16(const uint16_t* p) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 load_f16_mask(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load_bf16_mask(const uint16_t* p, __mmask16 m) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __mmask16 tail_mask(int64_t r) { return static_cast<__mmask16>((1u << r) - 1); }

float dot_f32(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
float dot_f16(const float* x, const uint16_t* w, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_f16(w + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), load_f16(w + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_f16(w + i), s0);
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), load_f16_mask(w + i, m), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
float dot_bf16(const float* x, const uint16_t* w, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_bf16(w + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), load_bf16(w + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_bf16(w + i), s0);
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), load_bf16_mask(w + i, m), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
void axpy_f32(float a, const float* v, float* y, int64_t n) {
  __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(v + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, v + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}
void axpy_f16(float a, const uint16_t* v, float* y, int64_t n) {
  __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, load_f16(v + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, load_f16_mask(v + i, m), _mm512_maskz_loadu_ps(m, y + i)));
  }
}
void axpy_bf16(float a, const uint16_t* v, float* y, int64_t n) {
  __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, load_bf16(v + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, load_bf16_mask(v + i, m), _mm512_maskz_loadu_ps(m, y + i)));
  }
}
void to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
void to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
  for (; i < n; ++i) {
    __m512 v = _mm512_set1_ps(x[i]);
    __m256bh h = _mm512_cvtneps_pbh(v);
    y[i] = static_cast<uint16_t>(_mm256_extract_epi16(reinterpret_cast<__m256i>(h), 0));
  }
}

void from_f16(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load_f16(x + i));
  if (i < n) _mm512_mask_storeu_ps(y + i, tail_mask(n - i), load_f16_mask(x + i, tail_mask(n - i)));
}
void from_bf16(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load_bf16(x + i));
  if (i < n) _mm512_mask_storeu_ps(y + i, tail_mask(n - i), load_bf16_mask(x + i, tail_mask(n - i)));
}

void quantize_act(const float* x, int64_t n, tensor::ActQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    float d = amax / 127.0f, id = d != 0 ? 127.0f / amax : 0.0f;
    __m512 iv = _mm512_set1_ps(id);
    __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, iv));  // round to nearest even
    __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, iv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16), _mm512_cvtsepi32_epi8(q1));
    out[b].d = d;
    out[b].sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

inline __m256i nibbles(const uint8_t* qs) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}
inline __m256i load_x(const tensor::ActQ8& a) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
}

// Q5_0 / Q5_1: the block's 32-bit qh is directly a byte mask (bit e ↔ element e, in the same
// order as nibbles()), so the 5th bit is one masked set. Values stay unsigned 0..31.
inline __m256i q5_values(const uint8_t* qs, const uint8_t* qhb) {
  uint32_t qh;
  __builtin_memcpy(&qh, qhb, 4);
  return _mm256_or_si256(nibbles(qs), _mm256_maskz_set1_epi8(static_cast<__mmask32>(qh), 0x10));
}

// Unsigned weight values of one block, in nibbles() order; Q8_0's signed bytes biased by +128
// (LegacyFormat's -128·Σx takes the bias off).
inline __m256i values(const tensor::BlockQ4_0& b) { return nibbles(b.qs); }
inline __m256i values(const tensor::BlockQ4_1& b) { return nibbles(b.qs); }
inline __m256i values(const tensor::BlockQ5_0& b) { return q5_values(b.qs, b.qh); }
inline __m256i values(const tensor::BlockQ5_1& b) { return q5_values(b.qs, b.qh); }
inline __m256i values(const tensor::BlockQ8_0& b) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)),
                          _mm256_set1_epi8(static_cast<char>(0x80)));
}

// The legacy 32-element formats share one kernel: per block 32 unsigned weight bytes
// (values()), the scale d, and either a min (kMin: + m·dx·Σx, kept apart in float) or a
// signed-offset correction (kOffset: lane 0 starts at kOffset·Σx, so it cancels exactly in
// integers); see LegacyFormat. acc += dw·dx · Σ q·x as 8 lanes.
template <int NT, class B>
void legacy_nt(const B* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  using Fmt = tensor::LegacyFormat<B>;
  __m256 acc[NT];
  float off[NT];
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = values(w[i]);
    const float dw = h2f(w[i].d);
    float mw = 0;
    if constexpr (Fmt::kMin) mw = h2f(w[i].m);
    for (int t = 0; t < NT; ++t) {
      const tensor::ActQ8& a = x[t * xs + i];
      __m256i p = _mm256_dpbusd_epi32(_mm256_maskz_set1_epi32(1, Fmt::kOffset * a.sum), q, load_x(a));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d), acc[t]);
      if constexpr (Fmt::kMin) off[t] += mw * a.d * a.sum;
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = Fmt::kMin ? hsum256(acc[t]) + off[t] : hsum256(acc[t]);
}

#define RAPID_LEGACY_NT(fn, B)                                                  \
  template <int NT>                                                             \
  void fn##_nt(const B* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) { \
    legacy_nt<NT>(w, x, xs, nb, out);                                           \
  }
RAPID_LEGACY_NT(q4_0, tensor::BlockQ4_0)
RAPID_LEGACY_NT(q4_1, tensor::BlockQ4_1)
RAPID_LEGACY_NT(q5_0, tensor::BlockQ5_0)
RAPID_LEGACY_NT(q5_1, tensor::BlockQ5_1)
RAPID_LEGACY_NT(q8_0, tensor::BlockQ8_0)
#undef RAPID_LEGACY_NT

// Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scale/min; sub-block j pairs with activation
// block j. Q5_K adds a 5th bit (bit j of qh[l] for sub-block j), turned into 0x10 by a byte test mask.
template <int NT, class B, bool kFifthBit>
void k4_nt(const B* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  float off[NT];
  const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(0x10);
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(w[i].d), dmin = h2f(w[i].dmin);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) tensor::scale_min_k4(j, w[i].scales, sc[j], mn[j]);
    for (int k = 0; k < 4; ++k) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * k));
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFifthBit) {
        const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh));
        __mmask32 h0 = _mm256_test_epi8_mask(H, _mm256_set1_epi8(static_cast<char>(1 << (2 * k))));
        __mmask32 h1 = _mm256_test_epi8_mask(H, _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1))));
        lo = _mm256_or_si256(lo, _mm256_maskz_mov_epi8(h0, b16));
        hi = _mm256_or_si256(hi, _mm256_maskz_mov_epi8(h1, b16));
      }
      const float s0 = d * sc[2 * k], s1 = d * sc[2 * k + 1];
      for (int t = 0; t < NT; ++t) {
        const tensor::ActQ8& a0 = x[t * xs + i * 8 + 2 * k];
        const tensor::ActQ8& a1 = x[t * xs + i * 8 + 2 * k + 1];
        __m256i p0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, load_x(a0));
        __m256i p1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), hi, load_x(a1));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(s0 * a0.d), acc[t]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(s1 * a1.d), acc[t]);
        off[t] -= dmin * (mn[2 * k] * a0.d * a0.sum + mn[2 * k + 1] * a1.d * a1.sum);
      }
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + off[t];
}
template <int NT>
void q4_k_nt(const tensor::BlockQ4_K* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  k4_nt<NT, tensor::BlockQ4_K, false>(w, x, xs, nb, out);
}
template <int NT>
void q5_k_nt(const tensor::BlockQ5_K* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  k4_nt<NT, tensor::BlockQ5_K, true>(w, x, xs, nb, out);
}

// Q6_K: 6-bit values (0..63, offset 32) with an int8 scale per 16; the 8 dpbusd lanes of a
// 32-element block split 4/4 between its two scales, so the scale is a per-lane vector.
template <int NT>
void q6_k_nt(const tensor::BlockQ6_K* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(w[i].d);
    for (int h = 0; h < 2; ++h) {
      const int8_t* sc = w[i].scales + 8 * h;
      __m256i L0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].ql + 64 * h));
      __m256i L1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].ql + 64 * h + 32));
      __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * h));
      __m256i u[4];
      u[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
      u[1] = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
      u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30));
      u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
      for (int b = 0; b < 4; ++b) {
        __m256 sv = _mm256_set_m128(_mm_set1_ps(d * sc[2 * b + 1]), _mm_set1_ps(d * sc[2 * b]));
        for (int t = 0; t < NT; ++t) {
          const tensor::ActQ8& a = x[t * xs + i * 8 + h * 4 + b];
          __m256i xv = load_x(a);
          __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[b], xv);
          __m256i c = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, xv);
          p = _mm256_sub_epi32(p, _mm256_slli_epi32(c, 5));  // values are u - 32
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sv, _mm256_set1_ps(a.d)), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]);
}

// Σ_g b[g]·s[g] for an MLX row's bias part: 8 groups per FMA, then the tail in order.
inline float mlx_bias_dot(const float* b, const float* s, int64_t n) {
  __m256 v = _mm256_setzero_ps();
  int64_t g = 0;
  for (; g + 8 <= n; g += 8) v = _mm256_fmadd_ps(_mm256_loadu_ps(b + g), _mm256_loadu_ps(s + g), v);
  float r = hsum256(v);
  for (; g < n; ++g) r += b[g] * s[g];
  return r;
}

template <int NT, bool kFour>
void mlx_nt(const uint8_t* w, const float* sc, const float* bi, int gs, const tensor::ActQ8* x, int64_t xs, int64_t nb,
            const float* gsum, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const int bpg = gs / 32;
  const int64_t groups = nb / bpg;
  // Groups outer: the group's scale is one load, with no division per block.
  for (int64_t g = 0, b = 0; g < groups; ++g) {
    const float s = sc[g];
    for (int i = 0; i < bpg; ++i, ++b) {
      __m256i q = kFour ? nibbles(w + b * 16) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * 32));
      for (int t = 0; t < NT; ++t) {
        const tensor::ActQ8& a = x[t * xs + b];
        __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load_x(a));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s * a.d), acc[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + mlx_bias_dot(bi, gsum + t * groups, groups);
}

template <bool kFour>
void mlx_dot(const uint8_t* w, const float* sc, const float* bi, int gs, const tensor::ActQ8* x, int64_t xs, int64_t nb,
             int nt, const float* gsum, float* out) {
  switch (nt) {
    case 1: mlx_nt<1, kFour>(w, sc, bi, gs, x, xs, nb, gsum, out); break;
    case 2: mlx_nt<2, kFour>(w, sc, bi, gs, x, xs, nb, gsum, out); break;
    case 3: mlx_nt<3, kFour>(w, sc, bi, gs, x, xs, nb, gsum, out); break;
    default: mlx_nt<4, kFour>(w, sc, bi, gs, x, xs, nb, gsum, out); break;
  }
}

// MXFP4, both layouts (compute/mxfp4_rows.h): vpdpbusd sums the same 4 products per lane as
// AVX2's maddubs + madd (neither can saturate here), so the results are AVX2's bit for bit.
struct DotVnni {
  __m256i operator()(__m256i u, __m256i s) const { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};
void mxfp4_dot(const uint8_t* w, const uint8_t* e, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  mxfp4_rows(Mxfp4Row{w, e}, x, xs, nb, nt, out, DotVnni{});
}
void mxfp4_ggml_dot(const void* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  mxfp4_rows(GgmlMxfp4Row{static_cast<const tensor::BlockMXFP4*>(w)}, x, xs, nb, nt, out, DotVnni{});
}

#define RAPID_DISPATCH_NT(fn, B)                                                           \
  void fn(const void* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {     \
    auto* wb = static_cast<const B*>(w);                                                   \
    switch (nt) {                                                                          \
      case 1: fn##_nt<1>(wb, x, xs, nb, out); break;                                       \
      case 2: fn##_nt<2>(wb, x, xs, nb, out); break;                                       \
      case 3: fn##_nt<3>(wb, x, xs, nb, out); break;                                       \
      default: fn##_nt<4>(wb, x, xs, nb, out); break;                                      \
    }                                                                                      \
  }
RAPID_DISPATCH_NT(q4_0, tensor::BlockQ4_0)
RAPID_DISPATCH_NT(q4_1, tensor::BlockQ4_1)
RAPID_DISPATCH_NT(q8_0, tensor::BlockQ8_0)
RAPID_DISPATCH_NT(q4_k, tensor::BlockQ4_K)
RAPID_DISPATCH_NT(q6_k, tensor::BlockQ6_K)
RAPID_DISPATCH_NT(q5_0, tensor::BlockQ5_0)
RAPID_DISPATCH_NT(q5_1, tensor::BlockQ5_1)
RAPID_DISPATCH_NT(q5_k, tensor::BlockQ5_K)
#undef RAPID_DISPATCH_NT

// ---- Multi-token kernels (Kernels::QDotV) in "lane = block" order: for a group of 8 blocks,
// vector m (0..7) holds in its int32 lane k the bytes 4m..4m+3 of block k, for the weights (built
// here once per group, shared by all tokens of the tile) and for the activations (pack_act_lanes,
// once per matmul; its group-major layout puts a tile's tokens at fixed offsets from one pointer).
// Four 512-bit dpbusd then leave each block's whole integer dot in its own lane, with no
// horizontal reduction; the int→float conversion and the scaling by dw·dx (and the Q4_1 offset
// mw·dx·Σx) are one vector op per 8 blocks. Integer sums are exact, and one token's float
// operations never depend on the other tokens, so a result never depends on nt (batch invariance).


// The (d, m) words of the first m (≤ 8) Q4_1 blocks of a group (dword 5k; zero past m): two
// 64-byte loads inside the group and one permute, cheaper than a gather (matters most at nt = 1).
template <bool kFull>
inline __m256i q4_1_heads(const uint8_t* p, int m) {
  constexpr int kDw = sizeof(tensor::BlockQ4_1) / 4;  // 5 dwords per block
  __m512i a, b;
  if (kFull) {
    a = _mm512_loadu_si512(p);
    b = _mm512_loadu_si512(p + 4 * sizeof(tensor::BlockQ4_1));
  } else {  // masked loads stay inside the m blocks (and never fault past them)
    const int n = kDw * m;
    a = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1), p);
    const int nb = std::max(0, std::min(16, n - 4 * kDw));
    b = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << nb) - 1), p + 4 * sizeof(tensor::BlockQ4_1));
  }
  const __m512i idx = _mm512_setr_epi32(0, 5, 10, 15, 16, 21, 26, 31, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutex2var_epi32(a, idx, b));
}
// The f16 scales of the first m (≤ 8) Q4_0 blocks of a group (18-byte blocks: word 9k, all within
// its first 128 bytes) as floats (zero past m): two 64-byte loads and one word permute.
template <bool kFull>
inline __m256 q4_0_scales(const uint8_t* p, int m) {
  __m512i a, b;
  if (kFull) {
    a = _mm512_loadu_si512(p);
    b = _mm512_loadu_si512(p + 64);
  } else {  // masked to the m blocks' bytes
    const int n = 18 * m;
    a = _mm512_maskz_loadu_epi8(n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1, p);
    b = _mm512_maskz_loadu_epi8(n <= 64 ? 0 : (__mmask64(1) << (n - 64)) - 1, p + 64);
  }
  const __m512i idx = _mm512_setr_epi32(0 | 9 << 16, 18 | 27 << 16, 36 | 45 << 16, 54 | 63 << 16, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0, 0, 0, 0);
  return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(a, idx, b)));
}
// The f16 scales of the first m (≤ 8) Q8_0 blocks of a group (34-byte blocks: word 17k) as
// floats (zero past m): four 64-byte loads inside the group and two word permutes, much cheaper
// than a gather on these cores.
template <bool kFull>
inline __m256 q8_0_scales(const uint8_t* p, int m) {
  __m512i v[4];
  for (int i = 0; i < 4; ++i) {
    if (kFull) {
      v[i] = _mm512_loadu_si512(p + 64 * i);
    } else {  // masked to the m blocks' bytes: never reads (or faults) past them
      const int lo = 64 * i, hi = std::min(34 * m, lo + 64);
      const __mmask64 mk = hi <= lo ? 0 : hi - lo >= 64 ? ~__mmask64(0) : (__mmask64(1) << (hi - lo)) - 1;
      v[i] = _mm512_maskz_loadu_epi8(mk, p + lo);
    }
  }
  // Word indices (pairs per dword): blocks 0-3 from words 0..63 of v0:v1, blocks 4-7 from v2:v3.
  const __m512i i01 = _mm512_setr_epi32(0 | 17 << 16, 34 | 51 << 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i i23 = _mm512_setr_epi32(0, 0, 4 | 21 << 16, 38 | 55 << 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i r = _mm512_mask_blend_epi16(0xf0, _mm512_permutex2var_epi16(v[0], i01, v[1]),
                                            _mm512_permutex2var_epi16(v[2], i23, v[3]));
  return _mm256_cvtph_ps(_mm512_castsi512_si128(r));
}
inline __m256 f16_lo(__m256i v) {
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_and_si256(v, _mm256_set1_epi32(0xffff))));
}
inline __m256 f16_hi(__m256i v) { return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(v, 16))); }

// Per-block integer dots of one token's activation group (8 vectors in lane order) with W2, the
// weights' 8 vectors as 4 zmm pairs [W[2j] | W[2j+1]]: a 512-bit vpdpbusd issues as fast as a
// 256-bit one on the target cores (measured), so pairs halve the dot instructions per token.
inline __m256i lane_dots(const __m512i* W2, const int32_t* xg) {
  // One dependency chain: the tokens of a tile give enough independent chains, and it saves an add.
  __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W2[0], _mm512_loadu_si512(xg));
  s0 = _mm512_dpbusd_epi32(s0, W2[1], _mm512_loadu_si512(xg + 16));
  s0 = _mm512_dpbusd_epi32(s0, W2[2], _mm512_loadu_si512(xg + 32));
  s0 = _mm512_dpbusd_epi32(s0, W2[3], _mm512_loadu_si512(xg + 48));
  return _mm256_add_epi32(_mm512_castsi512_si256(s0), _mm512_extracti64x4_epi64(s0, 1));
}

// A row's tail group (kTail: its last, partial one) over token pairs (ActLanes::pq,
// qdotv_dispatch.h's paired_tail_loop): when the group has 1-4 blocks, lanes 0-3 of each weight
// vector go to both halves (W2 quarters 0, 0, 2, 2) and meet one pair entry, so 4 dots serve two
// tokens. `tail(t, dots, c)` is the per-token loop's float tail for pair entry t and fused acc c.
// Returns how many tokens it did (all, or none when there are no pairs).
template <int NT, bool kTail, class Tail>
[[gnu::always_inline]] inline int paired_tail(const __m512i* W2, const ActLanes& x, __m256* acc, Tail&& tail) {
  if constexpr (!kTail || NT < 2) {
    return 0;
  } else {
    if (!x.pq) return 0;
    __m512i Wd[4];
    for (int j = 0; j < 4; ++j) Wd[j] = _mm512_shuffle_i64x2(W2[j], W2[j], _MM_SHUFFLE(2, 2, 0, 0));
    paired_tail_loop<NT>(acc, [&](int t) { return lane_dots(Wd, x.pq + t * 64); }, tail);
    return NT;
  }
}

// The two tails of a lane group's per-token loop, the same float operations as the AVX2 lane
// kernels (kernels_avx2_lanes.cpp) so that a token's result is bitwise the same on both ISAs.
// Weights d·q + m per block (Q4_1, Q4_K, MLX affine): acc += sum·(dw·dx), then += mw·(dx·Σx).
// kTail: the row's partial last group (paired_tail).
template <int NT, bool kTail = false>
[[gnu::always_inline]] inline void scaled_offset_dots(const __m512i* W2, __m256 dw, __m256 mw, const ActLanes& x,
                                                      int64_t g, __m256* acc) {
  const int32_t* xq = x.q + g * x.ld * 64;
  const float *xd = x.d + g * x.ld * 8, *xds = x.ds + g * x.ld * 8;
  const __m256 dwd = _mm256_permute2f128_ps(dw, dw, 0x00), mwd = _mm256_permute2f128_ps(mw, mw, 0x00);
  const int t0 = paired_tail<NT, kTail>(W2, x, acc, [&](int t, __m256i isum, __m256 c) {
    return scaled_offset_tail(isum, dwd, mwd, x.pd + t * 8, x.pds + t * 8, c);
  });
#pragma GCC unroll 16
  for (int t = t0; t < NT; ++t)
    acc[t] = scaled_offset_tail(lane_dots(W2, xq + t * 64), dw, mw, xd + t * 8, xds + t * 8, acc[t]);
}
// Weights d·(q − 2^kShift) with q stored unsigned (Q4_0, Q8_0): the offset leaves exactly in int32.
template <int NT, int kShift, bool kTail = false>
[[gnu::always_inline]] inline void offset_dots(const __m512i* W2, __m256 dw, const ActLanes& x, int64_t g,
                                               __m256* acc) {
  const int32_t* xq = x.q + g * x.ld * 64;
  const int32_t* xs = x.sum + g * x.ld * 8;
  const float* xd = x.d + g * x.ld * 8;
  const __m256 dwd = _mm256_permute2f128_ps(dw, dw, 0x00);
  const int t0 = paired_tail<NT, kTail>(W2, x, acc, [&](int t, __m256i dots, __m256 c) {
    return offset_tail<kShift>(dots, x.psum + t * 8, dwd, x.pd + t * 8, c);
  });
#pragma GCC unroll 16
  for (int t = t0; t < NT; ++t)
    acc[t] = offset_tail<kShift>(lane_dots(W2, xq + t * 64), xs + t * 8, dw, xd + t * 8, acc[t]);
}

// A permute index over the 32 dwords of two zmm: lane 8e + k (e = 0, 1; k = 0..7) takes f(k, e).
template <class F>
inline __m512i lane_index(F f) {
  alignas(64) int32_t v[16];
  for (int e = 0; e < 2; ++e)
    for (int k = 0; k < 8; ++k) v[8 * e + k] = f(k, e);
  return _mm512_load_si512(v);
}

// 16 bytes at `off` in each block of a group (stride kStride; zero past the first m blocks) as two
// zmm: blocks 0-3 in half[0], 4-7 in half[1].
template <size_t kStride, bool kFull>
inline void gather16(const uint8_t* p, size_t off, int m, __m512i* half) {
  auto at = [&](int k) {
    return kFull || k < m ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k * kStride + off)) : _mm_setzero_si128();
  };
  // The insert positions are spelled out: they must be immediates even where the compiler does not
  // unroll (the -O1 sanitizer build).
  for (int h = 0; h < 2; ++h) {
    __m512i v = _mm512_castsi128_si512(at(4 * h));
    v = _mm512_inserti32x4(v, at(4 * h + 1), 1);
    v = _mm512_inserti32x4(v, at(4 * h + 2), 2);
    half[h] = _mm512_inserti32x4(v, at(4 * h + 3), 3);
  }
}
// Dwords 2h and 2h + 1 of the 8 blocks of 16 bytes held in half[] as one pair in lane order (lane
// 8e + k = dword 2h + e of block k): one permute, no transpose.
inline __m512i dword_pair(const __m512i* half, int h) {
  return _mm512_permutex2var_epi32(half[0], lane_index([h](int k, int e) { return 4 * k + 2 * h + e; }), half[1]);
}
// The 4-bit values of 8 blocks of 16 packed bytes as W2's pairs: byte j of a dword holds elements
// j and j + 16 in its low / high nibble (MLX's LSB-first pairs are the same once the activations
// are in nibble order), so dwords 2h, 2h + 1 give low nibbles W2[h] and high W2[h + 2].
inline void nibble_pairs(const __m512i* half, __m512i* W2) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m512i v = dword_pair(half, h);
    W2[h] = _mm512_and_si512(v, m4);
    W2[h + 2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}
// Q4_0 / Q4_1 (blocks of B): the nibbles of a group's first m blocks (zero past them).
template <class B, bool kFull>
inline void unpack_q4(const uint8_t* p, int m, __m512i* W2) {
  __m512i half[2];
  gather16<sizeof(B), kFull>(p, offsetof(B, qs), m, half);
  nibble_pairs(half, W2);
}

// Group g (blocks [8g, 8g+m)) of a Q4_1 row for NT tokens; blocks past m contribute exact zeros.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q4_1v_group(const tensor::BlockQ4_1* w, const ActLanes& x, int64_t g, int m, __m256* acc) {
  const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g);
  __m512i W2[4];
  unpack_q4<tensor::BlockQ4_1, kFull>(p, m, W2);
  const __m256i dm = q4_1_heads<kFull>(p, m);
  scaled_offset_dots<NT, !kFull>(W2, f16_lo(dm), f16_hi(dm), x, g, acc);
}

// Q4_0: w = d·(q − 8).
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q4_0v_group(const tensor::BlockQ4_0* w, const ActLanes& x, int64_t g, int m, __m256* acc) {
  const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g);
  __m512i W2[4];
  unpack_q4<tensor::BlockQ4_0, kFull>(p, m, W2);
  offset_dots<NT, 3, !kFull>(W2, q4_0_scales<kFull>(p, m), x, g, acc);
}

// 64 bytes at p + off, masked to the group's first n bytes (never reading or faulting past them).
template <bool kFull>
inline __m512i load64(const uint8_t* p, int off, int n) {
  if (kFull) return _mm512_loadu_si512(p + off);
  const int k = std::clamp(n - off, 0, 64);
  return _mm512_maskz_loadu_epi8(k >= 64 ? ~__mmask64(0) : (__mmask64(1) << k) - 1, p + off);
}
// Q5_0 / Q5_1 are Q4_0 / Q4_1 with a 5th bit per element from the block's 32-bit qh (bit e ↔
// element e). Their heads for the first m blocks of a group (zero past m): qh of block k in lane k,
// and Q5_0's scales as floats (22-byte blocks: d at word 11k, qh words 11k + 1, 11k + 2; the group's
// 176 bytes as three loads, the last two overlapping, and two word permutes) ...
template <bool kFull>
inline __m256 q5_0_heads(const uint8_t* p, int m, __m256i& qh) {
  const int n = 22 * m;
  const __m512i a = load64<kFull>(p, 0, n), b = load64<kFull>(p, 64, n), c = load64<kFull>(p, 112, n);
  // Words 2k, 2k + 1: qh of block k; word 16 + k: its d. Blocks 6 and 7 come from c (word 56 on).
  const __m512i idx01 = _mm512_setr_epi32(1 | 2 << 16, 12 | 13 << 16, 23 | 24 << 16, 34 | 35 << 16, 45 | 46 << 16,
                                          56 | 57 << 16, 0, 0, 0 | 11 << 16, 22 | 33 << 16, 44 | 55 << 16, 0, 0, 0, 0, 0);
  const __m512i idx2 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 11 | 12 << 16, 22 | 23 << 16, 0, 0, 0, 10 | 21 << 16, 0, 0, 0, 0);
  const __m512i r = _mm512_mask_permutexvar_epi16(_mm512_permutex2var_epi16(a, idx01, b), 0x00c0f000u, idx2, c);
  qh = _mm512_castsi512_si256(r);
  return _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 2));
}
// ... and Q5_1's (d, m) dwords (24-byte blocks: dword 6k, qh dword 6k + 1; the group is three zmm).
template <bool kFull>
inline __m256i q5_1_heads(const uint8_t* p, int m, __m256i& qh) {
  const int n = 24 * m;
  const __m512i a = load64<kFull>(p, 0, n), b = load64<kFull>(p, 64, n), c = load64<kFull>(p, 128, n);
  // Lane k: qh of block k; lane 8 + k: its (d, m). Blocks 6 and 7 come from c (dword 32 on).
  const __m512i idx01 = _mm512_setr_epi32(1, 7, 13, 19, 25, 31, 0, 0, 0, 6, 12, 18, 24, 30, 0, 0);
  const __m512i idx2 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 5, 11, 0, 0, 0, 0, 0, 0, 4, 10);
  const __m512i r = _mm512_mask_permutexvar_epi32(_mm512_permutex2var_epi32(a, idx01, b), 0xc0c0, idx2, c);
  qh = _mm512_castsi512_si256(r);
  return _mm512_extracti64x4_epi64(r, 1);
}
// The 5th bits (qh: block k's in lane k) into W2 as nibble_pairs leaves it: W2[j] byte i of lane
// 8e + k is element 8j + 4e + i of block k, so it takes bit 4e + i of qh byte j.
inline void add_fifth_bits(__m256i qh, __m512i* W2) {
  const __m512i h = _mm512_broadcast_i64x4(qh);
  const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi32(0x08040201), _mm256_set1_epi32(static_cast<int>(0x80402010u)), 1);
  const __m512i b16 = _mm512_set1_epi8(0x10);
  for (int j = 0; j < 4; ++j) {
    const __m512i spread = _mm512_add_epi32(_mm512_set1_epi32(0x01010101 * j),  // byte j of each dword, four times
                                            _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0));
    const __mmask64 set = _mm512_test_epi8_mask(_mm512_shuffle_epi8(h, spread), bit);
    W2[j] = _mm512_mask_add_epi8(W2[j], set, W2[j], b16);
  }
}

// Q5_0: w = d·(q − 16), Q4_0's form.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q5_0v_group(const tensor::BlockQ5_0* w, const ActLanes& x, int64_t g, int m, __m256* acc) {
  const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g);
  __m512i W2[4];
  __m256i qh;
  unpack_q4<tensor::BlockQ5_0, kFull>(p, m, W2);
  const __m256 dw = q5_0_heads<kFull>(p, m, qh);
  add_fifth_bits(qh, W2);
  offset_dots<NT, 4, !kFull>(W2, dw, x, g, acc);
}
// Q5_1: w = d·q + m, Q4_1's form.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q5_1v_group(const tensor::BlockQ5_1* w, const ActLanes& x, int64_t g, int m, __m256* acc) {
  const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g);
  __m512i W2[4];
  __m256i qh;
  unpack_q4<tensor::BlockQ5_1, kFull>(p, m, W2);
  const __m256i dm = q5_1_heads<kFull>(p, m, qh);
  add_fifth_bits(qh, W2);
  scaled_offset_dots<NT, !kFull>(W2, f16_lo(dm), f16_hi(dm), x, g, acc);
}

// Q8_0: weights biased to unsigned (+128); the bias is removed exactly in int32 with 128·Σx.
template <int NT, bool kFull>
[[gnu::always_inline]] inline void q8_0v_group(const tensor::BlockQ8_0* w, const ActLanes& x, int64_t g, int m, __m256* acc) {
  const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g);
  // Lanes past m become 0x80 here; harmless, their activation bytes and Σx are zero.
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i W2[4], half[2];
  for (int i = 0; i < 2; ++i) {  // bytes 16i..16i+15 of the blocks: W2[2i], W2[2i + 1]
    gather16<sizeof(tensor::BlockQ8_0), kFull>(p, offsetof(tensor::BlockQ8_0, qs) + 16 * i, m, half);
    for (int h = 0; h < 2; ++h) W2[2 * i + h] = _mm512_xor_si512(dword_pair(half, h), bias);
  }
  offset_dots<NT, 7, !kFull>(W2, q8_0_scales<kFull>(p, m), x, g, acc);
}

// Q4_K: a super-block is one lane group, sub-block k (nibble half k & 1 of the 32 bytes at
// qs + 32·(k/2)) in lane k; w = (d·sc)·q − (dmin·mn) per sub-block, Q4_1's form. The 128 qs bytes
// are two zmm; one dword permute per pair puts every sub-block's dword in its lane, and a per-lane
// shift (0 or 4) picks its nibble.
// The 4-bit values of a Q4_K / Q5_K super-block's 128 qs bytes as W2's pairs.
inline void k4_nibbles(const uint8_t* qs, __m512i* W2) {
  const __m512i q0 = _mm512_loadu_si512(qs), q1 = _mm512_loadu_si512(qs + 64);
  const __m512i shift = lane_index([](int k, int) { return 4 * (k & 1); }), m4 = _mm512_set1_epi8(0x0f);
  for (int j = 0; j < 4; ++j) {
    const __m512i idx = lane_index([j](int k, int e) { return 8 * (k >> 1) + 2 * j + e; });
    W2[j] = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutex2var_epi32(q0, idx, q1), shift), m4);
  }
}
// A Q4_K / Q5_K super-block's dots for NT tokens from its values W2 and its header.
template <int NT, class B>
[[gnu::always_inline]] inline void k4_dots(const B& b, const __m512i* W2, const ActLanes& x, int64_t g, __m256* acc) {
  __m256 sc, mn;
  k4_scales(b.scales, sc, mn);
  scaled_offset_dots<NT>(W2, _mm256_mul_ps(_mm256_set1_ps(h2f(b.d)), sc), _mm256_mul_ps(_mm256_set1_ps(-h2f(b.dmin)), mn),
                         x, g, acc);
}
template <int NT>
[[gnu::always_inline]] inline void q4_kv_group(const tensor::BlockQ4_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  __m512i W2[4];
  k4_nibbles(w[g].qs, W2);
  k4_dots<NT>(w[g], W2, x, g, acc);
}
// Q5_K: Q4_K's nibbles and scales, element l of sub-block k adding 16 where bit k of qh[l] is set.
// W2[j] byte i of lane 8e + k is element 8j + 4e + i, so qh dword 2j + e (in every lane) rotated
// right by k − 4 puts that bit at bit 4 of byte i. Values up to 31: still vpdpbusd's u8 operand.
template <int NT>
[[gnu::always_inline]] inline void q5_kv_group(const tensor::BlockQ5_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ5_K& b = w[g];
  __m512i W2[4];
  k4_nibbles(b.qs, W2);
  const __m512i qh = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
  const __m512i rot = lane_index([](int k, int) { return (k - 4) & 31; }), bit4 = _mm512_set1_epi8(0x10);
  for (int j = 0; j < 4; ++j) {
    const __m512i h = _mm512_permutexvar_epi32(lane_index([j](int, int e) { return 2 * j + e; }), qh);
    W2[j] = _mm512_ternarylogic_epi32(W2[j], _mm512_rorv_epi32(h, rot), bit4, 0xF8);  // W2 | (h & bit4)
  }
  k4_dots<NT>(b, W2, x, g, acc);
}

// Q6_K: a super-block is one lane group, sub-block k = 32-element block k % 4 of half h = k / 4.
// Its dword d is ql dword 16h + 8(k & 1) + d (nibble k & 2 ? high : low) with two bits of qh dword
// 8h + d (at bit 2·(k & 3) of each byte, rotated to bits 4-5), gathered straight into lane order by
// permutes. Values − 32 go through vpdpbusd as |w| with the sign moved onto x (|x| ≤ 127), each
// 16-element half in its own chain: a zmm lane sums 8 products (|Σ| ≤ 8·32·127 fits 16 bits), so
// pmaddwd / vpdpwssd apply the half's int8 scale in integers. One conversion per token and group.
// Pair j's values from lo (their low four bits at bits 0-3 of each byte) and hi (their top two at
// bits 4-5; both may hold other bits elsewhere): |v − 32| and the sign mask of v − 32.
[[gnu::always_inline]] inline void q6_k_pair(__m512i lo, __m512i hi, __m512i& A, __mmask64& neg) {
  // (lo & 0x0f) | (hi & 0xf0), then & 0x3f − 32.
  const __m512i v = _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi8(0x0f), 0xE4 /* c ? a : b */);
  const __m512i s = _mm512_sub_epi8(_mm512_and_si512(v, _mm512_set1_epi8(0x3f)), _mm512_set1_epi8(32));
  A = _mm512_abs_epi8(s);
  neg = _mm512_movepi8_mask(s);
}
template <int NT>
[[gnu::always_inline]] inline void k16_dots(__m128i scales, uint16_t d, const __m512i* A2, const __mmask64* neg,
                                            const ActLanes& x, int64_t g, __m256* acc);
template <int NT>
[[gnu::always_inline]] inline void q6_kv_group(const tensor::BlockQ6_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ6_K& b = w[g];
  const __m512i l0 = _mm512_loadu_si512(b.ql), l1 = _mm512_loadu_si512(b.ql + 64), qh = _mm512_loadu_si512(b.qh);
  const __m512i lshift = lane_index([](int k, int) { return k & 2 ? 4 : 0; });
  const __m512i hrot = lane_index([](int k, int) { return (4 - 2 * (k & 3)) & 31; });
  __m512i A2[4];
  __mmask64 neg[4];
  for (int j = 0; j < 4; ++j) {
    const __m512i il = lane_index([j](int k, int e) { return 16 * (k >> 2) + 8 * (k & 1) + 2 * j + e; });
    const __m512i ih = lane_index([j](int k, int e) { return 8 * (k >> 2) + 2 * j + e; });
    const __m512i lo = _mm512_srlv_epi32(_mm512_permutex2var_epi32(l0, il, l1), lshift);
    const __m512i hi = _mm512_rolv_epi32(_mm512_permutexvar_epi32(ih, qh), hrot);
    q6_k_pair(lo, hi, A2[j], neg[j]);
  }
  k16_dots<NT>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), b.d, A2, neg, x, g, acc);
}
// Q6_K_LANES (tensor/lane_layout.h): pair j's low bits are ql half j % 2 (high nibbles for j >= 2),
// its top two bits 2·j of qh, already in lane order: shifts instead of the permutes above, the same
// values and dots after.
template <int NT>
[[gnu::always_inline]] inline void q6_klv_group(const tensor::BlockQ6_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ6_K& b = w[g];
  const __m512i l0 = _mm512_loadu_si512(b.ql), l1 = _mm512_loadu_si512(b.ql + 64), qh = _mm512_loadu_si512(b.qh);
  __m512i A2[4];
  __mmask64 neg[4];
  // 16-bit shifts: what crosses a byte lands outside the bits q6_k_pair keeps.
  q6_k_pair(l0, _mm512_slli_epi16(qh, 4), A2[0], neg[0]);
  q6_k_pair(l1, _mm512_slli_epi16(qh, 2), A2[1], neg[1]);
  q6_k_pair(_mm512_srli_epi16(l0, 4), qh, A2[2], neg[2]);
  q6_k_pair(_mm512_srli_epi16(l1, 4), _mm512_srli_epi16(qh, 2), A2[3], neg[3]);
  k16_dots<NT>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), b.d, A2, neg, x, g, acc);
}
// Q3_K: Q6_K's shape (16-element sub-blocks with int8 scales, k16_dots) with 3-bit values − 4:
// element l (0..31) of 32-element block k takes bits 2·(k % 4) of qs[32·(k / 4) + l] and, as +4,
// bit k of hmask[l]. W2[j] byte i of lane 8e + k is element 8j + 4e + i, so one dword permute of
// qs (of hmask) per pair and a per-lane shift (rotate) put both where they belong.
// The two bits 2·(k % 4) of qs[32·(k / 4) + l] of each element l of 32-element block k (Q2_K's
// values, Q3_K's low bits) as W2's pairs: one dword permute of qs and a per-lane shift per pair.
inline void k2_low_bits(const uint8_t* qs, __m512i* W2) {
  const __m512i q = _mm512_loadu_si512(qs);
  const __m512i qshift = lane_index([](int k, int) { return 2 * (k % 4); }), m3 = _mm512_set1_epi8(3);
  for (int j = 0; j < 4; ++j) {
    const __m512i iq = lane_index([j](int k, int e) { return 8 * (k / 4) + 2 * j + e; });
    W2[j] = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(iq, q), qshift), m3);
  }
}
// Lane 8e + k of lo / hi: entry 2k / 2k + 1 of the 16 int32 in s, a super-block's per-16-element
// scales in its sub-blocks' lanes (Q6_K, Q3_K, Q2_K).
inline void sub_block_lanes(__m512i s, __m512i& lo, __m512i& hi) {
  lo = _mm512_permutexvar_epi32(lane_index([](int k, int) { return 2 * k; }), s);
  hi = _mm512_permutexvar_epi32(lane_index([](int k, int) { return 2 * k + 1; }), s);
}
template <int NT>
[[gnu::always_inline]] inline void q3_kv_group(const tensor::BlockQ3_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ3_K& b = w[g];
  const __m512i hm = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
  const __m512i hrot = lane_index([](int k, int) { return (k - 2) & 31; });  // bit k to bit 2
  const __m512i b4 = _mm512_set1_epi8(4);
  __m512i lo[4], A2[4];
  __mmask64 neg[4];
  k2_low_bits(b.qs, lo);
  for (int j = 0; j < 4; ++j) {
    const __m512i ih = lane_index([j](int, int e) { return 2 * j + e; });
    const __m512i hi = _mm512_rorv_epi32(_mm512_permutexvar_epi32(ih, hm), hrot);
    const __m512i v = _mm512_sub_epi8(_mm512_ternarylogic_epi32(lo[j], hi, b4, 0xF8), b4);  // (lo | (hi & 4)) − 4
    A2[j] = _mm512_abs_epi8(v);
    neg[j] = _mm512_movepi8_mask(v);
  }
  k16_dots<NT>(q3_k_scales(b.scales), b.d, A2, neg, x, g, acc);
}
// Q2_K: Q3_K's low two bits alone (unsigned, so vpdpbusd's operand as they are), and per 16-element
// sub-block a 4-bit scale and a 4-bit min: w = d·sc·q − dmin·m. Each half's dots stay in 16 bits
// (8·3·127), so the scales are pmaddwd / vpdpwssd in integers; the mins meet the activations' half
// sums (pack_act_lanes' hs, 16·127) in one pmaddwd per token; then two FMAs per token and group,
// the AVX2 kernel's.
template <int NT>
[[gnu::always_inline]] inline void q2_kv_group(const tensor::BlockQ2_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ2_K& b = w[g];
  __m512i W2[4];
  k2_low_bits(b.qs, W2);
  // Lane 8e + k: sub-block 2k's scale (min) in its low 16 bits, 2k + 1's in the other vector.
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), m4 = _mm_set1_epi8(0x0f);
  __m512i sc_lo, sc_hi, mn_lo512, mn_hi512;
  sub_block_lanes(_mm512_cvtepu8_epi32(_mm_and_si128(s, m4)), sc_lo, sc_hi);
  sub_block_lanes(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(s, 4), m4)), mn_lo512, mn_hi512);
  // Lane k: sub-block 2k's min in its low 16 bits, 2k + 1's in its high 16, as hs holds the sums.
  const __m256i mn = _mm256_or_si256(_mm512_castsi512_si256(mn_lo512), _mm256_slli_epi32(_mm512_castsi512_si256(mn_hi512), 16));
  const __m256 dw = _mm256_set1_ps(h2f(b.d)), mw = _mm256_set1_ps(-h2f(b.dmin));
  const int32_t* xq = x.q + g * x.ld * 64;
  const int32_t* xh = x.hs + g * x.ld * 8;
  const float* xd = x.d + g * x.ld * 8;
  const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const int32_t* xg = xq + t * 64;
    __m512i xv[4];
    for (int j = 0; j < 4; ++j) xv[j] = _mm512_loadu_si512(xg + 16 * j);
    const __m512i h0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, W2[0], xv[0]), W2[1], xv[1]);
    const __m512i h1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, W2[2], xv[2]), W2[3], xv[3]);
    const __m512i p = _mm512_dpwssd_epi32(_mm512_madd_epi16(h0, sc_lo), h1, sc_hi);
    const __m256i ps = _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
    const __m256i qs8 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + t * 8)), mn);
    const __m256 d = _mm256_loadu_ps(xd + t * 8);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ps), _mm256_mul_ps(dw, d), acc[t]);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qs8), _mm256_mul_ps(mw, d), acc[t]);
  }
}
// A Q6_K / Q3_K super-block's dots for NT tokens from its pairs (|v| and signs), its 16 int8 scales
// (one per 16 elements, an xmm) and its f16 d.
template <int NT>
[[gnu::always_inline]] inline void k16_dots(__m128i scales, uint16_t d, const __m512i* A2, const __mmask64* neg,
                                            const ActLanes& x, int64_t g, __m256* acc) {
  // Lane 8e + k: scale 2k (first 16 elements) / 2k + 1 (last 16) in its low 16 bits.
  const __m512i low16 = _mm512_set1_epi32(0xffff);
  __m512i sc_lo, sc_hi;
  sub_block_lanes(_mm512_cvtepi8_epi32(scales), sc_lo, sc_hi);
  sc_lo = _mm512_and_si512(sc_lo, low16);
  sc_hi = _mm512_and_si512(sc_hi, low16);
  const __m256 dw = _mm256_set1_ps(h2f(d));
  const int32_t* xq = x.q + g * x.ld * 64;
  const float* xd = x.d + g * x.ld * 8;
  const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const int32_t* xg = xq + t * 64;
    __m512i xs[4];
    for (int j = 0; j < 4; ++j) {
      const __m512i xv = _mm512_loadu_si512(xg + 16 * j);
      xs[j] = _mm512_mask_sub_epi8(xv, neg[j], zero, xv);
    }
    const __m512i h0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, A2[0], xs[0]), A2[1], xs[1]);
    const __m512i h1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, A2[2], xs[2]), A2[3], xs[3]);
    const __m512i p = _mm512_dpwssd_epi32(_mm512_madd_epi16(h0, sc_lo), h1, sc_hi);
    const __m256i ps = _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ps), _mm256_mul_ps(dw, _mm256_loadu_ps(xd + t * 8)), acc[t]);
  }
}

// The lane layouts' nibble groups (tensor/lane_layout.h: Q4_0 / Q4_1 groups, Q4_K super-blocks):
// 128 bytes whose low / high nibbles are W2's pairs h / h + 2, already in lane order.
inline void nibble_halves(const uint8_t* p, __m512i* W2) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m512i v = _mm512_loadu_si512(p + 64 * h);
    W2[h] = _mm512_and_si512(v, m4);
    W2[h + 2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// Q4_K_LANES: the four permutes and variable shifts above become nibble_halves' two shifts; the
// same scales and dots after.
template <int NT>
[[gnu::always_inline]] inline void q4_klv_group(const tensor::BlockQ4_K* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockQ4_K& b = w[g];
  __m512i W2[4];
  nibble_halves(b.qs, W2);
  k4_dots<NT>(b, W2, x, g, acc);
}

RAPID_KV_LANES(q4_kv, tensor::BlockQ4_K)
RAPID_KV_LANES(q5_kv, tensor::BlockQ5_K)
RAPID_KV_LANES(q4_klv, tensor::BlockQ4_K)
RAPID_KV_LANES(q6_kv, tensor::BlockQ6_K)
RAPID_KV_LANES(q3_kv, tensor::BlockQ3_K)
RAPID_KV_LANES(q2_kv, tensor::BlockQ2_K)
RAPID_KV_LANES(q6_klv, tensor::BlockQ6_K)

// A lane group's 128 bytes of 16-byte (nibble) blocks as two zmm: all of them, or (the row's last
// group) the first m blocks' bytes only.
template <bool kFull>
[[gnu::always_inline]] inline void load_nibble_group(const uint8_t* p, int m, __m512i* half) {
  if (kFull) {
    half[0] = _mm512_loadu_si512(p);
    half[1] = _mm512_loadu_si512(p + 64);
  } else {
    const int n = 16 * m;
    half[0] = _mm512_maskz_loadu_epi8(n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1, p);
    half[1] = _mm512_maskz_loadu_epi8(n <= 64 ? 0 : (__mmask64(1) << (n - 64)) - 1, p + 64);
  }
}
// The same 128 bytes as W2's pairs (nibble_pairs), zero past the first m blocks.
template <bool kFull>
[[gnu::always_inline]] inline void nibble_group(const uint8_t* p, int m, __m512i* W2) {
  __m512i half[2];
  load_nibble_group<kFull>(p, m, half);
  nibble_pairs(half, W2);
}
// A lane group's 256 bytes of 32-byte blocks as four zmm, blocks (2i, 2i + 1) in z[i]: all of them,
// or (the row's last group) the first m blocks' bytes only, zeros past them.
template <bool kFull>
[[gnu::always_inline]] inline void load_byte_group(const uint8_t* p, int m, __m512i* z) {
  for (int i = 0; i < 4; ++i) {
    if (kFull) {
      z[i] = _mm512_loadu_si512(p + 64 * i);
    } else {
      const int n = std::clamp(32 * m - 64 * i, 0, 64);
      z[i] = _mm512_maskz_loadu_epi8(n == 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1, p + 64 * i);
    }
  }
}

// The lane layouts (tensor/lane_layout.h): a full group's quants are already W2's pairs (Q8_0:
// biased) or the two dword pairs nibble_pairs would gather, its scales (Q4_1: (d, m) dwords) one
// load; then the gathering kernel's own dots, so the same bits. A row's tail (under 8 blocks) is
// its blocks' heads, then their quants (qdotv_dispatch.h's LaneRow): a masked load each.
// The first m (< 8) of 8 f16 scales as floats, zero past m (read only m).
inline __m256 f16_first(const uint8_t* p, int m) {
  return _mm256_cvtph_ps(_mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << m) - 1), p));
}
inline void transpose_bytes8(const __m512i* z, __m512i* W2);

void q8_0_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const LaneRow<tensor::BlockQ8_0> r(w, nb, 256);
    __m512i W2[4];
    if constexpr (kFull) {
      for (int j = 0; j < 4; ++j) W2[j] = _mm512_loadu_si512(r.groups + 256 * g + 64 * j);
      offset_dots<NT, 7>(W2, f16x8(r.heads + 16 * g), x, g, acc);
    } else {  // m blocks of 32 quants: mlx8v's tail (the same dword pairs), then biased as the groups
      __m512i z[4];
      load_byte_group<false>(r.tail_qs, m, z);
      transpose_bytes8(z, W2);
      // Lanes past m become 0x80; harmless, their activation bytes and Σx are zero.
      for (int j = 0; j < 4; ++j) W2[j] = _mm512_xor_si512(W2[j], _mm512_set1_epi8(static_cast<char>(0x80)));
      offset_dots<NT, 7, true>(W2, f16_first(r.tail, m), x, g, acc);
    }
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}
void q4_1_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const LaneRow<tensor::BlockQ4_1> r(w, nb, 128);
    __m512i W2[4];
    if constexpr (kFull) {
      nibble_halves(r.groups + 128 * g, W2);
      const __m256i dm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.heads + 32 * g));
      scaled_offset_dots<NT>(W2, f16_lo(dm), f16_hi(dm), x, g, acc);
    } else {
      nibble_group<false>(r.tail_qs, m, W2);
      const __m256i dm = _mm256_maskz_loadu_epi32(static_cast<__mmask8>((1u << m) - 1), r.tail);
      scaled_offset_dots<NT, true>(W2, f16_lo(dm), f16_hi(dm), x, g, acc);
    }
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}


// MLX affine 4-bit (Kernels::MlxDotV): 16 packed bytes per block, so a lane group's 128 bytes are
// two zmm; the row's scales and biases per group as stored (qdotv_dispatch.h's mlx_lanes_rows).
// kLanes: DType::MLX_LANES, whose full groups are nibble_pairs' dword pairs as stored (the two
// permutes saved: 12 % of an in-cache 4096-wide row); its tail blocks are as stored.
template <bool kLanes>
void mlx4v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256 dw, __m256 mw, __m256* acc)
                   __attribute__((always_inline)) {
    __m512i W2[4];
    if (kLanes && kFull) nibble_halves(w + g * 8 * 16, W2);
    else nibble_group<kFull>(w + g * 8 * 16, m, W2);
    scaled_offset_dots<NT, !kFull>(W2, dw, mw, x, g, acc);
  };
  mlx_lanes_rows(rows, nb, nt, out, ldo, group);
}

// MLX affine 8-bit (Kernels::MlxDotV): a lane group's 256 bytes are its 8 blocks in order, four zmm
// holding blocks (2j, 2j + 1). Two rounds of two-source permutes put them in W2's lane order:
// t[0] / t[1] take dwords 0-3 / 4-7 of blocks 0-3 (lane 4·(d % 4) + k), t[2] / t[3] those of
// blocks 4-7; W2[j] then takes dwords 2j, 2j + 1 of all eight. Eight permutes per 256 bytes, no
// narrow loads: the per-cache-line cost that slowed GGUF Q8_0's gathering (bench/README.md, "Weights
// in lane order") stays low without a repacked copy.
[[gnu::always_inline]] inline void transpose_bytes8(const __m512i* z, __m512i* W2) {
  const __m512i first[2] = {
      lane_index([](int k, int e) { return 8 * ((8 * e + k) % 4) + (8 * e + k) / 4; }),
      lane_index([](int k, int e) { return 8 * ((8 * e + k) % 4) + (8 * e + k) / 4 + 4; })};
  const __m512i second[2] = {
      lane_index([](int k, int e) { return (k < 4 ? 0 : 12) + 4 * e + k; }),
      lane_index([](int k, int e) { return (k < 4 ? 8 : 20) + 4 * e + k; })};
  __m512i t[4];
  for (int h = 0; h < 2; ++h) {
    t[2 * h] = _mm512_permutex2var_epi32(z[2 * h], first[0], z[2 * h + 1]);
    t[2 * h + 1] = _mm512_permutex2var_epi32(z[2 * h], first[1], z[2 * h + 1]);
  }
  for (int j = 0; j < 4; ++j) W2[j] = _mm512_permutex2var_epi32(t[j / 2], second[j % 2], t[2 + j / 2]);
}
// MLX affine 2-, 3-, 5- and 6-bit rows (an LSB-first bit stream, mlx_bits.h): two blocks a zmm,
// their 8·bits bytes loaded (masked: never past them); one vpermb gives each qword of 8 values the 8
// bytes from the first one's, one vpmultishiftqb takes each value's bits from its offset there (8
// values span at most 7 + 8·6 bits). Then the 8-bit rows' permutes into the lanes and MLX 4-bit's
// dots: the AVX2 kernel's values and float operations, so its bits.
template <int kBits>
[[gnu::always_inline]] inline void mlx_stream_pair(const uint8_t* p, int blocks, __m512i& z) {
  struct Tables {
    alignas(64) uint8_t bytes[64], shifts[64];
  };
  static constexpr Tables t = [] {
    Tables r{};
    for (int j = 0; j < 64; ++j) {
      const int first = (j / 32) * 32 * kBits + (j % 32) / 8 * 8 * kBits;  // bit offset of qword j / 8's first value
      const int o = (j / 32) * 32 * kBits + (j % 32) * kBits;
      r.bytes[j] = static_cast<uint8_t>(first / 8 + j % 8);
      r.shifts[j] = static_cast<uint8_t>(o - first / 8 * 8);
    }
    return r;
  }();
  const __m512i src = load64<false>(p, 0, blocks * 4 * kBits);
  const __m512i q = _mm512_permutexvar_epi8(_mm512_load_si512(t.bytes), src);
  z = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_load_si512(t.shifts), q), _mm512_set1_epi8((1 << kBits) - 1));
}
template <int kBits>
void mlx_stream_v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256 dw, __m256 mw, __m256* acc)
                   __attribute__((always_inline)) {
    __m512i z[4], W2[4];
    const uint8_t* p = w + g * 8 * 4 * kBits;
    for (int i = 0; i < 4; ++i) mlx_stream_pair<kBits>(p + i * 8 * kBits, kFull ? 2 : std::clamp(m - 2 * i, 0, 2), z[i]);
    transpose_bytes8(z, W2);
    scaled_offset_dots<NT, !kFull>(W2, dw, mw, x, g, acc);
  };
  mlx_lanes_rows(rows, nb, nt, out, ldo, group);
}
// The row's values q (u8) are the vpdpbusd operand as stored; w = s·q + b = s·(q − 128) + (b + 128·s)
// keeps the integer part Q8_0's (Σ(q − 128)·x, exact) so that AMX panels, whose tiles are signed,
// give the same bits. b + 128·s: one rounding (128·s is exact), the panels' std::fma.
template <int NT, bool kTail>
[[gnu::always_inline]] inline void mlx8_dots(const __m512i* W2, __m256 dw, __m256 mw, const ActLanes& x, int64_t g,
                                             __m256* acc) {
  const int32_t* xq = x.q + g * x.ld * 64;
  const int32_t* xs = x.sum + g * x.ld * 8;
  const float *xd = x.d + g * x.ld * 8, *xds = x.ds + g * x.ld * 8;
  const __m256 mw128 = _mm256_fmadd_ps(dw, _mm256_set1_ps(128.0f), mw);
  auto f = [](__m256i dots, const int32_t* sx, __m256 dw, __m256 mw128, const float* d, const float* ds, __m256 a) {
    return scaled_offset_tail(unbiased<7>(dots, sx), dw, mw128, d, ds, a);
  };
  const __m256 dwd = _mm256_permute2f128_ps(dw, dw, 0x00), mwd = _mm256_permute2f128_ps(mw128, mw128, 0x00);
  const int t0 = paired_tail<NT, kTail>(W2, x, acc, [&](int t, __m256i dots, __m256 c) {
    return f(dots, x.psum + t * 8, dwd, mwd, x.pd + t * 8, x.pds + t * 8, c);
  });
#pragma GCC unroll 16
  for (int t = t0; t < NT; ++t)
    acc[t] = f(lane_dots(W2, xq + t * 64), xs + t * 8, dw, mw128, xd + t * 8, xds + t * 8, acc[t]);
}
// kLanes: DType::MLX_LANES (8-bit), whose full groups are W2 as stored; its tail blocks are as stored.
template <bool kLanes>
void mlx8v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256 dw, __m256 mw, __m256* acc)
                   __attribute__((always_inline)) {
    __m512i z[4], W2[4];
    load_byte_group<kFull>(w + g * 8 * 32, m, z);  // a partial group's zeros meet zero activations
    if (kLanes && kFull) {
      for (int i = 0; i < 4; ++i) W2[i] = z[i];
    } else {
      transpose_bytes8(z, W2);
    }
    mlx8_dots<NT, !kFull>(W2, dw, mw, x, g, acc);
  };
  mlx_lanes_rows(rows, nb, nt, out, ldo, group);
}

// MXFP4, both layouts (mxfp4_rows.h's lane scheme): nibbles as Q4_0 / MLX 4-bit, one pshufb per
// pair to 2·E2M1 + 16, then Q5_0's dots; the same lane scales and float operations as AVX2's.
template <int NT, bool kTail>
[[gnu::always_inline]] inline void mxfp4v_dots(__m512i* W2, __m256 dw, const ActLanes& x, int64_t g, __m256* acc) {
  const __m512i lut = _mm512_broadcast_i32x4(mxfp4_biased_lut());
  for (int j = 0; j < 4; ++j) W2[j] = _mm512_shuffle_epi8(lut, W2[j]);
  offset_dots<NT, 4, kTail>(W2, dw, x, g, acc);
}
// DType::MXFP4: a group's 128 nibble bytes are two zmm (mlx4v's loads); nibble-order activations.
void mxfp4v(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, const uint8_t* e, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    __m512i W2[4];
    nibble_group<kFull>(w + g * 8 * 16, m, W2);
    mxfp4v_dots<NT, !kFull>(W2, mxfp4_lane_scales(mxfp4_scale_bytes<1, kFull>(e + 8 * g, m)), x, g, acc);
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}
// GGML's 17-byte blocks in place (Q4_0's nibble order, plain-order activations).
void mxfp4_ggmlv(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  using B = tensor::BlockMXFP4;
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const uint8_t* p = w + g * 8 * sizeof(B);
    __m512i W2[4];
    unpack_q4<B, kFull>(p, m, W2);
    mxfp4v_dots<NT, !kFull>(W2, mxfp4_lane_scales(mxfp4_scale_bytes<sizeof(B), kFull>(p + offsetof(B, e), m)), x, g, acc);
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}

// IQ4_NL / IQ4_XS: the nibbles unpacked as Q4_0's, one pshufb per pair to table value + 128 (u8),
// then Q8_0's dots (the +128 leaves exactly as 128·Σx). IQ4_NL's blocks are Q4_0's in layout.
inline void iq4_values(__m512i* W2) {
  const __m512i lut = _mm512_broadcast_i32x4(iq4_lut<128>());
  for (int j = 0; j < 4; ++j) W2[j] = _mm512_shuffle_epi8(lut, W2[j]);
}
template <int NT, bool kFull>
[[gnu::always_inline]] inline void iq4_nlv_group(const tensor::BlockIQ4_NL* w, const ActLanes& x, int64_t g, int m,
                                                 __m256* acc) {
  const auto* p = reinterpret_cast<const uint8_t*>(w + 8 * g);
  __m512i W2[4];
  unpack_q4<tensor::BlockIQ4_NL, kFull>(p, m, W2);
  iq4_values(W2);  // blocks past m: value bytes meet zero activations and Σx = 0
  offset_dots<NT, 7, !kFull>(W2, q4_0_scales<kFull>(p, m), x, g, acc);
}
// IQ4_XS: a super-block is one lane group (sub-block k in lane k), its 128 qs bytes Q4_0's 8 blocks'.
template <int NT>
[[gnu::always_inline]] inline void iq4_xsv_group(const tensor::BlockIQ4_XS* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockIQ4_XS& b = w[g];
  __m512i W2[4];
  nibble_group<true>(b.qs, 8, W2);
  iq4_values(W2);
  offset_dots<NT, 7>(W2, iq4_xs_scales(b), x, g, acc);
}
// IQ4_XS_LANES: the qs bytes already in nibble_halves' order, the same values and dots after.
template <int NT>
[[gnu::always_inline]] inline void iq4_xslv_group(const tensor::BlockIQ4_XS* w, const ActLanes& x, int64_t g, __m256* acc) {
  const tensor::BlockIQ4_XS& b = w[g];
  __m512i W2[4];
  nibble_halves(b.qs, W2);
  iq4_values(W2);
  offset_dots<NT, 7>(W2, iq4_xs_scales(b), x, g, acc);
}
RAPID_KV_LANES(iq4_xsv, tensor::BlockIQ4_XS)
RAPID_KV_LANES(iq4_xslv, tensor::BlockIQ4_XS)
// Q4_0_LANES, and IQ4_NL_LANES (Q4_0's bytes, kTable): its nibbles through the table, then
// iq4_nlv_group's dots, so its bits.
template <bool kTable>
void nibble_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {
  static_assert(sizeof(tensor::BlockQ4_0) == sizeof(tensor::BlockIQ4_NL));
  auto group = [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc) __attribute__((always_inline)) {
    const LaneRow<tensor::BlockQ4_0> r(w, nb, 128);
    __m512i W2[4];
    __m256 d;
    if constexpr (kFull) {
      nibble_halves(r.groups + 128 * g, W2);
      d = f16x8(r.heads + 16 * g);
    } else {
      nibble_group<false>(r.tail_qs, m, W2);
      d = f16_first(r.tail, m);
    }
    if constexpr (kTable) {
      iq4_values(W2);  // a tail's lanes past m meet zero activations and Σx = 0
      offset_dots<NT, 7, !kFull>(W2, d, x, g, acc);
    } else {
      offset_dots<NT, 3, !kFull>(W2, d, x, g, acc);
    }
  };
  group_lanes(rows, nb, nt, out, ldo, group);
}

RAPID_QDOTV(q4_0v, tensor::BlockQ4_0)
RAPID_QDOTV(q4_1v, tensor::BlockQ4_1)
RAPID_QDOTV(q8_0v, tensor::BlockQ8_0)
RAPID_QDOTV(iq4_nlv, tensor::BlockIQ4_NL)
RAPID_QDOTV(q5_0v, tensor::BlockQ5_0)
RAPID_QDOTV(q5_1v, tensor::BlockQ5_1)
#undef RAPID_QDOTV
#undef RAPID_KV_LANES

}  // namespace

// g·σ(a)·u for the gated MLPs (silu: a = g; gelu_tanh: a = 2z). exp16 saturates (+inf above ~88.7,
// 0 below -104), so the result is exact at the extremes (-0, g); the tail is masked, the same
// operations per lane, so a value never depends on the row range.
template <class A>
static void gated_rows(const float* gate, const float* up, int64_t n, float* out, A arg) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), arg(g)));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i)));
  }
}
static void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  gated_rows(gate, up, n, out, [](__m512 g) { return g; });
}
static void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  gated_rows(gate, up, n, out, [](__m512 g) {
    const __m512 b = _mm512_fmadd_ps(_mm512_set1_ps(kGeluTanhB), _mm512_mul_ps(g, g), _mm512_set1_ps(kGeluTanhA));
    return _mm512_mul_ps(g, b);
  });
}

// 16 running (max, first index) lanes, then the largest lane value with the smallest index; the
// tail by scalar compares. A lane never takes a NaN (ordered compares) and starts at -inf where
// x[l] is NaN; x[0] = NaN is std::max_element's special case (it returns 0) and goes scalar.
static int64_t argmax_f32(const float* x, int64_t n) {
  if (n < 32 || x[0] != x[0]) return std::max_element(x, x + n) - x;
  __m512 v = _mm512_loadu_ps(x);
  __m512 best = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
  __m512i bi = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), idx = bi;
  const __m512i step = _mm512_set1_epi32(16);
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    idx = _mm512_add_epi32(idx, step);
    v = _mm512_loadu_ps(x + i);
    const __mmask16 gt = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
    best = _mm512_mask_mov_ps(best, gt, v);
    bi = _mm512_mask_mov_epi32(bi, gt, idx);
  }
  float mx = _mm512_reduce_max_ps(best);
  int64_t at = _mm512_mask_reduce_min_epi32(_mm512_cmp_ps_mask(best, _mm512_set1_ps(mx), _CMP_EQ_OQ), bi);
  for (; i < n; ++i)
    if (x[i] > mx) { mx = x[i]; at = i; }
  return at;
}

void fill_kernels_avx512(Kernels& k) {
  k.silu_mul = silu_mul;
  k.gelu_tanh_mul = gelu_tanh_mul;
  k.argmax_f32 = argmax_f32;
  k.dot_f32 = dot_f32;
  k.dot_f16 = dot_f16;
  k.dot_bf16 = dot_bf16;
  k.axpy_f32 = axpy_f32;
  k.axpy_f16 = axpy_f16;
  k.axpy_bf16 = axpy_bf16;
  k.f32_to_f16 = to_f16;
  k.f32_to_bf16 = to_bf16;
  k.f16_to_f32 = from_f16;
  k.bf16_to_f32 = from_bf16;
  k.quantize_act = quantize_act;
  k.dot_q4_0 = q4_0;
  k.dot_q4_1 = q4_1;
  k.dot_q8_0 = q8_0;
  k.dot_q4_k = q4_k;
  k.dot_q6_k = q6_k;
  k.dot_q5_0 = q5_0;
  k.dot_q5_1 = q5_1;
  k.dot_q5_k = q5_k;
  k.dot_mlx4 = mlx_dot<true>;
  k.dot_mlx8 = mlx_dot<false>;
  k.dot_mxfp4 = mxfp4_dot;
  k.dot_mxfp4_ggml = mxfp4_ggml_dot;
  k.dot_q4_0v = q4_0v;
  k.dot_q4_1v = q4_1v;
  k.dot_q8_0v = q8_0v;
  k.dot_q5_0v = q5_0v;
  k.dot_q5_1v = q5_1v;
  k.dot_q2_kv = q2_kv;
  k.dot_q3_kv = q3_kv;
  k.dot_q4_kv = q4_kv;
  k.dot_q5_kv = q5_kv;
  k.dot_q6_kv = q6_kv;
  k.dot_iq4_nlv = iq4_nlv;
  k.dot_iq4_xsv = iq4_xsv;
  fill_lattice_kernels(k);  // the AVX2 kernels' code (iq_lattice_rows.h), so their bits
  k.dot_q8_0_lanes = q8_0_lanes;
  k.dot_q4_0_lanes = nibble_lanes<false>;
  k.dot_iq4_nl_lanes = nibble_lanes<true>;
  k.dot_iq4_xs_lanes = iq4_xslv;
  k.dot_q4_1_lanes = q4_1_lanes;
  k.dot_q4_k_lanes = q4_klv;
  k.dot_q6_k_lanes = q6_klv;
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
