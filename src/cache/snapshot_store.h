// Disk store for prefix-cache entries so a restart does not lose the KV of long, shared prompts
// (system prompts, agent tool schemas). One file per entry under
//   <root>/<model-key>/<keyed hash of the tokens>-<n>.kvs  (root default: $XDG_CACHE_HOME or ~/.cache /rapid-mlx/kv)
// in the authenticated (optionally encrypted) format of snapshot_format.h.
// Trust: the directory must belong to this user and not be writable by group/others, and one
// store holds its lock (snapshot_dir.h); anything else is refused (the caller then runs without
// persistence). Every file is opened relative to the checked directory, never through a symlink.
// Writes are atomic (exclusive 0600 temp file in the same dir, fsync, rename, fsync dir) and done
// by a background thread from a bounded queue; flush() waits for it. Start-up reads only headers
// and token ids (the index, already authenticated); pages are read and verified on the first hit,
// after the header's sizes were checked against the model. A corrupt, forged, oversized, foreign
// or old-format entry is logged, deleted and never served. A disk cap evicts least recently used files.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_pool.h"
#include "cache/cache_key.h"
#include "cache/snapshot_dir.h"
#include "cache/snapshot_format.h"

namespace rapid::cache {

// Version of what a directory's KV bytes mean (the page layout), part of its name. The file
// format's own version is in each header: a directory's older-format files are purged on start-up.
inline constexpr uint32_t kSnapshotDirVersion = 1;

// Hex key naming the directory of one model's snapshots: KV from different weights, tokenizer,
// KV dtype or page layout must never be mixed.
std::string model_identity_key(const std::string& weights_hash, const std::string& tokenizer_hash,
                               KvDType kv_dtype, uint32_t format_version = kSnapshotDirVersion);
std::string default_cache_root();  // $XDG_CACHE_HOME/rapid-mlx/kv or ~/.cache/rapid-mlx/kv

// Pages of a queued entry that still live in memory the caller owns (pinned KV blocks), taken
// when the writer gets to the entry: the caller's thread never copies a whole prefix (tens of MB,
// ~20 ms for a 2k-token prompt) inside a request. `release` runs exactly once: after `gather`, or
// when the entry is dropped unwritten (queue full, purge), on whichever thread that happens.
struct PageSource {
  std::function<std::vector<uint8_t>()> gather;
  std::function<std::vector<uint8_t>()> state;  // optional: the entry's recurrent state, copied by the writer
  std::function<void()> release;
};

struct SnapshotStoreOptions {
  std::string dir;               // the model's directory (root + "/" + model_key); created 0700
  std::string model_key;         // from model_identity_key()
  CacheKey key;                  // from load_or_create_cache_key(): authenticates every file
  bool encrypt = false;          // tokens and pages as ciphertext on disk
  SnapshotLimits limits;         // what a header may claim (the model's context and KV shape)
  int64_t owner_uid = -1;        // who must own the directory; -1: this process's effective uid
  uint64_t max_disk_bytes = 0;   // 0 = unlimited
  bool compress = false;         // zstd the pages (see bench/cache_bench.cpp for whether it pays)
  int zstd_level = 1;
  size_t queue_limit = 64;       // put() refuses beyond this many pending entries
};

struct SnapshotStats {
  size_t entries = 0, pending = 0;
  uint64_t disk_bytes = 0, writes = 0, bytes_written = 0, hits = 0, misses = 0, bytes_read = 0;
  uint64_t corrupt_skipped = 0, evictions = 0, dropped = 0, old_format_purged = 0;
};

class SnapshotStore {
 public:
  // Throws FileError (path and reason) when the directory cannot be trusted or is in use.
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

  std::string file_name(const std::vector<int32_t>& tokens) const { return codec_->file_name(tokens); }
  const SnapshotCodec& codec() const { return *codec_; }

 private:
  struct IndexEntry {
    std::vector<int32_t> tokens;
    uint64_t size = 0;
    uint64_t last_access = 0;
  };
  void scan();
  // The entry's authenticated tokens from its header and first section; "" or why it is refused.
  std::string index_one(const std::string& name, IndexEntry& ie, bool* old_format);
  std::optional<SnapshotEntry> read_entry(const std::string& name, std::string* why);
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
  std::unique_ptr<SnapshotDir> dir_;
  std::unique_ptr<SnapshotCodec> codec_;
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
