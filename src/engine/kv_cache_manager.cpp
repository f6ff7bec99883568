#include "engine/kv_cache_manager.h"

#include <algorithm>

#include "cache/page_io.h"
#include "common/error.h"
#include "common/log.h"

namespace rapid::engine {
namespace {
std::shared_ptr<cache::StateSnapshot> save_state(const model::PagedKvState& kv) {
  auto snap = std::make_shared<cache::StateSnapshot>();
  snap->position = kv.length();
  snap->bytes.resize(kv.recurrent_bytes());
  kv.save_recurrent(snap->bytes.data());
  return snap;
}
}  // namespace

KvCacheManager::KvCacheManager(model::Model& model, KvCacheOptions opts) : opts_(std::move(opts)) {
  // A hybrid's state is its KV pages plus a recurrent state that cannot be truncated: its
  // sequences' states come from the model, and the prefix cache keeps checkpoints of the recurrent
  // state beside the KV, within a budget taken out of the pool's.
  if (model.has_recurrent_state()) {
    state_model_ = &model;
    state_bytes_ = model.recurrent_state_bytes();
    if (opts_.prefix_cache) {
      checkpoint_budget_ = opts_.checkpoint_bytes ? std::min(opts_.checkpoint_bytes, opts_.pool_bytes / 2)
                                                  : opts_.pool_bytes / 4;
      opts_.pool_bytes -= checkpoint_budget_;
    }
  }
  cache::BlockShape shape = model.kv_block_shape(opts_.block_size);
  pool_ = std::make_shared<cache::BlockPool>(shape, opts_.pool_bytes);
  if (opts_.prefix_cache) radix_ = std::make_unique<cache::RadixCache>(*pool_);
  if (radix_ && opts_.on_events) radix_->record_events(true, state_model_ != nullptr);
  if (opts_.prefix_cache && !opts_.snapshot_dir.empty()) open_store(shape);
  publish();
}

// An unusable snapshot directory or key must not stop the server: it runs without persistence.
void KvCacheManager::open_store(const cache::BlockShape& shape) {
  try {
    cache::SnapshotStoreOptions so;
    so.dir = opts_.snapshot_dir;
    so.model_key = opts_.model_key;
    so.max_disk_bytes = opts_.snapshot_max_disk_bytes;
    so.encrypt = opts_.snapshot_encrypt;
    so.limits.block_tokens = uint64_t(shape.block_size);
    so.limits.block_bytes = shape.block_bytes();
    so.limits.state_bytes = state_bytes_;  // a hybrid's entries carry exactly its state, others none
    if (opts_.snapshot_max_tokens > 0) so.limits.max_tokens = uint64_t(opts_.snapshot_max_tokens);
    so.key = cache::load_or_create_cache_key(opts_.snapshot_key_file.empty() ? cache::default_cache_key_path()
                                                                              : opts_.snapshot_key_file);
    store_ = std::make_unique<cache::SnapshotStore>(std::move(so));
  } catch (const Error& e) {
    persist_disabled_ = e.what();
    log::warn(std::string("kv snapshots disabled (the server runs without them): ") + e.what());
  }
}

KvCacheManager::~KvCacheManager() {
  store_.reset();  // drains queued writes
  reclaim();
  radix_.reset();  // returns the tree's references before the pool goes
}

std::unique_ptr<model::PagedKvState> KvCacheManager::open(const std::vector<int32_t>& tokens, int64_t max_tokens,
                                                   int64_t* cached) {
  *cached = 0;
  last_ckpt_.reset();
  last_ckpt_kv_ = nullptr;
  if (state_model_) return open_hybrid(tokens, max_tokens, cached);
  auto kv = std::make_unique<model::PagedKvState>(pool_, max_tokens);
  if (!radix_ || tokens.size() < 2) return kv;
  const int64_t usable = int64_t(tokens.size()) - 1;  // one token must run to produce logits
  cache::PrefixMatch m = radix_->match_prefix(tokens);
  if (store_ && std::min<int64_t>(m.matched, usable) + opts_.block_size <= usable) {
    // Matched again either way: making room for the restored pages may have evicted cached
    // prefixes, the matched one included.
    restore_from_disk(tokens, m.matched);
    m = radix_->match_prefix(tokens);
  }
  int64_t take = std::min<int64_t>(m.matched, usable);
  if (take <= 0) return kv;
  std::vector<cache::BlockId> blocks(m.blocks.begin(), m.blocks.begin() + (take + opts_.block_size - 1) / opts_.block_size);
  kv->adopt_prefix(blocks, take);
  *cached = take;
  return kv;
}

// Resumes at the deepest checkpoint at or before the longest cached prefix of all but the last
// token (which must run for its logits): KV up to the checkpoint is adopted, the recurrent state
// restored; matched tokens past the checkpoint are recomputed (and not counted as cached).
std::unique_ptr<model::PagedKvState> KvCacheManager::open_hybrid(const std::vector<int32_t>& tokens, int64_t max_tokens,
                                                          int64_t* cached) {
  std::unique_ptr<model::SequenceState> st = state_model_->new_paged_state(pool_, max_tokens);
  auto* raw = dynamic_cast<model::PagedKvState*>(st.get());
  if (!raw) throw Error("the model's sequence state is not paged");
  st.release();
  std::unique_ptr<model::PagedKvState> kv(raw);
  if (!radix_ || tokens.size() < 2) return kv;
  const std::vector<int32_t> usable(tokens.begin(), tokens.end() - 1);
  cache::PrefixMatch m = radix_->match_prefix(usable);
  const int64_t have = m.state ? m.state->position : 0;
  if (store_ && have + opts_.block_size <= int64_t(usable.size()) && restore_hybrid_from_disk(usable, have))
    m = radix_->match_prefix(usable);
  if (!m.state) return kv;
  const int64_t take = m.state->position;
  std::vector<cache::BlockId> blocks(m.blocks.begin(), m.blocks.begin() + (take + opts_.block_size - 1) / opts_.block_size);
  kv->adopt_prefix(blocks, take);
  kv->restore_recurrent(m.state->bytes.data(), m.state->bytes.size());
  *cached = take;
  return kv;
}

// A disk entry is a whole prefix with its checkpoint at its end (only whole-prefix entries: the
// state is valid at the entry's last token, not at a shorter shared part).
bool KvCacheManager::restore_hybrid_from_disk(const std::vector<int32_t>& tokens, int64_t have) {
  std::optional<cache::SnapshotEntry> e = store_->lookup(tokens, size_t(have) + 1);
  if (!e || e->state.size() != state_bytes_) return false;  // the header check refuses other sizes
  const size_t bb = pool_->shape().block_bytes();
  if (!make_free(int64_t(e->pages.size() / bb))) return false;
  std::optional<std::vector<cache::BlockId>> blocks = cache::scatter_pages(*pool_, e->pages);
  if (!blocks) return false;
  auto snap = std::make_shared<cache::StateSnapshot>();
  snap->position = int64_t(e->tokens.size());
  snap->bytes = std::move(e->state);
  radix_->insert(e->tokens, *blocks, std::move(snap));
  for (cache::BlockId b : *blocks) pool_->decref(b);  // the tree holds them now
  radix_->evict_checkpoints(checkpoint_budget_);
  ++restored_entries_;
  restored_tokens_ += e->tokens.size();
  return true;
}

bool KvCacheManager::restore_from_disk(const std::vector<int32_t>& tokens, int64_t have) {
  size_t common = 0;
  std::optional<cache::SnapshotEntry> e = store_->lookup(tokens, size_t(have) + 1, &common);
  if (!e) return false;
  // Keep the shared part only (whole blocks up to the one holding its last token).
  const size_t bb = pool_->shape().block_bytes(), bs = size_t(opts_.block_size);
  e->tokens.resize(common);
  e->pages.resize(std::min(e->pages.size(), (common + bs - 1) / bs * bb));
  if (!make_free(int64_t(e->pages.size() / bb))) return false;
  std::optional<std::vector<cache::BlockId>> blocks = cache::scatter_pages(*pool_, e->pages);
  if (!blocks) return false;
  radix_->insert(e->tokens, *blocks);
  for (cache::BlockId b : *blocks) pool_->decref(b);  // the tree holds them now
  ++restored_entries_;
  restored_tokens_ += e->tokens.size();
  return true;
}

bool KvCacheManager::make_free(int64_t n) {
  if (int64_t(pool_->free_count()) >= n) return true;
  reclaim();  // publish() does it once per step; here only when short of blocks
  if (int64_t(pool_->free_count()) >= n) return true;
  if (radix_ && radix_->ensure_free(size_t(n))) return true;
  if (pinned_ == 0) return false;
  // Pages still waiting for the snapshot writer: let it finish so their blocks can go too.
  flush();
  return radix_ && radix_->ensure_free(size_t(n));
}

void KvCacheManager::reclaim() {
  std::vector<cache::BlockId> done;
  {
    std::lock_guard lk(unpin_mu_);
    done.swap(unpin_);
  }
  for (cache::BlockId b : done) pool_->decref(b);
  pinned_ -= int64_t(done.size());
}

void KvCacheManager::remember(const std::vector<int32_t>& tokens, const model::PagedKvState& kv) {
  if (!radix_ || kv.length() == 0) return;
  if (kv.length() > int64_t(tokens.size())) return;  // unverified drafts in the KV: never cache them
  std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + kv.length());
  if (!state_model_) {
    radix_->insert(prefix, kv.table().blocks());
    return;
  }
  std::shared_ptr<cache::StateSnapshot> snap = save_state(kv);
  radix_->insert(prefix, kv.table().blocks(), snap);
  radix_->evict_checkpoints(checkpoint_budget_);
  last_ckpt_ = std::move(snap);
  last_ckpt_kv_ = &kv;
}

// The checkpoint remember() just made for this sequence at this length, else a fresh copy.
// (open() forgets it: a new sequence may reuse a freed one's address.)
std::shared_ptr<cache::StateSnapshot> KvCacheManager::snapshot_of(const model::PagedKvState& kv) {
  if (last_ckpt_ && last_ckpt_kv_ == &kv && last_ckpt_->position == kv.length()) return last_ckpt_;
  return save_state(kv);
}

void KvCacheManager::checkpoint(const std::vector<int32_t>& tokens, const model::PagedKvState& kv, bool boundary) {
  if (!state_model_ || !radix_ || kv.length() > int64_t(tokens.size())) return;
  if (boundary) {
    remember(tokens, kv);
    persist(tokens, kv);
    return;
  }
  if (opts_.checkpoint_interval <= 0) return;
  const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + kv.length());
  cache::PrefixMatch m = radix_->match_prefix(prefix, /*count=*/false);
  if (kv.length() - (m.state ? m.state->position : 0) >= opts_.checkpoint_interval) remember(tokens, kv);
}

void KvCacheManager::persist(const std::vector<int32_t>& tokens, const model::PagedKvState& kv) {
  if (!store_ || kv.length() < opts_.snapshot_min_tokens || kv.length() > int64_t(tokens.size())) return;
  std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + kv.length());
  if (store_->contains(prefix)) return;
  cache::SnapshotEntry e;
  e.tokens = std::move(prefix);
  std::shared_ptr<const cache::StateSnapshot> snap;
  if (state_model_) snap = snapshot_of(kv);  // the checkpoint remember() just made, as a rule
  // Full blocks are never written again (a sequence only appends past its length), so the writer
  // copies them later from the pool, pinned until then; a partly filled last block is still being
  // appended to and is copied now (one block).
  const std::vector<cache::BlockId>& blocks = kv.table().blocks();
  const size_t bs = size_t(opts_.block_size), full = size_t(kv.length()) / bs;
  const size_t used = std::min(blocks.size(), (size_t(kv.length()) + bs - 1) / bs);
  std::vector<cache::BlockId> pinned(blocks.begin(), blocks.begin() + full);
  std::vector<uint8_t> tail =
      cache::gather_pages(*pool_, std::vector<cache::BlockId>(blocks.begin() + full, blocks.begin() + used));
  for (cache::BlockId b : pinned) pool_->incref(b);
  pinned_ += int64_t(pinned.size());
  const cache::BlockPool* pool = pool_.get();
  cache::PageSource src;
  src.gather = [pool, pinned, tail = std::move(tail)] {
    std::vector<uint8_t> pages = cache::gather_pages(*pool, pinned, tail.size());
    pages.insert(pages.end(), tail.begin(), tail.end());
    return pages;
  };
  src.release = [this, pinned] {
    std::function<void()> wake;
    {
      std::lock_guard lk(unpin_mu_);
      unpin_.insert(unpin_.end(), pinned.begin(), pinned.end());
      wake = wakeup_;
    }
    if (wake) wake();
  };
  if (snap) src.state = [snap] { return snap->bytes; };  // immutable once made: copied by the writer
  if (!store_->put(std::move(e), std::move(src))) log::debug("kv snapshot queue full: entry dropped");
}

void KvCacheManager::purge() {
  if (store_) store_->purge();
  reclaim();
  if (radix_) radix_->evict(pool_->total_blocks());
  // A subscriber that missed some removals still ends with an empty index.
  send_events(radix_ && radix_->stats().nodes == 0);
  publish();
}

void KvCacheManager::send_events(bool cleared) {
  if (!radix_ || !opts_.on_events) return;
  std::vector<cache::KvEvent> ev = radix_->take_events();
  if (cleared) ev.push_back(cache::KvEvent{cache::KvEventKind::AllCleared, {}, std::nullopt, {}});
  if (!ev.empty()) opts_.on_events(std::move(ev));
}

std::vector<std::vector<int32_t>> KvCacheManager::sequences() const {
  return radix_ ? radix_->sequences() : std::vector<std::vector<int32_t>>{};
}

std::vector<std::vector<int32_t>> KvCacheManager::checkpoint_prefixes() const {
  return radix_ ? radix_->checkpoint_prefixes() : std::vector<std::vector<int32_t>>{};
}

void KvCacheManager::flush() {
  if (store_) {
    store_->set_foreground_busy(false);  // the engine waits here: nothing to give way to
    store_->flush();
  }
  reclaim();
}

void KvCacheManager::publish() {
  reclaim();
  send_events();
  KvCacheStats s;
  s.pool = pool_->stats();
  s.block_size = opts_.block_size;
  s.prefix_cache = radix_ != nullptr;
  if (radix_) s.radix = radix_->stats();
  s.persistent = store_ != nullptr;
  if (store_) s.snapshot_dir = store_->dir();  // disk stats are read live by stats()
  s.persist_disabled = persist_disabled_;
  s.restored_entries = restored_entries_;
  s.restored_tokens = restored_tokens_;
  s.state_bytes_per_seq = state_bytes_;
  s.checkpoint_budget = checkpoint_budget_;
  std::lock_guard lk(stats_mu_);
  stats_ = std::move(s);
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  {
    std::lock_guard lk(stats_mu_);
    s = stats_;
  }
  if (store_) s.disk = store_->stats();  // live: the background writer moves on between steps
  return s;
}

}  // namespace rapid::engine
