// AVX-512 kernels (F, BW, VL, VNNI, BF16). Integer dots use vpdpbusd (u8 × s8 → s32), which
// needs unsigned weights: nibbles already are, Q8_0 weights are biased by +128 (xor 0x80) and the
// bias removed with the activation block's integer sum.
#include <immintrin.h>

#include "compute/kernels.h"

namespace rapid {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
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

void quantize_act(const float* x, int64_t n, ActQ8* out) {
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
inline __m256i load_x(const ActQ8& a) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
}

// Per block: acc += dw*dx * Σ q·x (as 8 lanes) and off += c(dw, mw)*dx*Σx for the weight offset.
template <int NT>
void q4_1_nt(const BlockQ4_1* w, const ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  float off[NT];
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q = nibbles(w[i].qs);
    float dw = h2f(w[i].d), mw = h2f(w[i].m);
    for (int t = 0; t < NT; ++t) {
      const ActQ8& a = x[t * xs + i];
      __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load_x(a));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d), acc[t]);
      off[t] += mw * a.d * a.sum;
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + off[t];
}

template <int NT>
void q4_0_nt(const BlockQ4_0* w, const ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  float off[NT];
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q = nibbles(w[i].qs);
    float dw = h2f(w[i].d);
    for (int t = 0; t < NT; ++t) {
      const ActQ8& a = x[t * xs + i];
      // Start lane 0 at -8·Σx so the weight offset cancels exactly in integers.
      __m256i p = _mm256_dpbusd_epi32(_mm256_maskz_set1_epi32(1, -8 * a.sum), q, load_x(a));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + off[t];
}

template <int NT>
void q8_0_nt(const BlockQ8_0* w, const ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  float off[NT];
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs)), bias);
    float dw = h2f(w[i].d);
    for (int t = 0; t < NT; ++t) {
      const ActQ8& a = x[t * xs + i];
      __m256i p = _mm256_dpbusd_epi32(_mm256_maskz_set1_epi32(1, -128 * a.sum), q, load_x(a));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + off[t];
}


inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: 8 sub-blocks of 32 with 6-bit scale/min; sub-block j pairs with activation block j.
template <int NT>
void q4_k_nt(const BlockQ4_K* w, const ActQ8* x, int64_t xs, int64_t nb, float* out) {
  __m256 acc[NT];
  float off[NT];
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  for (int64_t i = 0; i < nb; ++i) {
    const float d = h2f(w[i].d), dmin = h2f(w[i].dmin);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) scale_min_k4(j, w[i].scales, sc[j], mn[j]);
    for (int k = 0; k < 4; ++k) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * k));
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const float s0 = d * sc[2 * k], s1 = d * sc[2 * k + 1];
      for (int t = 0; t < NT; ++t) {
        const ActQ8& a0 = x[t * xs + i * 8 + 2 * k];
        const ActQ8& a1 = x[t * xs + i * 8 + 2 * k + 1];
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

// Q6_K: 6-bit values (0..63, offset 32) with an int8 scale per 16; the 8 dpbusd lanes of a
// 32-element block split 4/4 between its two scales, so the scale is a per-lane vector.
template <int NT>
void q6_k_nt(const BlockQ6_K* w, const ActQ8* x, int64_t xs, int64_t nb, float* out) {
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
          const ActQ8& a = x[t * xs + i * 8 + h * 4 + b];
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

template <int NT, bool kFour>
void mlx_nt(const uint8_t* w, const float* sc, const float* bi, int gs, const ActQ8* x, int64_t xs,
            int64_t nb, float* out) {
  __m256 acc[NT];
  float off[NT];
  for (int t = 0; t < NT; ++t) { acc[t] = _mm256_setzero_ps(); off[t] = 0; }
  const int bpg = gs / 32;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i q = kFour ? nibbles(w + b * 16) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * 32));
    const float s = sc[b / bpg], bb = bi[b / bpg];
    for (int t = 0; t < NT; ++t) {
      const ActQ8& a = x[t * xs + b];
      __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load_x(a));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s * a.d), acc[t]);
      off[t] += bb * a.d * a.sum;
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]) + off[t];
}

template <bool kFour>
void mlx_dot(const uint8_t* w, const float* sc, const float* bi, int gs, const ActQ8* x, int64_t xs,
             int64_t nb, int nt, float* out) {
  switch (nt) {
    case 1: mlx_nt<1, kFour>(w, sc, bi, gs, x, xs, nb, out); break;
    case 2: mlx_nt<2, kFour>(w, sc, bi, gs, x, xs, nb, out); break;
    case 3: mlx_nt<3, kFour>(w, sc, bi, gs, x, xs, nb, out); break;
    default: mlx_nt<4, kFour>(w, sc, bi, gs, x, xs, nb, out); break;
  }
}

#define RAPID_DISPATCH_NT(fn, B)                                                           \
  void fn(const void* w, const ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {     \
    auto* wb = static_cast<const B*>(w);                                                   \
    switch (nt) {                                                                          \
      case 1: fn##_nt<1>(wb, x, xs, nb, out); break;                                       \
      case 2: fn##_nt<2>(wb, x, xs, nb, out); break;                                       \
      case 3: fn##_nt<3>(wb, x, xs, nb, out); break;                                       \
      default: fn##_nt<4>(wb, x, xs, nb, out); break;                                      \
    }                                                                                      \
  }
RAPID_DISPATCH_NT(q4_0, BlockQ4_0)
RAPID_DISPATCH_NT(q4_1, BlockQ4_1)
RAPID_DISPATCH_NT(q8_0, BlockQ8_0)
RAPID_DISPATCH_NT(q4_k, BlockQ4_K)
RAPID_DISPATCH_NT(q6_k, BlockQ6_K)
#undef RAPID_DISPATCH_NT

}  // namespace

void fill_kernels_avx512(Kernels& k) {
  k.dot_f32 = dot_f32;
  k.dot_f16 = dot_f16;
  k.dot_bf16 = dot_bf16;
  k.axpy_f32 = axpy_f32;
  k.axpy_f16 = axpy_f16;
  k.axpy_bf16 = axpy_bf16;
  k.f32_to_f16 = to_f16;
  k.f32_to_bf16 = to_bf16;
  k.quantize_act = quantize_act;
  k.dot_q4_0 = q4_0;
  k.dot_q4_1 = q4_1;
  k.dot_q8_0 = q8_0;
  k.dot_q4_k = q4_k;
  k.dot_q6_k = q6_k;
  k.dot_mlx4 = mlx_dot<true>;
  k.dot_mlx8 = mlx_dot<false>;
}

}  // namespace rapid
