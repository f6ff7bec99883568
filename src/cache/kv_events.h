// What the prefix cache tells the outside about its contents (vLLM's KV-cache events): full blocks
// stored, blocks removed, everything cleared. A router that indexes these events knows which
// prefixes this replica can serve from cache. Only full blocks are announced: a partly filled last
// block is still KV of a valid prefix here, but routers reason in whole blocks (as vLLM does).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace rapid::cache {

enum class KvEventKind { Stored, Removed, AllCleared };

struct KvEvent {
  KvEventKind kind = KvEventKind::Stored;
  std::vector<uint64_t> block_hashes;   // Stored: chained, in order; Removed: any order
  std::optional<uint64_t> parent_hash;  // Stored: hash of the block before the first (none at the root)
  std::vector<int32_t> token_ids;       // Stored: block_size tokens per hash, in order
};

// Hash of a full block given the hash of the block before it (nullopt for the first block):
// 64-bit FNV-1a over the parent hash's 8 little-endian bytes (none for the first block) and then
// each token id's 4 little-endian bytes, with the top bit cleared so every hash is a non-negative
// int64 (decoders that read msgpack integers as int64, such as Go's, take them unchanged).
uint64_t block_hash(std::optional<uint64_t> parent, const int32_t* tokens, size_t n);

}  // namespace rapid::cache
