#include "compute/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "compute/attention_impl.h"
#include "compute/cpu_features.h"
#include "compute/kernels.h"
#include "compute/prefetch.h"

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
// Into L2 (T1), not L1 (T0): a chunk is 256 lines, far more than the L1's few miss buffers hold, so
// T0 left most of them waiting in turn. On the AMD EPYC, T1 took a 30-layer 2000-key decode's
// attention over KV from DRAM from 3.2-4.0 to 1.9-2.8 ms (T0: 2.9-4.0) and a 2048-token SmolLM2
// decode up 20-40 %; an L2-resident layer is 5-7 % slower (bench/README.md: "Prefetches the
// compiler deleted").
inline void prefetch_slots(const KvView& kv, int64_t h, int64_t pos, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *k = kv.key_at(pos + i, h), *v = kv.value_at(pos + i, h);
    for (size_t o = 0; o < kv.slot_stride; o += 64) {
      prefetch_l2(k + o);
      prefetch_l2(v + o);
    }
  }
}

// Up to this many live rows per chunk read the pages directly instead of converting them first.
constexpr int64_t kPagedRows = 3;

// Keys also go in segments of kSegment positions (absolute, like chunks; a multiple of every ISA's
// chunk). A row runs each segment's chunks from a fresh online-softmax state and folds the
// segments' states in order (fold_state), so a row whose keys fit one segment (any context up to
// kSegment) gets exactly the one-pass result. Because the segments are fixed by position, a
// long-context decode can run them as separate tasks and fold their states afterwards with the
// same bits as one task folding them in turn: one sequence's 2-3 kv heads no longer leave a
// thread idle (bench/README.md: "Long-context decode").
constexpr int64_t kSegment = 512;

// Folds a segment's state (m, l, acc) into the running one (tm, tl, tacc); the segment's keys come
// after the running state's. A segment that held none of the row's keys (m = -inf) leaves it.
// Out of line: one copy of the arithmetic for both callers.
[[gnu::noinline]] void fold_state(float& tm, float& tl, float* tacc, float m, float l, const float* acc,
                                  int64_t hdp) {
  if (m == -INFINITY) return;
  if (tm == -INFINITY) {
    tm = m, tl = l;
    std::memcpy(tacc, acc, sizeof(float) * hdp);
    return;
  }
  const float mx = std::max(tm, m), a = std::exp(tm - mx), b = std::exp(m - mx);
  tl = tl * a + l * b;
  for (int64_t d = 0; d < hdp; ++d) tacc[d] = tacc[d] * a + acc[d] * b;
  tm = mx;
}

// Queries t0..t1-1 of a segment against kv heads kv0..kv1-1, with hs query heads each (the first hs
// heads of each kv head's group starting at head offset hoff). Rows are ordered kv head, token,
// head, so each kv head's rows are one run for the inner loops.
struct TileRows {
  const AttentionSegment* sg;
  int64_t kv0, kv1, hoff, hs, t0, t1;
  int64_t per_kv() const { return (t1 - t0) * hs; }
  int64_t count() const { return per_kv() * (kv1 - kv0); }
  // Row i's token and query head.
  void at(int64_t i, int64_t group, int64_t& t, int64_t& h) const {
    const int64_t kvh = kv0 + i / per_kv();
    t = t0 + i % per_kv() / hs;
    h = kvh * group + hoff + i % hs;
  }
};

// A row's output from its folded state: the sink (if any) joins the softmax, then the gate.
void write_row(const AttentionSegment& sg, const AttentionParams& p, int64_t t, int64_t h, float m, float l,
               const float* acc) {
  const int64_t hd = p.head_dim;
  float* o = sg.out + t * p.n_heads * hd + h * hd;
  if (p.sinks) {
    // The sink joins the softmax after all keys, in every ISA's path alike: against the larger of
    // the running max and the sink logit, so neither exponential overflows.
    const float s = p.sinks[h], mx = std::max(m, s), a = std::exp(m - mx);
    const float den = l * a + std::exp(s - mx);
    for (int64_t d = 0; d < hd; ++d) o[d] = acc[d] * a / den;
  } else {
    for (int64_t d = 0; d < hd; ++d) o[d] = acc[d] / l;
  }
  if (sg.gate) {
    const float* gt = sg.gate + t * sg.gate_ld + h * sg.gate_hs;
    for (int64_t d = 0; d < hd; ++d) o[d] *= 1.0f / (1.0f + std::exp(-gt[d]));
  }
}

// The tile's rows over key segment `seg` only, each row's state (m, l, then hdp acc values) written
// to `partial`; or (seg < 0) over all its keys, folding segment by segment, and written out. The
// keys are walked in f.chunk-position chunks from the tile's first visible key; per chunk and kv
// head the K/V are converted to f32 once and shared by that kv head's rows (or read in place for a
// few rows). A row only ever takes part in the chunks that hold its own visible keys, with its own
// slot range, so its result is the same in any tile. Taking the kv heads in turn per chunk, a decode
// task that covers all of a sequence's kv heads walks each block's K (then V) plane in address order.
void attend_tile(const TileRows& tr, const AttentionParams& p, const attn::Fns& f, int64_t seg, float* partial) {
  const AttentionSegment& sg = *tr.sg;
  const int64_t C = f.chunk, group = p.n_heads / p.n_kv_heads;
  const int64_t hd = p.head_dim, hdp = (hd + f.lanes - 1) / f.lanes * f.lanes;
  const int64_t q_stride = p.n_heads * hd, per_kv = tr.per_kv(), nrows = tr.count();
  const bool fold = seg < 0;
  thread_local std::vector<float> kt, vf, acc, tacc, tm, tl;
  thread_local std::vector<attn::Row> rows;
  kt.resize(static_cast<size_t>(hdp * C));
  vf.resize(static_cast<size_t>(hdp * C));
  acc.resize(static_cast<size_t>(nrows * hdp));
  rows.resize(static_cast<size_t>(nrows));
  if (fold) {
    tacc.resize(static_cast<size_t>(nrows * hdp));
    tm.assign(static_cast<size_t>(nrows), -INFINITY);
    tl.assign(static_cast<size_t>(nrows), 0.0f);
  }
  for (int64_t i = 0; i < nrows; ++i) {
    int64_t t, h;
    tr.at(i, group, t, h);
    rows[static_cast<size_t>(i)].q = sg.q + t * q_stride + h * hd;
    rows[static_cast<size_t>(i)].acc = acc.data() + i * hdp;
  }
  const int64_t lo = first_key(sg.pos0 + tr.t0, p.window), hi = sg.pos0 + tr.t1 - 1;
  for (int64_t s = fold ? lo / kSegment : seg, s_end = fold ? hi / kSegment : seg; s <= s_end; ++s) {
    for (attn::Row& r : rows) r.m = -INFINITY, r.l = 0.0f;
    std::fill(acc.begin(), acc.end(), 0.0f);
    const int64_t klo = std::max(lo, s * kSegment), khi = std::min(hi, (s + 1) * kSegment - 1);
    // Prefetch past the segment only when this task goes on to the next one.
    const int64_t pf_hi = fold ? hi : khi;
    for (int64_t c0 = klo / C * C; c0 <= khi; c0 += C) {
      // Queries are in position order, so the tile's visible slots of this chunk are one run.
      const int jlo = static_cast<int>(std::max(lo, c0) - c0), jhi = static_cast<int>(std::min(hi, c0 + C - 1) - c0);
      int live = 0;
      for (int64_t t = tr.t0; t < tr.t1; ++t) {
        const int64_t pos = sg.pos0 + t, a = std::max(first_key(pos, p.window), c0), b = std::min(pos, c0 + C - 1);
        for (int64_t k = 0; k < tr.kv1 - tr.kv0; ++k)
          for (int64_t h = 0; h < tr.hs; ++h) {
            attn::Row& r = rows[static_cast<size_t>(k * per_kv + (t - tr.t0) * tr.hs + h)];
            r.jlo = static_cast<int>(a - c0);
            r.jhi = static_cast<int>(b - c0);
          }
        live += a <= b;
      }
      if (live == 0) continue;  // a window gap: no query of the tile sees this chunk
      const int64_t next = std::min(pf_hi, c0 + 2 * C - 1) - (c0 + C) + 1;  // slots of the next chunk
      for (int64_t kvh = tr.kv0; kvh < tr.kv1; ++kvh) {
        if (next > 0) prefetch_slots(sg.kv, kvh, c0 + C, next);
        attn::Row* kr = rows.data() + (kvh - tr.kv0) * per_kv;
        if (f.step_paged && live * tr.hs <= kPagedRows) {
          f.step_paged(sg.kv, kvh, c0, jlo, jhi, hd, hdp, p.scale, p.softcap, kr, static_cast<int>(per_kv));
        } else {
          f.load(sg.kv, kvh, c0, jlo, jhi, hd, hdp, kt.data(), vf.data());
          f.step(kt.data(), vf.data(), hd, hdp, p.scale, p.softcap, kr, static_cast<int>(per_kv));
        }
      }
    }
    for (int64_t i = 0; i < nrows; ++i) {
      const attn::Row& r = rows[static_cast<size_t>(i)];
      if (!fold) {
        float* st = partial + i * (hdp + 2);
        st[0] = r.m, st[1] = r.l;
        std::memcpy(st + 2, r.acc, sizeof(float) * hdp);
      } else {
        fold_state(tm[i], tl[i], tacc.data() + i * hdp, r.m, r.l, r.acc, hdp);
      }
    }
  }
  if (!fold) return;
  for (int64_t i = 0; i < nrows; ++i) {
    int64_t t, h;
    tr.at(i, group, t, h);
    write_row(sg, p, t, h, tm[i], tl[i], tacc.data() + i * hdp);
  }
}

// A tile whose key segments ran as tasks of their own: states [segment][row][2 + hdp] from `part`.
struct SplitTile {
  TileRows rows;
  int64_t s0, s1;
  size_t part;
};

void fold_split(const SplitTile& u, const float* parts, const AttentionParams& p, int64_t hdp) {
  const int64_t nrows = u.rows.count(), group = p.n_heads / p.n_kv_heads, stride = nrows * (hdp + 2);
  thread_local std::vector<float> tacc;
  tacc.resize(static_cast<size_t>(hdp));
  for (int64_t i = 0; i < nrows; ++i) {
    float tm = -INFINITY, tl = 0.0f;
    for (int64_t s = u.s0; s <= u.s1; ++s) {
      const float* st = parts + u.part + (s - u.s0) * stride + i * (hdp + 2);
      fold_state(tm, tl, tacc.data(), st[0], st[1], st + 2, hdp);
    }
    int64_t t, h;
    u.rows.at(i, group, t, h);
    write_row(*u.rows.sg, p, t, h, tm, tl, tacc.data());
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
  const int64_t group = p.n_heads / p.n_kv_heads, hdp = (p.head_dim + f.lanes - 1) / f.lanes * f.lanes;
  int64_t tiles_total = 0, max_n = 0, max_keys = 0;
  for (size_t i = 0; i < count; ++i) {
    if (segs[i].kv.dtype != tensor::DType::F32 && segs[i].kv.dtype != tensor::DType::F16 && segs[i].kv.dtype != tensor::DType::BF16)
      throw Error("attention: KV dtype must be f32, f16 or bf16");
    tiles_total += (segs[i].n + kTile - 1) / kTile;
    max_n = std::max(max_n, segs[i].n);
    max_keys = std::max(max_keys, segs[i].pos0 + segs[i].n);
  }
  const int64_t threads = pool.size();
  // Key segments as tasks of their own when (tile, kv head) tasks alone would be too few to share
  // evenly (the decode of one or two sequences) and the keys span several segments.
  const bool split = threads > 1 && tiles_total * p.n_kv_heads < 4 * threads && max_keys > kSegment;
  // Query heads per task: a whole group whenever that leaves a task per thread, since the group's
  // rows then share every K/V read (a long-context decode is bound by those reads).
  const int64_t hs = split || tiles_total * p.n_kv_heads >= threads ? group : 1;
  // Decode-sized tiles with enough sequences to go round: one task per tile over all kv heads.
  const int64_t kvt = !split && max_n <= kPagedRows && tiles_total >= 2 * threads ? p.n_kv_heads : 1;
  const int64_t per_tile = p.n_kv_heads / kvt * (group / hs);
  struct Task {
    TileRows rows;
    int64_t seg;  // -1: all of the tile's keys
    size_t part;
  };
  thread_local std::vector<Task> tasks;
  thread_local std::vector<SplitTile> splits;
  thread_local std::vector<float> parts;
  tasks.clear();
  splits.clear();
  size_t part_floats = 0;
  for (size_t i = 0; i < count; ++i) {
    const AttentionSegment& sg = segs[i];
    // Last tiles first: they see the most keys, so they should not be the ones left over.
    for (int64_t tile = (sg.n + kTile - 1) / kTile - 1; tile >= 0; --tile)
      for (int64_t sub = 0; sub < per_tile; ++sub) {
        const int64_t kv0 = sub / (group / hs) * kvt, hoff = sub % (group / hs) * hs;
        const TileRows tr{&sg, kv0, kv0 + kvt, hoff, hs, tile * kTile, std::min(sg.n, (tile + 1) * kTile)};
        const int64_t s0 = first_key(sg.pos0 + tr.t0, p.window) / kSegment, s1 = (sg.pos0 + tr.t1 - 1) / kSegment;
        if (!split || s0 == s1) {
          tasks.push_back({tr, -1, 0});
          continue;
        }
        splits.push_back({tr, s0, s1, part_floats});
        for (int64_t s = s0; s <= s1; ++s) {
          tasks.push_back({tr, s, part_floats});
          part_floats += static_cast<size_t>(tr.count() * (hdp + 2));
        }
      }
  }
  parts.resize(part_floats);
  // The workers see their own thread_locals: hand them this thread's buffers.
  const Task* tk = tasks.data();
  const SplitTile* sp = splits.data();
  float* pt = parts.data();
  pool.parallel_for(static_cast<int64_t>(tasks.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) attend_tile(tk[i].rows, p, f, tk[i].seg, tk[i].seg < 0 ? nullptr : pt + tk[i].part);
  });
  if (splits.empty()) return;
  pool.parallel_for(static_cast<int64_t>(splits.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fold_split(sp[i], pt, p, hdp);
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
