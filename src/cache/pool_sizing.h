// How big the KV block pools are: the serving policy that turns the user's --kv-cache-memory (or
// nothing), the context length, the batch size and the model's block shape into pool bytes.
#pragma once
#include <cstdint>
#include <optional>

#include "cache/block_pool.h"

namespace rapid::cache {

// The context each sequence is served with: `requested` (> 0) if given, else the model's
// max_position_embeddings capped at 32768 (memory grows with it), else 4096 when the model does
// not say.
int64_t serving_context(int64_t requested, int64_t max_position_embeddings);

// Bytes for `seqs` sequences of `context` tokens each in blocks of `shape`, plus 4 spare blocks
// (prefix-cache room and the partial block of each sequence), at most `cap`.
uint64_t full_context_pool_bytes(const BlockShape& shape, int64_t seqs, int64_t context, uint64_t cap);

// The model's pool: `requested` (--kv-cache-memory, as parse_memory_size reads it) when given, else
// full contexts for every sequence capped at 1/4 of `ram` (the rest: weights, activations, OS).
uint64_t kv_pool_bytes(std::optional<uint64_t> requested, const BlockShape& shape, int64_t seqs, int64_t context,
                       uint64_t ram);

// A draft model's (or MTP heads') pool: full contexts capped at 1/8 of `ram`; drafts are cheap to
// recompute, so it never takes room from the main pool's prefix cache.
uint64_t draft_pool_bytes(const BlockShape& shape, int64_t seqs, int64_t context, uint64_t ram);

}  // namespace rapid::cache
