// A sequence's KV cache as pages of a shared cache::BlockPool (the layout in cache/block_pool.h),
// read in place by the attention kernel through KvView. The scheduler owns the pool and the
// prefix cache; this class only tracks one sequence's block table.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cache/block_pool.h"
#include "compute/attention.h"
#include "model/model.h"

namespace rapid::model {

// The page geometry of `num_layers` attention layers with kv_heads × head_dim keys, in the KV
// dtype a model was asked for (f16, bf16 or f32; anything else is an Error).
cache::BlockShape kv_block_shape_for(int32_t num_layers, int64_t kv_heads, int64_t head_dim, int32_t block_size,
                                     tensor::DType kv_dtype);

class PagedKvState : public SequenceState {
 public:
  PagedKvState(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens);
  ~PagedKvState() override;  // returns every block reference to the pool

  int64_t length() const override { return table_.length(); }
  void truncate(int64_t n) override;  // drops whole blocks past n
  int64_t capacity() const { return max_tokens_; }

  // Takes a reference on each block of a cached prefix (radix match) covering `length` tokens.
  // Only valid on an empty state.
  void adopt_prefix(const std::vector<cache::BlockId>& blocks, int64_t length);
  // Free pool blocks that appending n tokens needs (new pages + a copy-on-write of a shared,
  // partly filled last page).
  int64_t blocks_needed(int64_t n) const;
  // Reserves slots for n more tokens (length grows by n). Throws Error when the pool runs out
  // (the caller checks blocks_needed first); on failure the state is unchanged.
  void append(int64_t n);
  void release();  // drops every block (length 0)

  const cache::BlockTable& table() const { return table_; }
  cache::BlockPool& pool() { return *pool_; }
  // The view of layer l for the attention kernel (valid until the next append/truncate).
  compute::KvView layer(int32_t l);

 private:
  std::shared_ptr<cache::BlockPool> pool_;
  cache::BlockTable table_;
  int64_t max_tokens_;
  std::vector<uint8_t*> bases_;  // block base pointers, parallel to table_.blocks()
};

// One entry of a batched forward over paged states: its state, first new position, and rows
// [row, row + n) of the batch's activations.
struct PagedSeq {
  PagedKvState* kv = nullptr;
  int64_t pos0 = 0, row = 0, n = 0;
};

// Admits a batch for a model whose states are all PagedKvState: checks every entry (a state of
// this model whose pool `check_pool` accepts, no sequence twice, tokens in [0, vocab), within
// capacity, enough free blocks per pool) before touching any state, then appends each entry's
// tokens. Fills `seqs` and returns the total rows. Throws Error and changes nothing on refusal.
int64_t admit_paged_batch(const BatchEntry* entries, size_t count, int64_t vocab,
                          const std::function<void(const cache::BlockShape&)>& check_pool,
                          std::vector<PagedSeq>& seqs);

}  // namespace rapid::model
