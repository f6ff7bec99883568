// AVX-512 inner loops of the chunked attention: one FMA accumulator per key of the chunk, reduced
// to a vector of the chunk's 16 scores (lane j = key j) for the masked online-softmax update.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "compute/attention_impl.h"

namespace rapid::attn {
namespace {

// Loads 16 elements (mask m) of a K/V row as f32.
inline __m512 load16(DType dt, const uint8_t* p, __mmask16 m) {
  if (dt == DType::F16)
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  if (dt == DType::BF16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  return _mm512_maskz_loadu_ps(m, p);
}

// Keys are kept as rows (kf[j*hdp + d], zero-padded): converting them is then just a cvtph per 16
// values, which matters for decode where a chunk serves only one or a few query rows.
void load(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
          float* kf, float* vf) {
  const int64_t es = kv.dtype == DType::F32 ? 4 : 2;
  for (int j = jlo; j <= jhi; ++j) {
    const uint8_t* k = kv.key_at(c0 + j, h);
    const uint8_t* v = kv.value_at(c0 + j, h);
    float* kr = kf + j * hdp;
    float* vr = vf + j * hdp;
    for (int64_t d = 0; d < hdp; d += 16) {
      const int64_t rem = hd - d;
      const __mmask16 m = rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1);
      _mm512_storeu_ps(kr + d, load16(kv.dtype, k + d * es, m));
      _mm512_storeu_ps(vr + d, load16(kv.dtype, v + d * es, m));
    }
  }
}

// Lane sums of 16 vectors: result lane j = sum of v[j]'s lanes, always by the same tree.
inline __m512 hsum16(const __m512 v[16]) {
  __m512 x[8], y[4];
  for (int i = 0; i < 8; ++i)
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
    y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // y[i], 128-bit segment L: partial sums (over segment L's lanes) of keys 4i..4i+3.
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xdd));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, 0x88), _mm512_shuffle_f32x4(z0, z1, 0xdd));
}

// e^x for x <= 0 (or -inf): 2^n * P(r) with n = round(x/ln2), r = x - n*ln2, P degree-7 Taylor
// (|r| <= ln2/2: error ~1 ulp); scalef gives exact 2^n scaling and underflows to 0 cleanly.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Chunks of 64 keys (4 vectors of 16 scores): the serial part of the online softmax (max, rescale,
// lane sums) then happens once per 64 keys, which is what bounds a single decode row.
constexpr int C = 64;

// Where step reads the chunk's keys/values: the f32 rows converted by load, or the cache pages
// themselves (converted on the fly). f16/bf16 -> f32 is exact and tails read as zero in both, so
// the two give bitwise the same results; the paged one saves the conversion pass when a chunk
// serves only a row or two (decode).
struct BufSrc {
  const float *kf, *vf;
  int64_t hdp;
  __m512 k(int j, int64_t d, __mmask16) const { return _mm512_loadu_ps(kf + j * hdp + d); }
  __m512 v(int j, int64_t d, __mmask16) const { return _mm512_loadu_ps(vf + j * hdp + d); }
};
template <DType DT>
struct PageSrc {
  const uint8_t *kp[C], *vp[C];  // per slot; slots no row sees point at zeros
  static constexpr int64_t es = DT == DType::F32 ? 4 : 2;
  __m512 k(int j, int64_t d, __mmask16 m) const { return load16(DT, kp[j] + d * es, m); }
  __m512 v(int j, int64_t d, __mmask16 m) const { return load16(DT, vp[j] + d * es, m); }
};

template <class Src>
void step_impl(const Src& src, int64_t hd, int64_t hdp, float scale, float softcap, Row* rows, int nrows) {
  alignas(64) float s[C];
  for (int rr = 0; rr < nrows; ++rr) {
    Row& w = rows[rr];
    if (w.jlo > w.jhi) continue;
    // Only the 16-key vectors holding visible keys are computed (a function of jlo/jhi alone).
    const int v0 = w.jlo / 16, v1 = w.jhi / 16;
    __m512 sc[C / 16];
    __mmask16 mk[C / 16];
    float cmax = -INFINITY;
    for (int vi = v0; vi <= v1; ++vi) {
      // One accumulator per key over 16-wide slices of head_dim, then fixed-tree lane sums.
      __m512 acc[16];
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
      for (int64_t d = 0; d < hdp; d += 16) {
        const __mmask16 dm = hd - d >= 16 ? __mmask16(0xffff) : __mmask16((1u << (hd - d)) - 1);
        const __m512 qv = _mm512_maskz_loadu_ps(dm, w.q + d);
        for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(qv, src.k(16 * vi + j, d, dm), acc[j]);
      }
      sc[vi] = _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale));
      if (softcap > 0) {
        _mm512_store_ps(s, sc[vi]);
        for (int j = 0; j < 16; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
        sc[vi] = _mm512_load_ps(s);
      }
      const int lo = std::max(w.jlo - 16 * vi, 0), hi = std::min(w.jhi - 16 * vi, 15);
      mk[vi] = __mmask16(((1u << (hi + 1)) - 1) & ~((1u << lo) - 1));
      cmax = std::max(cmax, _mm512_mask_reduce_max_ps(mk[vi], sc[vi]));
    }
    const float mnew = std::max(w.m, cmax);
    if (mnew > w.m && w.m != -INFINITY) {  // rescale what was summed against the old max
      const float alpha = std::exp(w.m - mnew);
      w.l *= alpha;
      const __m512 av = _mm512_set1_ps(alpha);
      for (int64_t e = 0; e < hdp; e += 16) _mm512_storeu_ps(w.acc + e, _mm512_mul_ps(_mm512_loadu_ps(w.acc + e), av));
    }
    w.m = mnew;
    const __m512 mv = _mm512_set1_ps(mnew);
    __m512 tot = _mm512_setzero_ps();
    for (int vi = v0; vi <= v1; ++vi) {
      const __m512 p = _mm512_maskz_mov_ps(mk[vi], exp16(_mm512_sub_ps(sc[vi], mv)));
      tot = _mm512_add_ps(tot, p);
      _mm512_store_ps(s + 16 * vi, p);
    }
    w.l += _mm512_reduce_add_ps(tot);
    for (int64_t e = 0; e < hdp; e += 64) {
      // Even and odd keys go to two accumulator sets (shorter FMA chains), added at the end.
      const int nv = int(std::min<int64_t>(4, (hdp - e) / 16));
      __mmask16 dm[4];
      for (int i = 0; i < nv; ++i) {
        const int64_t rem = hd - e - 16 * i;
        dm[i] = rem >= 16 ? __mmask16(0xffff) : rem > 0 ? __mmask16((1u << rem) - 1) : __mmask16(0);
      }
      __m512 ce[4], co[4];
      for (int i = 0; i < nv; ++i) {
        ce[i] = _mm512_loadu_ps(w.acc + e + 16 * i);
        co[i] = _mm512_setzero_ps();
      }
      int j = w.jlo;
      if (j & 1) {
        const __m512 pj = _mm512_set1_ps(s[j]);
        for (int i = 0; i < nv; ++i) co[i] = _mm512_fmadd_ps(pj, src.v(j, e + 16 * i, dm[i]), co[i]);
        ++j;
      }
      for (; j + 1 <= w.jhi; j += 2) {
        const __m512 pe = _mm512_set1_ps(s[j]), po = _mm512_set1_ps(s[j + 1]);
        for (int i = 0; i < nv; ++i) {
          ce[i] = _mm512_fmadd_ps(pe, src.v(j, e + 16 * i, dm[i]), ce[i]);
          co[i] = _mm512_fmadd_ps(po, src.v(j + 1, e + 16 * i, dm[i]), co[i]);
        }
      }
      if (j <= w.jhi) {
        const __m512 pj = _mm512_set1_ps(s[j]);
        for (int i = 0; i < nv; ++i) ce[i] = _mm512_fmadd_ps(pj, src.v(j, e + 16 * i, dm[i]), ce[i]);
      }
      for (int i = 0; i < nv; ++i) _mm512_storeu_ps(w.acc + e + 16 * i, _mm512_add_ps(ce[i], co[i]));
    }
  }
}

void step(const float* kf, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap,
          Row* rows, int nrows) {
  step_impl(BufSrc{kf, vf, hdp}, hd, hdp, scale, softcap, rows, nrows);
}

template <DType DT>
void step_paged_dt(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
                   float scale, float softcap, Row* rows, int nrows) {
  thread_local std::vector<float> zeros;
  if (zeros.size() < size_t(hdp)) zeros.assign(size_t(hdp), 0.0f);
  const uint8_t* z = reinterpret_cast<const uint8_t*>(zeros.data());
  PageSrc<DT> src;
  for (int j = 0; j < C; ++j) {
    const bool in = j >= jlo && j <= jhi;
    src.kp[j] = in ? kv.key_at(c0 + j, h) : z;
    src.vp[j] = in ? kv.value_at(c0 + j, h) : z;
  }
  step_impl(src, hd, hdp, scale, softcap, rows, nrows);
}

void step_paged(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
                float scale, float softcap, Row* rows, int nrows) {
  if (kv.dtype == DType::F16) step_paged_dt<DType::F16>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
  else if (kv.dtype == DType::BF16) step_paged_dt<DType::BF16>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
  else step_paged_dt<DType::F32>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
}

}  // namespace

Fns fns_avx512() { return Fns{load, step, 16, C, step_paged}; }

}  // namespace rapid::attn
