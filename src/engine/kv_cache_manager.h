// The engine's KV memory: one shared block pool, the radix prefix cache over it, and the disk
// snapshot store behind that (vLLM's KV-cache-manager role). The scheduler asks it to give a
// sequence its cached prefix, to find free blocks (evicting unused cached prefixes first), and to
// keep a finished sequence's KV for later requests. Owned and called by the engine thread only,
// except stats() which any thread may read.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/block_pool.h"
#include "cache/radix_cache.h"
#include "cache/snapshot_store.h"
#include "model/model.h"
#include "model/paged_kv.h"

namespace rapid::engine {

struct KvCacheOptions {
  int32_t block_size = 16;
  uint64_t pool_bytes = 1ull << 30;
  bool prefix_cache = true;
  // A hybrid (recurrent-state) model's checkpoints: at most this many bytes of them in the prefix
  // cache, carved out of pool_bytes (0: a quarter of it). A prefill also checkpoints at a chunk's
  // end once it is this many tokens past the deepest checkpoint on its path (0: never).
  uint64_t checkpoint_bytes = 0;
  int64_t checkpoint_interval = 1024;
  // Disk persistence; empty dir = off.
  std::string snapshot_dir;      // the model's own directory (root + model key)
  std::string model_key;
  uint64_t snapshot_max_disk_bytes = 8ull << 30;
  int64_t snapshot_min_tokens = 64;  // shorter prompts are cheap to recompute: not persisted
  int64_t snapshot_max_tokens = 0;   // the context: longer headers are refused (0: no model bound)
  std::string snapshot_key_file;     // the install's key (cache::default_cache_key_path() if empty)
  bool snapshot_encrypt = false;     // prompts' tokens and KV as ciphertext on disk
  // KV-cache events (memory tier), handed over once per engine step in the order they happened;
  // called on the engine thread, so it must only queue them. Unset: no events are recorded.
  std::function<void(std::vector<cache::KvEvent>)> on_events;
};

struct KvCacheStats {
  cache::PoolStats pool;
  cache::RadixStats radix;
  bool prefix_cache = false;
  bool persistent = false;
  std::string snapshot_dir;
  std::string persist_disabled;  // why persistence was asked for but is off (untrusted dir, ...)
  cache::SnapshotStats disk;
  uint64_t restored_entries = 0, restored_tokens = 0;
  int32_t block_size = 0;
  // Hybrid models: one sequence's recurrent state, and the checkpoints' budget (radix has their
  // count and bytes). 0 for KV-only models.
  uint64_t state_bytes_per_seq = 0, checkpoint_budget = 0;
};

class KvCacheManager {
 public:
  KvCacheManager(model::Model& model, KvCacheOptions opts);
  ~KvCacheManager();

  // A fresh paged state for a sequence; adopts the longest cached prefix of `tokens` (memory
  // first, then disk), leaving at least one token to compute. Returns the adopted length.
  // A hybrid resumes from the deepest recurrent checkpoint at or before the match (its KV up to
  // there, its recurrent state restored): the adopted length is that checkpoint's position.
  std::unique_ptr<model::PagedKvState> open(const std::vector<int32_t>& tokens, int64_t max_tokens, int64_t* cached);
  // Make `n` blocks free, evicting least recently used cached prefixes no sequence holds.
  bool make_free(int64_t n);
  int64_t free_blocks() const { return int64_t(pool_->free_count()); }
  int64_t total_blocks() const { return int64_t(pool_->total_blocks()); }
  // Keeps the first kv.length() tokens' KV in the prefix cache (a sequence that finishes or is
  // preempted; also a prompt once prefilled, so concurrent requests share it at once).
  // A hybrid's recurrent state at kv.length() is kept as a checkpoint beside that KV.
  void remember(const std::vector<int32_t>& tokens, const model::PagedKvState& kv);
  // After a prefill chunk: a hybrid remembers the prefix (with its checkpoint) at a message
  // boundary (also persisted: what the next turn resumes from after a restart) or when it is
  // checkpoint_interval tokens past the deepest checkpoint on its path; otherwise nothing.
  void checkpoint(const std::vector<int32_t>& tokens, const model::PagedKvState& kv, bool boundary);
  // Queues the prefix to disk (background write) if persistence is on and it is long enough.
  void persist(const std::vector<int32_t>& tokens, const model::PagedKvState& kv);
  void purge();  // drops every unused cached prefix and every disk entry
  std::vector<std::vector<int32_t>> sequences() const;  // engine thread: what the prefix cache holds
  // Engine thread: the tokens before each recurrent-state checkpoint (hybrid models).
  std::vector<std::vector<int32_t>> checkpoint_prefixes() const;
  void flush();  // waits for queued disk writes
  // Whether model steps are running: background snapshot writes wait for a pause (bounded).
  void set_busy(bool busy) {
    if (store_) store_->set_foreground_busy(busy);
  }
  KvCacheStats stats() const;  // thread-safe copy, refreshed by publish()
  void publish();              // engine thread: refresh the copy stats() returns
  cache::BlockPool& pool() { return *pool_; }
  // Called (from the snapshot writer's thread) when pinned blocks can be unpinned: the owner
  // wakes its thread, which unpins them in its next publish() even when no request is running.
  void set_wakeup(std::function<void()> fn) {
    std::lock_guard lk(unpin_mu_);
    wakeup_ = std::move(fn);
  }

 private:
  bool restore_from_disk(const std::vector<int32_t>& tokens, int64_t have);  // true: tree grew
  std::unique_ptr<model::PagedKvState> open_hybrid(const std::vector<int32_t>& tokens, int64_t max_tokens, int64_t* cached);
  bool restore_hybrid_from_disk(const std::vector<int32_t>& tokens, int64_t have);
  std::shared_ptr<cache::StateSnapshot> snapshot_of(const model::PagedKvState& kv);
  void reclaim();  // drops the pins of snapshot pages the writer has copied (engine thread)
  void open_store(const cache::BlockShape& shape);  // persistence, or one warning why not
  void send_events(bool cleared = false);  // recorded events to opts_.on_events

  KvCacheOptions opts_;
  model::Model* state_model_ = nullptr;  // a model with recurrent state: open() asks it for states
  uint64_t state_bytes_ = 0;      // its per-sequence recurrent state
  uint64_t checkpoint_budget_ = 0;
  // The checkpoint remember() made last (persist() of the same sequence writes it to disk).
  std::shared_ptr<cache::StateSnapshot> last_ckpt_;
  const model::PagedKvState* last_ckpt_kv_ = nullptr;
  std::shared_ptr<cache::BlockPool> pool_;
  std::unique_ptr<cache::RadixCache> radix_;
  std::unique_ptr<cache::SnapshotStore> store_;
  std::string persist_disabled_;
  uint64_t restored_entries_ = 0, restored_tokens_ = 0;
  // Blocks pinned for queued snapshots: the engine thread pins, the writer thread hands them back
  // here once copied, the engine thread unpins (the pool is single-threaded).
  int64_t pinned_ = 0;
  std::mutex unpin_mu_;
  std::vector<cache::BlockId> unpin_;
  std::function<void()> wakeup_;
  mutable std::mutex stats_mu_;
  KvCacheStats stats_;
};

}  // namespace rapid::engine
