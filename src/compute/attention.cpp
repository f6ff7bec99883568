#include "compute/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "compute/kernels.h"
#include "compute/ops.h"

namespace rapid {

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
        case DType::F32:
          std::memcpy(kd, ks, head_dim * 4);
          std::memcpy(vd, vs, head_dim * 4);
          break;
        case DType::F16:
          kr.f32_to_f16(ks, reinterpret_cast<uint16_t*>(kd), head_dim);
          kr.f32_to_f16(vs, reinterpret_cast<uint16_t*>(vd), head_dim);
          break;
        case DType::BF16:
          kr.f32_to_bf16(ks, reinterpret_cast<uint16_t*>(kd), head_dim);
          kr.f32_to_bf16(vs, reinterpret_cast<uint16_t*>(vd), head_dim);
          break;
        default: throw Error("kv cache: dtype must be f32, f16 or bf16");
      }
    }
  }
}

namespace {

// One query token t of one head h of segment sg. Keys are visited in position order, one page run
// at a time (a block's slots are contiguous), so the page is looked up once per block, not per key.
void attend_one(const AttentionSegment& sg, int64_t t, int64_t h, const AttentionParams& p,
                const Kernels& kr, std::vector<float>& scores) {
  const KvView& kv = sg.kv;
  const int64_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads, kvh = h / group;
  const int64_t q_stride = p.n_heads * hd;
  const int64_t pos = sg.pos0 + t;
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  const int64_t len = pos - first + 1;
  const int64_t bs = kv.block_size();
  const size_t head_off = static_cast<size_t>(kvh) * kv.head_stride;
  scores.resize(static_cast<size_t>(len));
  const float* qv = sg.q + t * q_stride + h * hd;
  int64_t j = 0;
  for (int64_t at = first; at <= pos;) {
    const int64_t s0 = at & kv.slot_mask, cnt = std::min(bs - s0, pos - at + 1);
    const uint8_t* kp = kv.blocks[at >> kv.block_shift] + kv.k_off + head_off + s0 * kv.slot_stride;
    for (int64_t i = 0; i < cnt; ++i, kp += kv.slot_stride) {
      float s = kv.dtype == DType::F16  ? kr.dot_f16(qv, reinterpret_cast<const uint16_t*>(kp), hd)
              : kv.dtype == DType::BF16 ? kr.dot_bf16(qv, reinterpret_cast<const uint16_t*>(kp), hd)
                                        : kr.dot_f32(qv, reinterpret_cast<const float*>(kp), hd);
      s *= p.scale;
      if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
      scores[j++] = s;
    }
    at += cnt;
  }
  softmax(scores.data(), len);
  float* o = sg.out + t * q_stride + h * hd;
  std::fill(o, o + hd, 0.0f);
  j = 0;
  for (int64_t at = first; at <= pos;) {
    const int64_t s0 = at & kv.slot_mask, cnt = std::min(bs - s0, pos - at + 1);
    const uint8_t* vp = kv.blocks[at >> kv.block_shift] + kv.v_off + head_off + s0 * kv.slot_stride;
    for (int64_t i = 0; i < cnt; ++i, vp += kv.slot_stride, ++j) {
      if (kv.dtype == DType::F16) kr.axpy_f16(scores[j], reinterpret_cast<const uint16_t*>(vp), o, hd);
      else if (kv.dtype == DType::BF16) kr.axpy_bf16(scores[j], reinterpret_cast<const uint16_t*>(vp), o, hd);
      else kr.axpy_f32(scores[j], reinterpret_cast<const float*>(vp), o, hd);
    }
    at += cnt;
  }
}

}  // namespace

void attention_batch(const AttentionSegment* segs, size_t count, const AttentionParams& p,
                     ThreadPool& pool) {
  if (count == 0) return;
  const Kernels& kr = kernels();
  // Task ranges per segment: tasks [start[i], start[i+1]) are segment i's (token, head) pairs.
  thread_local std::vector<int64_t> start;
  start.assign(count + 1, 0);
  for (size_t i = 0; i < count; ++i) {
    if (segs[i].kv.dtype != DType::F32 && segs[i].kv.dtype != DType::F16 && segs[i].kv.dtype != DType::BF16)
      throw Error("attention: KV dtype must be f32, f16 or bf16");
    start[i + 1] = start[i] + segs[i].n * p.n_heads;
  }
  const int64_t* st = start.data();
  pool.parallel_for(start[count], 1, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> scores;
    size_t s = static_cast<size_t>(std::upper_bound(st, st + count + 1, b) - st) - 1;
    for (int64_t task = b; task < e; ++task) {
      while (task >= st[s + 1]) ++s;
      const int64_t local = task - st[s];
      attend_one(segs[s], local / p.n_heads, local % p.n_heads, p, kr, scores);
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

}  // namespace rapid
