// Causal grouped-query attention of new query tokens over a paged KV cache.
// The cache is reached through KvView, which addresses the pages of cache::BlockPool in place
// (block = per layer K[kv_heads][block_size][head_dim] then V[...]), so no copy is ever made.
#pragma once
#include <cstddef>
#include <cstdint>

#include "compute/thread_pool.h"
#include "tensor/tensor.h"

namespace rapid::compute {

// One layer of one sequence's KV pages. Token position p lives in block p >> block_shift at
// slot p & slot_mask; within that block, kv head h of layer l starts at k_off/v_off + h*head_stride.
struct KvView {
  tensor::DType dtype = tensor::DType::F16;            // F16, BF16 or F32
  uint8_t* const* blocks = nullptr;    // base pointer of each block, in sequence order
  size_t k_off = 0, v_off = 0;         // this layer's K and V plane offsets inside a block
  int32_t block_shift = 4;             // block_size = 1 << block_shift (a power of two: shift/mask)
  int64_t slot_mask = 15;              // block_size - 1
  size_t head_stride = 0;              // block_size * head_dim * elem bytes
  size_t slot_stride = 0;              // head_dim * elem bytes

  int64_t block_size() const { return int64_t(1) << block_shift; }
  uint8_t* key_at(int64_t pos, int64_t h) const {
    return blocks[pos >> block_shift] + k_off + h * head_stride + (pos & slot_mask) * slot_stride;
  }
  uint8_t* value_at(int64_t pos, int64_t h) const {
    return blocks[pos >> block_shift] + v_off + h * head_stride + (pos & slot_mask) * slot_stride;
  }
};

struct AttentionParams {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;     // applied to q·k
  int64_t window = 0;     // > 0: a query at p sees keys p-window+1 .. p (sliding-window layers)
  float softcap = 0.0f;   // > 0: scores = cap * tanh(scores / cap)
  // Attention sinks (gpt-oss): per query head, a logit that joins the softmax's denominator and
  // nothing else (a key with a zero value). nullptr = none.
  const float* sinks = nullptr;
};

// Stores n tokens' keys/values (f32 [n][n_kv_heads*head_dim]) at positions pos0.. in the cache.
void kv_store(const KvView& kv, int64_t pos0, int64_t n, int64_t n_kv_heads, int64_t head_dim,
              const float* k, const float* v);

// One sequence's share of a batched attention: n queries at positions pos0..pos0+n-1 (their keys
// already stored), q and out [n][n_heads*head_dim].
struct AttentionSegment {
  const float* q = nullptr;
  int64_t n = 0, pos0 = 0;
  KvView kv;
  float* out = nullptr;
  // Optional output gate (Qwen3.5's gated attention): out ← out · sigmoid(gate), token t's head h
  // reading head_dim values at gate + t*gate_ld + h*gate_hs. Applied by the task that wrote the
  // head, so it costs no region or serial pass of its own.
  const float* gate = nullptr;
  int64_t gate_ld = 0, gate_hs = 0;
};

// Every segment of a batched forward in one parallel region, as tasks of (tile of queries, kv
// head): each K/V chunk is converted once per tile and shared by the group's query heads, with an
// online softmax. Keys are taken in fixed-size chunks from position 0 (or the window
// start), so a query's arithmetic is the same whatever the batch, the tiling, the chunking of the
// prefill or the block size: results are bitwise independent of them.
void attention_batch(const AttentionSegment* segs, size_t count, const AttentionParams& p,
                     ThreadPool& pool);

// Single sequence: attention_batch with one segment.
void attention(const float* q, int64_t n, int64_t pos0, const KvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool);

}  // namespace rapid::compute
