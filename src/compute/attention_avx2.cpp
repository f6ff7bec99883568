// AVX2 inner loops of the chunked attention: a chunk's 16 keys are the lanes of two vectors.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "compute/attention_impl.h"
#include "compute/avx2_exp.h"
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

// In-register transpose of 8 rows of 8 floats: r[i][d] -> r[d][i].
inline void transpose8(__m256* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

void load(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
          float* kt, float* vf) {
  const int64_t es = kv.dtype == tensor::DType::F32 ? 4 : 2;
  const bool whole = jlo == 0 && jhi == kChunk - 1;
  if (!whole) std::memset(kt, 0, sizeof(float) * hd * kChunk);
  if (kv.dtype == tensor::DType::F16 && hd % 8 == 0) {
    for (int j = jlo; j <= jhi; ++j) {
      const uint8_t* v = kv.value_at(c0 + j, h);
      float* vr = vf + j * hdp;
      for (int64_t d = 0; d < hd; d += 8)
        _mm256_storeu_ps(vr + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + 2 * d))));
    }
  } else {
    for (int j = jlo; j <= jhi; ++j) {
      const uint8_t* v = kv.value_at(c0 + j, h);
      float* vr = vf + j * hdp;
      for (int64_t d = 0; d < hdp; d += 8) _mm256_storeu_ps(vr + d, load8(kv.dtype, v + d * es, std::min<int64_t>(8, hd - d)));
    }
  }
  if (whole && hd % 8 == 0) {
    // Keys 8 at a time: 8 x 8 blocks transposed in registers into kt's key-minor layout.
    for (int j0 = 0; j0 < kChunk; j0 += 8) {
      const uint8_t* k[8];
      for (int i = 0; i < 8; ++i) k[i] = kv.key_at(c0 + j0 + i, h);
      for (int64_t d = 0; d < hd; d += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = load8(kv.dtype, k[i] + d * es, 8);
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (d + i) * kChunk + j0, r[i]);
      }
    }
    return;
  }
  alignas(32) float row[8];
  for (int j = jlo; j <= jhi; ++j) {
    const uint8_t* k = kv.key_at(c0 + j, h);
    for (int64_t d = 0; d < hdp; d += 8) {
      const int64_t n = std::min<int64_t>(8, hd - d);
      _mm256_store_ps(row, load8(kv.dtype, k + d * es, n));
      for (int64_t i = 0; i < n; ++i) kt[(d + i) * kChunk + j] = row[i];
    }
  }
}

// The score half of a row's chunk: s[j] = scale * q·k_j for the chunk's 16 keys. Two accumulators
// per half (d even / odd), summed in a fixed order. R rows at once so their 4R independent FMA chains
// hide the FMA latency (one row's four chains left the core half idle) and share each key load;
// every row's own operations and their order are those of R = 1.
template <int R>
inline void scores(const float* kt, int64_t hd, float scale, Row* const* w, float (*s)[kChunk]) {
  __m256 a0[R], a1[R], b0[R], b1[R];
  // Unrolled first: GCC would otherwise turn this loop into a memset and keep the arrays in memory.
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = b0[r] = b1[r] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 2 <= hd; d += 2) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kChunk), k0h = _mm256_loadu_ps(kt + d * kChunk + 8);
    const __m256 k1 = _mm256_loadu_ps(kt + (d + 1) * kChunk), k1h = _mm256_loadu_ps(kt + (d + 1) * kChunk + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 q0 = _mm256_set1_ps(w[r]->q[d]), q1 = _mm256_set1_ps(w[r]->q[d + 1]);
      a0[r] = _mm256_fmadd_ps(q0, k0, a0[r]);
      b0[r] = _mm256_fmadd_ps(q0, k0h, b0[r]);
      a1[r] = _mm256_fmadd_ps(q1, k1, a1[r]);
      b1[r] = _mm256_fmadd_ps(q1, k1h, b1[r]);
    }
  }
  if (d < hd) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kChunk), k0h = _mm256_loadu_ps(kt + d * kChunk + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 q0 = _mm256_set1_ps(w[r]->q[d]);
      a0[r] = _mm256_fmadd_ps(q0, k0, a0[r]);
      b0[r] = _mm256_fmadd_ps(q0, k0h, b0[r]);
    }
  }
  const __m256 sv = _mm256_set1_ps(scale);
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(s[r], _mm256_mul_ps(_mm256_add_ps(a0[r], a1[r]), sv));
    _mm256_store_ps(s[r] + 8, _mm256_mul_ps(_mm256_add_ps(b0[r], b1[r]), sv));
  }
}

// Turns a row's scores s[jlo..jhi] into probabilities against the updated running max (the other
// slots become 0), rescales what the row summed before if the max grew, and adds them to its l.
inline void softmax_update(Row& w, int64_t hdp, float softcap, float* s) {
  if (softcap > 0)
    for (int j = w.jlo; j <= w.jhi; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
  // Lanes outside jlo..jhi are masked so neither the max nor the fixed-order lane sum counts them.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_set1_epi32(w.jlo - 1), hi = _mm256_set1_epi32(w.jhi + 1);
  __m256 in[2];
  for (int half = 0; half < 2; ++half) {
    const __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * half));
    in[half] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(idx, lo), _mm256_cmpgt_epi32(hi, idx)));
  }
  // The max over the visible slots (exact in any order): masked lanes read -inf.
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 mx = _mm256_max_ps(_mm256_blendv_ps(ninf, _mm256_load_ps(s), in[0]),
                            _mm256_blendv_ps(ninf, _mm256_load_ps(s + 8), in[1]));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float mnew = std::max(w.m, _mm_cvtss_f32(m4));
  if (mnew > w.m && w.m != -INFINITY) {  // rescale what was summed against the old max
    const float alpha = std::exp(w.m - mnew);
    w.l *= alpha;
    const __m256 av = _mm256_set1_ps(alpha);
    // acc is padded to a multiple of 8 (Fns::lanes).
    for (float* a = w.acc; a < w.acc + hdp; a += 8) _mm256_storeu_ps(a, _mm256_mul_ps(_mm256_loadu_ps(a), av));
  }
  w.m = mnew;
  const __m256 mv = _mm256_set1_ps(mnew);
  __m256 p[2];
  for (int half = 0; half < 2; ++half)
    p[half] = _mm256_and_ps(in[half], exp8(_mm256_sub_ps(_mm256_load_ps(s + 8 * half), mv)));
  w.l += hsum256(_mm256_add_ps(p[0], p[1]));
  _mm256_store_ps(s, p[0]);
  _mm256_store_ps(s + 8, p[1]);
}

// acc += sum_j p_j V_j over slots jlo..jhi (the same for all R rows), in j order per element. NV
// vectors of each row's accumulator stay in registers across the chunk's keys.
template <int R, int NV>
inline void accumulate_block(const float* vf, int64_t hdp, int64_t e, int jlo, int jhi, Row* const* w,
                             float (*s)[kChunk]) {
  __m256 c[R][NV];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NV; ++i) c[r][i] = _mm256_loadu_ps(w[r]->acc + e + 8 * i);
  for (int j = jlo; j <= jhi; ++j) {
    const float* v = vf + j * hdp + e;
    for (int i = 0; i < NV; ++i) {
      const __m256 vv = _mm256_loadu_ps(v + 8 * i);
      for (int r = 0; r < R; ++r) c[r][i] = _mm256_fmadd_ps(_mm256_set1_ps(s[r][j]), vv, c[r][i]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(w[r]->acc + e + 8 * i, c[r][i]);
}

template <int R>
inline void accumulate(const float* vf, int64_t hdp, int jlo, int jhi, Row* const* w, float (*s)[kChunk]) {
  constexpr int kV = R == 3 ? 3 : 4;  // registers: R·kV accumulators + a V load + a p
  int64_t e = 0;
  for (; e + 8 * kV <= hdp; e += 8 * kV) accumulate_block<R, kV>(vf, hdp, e, jlo, jhi, w, s);
  for (; e < hdp; e += 8) accumulate_block<R, 1>(vf, hdp, e, jlo, jhi, w, s);
}

template <int R>
void step_rows(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap, Row* const* w) {
  alignas(32) float s[R][kChunk];
  scores<R>(kt, hd, scale, w, s);
  for (int r = 0; r < R; ++r) softmax_update(*w[r], hdp, softcap, s[r]);
  accumulate<R>(vf, hdp, w[0]->jlo, w[0]->jhi, w, s);
}

// Runs of live rows that see the same slots (a query token's heads: a GQA group in decode; in
// prefill, every row of the tile on a chunk all of them see) go in blocks of three; a run's last
// four rows as two pairs (four rows' 16 score accumulators would not fit the registers, and a
// lone row would run at a third of the speed).
void step(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap,
          Row* rows, int nrows) {
  Row* blk[3];
  int rr = 0;
  while (rr < nrows) {
    if (rows[rr].jlo > rows[rr].jhi) {
      ++rr;
      continue;
    }
    int len = 1;
    while (rr + len < nrows && rows[rr + len].jlo == rows[rr].jlo && rows[rr + len].jhi == rows[rr].jhi) ++len;
    for (int left = len; left > 0;) {
      const int take = left == 4 ? 2 : std::min(left, 3);
      for (int i = 0; i < take; ++i) blk[i] = &rows[rr++];
      if (take == 3) step_rows<3>(kt, vf, hd, hdp, scale, softcap, blk);
      else if (take == 2) step_rows<2>(kt, vf, hd, hdp, scale, softcap, blk);
      else step_rows<1>(kt, vf, hd, hdp, scale, softcap, blk);
      left -= take;
    }
  }
}

}  // namespace

Fns fns_avx2() { return Fns{load, step, 8, kChunk, nullptr}; }

}  // namespace rapid::compute::attn
