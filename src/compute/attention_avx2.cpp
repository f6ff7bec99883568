// AVX2 inner loops of the chunked attention: a chunk's 16 keys are the lanes of two vectors.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "compute/attention_impl.h"
#include "compute/avx2_exp.h"
#include "compute/avx2_hsum.h"

namespace rapid::compute::attn {
namespace {

// 8 elements of a K/V row of type DT as f32.
template <tensor::DType DT>
inline __m256 load8_as(const uint8_t* p) {
  if constexpr (DT == tensor::DType::F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if constexpr (DT == tensor::DType::BF16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
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
  if (dt == tensor::DType::F16) return load8_as<tensor::DType::F16>(p);
  if (dt == tensor::DType::BF16) return load8_as<tensor::DType::BF16>(p);
  return load8_as<tensor::DType::F32>(p);
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
  const int64_t es = kv_elem_bytes(kv.dtype);
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

// A chunk's scores are one fixed summation per key: lane l (0-7) of key j chains q[d]·k[d] over
// d = l, l+8, ... (FMAs from zero), the lanes are added as ((A0+A2)+(A1+A3)) + ((A4+A6)+(A5+A7)),
// and the sum is scaled. The buffered path below runs each chain A_l over 8 keys at once (kt: keys
// as lanes); the paged one (scores_paged: decode, keys read where they are) runs a key's 8 lanes
// over d and adds them by the same tree with shuffles. Both give the same bits, so a query's
// result does not depend on which path its chunk took.

// A_l + A_{l+2} for R rows over the chunk's 16 keys (two vectors, out[r][half]): 4R independent FMA
// chains (the FMA latency wants 8 in flight), each key load shared by the R rows and each q
// broadcast by the two halves.
template <int R>
inline void chain_pair(const float* kt, int64_t hd, int l, Row* const* w, __m256 (*out)[2]) {
  __m256 a[2][R][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) a[0][r][0] = a[0][r][1] = a[1][r][0] = a[1][r][1] = _mm256_setzero_ps();
  auto lane = [&](int64_t d, int i) __attribute__((always_inline)) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kChunk), k1 = _mm256_loadu_ps(kt + d * kChunk + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 q = _mm256_set1_ps(w[r]->q[d]);
      a[i][r][0] = _mm256_fmadd_ps(q, k0, a[i][r][0]);
      a[i][r][1] = _mm256_fmadd_ps(q, k1, a[i][r][1]);
    }
  };
  int64_t d = l;
  for (; d + 2 < hd; d += 8) lane(d, 0), lane(d + 2, 1);
  if (d < hd) lane(d, 0);  // a head dim that is not a multiple of 8 ends some chains a step early
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) out[r][h] = _mm256_add_ps(a[0][r][h], a[1][r][h]);
}
// s[r][j] = scale * q·k_j for the chunk's 16 keys from the transposed keys kt.
template <int R>
inline void scores(const float* kt, int64_t hd, float scale, Row* const* w, float (*s)[kChunk]) {
  __m256 quad0[R][2], x[R][2], y[R][2];
  chain_pair<R>(kt, hd, 0, w, quad0);
  chain_pair<R>(kt, hd, 1, w, x);
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) quad0[r][h] = _mm256_add_ps(quad0[r][h], x[r][h]);  // (A0+A2)+(A1+A3)
  chain_pair<R>(kt, hd, 4, w, x);
  chain_pair<R>(kt, hd, 5, w, y);
  const __m256 sv = _mm256_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h)
      _mm256_store_ps(s[r] + 8 * h, _mm256_mul_ps(_mm256_add_ps(quad0[r][h], _mm256_add_ps(x[r][h], y[r][h])), sv));
}

// The same scores from the key rows kp[j] in place (hd % 8 == 0): 4 keys at a time, each row's
// query vector shared by them, then the tree's three stages across the 4 keys' lane vectors.
template <int R, tensor::DType DT>
inline void scores_paged(const uint8_t* const* kp, int64_t hd, float scale, Row* const* w, float (*s)[kChunk]) {
  constexpr int64_t es = kv_elem_bytes(DT);
  const __m128 sv = _mm_set1_ps(scale);
  for (int j0 = 0; j0 < kChunk; j0 += 4) {
    __m256 a[R][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) a[r][j] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
      __m256 q[R];
      for (int r = 0; r < R; ++r) q[r] = _mm256_loadu_ps(w[r]->q + d);
      for (int j = 0; j < 4; ++j) {
        const __m256 kv = load8_as<DT>(kp[j0 + j] + d * es);
        for (int r = 0; r < R; ++r) a[r][j] = _mm256_fmadd_ps(q[r], kv, a[r][j]);
      }
    }
    for (int r = 0; r < R; ++r) {
      // Lanes l and l+2 of each key, then (l, l+1), then the two 128-bit halves: the tree above.
      const __m256 t01 = _mm256_add_ps(_mm256_unpacklo_ps(a[r][0], a[r][1]), _mm256_unpackhi_ps(a[r][0], a[r][1]));
      const __m256 t23 = _mm256_add_ps(_mm256_unpacklo_ps(a[r][2], a[r][3]), _mm256_unpackhi_ps(a[r][2], a[r][3]));
      const __m256d x = _mm256_castps_pd(t01), y = _mm256_castps_pd(t23);
      const __m256 u = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
      const __m128 z = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
      _mm_store_ps(s[r] + j0, _mm_mul_ps(z, sv));
    }
  }
}

// The lanes of a chunk's two score vectors that hold slots jlo..jhi (all rows of a block share
// them), so neither the max nor the fixed-order lane sum counts the others.
inline void visible_lanes(int jlo, int jhi, __m256* in) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_set1_epi32(jlo - 1), hi = _mm256_set1_epi32(jhi + 1);
  for (int half = 0; half < 2; ++half) {
    const __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * half));
    in[half] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(idx, lo), _mm256_cmpgt_epi32(hi, idx)));
  }
}

// max(m, the largest visible score) (exact in any order: masked lanes read -inf). Past a row's
// first chunks its max rarely grows, and a lane compare says so without the lane reduction, whose
// dependent shuffles were a good part of the softmax's time: the same value either way.
inline float running_max(float m, const float* s, const __m256* in) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  const __m256 mx = _mm256_max_ps(_mm256_blendv_ps(ninf, _mm256_load_ps(s), in[0]),
                                  _mm256_blendv_ps(ninf, _mm256_load_ps(s + 8), in[1]));
  if (_mm256_movemask_ps(_mm256_cmp_ps(mx, _mm256_set1_ps(m), _CMP_GT_OQ)) == 0) return m;
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return std::max(m, _mm_cvtss_f32(m4));
}

// Turns each row's scores s[jlo..jhi] into probabilities against its updated running max (the
// other slots become 0), rescales what the row summed before if the max grew, and adds them to
// its l. Phase by phase over the R rows, so their independent chains (max, exp, lane sum)
// overlap; each row's operations are those of R = 1.
template <int R>
inline void softmax_update(Row* const* w, int64_t hdp, float softcap, float (*s)[kChunk]) {
  const int jlo = w[0]->jlo, jhi = w[0]->jhi;
  if (softcap > 0)
    for (int r = 0; r < R; ++r)
      for (int j = jlo; j <= jhi; ++j) s[r][j] = softcap * std::tanh(s[r][j] / softcap);
  __m256 in[2];
  visible_lanes(jlo, jhi, in);
  for (int r = 0; r < R; ++r) {
    Row& x = *w[r];
    const float mnew = running_max(x.m, s[r], in);
    if (mnew > x.m && x.m != -INFINITY) {  // rescale what was summed against the old max
      const float alpha = std::exp(x.m - mnew);
      x.l *= alpha;
      const __m256 av = _mm256_set1_ps(alpha);
      // acc is padded to a multiple of 8 (Fns::lanes).
      for (float* a = x.acc; a < x.acc + hdp; a += 8) _mm256_storeu_ps(a, _mm256_mul_ps(_mm256_loadu_ps(a), av));
    }
    x.m = mnew;
  }
  for (int r = 0; r < R; ++r) {
    const __m256 mv = _mm256_set1_ps(w[r]->m);
    const __m256 p0 = _mm256_and_ps(in[0], exp8(_mm256_sub_ps(_mm256_load_ps(s[r]), mv)));
    const __m256 p1 = _mm256_and_ps(in[1], exp8(_mm256_sub_ps(_mm256_load_ps(s[r] + 8), mv)));
    w[r]->l += hsum256(_mm256_add_ps(p0, p1));
    _mm256_store_ps(s[r], p0);
    _mm256_store_ps(s[r] + 8, p1);
  }
}

// acc += sum_j p_j V_j over slots jlo..jhi (the same for all R rows), in j order per element. NV
// vectors of each row's accumulator stay in registers across the chunk's keys.
template <int R, int NV, class VSrc>
inline void accumulate_block(const VSrc& vsrc, int64_t e, int jlo, int jhi, Row* const* w, float (*s)[kChunk]) {
  __m256 c[R][NV];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NV; ++i) c[r][i] = _mm256_loadu_ps(w[r]->acc + e + 8 * i);
  for (int j = jlo; j <= jhi; ++j) {
    for (int i = 0; i < NV; ++i) {
      const __m256 vv = vsrc(j, e + 8 * i);
      for (int r = 0; r < R; ++r) c[r][i] = _mm256_fmadd_ps(_mm256_set1_ps(s[r][j]), vv, c[r][i]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(w[r]->acc + e + 8 * i, c[r][i]);
}

// Each accumulator vector is a chain of dependent FMAs (one per key): the two FMA ports at four
// cycles' latency want 8 chains in flight, so a block holds R·NV >= 6 of them where it can. Three
// rows take their vectors in threes (9 chains; 12 would not leave registers for a V load and the
// p's) and the rest in twos, never a lone vector, whose 3 chains ran at half the rate (head dim
// 64 went 3 + 3 + 1 + 1); two rows in fours; one row in eights. The split does not change any
// element's sum.
template <int R, class VSrc>
inline void accumulate(const VSrc& vsrc, int64_t hdp, int jlo, int jhi, Row* const* w, float (*s)[kChunk]) {
  int64_t left = hdp / 8, e = 0;
  if constexpr (R == 3) {
    for (; left >= 3 && left != 4; left -= 3, e += 24) accumulate_block<3, 3>(vsrc, e, jlo, jhi, w, s);
  } else {
    constexpr int kV = R == 2 ? 4 : 8;
    for (; left >= kV; left -= kV, e += 8 * kV) accumulate_block<R, kV>(vsrc, e, jlo, jhi, w, s);
    if constexpr (kV > 4)
      for (; left >= 4; left -= 4, e += 32) accumulate_block<R, 4>(vsrc, e, jlo, jhi, w, s);
  }
  for (; left >= 2; left -= 2, e += 16) accumulate_block<R, 2>(vsrc, e, jlo, jhi, w, s);
  if (left) accumulate_block<R, 1>(vsrc, e, jlo, jhi, w, s);
}

// Where p·V reads the values: the converted chunk (vf), or the cache pages (exact conversion).
struct BufV {
  const float* vf;
  int64_t hdp;
  __m256 operator()(int j, int64_t d) const { return _mm256_loadu_ps(vf + j * hdp + d); }
};
template <tensor::DType DT>
struct PageV {
  const uint8_t* const* vp;
  __m256 operator()(int j, int64_t d) const { return load8_as<DT>(vp[j] + d * kv_elem_bytes(DT)); }
};

template <int R, class Scores, class VSrc>
void step_rows(Scores&& scores_of, const VSrc& vsrc, int64_t hdp, float softcap, Row* const* w) {
  alignas(32) float s[R][kChunk];
  scores_of(s);
  softmax_update<R>(w, hdp, softcap, s);
  accumulate<R>(vsrc, hdp, w[0]->jlo, w[0]->jhi, w, s);
}

// Runs of live rows that see the same slots (a query token's heads: a GQA group in decode; in
// prefill, every row of the tile on a chunk all of them see) go in blocks of three; a run's last
// four rows as two pairs (four rows' 16 score accumulators would not fit the registers, and a
// lone row would run at a third of the speed). block(integral_constant<R>, rows) runs each.
template <class Block>
void for_each_block(Row* rows, int nrows, Block&& block) {
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
      if (take == 3) block(std::integral_constant<int, 3>{}, blk);
      else if (take == 2) block(std::integral_constant<int, 2>{}, blk);
      else block(std::integral_constant<int, 1>{}, blk);
      left -= take;
    }
  }
}

// The converted chunk's blocks phase by phase: every block's scores, then every block's softmax
// step, then every block's p·V. A block's softmax is a chain of dependent max / exp / sum steps that
// left the FMA ports idle while it ran (its p·V reads the p it writes, and the next block's scores
// sat past the reorder window); apart, the blocks' softmax chains overlap each other and the FMA
// phases run back to back. Each row's operations and their order are step_rows', so the same bits.
void step(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap,
          Row* rows, int nrows) {
  const BufV vsrc{vf, hdp};
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(nrows) * kChunk + 8);
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 31) & ~uintptr_t{31});
  auto scores_of = [&](Row* const* blk) { return reinterpret_cast<float (*)[kChunk]>(base + (blk[0] - rows) * kChunk); };
  for_each_block(rows, nrows, [&](auto rc, Row* const* blk) {
    scores<decltype(rc)::value>(kt, hd, scale, blk, scores_of(blk));
  });
  for_each_block(rows, nrows, [&](auto rc, Row* const* blk) {
    softmax_update<decltype(rc)::value>(blk, hdp, softcap, scores_of(blk));
  });
  for_each_block(rows, nrows, [&](auto rc, Row* const* blk) {
    accumulate<decltype(rc)::value>(vsrc, hdp, blk[0]->jlo, blk[0]->jhi, blk, scores_of(blk));
  });
}

// Decode's few rows read the chunk's keys and values where they are: converting and transposing
// a chunk into kt / vf for 3 rows cost as much as their scores and p·V (bench/README.md, "Where an
// AVX2 one-token group's time goes"). Slots no row sees read zeros.
template <tensor::DType DT>
void step_paged_dt(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
                   float scale, float softcap, Row* rows, int nrows) {
  alignas(32) static const uint8_t zeros[1024] = {};
  const uint8_t *kp[kChunk], *vp[kChunk];
  for (int j = 0; j < kChunk; ++j) {
    const bool in = j >= jlo && j <= jhi;
    kp[j] = in ? kv.key_at(c0 + j, h) : zeros;
    vp[j] = in ? kv.value_at(c0 + j, h) : zeros;
  }
  const PageV<DT> vsrc{vp};
  for_each_block(rows, nrows, [&](auto rc, Row* const* blk) {
    constexpr int R = decltype(rc)::value;
    step_rows<R>([&](float (*s)[kChunk]) { scores_paged<R, DT>(kp, hd, scale, blk, s); }, vsrc, hdp, softcap, blk);
  });
}

void step_paged(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp, float scale,
                float softcap, Row* rows, int nrows) {
  const int64_t es = kv_elem_bytes(kv.dtype);
  if (hd % 8 != 0 || hd * es > 1024) {  // the lanes over d need whole vectors (and zeros that long)
    thread_local std::vector<float> kt, vf;
    kt.resize(static_cast<size_t>(hdp * kChunk));
    vf.resize(static_cast<size_t>(hdp * kChunk));
    load(kv, h, c0, jlo, jhi, hd, hdp, kt.data(), vf.data());
    return step(kt.data(), vf.data(), hd, hdp, scale, softcap, rows, nrows);
  }
  if (kv.dtype == tensor::DType::F16) step_paged_dt<tensor::DType::F16>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
  else if (kv.dtype == tensor::DType::BF16) step_paged_dt<tensor::DType::BF16>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
  else step_paged_dt<tensor::DType::F32>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
}

}  // namespace

Fns fns_avx2() { return Fns{load, step, 8, kChunk, step_paged}; }

}  // namespace rapid::compute::attn
