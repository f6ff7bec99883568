// AVX-512 inner loops of the chunked attention. Scores come 16 keys at a time as one vector (lane
// j = key j) for the masked online-softmax update: from transposed f32 keys in prefill tiles, from
// the f16/bf16 pages in place for decode rows; both with the same per-key summation (see below).
#include <immintrin.h>

#include <cmath>

#include "compute/attention_impl.h"
#include "compute/avx512_exp.h"

namespace rapid::compute::attn {
namespace {

// Loads 16 elements (mask m) of a K/V row as f32. Whole vectors use plain loads: masked loads
// that miss the caches overlap far less (on Zen 5, decode attention over KV coming from DRAM took
// ~1.4x as long with every load masked; bench AttentionLayers).
inline __m512 load16(tensor::DType dt, const uint8_t* p, __mmask16 m) {
  const bool whole = m == __mmask16(0xffff);
  if (dt == tensor::DType::F32) return whole ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
  const __m256i h = whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(m, p);
  if (dt == tensor::DType::F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16
}

// Lanes of head dimensions d..d+15 that exist (d < hd); none when d >= hd.
inline __mmask16 dims_mask(int64_t hd, int64_t d) {
  const int64_t rem = hd - d;
  return rem >= 16 ? __mmask16(0xffff) : rem > 0 ? __mmask16((1u << rem) - 1) : __mmask16(0);
}

// Chunks of 64 keys (4 vectors of 16 scores): the serial part of the online softmax (max, rescale,
// lane sums) then happens once per 64 keys, which is what bounds a single decode row.
constexpr int C = 64;
// Rows with the same visible range are processed together (up to this many), sharing every K/V
// load; each row's arithmetic is the same as alone, so grouping never changes a result.
constexpr int kMaxG = 4;

// The buffered path (prefill tiles) keeps keys transposed, kt[d*C + j], so a row's 16 scores come
// from broadcast-q FMAs without any horizontal reduction and several rows share each key load;
// values stay rows, vf[j*hdp + d]. Both zero-padded from hd to hdp; slots outside jlo..jhi are
// zero. 16 keys at a time: 16 rows converted, transposed in registers, stored as 16 columns.
void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int k = 0; k < 2; ++k) {
      const __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + 2 + k]);
      r[i + k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 + k] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  // r[4q + k] (q = group of 4 source rows): 128-bit segment S holds elements 4S + {order k} of
  // those 4 rows. Gather segment S of the 4 groups into output rows 4S + k.
  for (int k = 0; k < 4; ++k) {
    const int kk = k == 1 ? 2 : k == 2 ? 1 : k;  // unpack order: lo/lo, hi/lo, lo/hi, hi/hi
    const __m512 a = _mm512_shuffle_f32x4(r[kk], r[4 + kk], 0x44), b = _mm512_shuffle_f32x4(r[8 + kk], r[12 + kk], 0x44);
    const __m512 c = _mm512_shuffle_f32x4(r[kk], r[4 + kk], 0xee), d = _mm512_shuffle_f32x4(r[8 + kk], r[12 + kk], 0xee);
    t[k] = _mm512_shuffle_f32x4(a, b, 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(a, b, 0xdd);
    t[8 + k] = _mm512_shuffle_f32x4(c, d, 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(c, d, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

void load(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
          float* kt, float* vf) {
  const int64_t es = kv_elem_bytes(kv.dtype);
  alignas(64) static const uint8_t zeros[1024] = {};  // rows outside jlo..jhi (hd <= 256 at f32)
  for (int j0 = jlo / 16 * 16; j0 <= jhi; j0 += 16) {
    const uint8_t* kp[16];
    for (int j = 0; j < 16; ++j) kp[j] = j0 + j >= jlo && j0 + j <= jhi ? kv.key_at(c0 + j0 + j, h) : zeros;
    for (int64_t d = 0; d < hdp; d += 16) {
      const __mmask16 m = dims_mask(hd, d);
      __m512 r[16];
      for (int j = 0; j < 16; ++j) r[j] = load16(kv.dtype, kp[j] + d * es, m);
      transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(kt + (d + i) * C + j0, r[i]);
    }
  }
  for (int j = jlo; j <= jhi; ++j) {
    const uint8_t* v = kv.value_at(c0 + j, h);
    float* vr = vf + j * hdp;
    for (int64_t d = 0; d < hdp; d += 16) {
      const __mmask16 m = dims_mask(hd, d);
      _mm512_storeu_ps(vr + d, load16(kv.dtype, v + d * es, m));
    }
  }
}

// Scores of 16 keys are a fixed summation per key: lane l of key j accumulates q[d]·k[d] for
// d = l, l+16, ... (one FMA chain), then the 16 lanes are added by one fixed tree,
// (((l0+l2)+(l1+l3)) + ((l4+l6)+(l5+l7))) + (((l8+l10)+(l9+l11)) + ((l12+l14)+(l13+l15))).
// The row-layout path (pages read in place) builds it with per-key accumulators and shuffles; the
// transposed path with one vector per lane index l over 16 keys. Both give the same bits.

// Stages 1-3 of the lane tree for 8 key vectors: per key, its two half sums (lanes 0-7, 8-15).
inline __m512 tree8(const __m512 v[8]) {
  __m512 x[4], y[2];
  for (int i = 0; i < 4; ++i)
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i) {
    const __m512d a = _mm512_castps_pd(x[2 * i]), b = _mm512_castps_pd(x[2 * i + 1]);
    y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xdd));
}
// Final stage for keys 0-7 (z0) and 8-15 (z1): lane j = key j's score.
inline __m512 tree_final(__m512 z0, __m512 z1) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, 0x88), _mm512_shuffle_f32x4(z0, z1, 0xdd));
}

// Where the row-layout path reads a chunk's keys/values: the cache pages themselves (converted on
// the fly; f16/bf16 -> f32 is exact). Slots no row sees point at zeros.
template <tensor::DType DT>
struct PageSrc {
  const uint8_t *kp[C], *vp[C];
  static constexpr int64_t es = kv_elem_bytes(DT);
  __m512 k(int j, int64_t d, __mmask16 m) const { return load16(DT, kp[j] + d * es, m); }
  __m512 v(int j, int64_t d, __mmask16 m) const { return load16(DT, vp[j] + d * es, m); }
};
struct BufSrc {  // values of the buffered path
  const float* vf;
  int64_t hdp;
  __m512 v(int j, int64_t d, __mmask16) const { return _mm512_loadu_ps(vf + j * hdp + d); }
};

// Raw scores of keys 16vi..16vi+15 for G rows, keys as rows (pages): 8 keys at a time.
template <int G, class Src>
inline void scores_rows(const Src& src, Row* const* rows, int vi, int64_t hd, int64_t hdp, __m512* out) {
  __m512 z[G][2];
  for (int half = 0; half < 2; ++half) {
    __m512 acc[G][8];
    for (int g = 0; g < G; ++g)
      for (int j = 0; j < 8; ++j) acc[g][j] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hdp; d += 16) {
      const __mmask16 dm = dims_mask(hd, d);
      __m512 qv[G];
      for (int g = 0; g < G; ++g) qv[g] = _mm512_maskz_loadu_ps(dm, rows[g]->q + d);
      for (int j = 0; j < 8; ++j) {
        const __m512 kv = src.k(16 * vi + 8 * half + j, d, dm);
        for (int g = 0; g < G; ++g) acc[g][j] = _mm512_fmadd_ps(qv[g], kv, acc[g][j]);
      }
    }
    for (int g = 0; g < G; ++g) z[g][half] = tree8(acc[g]);
  }
  for (int g = 0; g < G; ++g) out[g] = tree_final(z[g][0], z[g][1]);
}

// The same scores from transposed keys: A_l (lanes = the 16 keys) is lane l's FMA chain.
template <int G>
inline void scores_t(const float* kt, Row* const* rows, int vi, int64_t hd, __m512* out) {
  const float* kb = kt + 16 * vi;
  auto lane = [&](int l, __m512* a) {
    for (int g = 0; g < G; ++g) a[g] = _mm512_setzero_ps();
    for (int64_t d = l; d < hd; d += 16) {  // d >= hd adds q·k = 0·0: skipped
      const __m512 kv = _mm512_loadu_ps(kb + d * C);
      for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(_mm512_set1_ps(rows[g]->q[d]), kv, a[g]);
    }
  };
  auto quad = [&](int l0, __m512* q) {  // ((A_l0 + A_l0+2) + (A_l0+1 + A_l0+3))
    __m512 a[G], b[G];
    lane(l0, a);
    lane(l0 + 2, b);
    for (int g = 0; g < G; ++g) q[g] = _mm512_add_ps(a[g], b[g]);
    lane(l0 + 1, a);
    lane(l0 + 3, b);
    for (int g = 0; g < G; ++g) q[g] = _mm512_add_ps(q[g], _mm512_add_ps(a[g], b[g]));
  };
  __m512 q0[G], q1[G];
  quad(0, q0);
  quad(4, q1);
  for (int g = 0; g < G; ++g) out[g] = _mm512_add_ps(q0[g], q1[g]);
  quad(8, q0);
  quad(12, q1);
  for (int g = 0; g < G; ++g) out[g] = _mm512_add_ps(out[g], _mm512_add_ps(q0[g], q1[g]));
}

// One chunk for G rows that see the same slots: scores (by `scores`), online-softmax update per
// row, then p·V with each value load shared by the G rows.
template <int G, class Scores, class VSrc>
void step_group(Scores&& scores, const VSrc& src, int64_t hd, int64_t hdp, float scale, float softcap,
                Row* const* rows) {
  const int jlo = rows[0]->jlo, jhi = rows[0]->jhi;
  const int v0 = jlo / 16, v1 = jhi / 16;  // only the 16-key vectors holding visible keys
  alignas(64) float s[G][C];
  __m512 sc[G][C / 16];
  __mmask16 mk[C / 16];
  for (int vi = v0; vi <= v1; ++vi) {
    __m512 o[G];
    scores(vi, o);
    const int lo = std::max(jlo - 16 * vi, 0), hi = std::min(jhi - 16 * vi, 15);
    mk[vi] = __mmask16(((1u << (hi + 1)) - 1) & ~((1u << lo) - 1));
    for (int g = 0; g < G; ++g) {
      sc[g][vi] = _mm512_mul_ps(o[g], _mm512_set1_ps(scale));
      if (softcap > 0) {
        _mm512_store_ps(s[g], sc[g][vi]);
        for (int j = 0; j < 16; ++j) s[g][j] = softcap * std::tanh(s[g][j] / softcap);
        sc[g][vi] = _mm512_load_ps(s[g]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    Row& w = *rows[g];
    float cmax = -INFINITY;
    for (int vi = v0; vi <= v1; ++vi) cmax = std::max(cmax, _mm512_mask_reduce_max_ps(mk[vi], sc[g][vi]));
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
      const __m512 p = _mm512_maskz_mov_ps(mk[vi], exp16(_mm512_sub_ps(sc[g][vi], mv)));
      tot = _mm512_add_ps(tot, p);
      _mm512_store_ps(s[g] + 16 * vi, p);
    }
    w.l += _mm512_reduce_add_ps(tot);
  }
  // Per dimension: acc + (sum over even keys) + (sum over odd keys), two FMA chains in key order;
  // how dimensions are blocked does not change that, so NV is free per G.
  constexpr int NV = G <= 3 ? 4 : 2;
  for (int64_t e = 0; e < hdp; e += 16 * NV) {
    // Compile-time NV keeps the accumulators in registers; vectors past hdp are masked out
    // entirely (never loaded or stored), lanes in hd..hdp read V as zero.
    __mmask16 dm[NV], am[NV];
    for (int i = 0; i < NV; ++i) {
      dm[i] = dims_mask(hd, e + 16 * i);
      am[i] = e + 16 * i < hdp ? __mmask16(0xffff) : __mmask16(0);
    }
    __m512 ce[G][NV], co[G][NV];
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < NV; ++i) {
        ce[g][i] = _mm512_maskz_loadu_ps(am[i], rows[g]->acc + e + 16 * i);
        co[g][i] = _mm512_setzero_ps();
      }
    int j = jlo;
    if (j & 1) {
      for (int i = 0; i < NV; ++i) {
        const __m512 vv = src.v(j, e + 16 * i, dm[i]);
        for (int g = 0; g < G; ++g) co[g][i] = _mm512_fmadd_ps(_mm512_set1_ps(s[g][j]), vv, co[g][i]);
      }
      ++j;
    }
    for (; j + 1 <= jhi; j += 2)
      for (int i = 0; i < NV; ++i) {
        const __m512 ve = src.v(j, e + 16 * i, dm[i]), vo = src.v(j + 1, e + 16 * i, dm[i]);
        for (int g = 0; g < G; ++g) {
          ce[g][i] = _mm512_fmadd_ps(_mm512_set1_ps(s[g][j]), ve, ce[g][i]);
          co[g][i] = _mm512_fmadd_ps(_mm512_set1_ps(s[g][j + 1]), vo, co[g][i]);
        }
      }
    if (j <= jhi)
      for (int i = 0; i < NV; ++i) {
        const __m512 vv = src.v(j, e + 16 * i, dm[i]);
        for (int g = 0; g < G; ++g) ce[g][i] = _mm512_fmadd_ps(_mm512_set1_ps(s[g][j]), vv, ce[g][i]);
      }
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < NV; ++i)
        _mm512_mask_storeu_ps(rows[g]->acc + e + 16 * i, am[i], _mm512_add_ps(ce[g][i], co[g][i]));
  }
}

// Walks the rows in runs of up to kMaxG consecutive rows with the same visible slots (a token's
// query heads always are one) and hands each run to step_group<G>.
template <class Run>
void for_each_run(Row* rows, int nrows, Run&& run) {
  for (int rr = 0; rr < nrows;) {
    Row& w = rows[rr];
    if (w.jlo > w.jhi) {
      ++rr;
      continue;
    }
    int g = 1;
    while (rr + g < nrows && g < kMaxG && rows[rr + g].jlo == w.jlo && rows[rr + g].jhi == w.jhi) ++g;
    Row* run_rows[kMaxG];
    for (int i = 0; i < g; ++i) run_rows[i] = &rows[rr + i];
    switch (g) {
      case 1: run(std::integral_constant<int, 1>{}, run_rows); break;
      case 2: run(std::integral_constant<int, 2>{}, run_rows); break;
      case 3: run(std::integral_constant<int, 3>{}, run_rows); break;
      default: run(std::integral_constant<int, 4>{}, run_rows); break;
    }
    rr += g;
  }
}

void step(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap,
          Row* rows, int nrows) {
  const BufSrc src{vf, hdp};
  for_each_run(rows, nrows, [&](auto gc, Row* const* rr) {
    constexpr int G = decltype(gc)::value;
    step_group<G>([&](int vi, __m512* o) { scores_t<G>(kt, rr, vi, hd, o); }, src, hd, hdp, scale, softcap, rr);
  });
}

template <tensor::DType DT>
void step_paged_dt(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
                   float scale, float softcap, Row* rows, int nrows) {
  alignas(64) static const uint8_t zeros[1024] = {};
  PageSrc<DT> src;
  for (int j = 0; j < C; ++j) {
    const bool in = j >= jlo && j <= jhi;
    src.kp[j] = in ? kv.key_at(c0 + j, h) : zeros;
    src.vp[j] = in ? kv.value_at(c0 + j, h) : zeros;
  }
  for_each_run(rows, nrows, [&](auto gc, Row* const* rr) {
    constexpr int G = decltype(gc)::value;
    step_group<G>([&](int vi, __m512* o) { scores_rows<G>(src, rr, vi, hd, hdp, o); }, src, hd, hdp, scale,
                  softcap, rr);
  });
}

void step_paged(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
                float scale, float softcap, Row* rows, int nrows) {
  if (kv.dtype == tensor::DType::F16) step_paged_dt<tensor::DType::F16>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
  else if (kv.dtype == tensor::DType::BF16) step_paged_dt<tensor::DType::BF16>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
  else step_paged_dt<tensor::DType::F32>(kv, h, c0, jlo, jhi, hd, hdp, scale, softcap, rows, nrows);
}

}  // namespace

Fns fns_avx512() { return Fns{load, step, 16, C, step_paged}; }

}  // namespace rapid::compute::attn
