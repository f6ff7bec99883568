// Causal grouped-query attention of new query tokens over a KV cache.
// The cache is reached through KvView so a paged layout (block table) can replace the contiguous
// one without touching the architectures: only key_at/value_at change.
#pragma once
#include <cstdint>

#include "compute/thread_pool.h"
#include "model/tensor.h"

namespace rapid {

struct KvView {
  DType dtype = DType::F16;     // F16, BF16 or F32
  uint8_t* k = nullptr;         // position p, kv head h at k + p*pos_stride + h*head_stride
  uint8_t* v = nullptr;
  size_t pos_stride = 0, head_stride = 0;

  uint8_t* key_at(int64_t pos, int64_t h) const { return k + pos * pos_stride + h * head_stride; }
  uint8_t* value_at(int64_t pos, int64_t h) const { return v + pos * pos_stride + h * head_stride; }
};

struct AttentionParams {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;     // applied to q·k
  int64_t window = 0;     // > 0: a query at p sees keys p-window+1 .. p (sliding-window layers)
  float softcap = 0.0f;   // > 0: scores = cap * tanh(scores / cap)
};

// Stores n tokens' keys/values (f32 [n][n_kv_heads*head_dim]) at positions pos0.. in the cache.
void kv_store(const KvView& kv, int64_t pos0, int64_t n, int64_t n_kv_heads, int64_t head_dim,
              const float* k, const float* v);

// q: [n][n_heads*head_dim] for positions pos0..pos0+n-1 (their keys already stored);
// out: same shape.
void attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool);

}  // namespace rapid
