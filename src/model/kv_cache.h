// Per-sequence KV cache: one contiguous [max_tokens][n_kv_heads][head_dim] buffer per layer for
// keys and one for values. Memory is reserved but not touched until written, so resident size
// follows the tokens actually cached. (A paged layout will replace this behind KvView.)
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "compute/attention.h"
#include "model/model.h"

namespace rapid {

class KvCache : public SequenceState {
 public:
  KvCache(int64_t n_layers, int64_t max_tokens, int64_t n_kv_heads, int64_t head_dim, DType dtype);

  int64_t length() const override { return length_; }
  void truncate(int64_t n) override;
  int64_t capacity() const { return max_tokens_; }
  void advance(int64_t n) { length_ += n; }
  KvView layer(int64_t l) const;
  DType dtype() const { return dtype_; }

 private:
  struct Free { void operator()(uint8_t* p) const; };
  int64_t max_tokens_, n_kv_heads_, head_dim_;
  DType dtype_;
  size_t elem_;
  int64_t length_ = 0;
  std::vector<std::unique_ptr<uint8_t, Free>> k_, v_;
};

}  // namespace rapid
