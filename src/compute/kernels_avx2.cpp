// AVX2 + FMA + F16C kernels (built with -mavx2 -mfma -mf16c; only called when the CPU has them).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "compute/avx2_exp.h"
#include "compute/avx2_hsum.h"
#include "compute/kernels.h"
#include "compute/mxfp4_rows.h"
#include "tensor/fp16.h"

namespace rapid::compute {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16(const uint16_t* p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float bf(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float s = hsum256(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
float dot_f16(const float* x, const uint16_t* w, int64_t n) {
  __m256 s0 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load_f16(w + i), s0);
  float s = hsum256(s0);
  for (; i < n; ++i) s += x[i] * h2f(w[i]);
  return s;
}
float dot_bf16(const float* x, const uint16_t* w, int64_t n) {
  __m256 s0 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load_bf16(w + i), s0);
  float s = hsum256(s0);
  for (; i < n; ++i) s += x[i] * bf(w[i]);
  return s;
}
void axpy_f32(float a, const float* v, float* y, int64_t n) {
  __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(v + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * v[i];
}
void axpy_f16(float a, const uint16_t* v, float* y, int64_t n) {
  __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load_f16(v + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * h2f(v[i]);
}
void axpy_bf16(float a, const uint16_t* v, float* y, int64_t n) {
  __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load_bf16(v + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * bf(v[i]);
}
void to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

void from_f16(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}
void from_bf16(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) y[i] = tensor::bf16_to_f32(x[i]);
}

void quantize_act(const float* x, int64_t n, tensor::ActQ8* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 8 * j);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
    }
    __m128 mm = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    mm = _mm_max_ps(mm, _mm_movehl_ps(mm, mm));
    mm = _mm_max_ss(mm, _mm_movehdup_ps(mm));
    float amax = _mm_cvtss_f32(mm);
    float d = amax / 127.0f, id = d != 0 ? 127.0f / amax : 0.0f;
    __m256 iv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], iv));  // nearest-even
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    // Pack 32 int32 → 32 int8 keeping order (packs interleave 128-bit lanes; fix with a permute).
    __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p);
    out[b].d = d;
    out[b].sum = _mm_cvtsi128_si32(s4);
  }
}

// u8 × s8 → 8 int32 partial sums (no saturation for |u| ≤ 128 pairs as used here).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
inline __m256i nibbles(const uint8_t* qs) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

template <int NT>
void q8_0_nt(const tensor::BlockQ8_0* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs));
    __m256i aq = _mm256_sign_epi8(q, q);  // |w| as u8; the sign moves onto x
    float dw = h2f(w[i].d);
    for (int t = 0; t < NT; ++t) {
      const tensor::ActQ8& a = x[t * xs + i];
      __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)), q);
      __m256i p = dot_u8s8(aq, xv);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]);
}

// Byte e = 0x10 where bit e of the block's 32-bit qh is set: the 5th bit of Q5_0/Q5_1 element e
// (bytes 0..15 = low nibbles = elements 0..15, bytes 16..31 = high nibbles = elements 16..31).
inline __m256i q5_high_bits(const uint8_t* qhb) {
  uint32_t qh;
  __builtin_memcpy(&qh, qhb, 4);
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), pick);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// Unsigned weight values of one block, in nibbles() order.
inline __m256i values(const tensor::BlockQ4_0& b) { return nibbles(b.qs); }
inline __m256i values(const tensor::BlockQ4_1& b) { return nibbles(b.qs); }
inline __m256i values(const tensor::BlockQ5_0& b) { return _mm256_or_si256(nibbles(b.qs), q5_high_bits(b.qh)); }
inline __m256i values(const tensor::BlockQ5_1& b) { return _mm256_or_si256(nibbles(b.qs), q5_high_bits(b.qh)); }

// Q4_0 / Q4_1 / Q5_0 / Q5_1 share one kernel: per block 32 unsigned weight bytes (values()),
// the scale d, and either a min (kMin: + m·dx·Σx, kept apart in float) or a signed-offset
// correction (kOffset·Σx added to lane 0, exactly, in integers); see LegacyFormat.
template <int NT, class B>
void legacy_nt(const B* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  using Fmt = tensor::LegacyFormat<B>;
  __m256 acc[NT];
  float macc[NT];
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); macc[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = values(w[i]);
    const float dw = h2f(w[i].d);
    float mw = 0;
    if constexpr (Fmt::kMin) mw = h2f(w[i].m);
    // Offset formats: the signed weights once per block, |w| as u8 and w's sign moved onto x (as
    // Q8_0 does): the same exact integer dot as adding kOffset·Σx, one op per row instead of three.
    [[maybe_unused]] __m256i sq, aq;
    if constexpr (Fmt::kOffset != 0) {
      sq = _mm256_add_epi8(q, _mm256_set1_epi8(static_cast<char>(Fmt::kOffset)));
      aq = _mm256_sign_epi8(sq, sq);
    }
    for (int t = 0; t < NT; ++t) {
      const tensor::ActQ8& a = x[t * xs + i];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      __m256i p;
      if constexpr (Fmt::kOffset != 0) p = dot_u8s8(aq, _mm256_sign_epi8(xv, sq));
      else p = dot_u8s8(q, xv);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d), acc[t]);
      if constexpr (Fmt::kMin) macc[t] += mw * a.d * a.sum;
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = Fmt::kMin ? hsum256(acc[t]) + macc[t] : hsum256(acc[t]);
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
#undef RAPID_LEGACY_NT

// Bit j of every byte of h, moved to 0x10 (16-bit shifts never carry a foreign bit into bit 4
// of a byte because the mask keeps only that bit).
inline __m256i bit_j_to_16(__m256i h, int j) {
  __m256i v = j <= 4 ? _mm256_slli_epi16(h, 4 - j) : _mm256_srli_epi16(h, j - 4);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// Q4_K / Q5_K: per 256-element super-block eight 32-element sub-blocks (6-bit scale and min
// each); sub-block j is nibble half j&1 of qs[32*(j/2)..]; Q5_K's 5th bit of sub-block j is bit j
// of qh. Unsigned values, the min back through the activation sums.
template <int NT, class B>
void k4_nt(const B* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  constexpr bool kFifth = std::is_same_v<B, tensor::BlockQ5_K>;
  __m256 acc[NT];
  float off[NT];
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(w[i].d), dmin = h2f(w[i].dmin);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) tensor::scale_min_k4(j, w[i].scales, sc[j], mn[j]);
    [[maybe_unused]] __m256i H;
    if constexpr (kFifth) H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh));
    for (int k = 0; k < 4; ++k) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * k));
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFifth) {
        lo = _mm256_or_si256(lo, bit_j_to_16(H, 2 * k));
        hi = _mm256_or_si256(hi, bit_j_to_16(H, 2 * k + 1));
      }
      const float s0 = d * sc[2 * k], s1 = d * sc[2 * k + 1];
      for (int t = 0; t < NT; ++t) {
        const tensor::ActQ8& a0 = x[t * xs + i * 8 + 2 * k];
        const tensor::ActQ8& a1 = x[t * xs + i * 8 + 2 * k + 1];
        __m256i p0 = dot_u8s8(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0.qs)));
        __m256i p1 = dot_u8s8(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1.qs)));
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
  k4_nt<NT>(w, x, xs, nb, out);
}
template <int NT>
void q5_k_nt(const tensor::BlockQ5_K* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  k4_nt<NT>(w, x, xs, nb, out);
}

// Q6_K: per super-block two halves of 128 elements, each four 32-element blocks b whose element l
// is nibble (b & 2 ? high : low) of ql[l + 32·(b & 1)] plus bits 2b, 2b+1 of qh[l] as bits 4-5,
// minus 32; one int8 scale per 16 elements. The signed values go through the Q8_0 sign trick, and
// madd by the two scales (low / high 128-bit lane = elements 0-15 / 16-31) sums sc·Σ(w·x) exactly.
template <int NT>
void q6_k_nt(const tensor::BlockQ6_K* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(w[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[i].ql + 64 * half;
      const int8_t* sc = w[i].scales + 8 * half;
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * half));
      // (qh >> 2b) & 3, moved to bits 4-5 (16-bit shifts: the mask drops what crosses a byte).
      const __m256i v[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2)),
          _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2))};
      for (int b = 0; b < 4; ++b) {
        const __m256i sq = _mm256_sub_epi8(v[b], k32), aq = _mm256_sign_epi8(sq, sq);
        const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[2 * b + 1]), _mm_set1_epi16(sc[2 * b]));
        for (int t = 0; t < NT; ++t) {
          const tensor::ActQ8& a = x[t * xs + i * 8 + half * 4 + b];
          const __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)), sq);
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, xv), scv);
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a.d), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]);
}

// MLX affine rows (scale part, see Kernels::MlxDot): per 32-element block an integer dot of the
// unsigned values with the int8 activations, scaled by the group's scale·dx. 4-bit rows hold
// elements 2j, 2j+1 in byte j, so nibbles() gives the even then the odd elements and the
// activations come in that order (permute_act_for_mlx4). 8-bit values (0..255) would overflow
// maddubs' int16 pairs, so they are used as q - 128 with the sign moved onto x (|q - 128| <= 128
// fits u8) and the 128·scale·dx·Σx they lose moved into the bias part (bias + 128·scale).
// Σ_g (b[g] + off·sc[g])·s[g] for an MLX row's bias part (off: a value offset the block dots
// took off): 8 groups per FMA, then the tail in order.
inline float mlx_bias_dot(const float* b, const float* sc, float off, const float* s, int64_t n) {
  __m256 v = _mm256_setzero_ps();
  const __m256 o = _mm256_set1_ps(off);
  int64_t g = 0;
  for (; g + 8 <= n; g += 8) {
    const __m256 bo = _mm256_fmadd_ps(o, _mm256_loadu_ps(sc + g), _mm256_loadu_ps(b + g));
    v = _mm256_fmadd_ps(bo, _mm256_loadu_ps(s + g), v);
  }
  float r = hsum256(v);
  for (; g < n; ++g) r += (b[g] + off * sc[g]) * s[g];
  return r;
}

template <int NT, bool kFour>
void mlx_nt(const uint8_t* w, const float* sc, const float* bi, int gs, const tensor::ActQ8* x, int64_t xs, int64_t nb,
            const float* gsum, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const int bpg = gs / 32;
  const int64_t groups = nb / bpg;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  // Groups outer: the group's scale is one load, with no division per block.
  for (int64_t g = 0, b = 0; g < groups; ++g) {
    const float s = sc[g];
    for (int i = 0; i < bpg; ++i, ++b) {
      __m256i q, sq = _mm256_setzero_si256();
      if constexpr (kFour) {
        q = nibbles(w + b * 16);
      } else {
        sq = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * 32)), bias);
        q = _mm256_sign_epi8(sq, sq);
      }
      for (int t = 0; t < NT; ++t) {
        const tensor::ActQ8& a = x[t * xs + b];
        __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
        if constexpr (!kFour) xv = _mm256_sign_epi8(xv, sq);
        __m256i p = dot_u8s8(q, xv);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s * a.d), acc[t]);
      }
    }
  }
  constexpr float kOff = kFour ? 0.0f : 128.0f;
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + mlx_bias_dot(bi, sc, kOff, gsum + t * groups, groups);
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

// MXFP4, both layouts (compute/mxfp4_rows.h), with maddubs + madd as the integer dot.
struct DotU8S8 {
  __m256i operator()(__m256i u, __m256i s) const { return dot_u8s8(u, s); }
};
void mxfp4_dot(const uint8_t* w, const uint8_t* e, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  mxfp4_rows(Mxfp4Row{w, e}, x, xs, nb, nt, out, DotU8S8{});
}
void mxfp4_ggml_dot(const void* w, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  mxfp4_rows(GgmlMxfp4Row{static_cast<const tensor::BlockMXFP4*>(w)}, x, xs, nb, nt, out, DotU8S8{});
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
RAPID_DISPATCH_NT(q5_0, tensor::BlockQ5_0)
RAPID_DISPATCH_NT(q5_1, tensor::BlockQ5_1)
RAPID_DISPATCH_NT(q5_k, tensor::BlockQ5_K)
RAPID_DISPATCH_NT(q4_k, tensor::BlockQ4_K)
RAPID_DISPATCH_NT(q6_k, tensor::BlockQ6_K)
#undef RAPID_DISPATCH_NT

// g·σ(a)·u for the gated MLPs (silu: a = g; gelu_tanh: a = 2z). exp8 holds up to 88: beyond it
// (a < -88) the result is ±0 like std::exp's (g / (1 + inf)).
inline __m256 gated8(__m256 g, __m256 a, __m256 u) {
  const __m256 neg = _mm256_sub_ps(_mm256_setzero_ps(), a), hi = _mm256_set1_ps(88.0f);
  const __m256 e = exp8(_mm256_min_ps(neg, hi));
  const __m256 s = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 out = _mm256_blendv_ps(s, _mm256_mul_ps(g, _mm256_setzero_ps()), _mm256_cmp_ps(neg, hi, _CMP_GT_OQ));
  return _mm256_mul_ps(out, u);
}
// f(g, u) over a row, 8 at a time. The tail goes through the same vector operations (padded), so an
// element's value never depends on where a row range starts or ends.
template <class F>
void gated_rows(const float* gate, const float* up, int64_t n, float* out, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i == n) return;
  alignas(32) float g[8] = {}, u[8] = {};
  std::memcpy(g, gate + i, (n - i) * sizeof(float));
  std::memcpy(u, up + i, (n - i) * sizeof(float));
  _mm256_store_ps(g, f(_mm256_load_ps(g), _mm256_load_ps(u)));
  std::memcpy(out + i, g, (n - i) * sizeof(float));
}
void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  gated_rows(gate, up, n, out, [](__m256 g, __m256 u) { return gated8(g, g, u); });
}
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  gated_rows(gate, up, n, out, [](__m256 g, __m256 u) {
    const __m256 b = _mm256_fmadd_ps(_mm256_set1_ps(kGeluTanhB), _mm256_mul_ps(g, g), _mm256_set1_ps(kGeluTanhA));
    return gated8(g, _mm256_mul_ps(g, b), u);
  });
}

}  // namespace

void fill_kernels_avx2(Kernels& k) {
  k.silu_mul = silu_mul;
  k.gelu_tanh_mul = gelu_tanh_mul;
  k.dot_f32 = dot_f32;
  k.dot_f16 = dot_f16;
  k.dot_bf16 = dot_bf16;
  k.axpy_f32 = axpy_f32;
  k.axpy_f16 = axpy_f16;
  k.axpy_bf16 = axpy_bf16;
  k.f32_to_f16 = to_f16;
  k.f16_to_f32 = from_f16;
  k.bf16_to_f32 = from_bf16;
  k.quantize_act = quantize_act;
  k.dot_q4_0 = q4_0;
  k.dot_q4_1 = q4_1;
  k.dot_q8_0 = q8_0;
  k.dot_q5_0 = q5_0;
  k.dot_q5_1 = q5_1;
  k.dot_q5_k = q5_k;
  k.dot_q4_k = q4_k;
  k.dot_q6_k = q6_k;
  k.dot_mlx4 = mlx_dot<true>;
  k.dot_mlx8 = mlx_dot<false>;
  k.dot_mxfp4 = mxfp4_dot;
  k.dot_mxfp4_ggml = mxfp4_ggml_dot;
  fill_lane_kernels_avx2(k);
}

}  // namespace rapid::compute
