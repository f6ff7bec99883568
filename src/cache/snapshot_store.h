// Disk store for prefix-cache entries so a restart does not lose the KV of long, shared prompts
// (system prompts, agent tool schemas). One file per entry under
//   <root>/<model-key>/<xxh64(tokens)>.kvs     (root default: $XDG_CACHE_HOME or ~/.cache /rapid-mlx/kv)
// File layout (little-endian, see docs/cache.md): a 72-byte header {magic "RMLXKVS1", version,
// flags (zstd, has-state), xxh64(model key), n_tokens, raw/stored page bytes, state bytes,
// xxh64(payload), xxh64(header)} then int32 tokens, the KV pages (optionally zstd) and the
// recurrent state bytes.
// Writes are atomic (0600 temp file in the same dir, fsync, rename, fsync dir) and done by a
// background thread from a bounded queue; flush() waits for it. Start-up reads only headers and
// token ids (the index); pages are read and checksummed on the first hit. A corrupt, truncated or
// foreign entry is logged, deleted and never served. A disk cap evicts least recently used files.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_pool.h"

namespace rapid::cache {

inline constexpr uint32_t kSnapshotFormatVersion = 1;

// Hex key naming the directory of one model's snapshots: KV from different weights, tokenizer,
// KV dtype or file format must never be mixed.
std::string model_identity_key(const std::string& weights_hash, const std::string& tokenizer_hash,
                               KvDType kv_dtype, uint32_t format_version = kSnapshotFormatVersion);
std::string default_cache_root();  // $XDG_CACHE_HOME/rapid-mlx/kv or ~/.cache/rapid-mlx/kv

struct SnapshotEntry {
  std::vector<int32_t> tokens;  // the prefix
  std::vector<uint8_t> pages;   // KV pages of that prefix, in BlockPool block layout
  std::vector<uint8_t> state;   // optional recurrent-state snapshot valid after tokens.size()
  bool operator==(const SnapshotEntry&) const = default;
};

// Pages of a queued entry that still live in memory the caller owns (pinned KV blocks), taken
// when the writer gets to the entry: the caller's thread never copies a whole prefix (tens of MB,
// ~20 ms for a 2k-token prompt) inside a request. `release` runs exactly once: after `gather`, or
// when the entry is dropped unwritten (queue full, purge), on whichever thread that happens.
struct PageSource {
  std::function<std::vector<uint8_t>()> gather;
  std::function<void()> release;
};

struct SnapshotStoreOptions {
  std::string dir;               // the model's directory (root + "/" + model_key); created 0700
  std::string model_key;         // from model_identity_key()
  uint64_t max_disk_bytes = 0;   // 0 = unlimited
  bool compress = false;         // zstd the pages (see bench/cache_bench.cpp for whether it pays)
  int zstd_level = 1;
  size_t queue_limit = 64;       // put() refuses beyond this many pending entries
};

struct SnapshotStats {
  size_t entries = 0, pending = 0;
  uint64_t disk_bytes = 0, writes = 0, bytes_written = 0, hits = 0, misses = 0, bytes_read = 0;
  uint64_t corrupt_skipped = 0, evictions = 0, dropped = 0;
};

class SnapshotStore {
 public:
  explicit SnapshotStore(SnapshotStoreOptions opt);
  ~SnapshotStore();  // drains the queue, then stops the writer
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // Queue an entry for writing; false (and counted as dropped) if the queue is full. With `src`,
  // e.pages is filled from it by the writer.
  bool put(SnapshotEntry e, PageSource src = {});
  void flush();  // returns once every queued entry is on disk (or failed with a log line)
  // The stored entry with the longest token list that is a prefix of `tokens`, read and
  // verified now; corrupt candidates are deleted and the next best one is tried.
  // Entries shorter than `min_tokens` are not considered (the caller already has that much).
  // With `common`, the entry sharing the longest prefix with `tokens` (at least min_tokens) is
  // returned whole and *common says how many of its leading tokens are usable.
  std::optional<SnapshotEntry> lookup(const std::vector<int32_t>& tokens, size_t min_tokens = 1,
                                      size_t* common = nullptr);
  // Whether an entry for exactly these tokens is on disk or queued (avoids rewriting it).
  bool contains(const std::vector<int32_t>& tokens) const;
  void purge();  // drop the queue and delete every entry
  // The owner is computing (a model step is running or due): the writer does each piece of an
  // entry's work (copying its pages, encoding, each 4 MB written, fsync) only while this is clear,
  // or once the entry has waited kMaxDeferMs, so its copies and checksums do not take a core from
  // the model.
  void set_foreground_busy(bool busy) { fg_busy_.store(busy, std::memory_order_relaxed); }
  static constexpr int kMaxDeferMs = 2000;
  SnapshotStats stats() const;
  const std::string& dir() const { return opt_.dir; }

  static std::string file_name(const std::vector<int32_t>& tokens);
  static uint64_t model_key_hash(const std::string& model_key);  // stored in every header
  // Parse and verify a whole file image; nullopt with `why` set when it must not be served.
  static std::optional<SnapshotEntry> decode(const uint8_t* data, size_t size, uint64_t model_hash,
                                             std::string* why);
  static std::vector<uint8_t> encode(const SnapshotEntry& e, uint64_t model_hash, bool compress,
                                     int level);

 private:
  struct IndexEntry {
    std::vector<int32_t> tokens;
    uint64_t size = 0;
    uint64_t last_access = 0;
  };
  void scan();
  void writer_loop();
  struct Queued {
    SnapshotEntry e;
    PageSource src;
  };
  static void release(Queued& q);
  void write_one(const SnapshotEntry& e, std::chrono::steady_clock::time_point deadline);
  // Sleeps while the owner computes (set_foreground_busy), until `deadline`.
  void give_way(std::chrono::steady_clock::time_point deadline) const;
  void enforce_cap_locked(const std::string& keep);
  void drop_locked(const std::string& name, const char* why);

  SnapshotStoreOptions opt_;
  uint64_t model_hash_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Queued> queue_;
  bool busy_ = false, stop_ = false;
  std::atomic<bool> fg_busy_{false};
  std::map<std::string, IndexEntry> index_;
  uint64_t clock_ = 0;
  SnapshotStats st_;
  std::thread writer_;
};

}  // namespace rapid::cache
