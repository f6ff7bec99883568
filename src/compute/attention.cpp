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

void attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool) {
  const Kernels& kr = kernels();
  const int64_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  const int64_t q_stride = p.n_heads * hd;
  pool.parallel_for(n * p.n_heads, 1, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> scores;
    for (int64_t task = b; task < e; ++task) {
      const int64_t t = task / p.n_heads, h = task % p.n_heads, kvh = h / group;
      const int64_t pos = pos0 + t;
      const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
      const int64_t len = pos - first + 1;
      scores.resize(static_cast<size_t>(len));
      const float* qv = q + t * q_stride + h * hd;
      for (int64_t j = 0; j < len; ++j) {
        const uint8_t* kp = kv.key_at(first + j, kvh);
        float s = kv.dtype == DType::F16  ? kr.dot_f16(qv, reinterpret_cast<const uint16_t*>(kp), hd)
                : kv.dtype == DType::BF16 ? kr.dot_bf16(qv, reinterpret_cast<const uint16_t*>(kp), hd)
                                          : kr.dot_f32(qv, reinterpret_cast<const float*>(kp), hd);
        s *= p.scale;
        if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
        scores[j] = s;
      }
      softmax(scores.data(), len);
      float* o = out + t * q_stride + h * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t j = 0; j < len; ++j) {
        const uint8_t* vp = kv.value_at(first + j, kvh);
        if (kv.dtype == DType::F16) kr.axpy_f16(scores[j], reinterpret_cast<const uint16_t*>(vp), o, hd);
        else if (kv.dtype == DType::BF16) kr.axpy_bf16(scores[j], reinterpret_cast<const uint16_t*>(vp), o, hd);
        else kr.axpy_f32(scores[j], reinterpret_cast<const float*>(vp), o, hd);
      }
    }
  });
}

}  // namespace rapid
