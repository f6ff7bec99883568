// AVX2 inner loops of the chunked attention: a chunk's 16 keys are the lanes of two vectors.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "compute/attention_impl.h"
#include "compute/avx2_hsum.h"

namespace rapid::compute::attn {
namespace {

// 8 elements of a K/V row as f32 (n < 8: the rest read as zero).
inline __m256 load8(tensor::DType dt, const uint8_t* p, int64_t n) {
  if (n < 8) {
    alignas(32) float t[8] = {};
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i) {
      if (dt == tensor::DType::F32) {
        std::memcpy(&t[i], p + 4 * i, 4);
      } else if (dt == tensor::DType::F16) {
        t[i] = _cvtsh_ss(h[i]);
      } else {
        uint32_t u = uint32_t(h[i]) << 16;
        std::memcpy(&t[i], &u, 4);
      }
    }
    return _mm256_load_ps(t);
  }
  if (dt == tensor::DType::F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if (dt == tensor::DType::BF16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

void load(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
          float* kt, float* vf) {
  const int64_t es = kv.dtype == tensor::DType::F32 ? 4 : 2;
  if (jlo > 0 || jhi < kChunk - 1) std::memset(kt, 0, sizeof(float) * hd * kChunk);
  alignas(32) float row[8];
  for (int j = jlo; j <= jhi; ++j) {
    const uint8_t* k = kv.key_at(c0 + j, h);
    const uint8_t* v = kv.value_at(c0 + j, h);
    float* vr = vf + j * hdp;
    for (int64_t d = 0; d < hdp; d += 8) {
      const int64_t n = std::min<int64_t>(8, hd - d);
      _mm256_storeu_ps(vr + d, load8(kv.dtype, v + d * es, n));
      _mm256_store_ps(row, load8(kv.dtype, k + d * es, n));
      for (int64_t i = 0; i < n; ++i) kt[(d + i) * kChunk + j] = row[i];
    }
  }
}

// e^x for x <= 0: 2^n * P(r), n = round(x/ln2), P degree-7 Taylor on |r| <= ln2/2 (~1 ulp). x is
// clamped at -87 so 2^n stays a normal float (exp(-87) ~ 1.6e-38 is 0 for the softmax's sums).
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void step(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap,
          Row* rows, int nrows) {
  alignas(32) float s[kChunk];
  for (int rr = 0; rr < nrows; ++rr) {
    Row& w = rows[rr];
    if (w.jlo > w.jhi) continue;
    // Two accumulators per half (d even / odd), summed in a fixed order.
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    int64_t d = 0;
    for (; d + 2 <= hd; d += 2) {
      const __m256 q0 = _mm256_set1_ps(w.q[d]), q1 = _mm256_set1_ps(w.q[d + 1]);
      a0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kt + d * kChunk), a0);
      b0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kt + d * kChunk + 8), b0);
      a1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kt + (d + 1) * kChunk), a1);
      b1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kt + (d + 1) * kChunk + 8), b1);
    }
    if (d < hd) {
      const __m256 q0 = _mm256_set1_ps(w.q[d]);
      a0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kt + d * kChunk), a0);
      b0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kt + d * kChunk + 8), b0);
    }
    const __m256 sv = _mm256_set1_ps(scale);
    _mm256_store_ps(s, _mm256_mul_ps(_mm256_add_ps(a0, a1), sv));
    _mm256_store_ps(s + 8, _mm256_mul_ps(_mm256_add_ps(b0, b1), sv));
    if (softcap > 0)
      for (int j = w.jlo; j <= w.jhi; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
    float cmax = -INFINITY;
    for (int j = w.jlo; j <= w.jhi; ++j) cmax = std::max(cmax, s[j]);
    const float mnew = std::max(w.m, cmax);
    if (mnew > w.m && w.m != -INFINITY) {  // rescale what was summed against the old max
      const float alpha = std::exp(w.m - mnew);
      w.l *= alpha;
      const __m256 av = _mm256_set1_ps(alpha);
      for (int64_t e = 0; e < hdp; e += 8) _mm256_storeu_ps(w.acc + e, _mm256_mul_ps(_mm256_loadu_ps(w.acc + e), av));
    }
    w.m = mnew;
    // Lanes outside jlo..jhi are zeroed so the fixed-order lane sum below only counts visible keys.
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i lo = _mm256_set1_epi32(w.jlo - 1), hi = _mm256_set1_epi32(w.jhi + 1);
    const __m256 mv = _mm256_set1_ps(mnew);
    __m256 p[2];
    for (int half = 0; half < 2; ++half) {
      const __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * half));
      const __m256 in = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(idx, lo), _mm256_cmpgt_epi32(hi, idx)));
      p[half] = _mm256_and_ps(in, exp8(_mm256_sub_ps(_mm256_loadu_ps(s + 8 * half), mv)));
    }
    w.l += hsum256(_mm256_add_ps(p[0], p[1]));
    _mm256_store_ps(s, p[0]);
    _mm256_store_ps(s + 8, p[1]);
    for (int64_t e = 0; e < hdp; e += 32) {
      // Up to four vectors of the accumulator stay in registers across the chunk's keys.
      const int nv = int(std::min<int64_t>(4, (hdp - e) / 8));
      __m256 c[4];
      for (int i = 0; i < nv; ++i) c[i] = _mm256_loadu_ps(w.acc + e + 8 * i);
      for (int j = w.jlo; j <= w.jhi; ++j) {
        const __m256 pj = _mm256_set1_ps(s[j]);
        const float* v = vf + j * hdp + e;
        for (int i = 0; i < nv; ++i) c[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * i), c[i]);
      }
      for (int i = 0; i < nv; ++i) _mm256_storeu_ps(w.acc + e + 8 * i, c[i]);
    }
  }
}

}  // namespace

Fns fns_avx2() { return Fns{load, step, 8, kChunk, nullptr}; }

}  // namespace rapid::compute::attn
