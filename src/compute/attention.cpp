#include "compute/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "compute/attention_impl.h"
#include "compute/cpu_features.h"
#include "compute/kernels.h"

namespace rapid::compute {

void kv_store(const KvView& kv, int64_t pos0, int64_t n, int64_t n_kv_heads, int64_t head_dim,
              const float* k, const float* v) {
  const Kernels& kr = kernels();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < n_kv_heads; ++h) {
      const float* ks = k + (t * n_kv_heads + h) * head_dim;
      const float* vs = v + (t * n_kv_heads + h) * head_dim;
      uint8_t* kd = kv.key_at(pos0 + t, h);
      uint8_t* vd = kv.value_at(pos0 + t, h);
      switch (kv.dtype) {
        case tensor::DType::F32:
          std::memcpy(kd, ks, head_dim * 4);
          std::memcpy(vd, vs, head_dim * 4);
          break;
        case tensor::DType::F16:
          kr.f32_to_f16(ks, reinterpret_cast<uint16_t*>(kd), head_dim);
          kr.f32_to_f16(vs, reinterpret_cast<uint16_t*>(vd), head_dim);
          break;
        case tensor::DType::BF16:
          kr.f32_to_bf16(ks, reinterpret_cast<uint16_t*>(kd), head_dim);
          kr.f32_to_bf16(vs, reinterpret_cast<uint16_t*>(vd), head_dim);
          break;
        default: throw Error("kv cache: dtype must be f32, f16 or bf16");
      }
    }
  }
}

namespace {

const attn::Fns& attn_fns() {
  static const attn::Fns tables[3] = {
      attn::fns_scalar(), best_isa() >= Isa::Avx2 ? attn::fns_avx2() : attn::fns_scalar(),
      best_isa() >= Isa::Avx512 ? attn::fns_avx512()
      : best_isa() >= Isa::Avx2 ? attn::fns_avx2()
                                : attn::fns_scalar()};
  return tables[static_cast<int>(active_isa())];
}

// First key position a query at `pos` sees.
inline int64_t first_key(int64_t pos, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
}

// Asks for the K and V rows of slots pos..pos+n-1 of kv head h. A decode step reads each chunk
// once, so its converting pass waited on the rows' cache misses (over half of a 2000-key decode's
// attention time on AMD EPYC, bench/README.md); fetching the next chunk's rows while this one is
// computed hides them. A hint only: nothing is read that the arithmetic depends on.
inline void prefetch_slots(const KvView& kv, int64_t h, int64_t pos, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *k = kv.key_at(pos + i, h), *v = kv.value_at(pos + i, h);
    for (size_t o = 0; o < kv.slot_stride; o += 64) {
      __builtin_prefetch(k + o, 0, 3);
      __builtin_prefetch(v + o, 0, 3);
    }
  }
}

// Up to this many live rows per chunk read the pages directly instead of converting them first.
constexpr int64_t kPagedRows = 3;

// Queries t0..t1-1 of segment sg against kv heads kv0..kv1-1, with hs query heads each (the first
// hs heads of each kv head's group starting at head offset hoff). Rows are ordered kv head, token,
// head, so each kv head's rows are one run for the inner loops. The keys are walked in
// f.chunk-position chunks from the tile's first visible key; per chunk and kv head the K/V are
// converted to f32 once and shared by that kv head's rows (or read in place for a few rows). A row
// only ever takes part in the chunks that hold its own visible keys, with its own slot range, so
// its result is the same in any tile. Taking the kv heads in turn per chunk, a decode task that
// covers all of a sequence's kv heads walks each block's K (then V) plane in address order.
void attend_tile(const AttentionSegment& sg, int64_t kv0, int64_t kv1, int64_t hoff, int64_t hs, int64_t t0,
                 int64_t t1, const AttentionParams& p, const attn::Fns& f) {
  const int64_t C = f.chunk, group = p.n_heads / p.n_kv_heads;
  const int64_t hd = p.head_dim, hdp = (hd + f.lanes - 1) / f.lanes * f.lanes;
  const int64_t q_stride = p.n_heads * hd, per_kv = (t1 - t0) * hs, nrows = per_kv * (kv1 - kv0);
  thread_local std::vector<float> kt, vf, acc;
  thread_local std::vector<attn::Row> rows;
  kt.resize(static_cast<size_t>(hdp * C));
  vf.resize(static_cast<size_t>(hdp * C));
  acc.assign(static_cast<size_t>(nrows * hdp), 0.0f);
  rows.resize(static_cast<size_t>(nrows));
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t kvh = kv0 + i / per_kv, t = t0 + i % per_kv / hs, h = kvh * group + hoff + i % hs;
    attn::Row& r = rows[static_cast<size_t>(i)];
    r.q = sg.q + t * q_stride + h * hd;
    r.acc = acc.data() + i * hdp;
    r.m = -INFINITY;
    r.l = 0.0f;
  }
  const int64_t lo = first_key(sg.pos0 + t0, p.window), hi = sg.pos0 + t1 - 1;
  for (int64_t c0 = lo / C * C; c0 <= hi; c0 += C) {
    // Queries are in position order, so the tile's visible slots of this chunk are one run.
    const int jlo = static_cast<int>(std::max(lo, c0) - c0), jhi = static_cast<int>(std::min(hi, c0 + C - 1) - c0);
    int live = 0;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pos = sg.pos0 + t, a = std::max(first_key(pos, p.window), c0), b = std::min(pos, c0 + C - 1);
      for (int64_t k = 0; k < kv1 - kv0; ++k)
        for (int64_t h = 0; h < hs; ++h) {
          attn::Row& r = rows[static_cast<size_t>(k * per_kv + (t - t0) * hs + h)];
          r.jlo = static_cast<int>(a - c0);
          r.jhi = static_cast<int>(b - c0);
        }
      live += a <= b;
    }
    if (live == 0) continue;  // a window gap: no query of the tile sees this chunk
    const int64_t next = std::min(hi, c0 + 2 * C - 1) - (c0 + C) + 1;  // slots of the next chunk
    for (int64_t kvh = kv0; kvh < kv1; ++kvh) {
      if (next > 0) prefetch_slots(sg.kv, kvh, c0 + C, next);
      attn::Row* kr = rows.data() + (kvh - kv0) * per_kv;
      if (f.step_paged && live * hs <= kPagedRows) {
        f.step_paged(sg.kv, kvh, c0, jlo, jhi, hd, hdp, p.scale, p.softcap, kr, static_cast<int>(per_kv));
      } else {
        f.load(sg.kv, kvh, c0, jlo, jhi, hd, hdp, kt.data(), vf.data());
        f.step(kt.data(), vf.data(), hd, hdp, p.scale, p.softcap, kr, static_cast<int>(per_kv));
      }
    }
  }
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t kvh = kv0 + i / per_kv, t = t0 + i % per_kv / hs, h = kvh * group + hoff + i % hs;
    const attn::Row& r = rows[static_cast<size_t>(i)];
    float* o = sg.out + t * q_stride + h * hd;
    if (p.sinks) {
      // The sink joins the softmax after all keys, in every ISA's path alike: against the larger of
      // the running max and the sink logit, so neither exponential overflows.
      const float s = p.sinks[h], m = std::max(r.m, s), a = std::exp(r.m - m);
      const float l = r.l * a + std::exp(s - m);
      for (int64_t d = 0; d < hd; ++d) o[d] = r.acc[d] * a / l;
    } else {
      for (int64_t d = 0; d < hd; ++d) o[d] = r.acc[d] / r.l;
    }
    if (sg.gate) {
      const float* gt = sg.gate + t * sg.gate_ld + h * sg.gate_hs;
      for (int64_t d = 0; d < hd; ++d) o[d] *= 1.0f / (1.0f + std::exp(-gt[d]));
    }
  }
}

}  // namespace

void attention_batch(const AttentionSegment* segs, size_t count, const AttentionParams& p,
                     ThreadPool& pool) {
  if (count == 0) return;
  const attn::Fns& f = attn_fns();
  // Tiles of up to kTile queries of one segment and one kv head share each K/V conversion. When
  // that leaves fewer tasks than threads (one short sequence), the group's heads are split into
  // separate tasks as well; either way every (query, head) result is computed the same way.
  constexpr int64_t kTile = 32;
  const int64_t group = p.n_heads / p.n_kv_heads;
  int64_t tiles_total = 0, max_n = 0;
  for (size_t i = 0; i < count; ++i) {
    if (segs[i].kv.dtype != tensor::DType::F32 && segs[i].kv.dtype != tensor::DType::F16 && segs[i].kv.dtype != tensor::DType::BF16)
      throw Error("attention: KV dtype must be f32, f16 or bf16");
    tiles_total += (segs[i].n + kTile - 1) / kTile;
    max_n = std::max(max_n, segs[i].n);
  }
  const int64_t threads = pool.size();
  // Query heads per task: a whole group whenever that leaves a task per thread, since the group's
  // rows then share every K/V read (a long-context decode is bound by those reads).
  const int64_t hs = tiles_total * p.n_kv_heads >= threads ? group : 1;
  // Decode-sized tiles with enough sequences to go round: one task per tile over all kv heads.
  const int64_t kvt = max_n <= kPagedRows && tiles_total >= 2 * threads ? p.n_kv_heads : 1;
  const int64_t per_tile = p.n_kv_heads / kvt * (group / hs);
  // Task ranges per segment: tasks [start[i], start[i+1]) are segment i's (tile, kv heads, heads).
  thread_local std::vector<int64_t> start;
  start.assign(count + 1, 0);
  for (size_t i = 0; i < count; ++i) start[i + 1] = start[i] + (segs[i].n + kTile - 1) / kTile * per_tile;
  const int64_t* st = start.data();
  pool.parallel_for(start[count], 1, [&](int64_t b, int64_t e) {
    size_t s = static_cast<size_t>(std::upper_bound(st, st + count + 1, b) - st) - 1;
    for (int64_t task = b; task < e; ++task) {
      while (task >= st[s + 1]) ++s;
      const AttentionSegment& sg = segs[s];
      const int64_t local = task - st[s], ntiles = (sg.n + kTile - 1) / kTile;
      // Last tiles first: they see the most keys, so they should not be the ones left over.
      const int64_t tile = ntiles - 1 - local / per_tile, sub = local % per_tile;
      const int64_t kv0 = sub / (group / hs) * kvt, hoff = sub % (group / hs) * hs;
      attend_tile(sg, kv0, kv0 + kvt, hoff, hs, tile * kTile, std::min(sg.n, (tile + 1) * kTile), p, f);
    }
  });
}

void attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool) {
  AttentionSegment sg;
  sg.q = q;
  sg.n = n;
  sg.pos0 = pos0;
  sg.kv = kv;
  sg.out = out;
  attention_batch(&sg, 1, p, pool);
}

}  // namespace rapid::compute
