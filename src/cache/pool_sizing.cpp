#include "cache/pool_sizing.h"

#include <algorithm>

namespace rapid::cache {

int64_t serving_context(int64_t requested, int64_t max_position_embeddings) {
  if (requested > 0) return requested;
  return max_position_embeddings > 0 ? std::min<int64_t>(max_position_embeddings, 32768) : 4096;
}

uint64_t full_context_pool_bytes(const BlockShape& shape, int64_t seqs, int64_t context, uint64_t cap) {
  const uint64_t blocks = uint64_t(seqs) * uint64_t(context) / uint64_t(shape.block_size) + 4;
  return std::min<uint64_t>(blocks * shape.block_bytes(), cap);
}

uint64_t kv_pool_bytes(std::optional<uint64_t> requested, const BlockShape& shape, int64_t seqs, int64_t context,
                       uint64_t ram) {
  if (requested) return *requested;
  return full_context_pool_bytes(shape, seqs, context, ram / 4);
}

uint64_t draft_pool_bytes(const BlockShape& shape, int64_t seqs, int64_t context, uint64_t ram) {
  return full_context_pool_bytes(shape, seqs, context, ram / 8);
}

}  // namespace rapid::cache
