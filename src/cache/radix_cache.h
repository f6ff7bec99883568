// Radix prefix cache (the RadixAttention idea): a radix tree over token ids whose nodes own KV
// blocks from a BlockPool, shared read-only by every sequence that starts with that prefix.
//
// Invariants: every node's edge starts at a block boundary and, for inner nodes, covers whole
// blocks; only a leaf's last block may be partly filled (writers copy-on-write via BlockTable).
// A node holds one pool reference on each of its blocks. A sequence locks the path it uses
// (lock count on the node and all its ancestors); eviction only removes unlocked leaves, least
// recently used first. A match may end mid-block: KV at position i depends only on tokens 0..i,
// so a partly matched block is still valid for the matched slots (and is copied before writing).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cache/block_pool.h"
#include "cache/kv_events.h"

namespace rapid::cache {

using Token = int32_t;

// Opaque recurrent state (Gated DeltaNet / Mamba) valid exactly after `position` tokens.
struct StateSnapshot {
  int64_t position = 0;
  std::vector<uint8_t> bytes;
};

struct RadixNode;

struct PrefixMatch {
  int64_t matched = 0;             // tokens of the query covered by cached KV
  std::vector<BlockId> blocks;     // ceil(matched / block_size) blocks (no reference taken)
  RadixNode* node = nullptr;       // deepest node touched; pass to lock()/unlock()
  std::shared_ptr<StateSnapshot> state;  // deepest recurrent checkpoint at or before `matched`
};

struct RadixStats {
  uint64_t queried_tokens = 0, hit_tokens = 0, inserts = 0, evicted_blocks = 0;
  uint64_t evicted_checkpoints = 0;
  size_t nodes = 0, cached_blocks = 0;
  size_t checkpoints = 0, checkpoint_bytes = 0;  // recurrent-state checkpoints held by the tree
  double hit_rate() const { return queried_tokens ? double(hit_tokens) / double(queried_tokens) : 0.0; }
};

class RadixCache {
 public:
  explicit RadixCache(BlockPool& pool);
  ~RadixCache();  // releases every block reference the tree holds
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // Longest cached prefix of `tokens`; refreshes LRU time along the path. `count`: whether it is
  // a request's lookup (queried / hit tokens in stats()).
  PrefixMatch match_prefix(const std::vector<Token>& tokens, bool count = true);
  // Cache `tokens` whose KV lives in `blocks` (ceil(n / block_size) of them). Positions already
  // cached keep their existing blocks; the tree takes its own reference on the blocks it keeps.
  // `state`, if given, is a recurrent checkpoint at state->position (1..n) of `tokens`: it is
  // attached beside the KV of that position (replacing one already there) and lives as long as
  // the node holding that position. Returns the number of newly cached tokens.
  int64_t insert(const std::vector<Token>& tokens, const std::vector<BlockId>& blocks,
                 std::shared_ptr<StateSnapshot> state = nullptr);
  void lock(RadixNode* node);
  void unlock(RadixNode* node);
  // Drop up to n blocks' worth of unlocked leaves, LRU first; returns tree references released.
  // A node's checkpoints go with it.
  size_t evict(size_t n_blocks);
  // Drops checkpoints (never KV), least recently used node first, until the tree holds at most
  // `max_bytes` of them. Returns the number dropped.
  size_t evict_checkpoints(size_t max_bytes);
  // Evict until the pool has `n` free blocks (or nothing evictable is left). True on success.
  bool ensure_free(size_t n);

  // KV-cache events (full blocks stored / removed) are recorded only once this is turned on, and
  // handed over by take_events() in the order they happened. need_checkpoint (hybrid models, whose
  // recurrent state cannot be rebuilt from KV): a block is announced only while a checkpoint at or
  // after its end exists below it, since only then can a request that shares it resume from it;
  // it is withdrawn when the last such checkpoint goes.
  void record_events(bool on, bool need_checkpoint = false) {
    record_events_ = on;
    need_checkpoint_ = need_checkpoint;
  }
  std::vector<KvEvent> take_events() { return std::exchange(events_, {}); }
  // Every cached token sequence (root to leaf), for inspection; O(cached tokens).
  std::vector<std::vector<Token>> sequences() const;
  // The tokens before each recurrent checkpoint (root to its position), for inspection.
  std::vector<std::vector<Token>> checkpoint_prefixes() const;

  RadixStats stats() const;
  size_t cached_blocks() const { return cached_blocks_; }
  // Number of (leaf) nodes that could be evicted right now.
  size_t evictable_leaves() const;

 private:
  void free_subtree(RadixNode* n);
  int64_t insert_kv(const std::vector<Token>& tokens, const std::vector<BlockId>& blocks);
  void attach(const std::vector<Token>& tokens, std::shared_ptr<StateSnapshot> state);
  void drop_states(RadixNode* n);
  RadixNode* split(RadixNode* child, size_t at);
  void hash_blocks(const RadixNode* parent, RadixNode* leaf);
  size_t announceable(const RadixNode* n) const;
  void sync_events(RadixNode* n);
  void record_removed(RadixNode* n, size_t keep);
  BlockPool& pool_;
  int32_t bs_;
  std::unique_ptr<RadixNode> root_;
  uint64_t clock_ = 0;
  size_t nodes_ = 0, cached_blocks_ = 0, checkpoints_ = 0, checkpoint_bytes_ = 0;
  RadixStats st_;
  bool record_events_ = false, need_checkpoint_ = false;
  std::vector<KvEvent> events_;
};

}  // namespace rapid::cache
