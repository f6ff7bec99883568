#include "cache/snapshot_store.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/log.h"

namespace rapid::cache {

namespace {

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

bool read_all(int fd, void* buf, size_t n, off_t off) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, off);
    if (r <= 0) { if (r < 0 && errno == EINTR) continue; return false; }
    p += r; n -= size_t(r); off += r;
  }
  return true;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0) { if (errno == EINTR) continue; return false; }
    p += r; n -= size_t(r);
  }
  return true;
}

}  // namespace

std::string model_identity_key(const std::string& weights_hash, const std::string& tokenizer_hash,
                               KvDType kv_dtype, uint32_t format_version) {
  // Length-prefixed fields so ("ab","c") and ("a","bc") differ.
  std::string buf;
  for (const std::string* s : {&weights_hash, &tokenizer_hash}) {
    buf += std::to_string(s->size()) + ":" + *s + ";";
  }
  buf += std::string("kv=") + kv_dtype_name(kv_dtype) + ";v=" + std::to_string(format_version);
  return hex64(XXH64(buf.data(), buf.size(), 0x726170696dULL));
}

std::string default_cache_root() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/rapid-mlx/kv";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/rapid-mlx/kv";
}

SnapshotStore::SnapshotStore(SnapshotStoreOptions opt) : opt_(std::move(opt)) {
  if (opt_.model_key.empty()) throw Error("snapshot store: empty model key");
  if (opt_.key.bytes == CacheKey{}.bytes) throw Error("snapshot store: no key (load_or_create_cache_key)");
  if (opt_.max_disk_bytes && !opt_.limits.max_file_bytes) opt_.limits.max_file_bytes = opt_.max_disk_bytes;
  dir_ = std::make_unique<SnapshotDir>(opt_.dir, opt_.owner_uid >= 0 ? uid_t(opt_.owner_uid) : ::geteuid());
  codec_ = std::make_unique<SnapshotCodec>(opt_.key, opt_.model_key, opt_.limits);
  scan();
  writer_ = std::thread([this] { writer_loop(); });
}

SnapshotStore::~SnapshotStore() {
  {
    std::unique_lock lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

// One file's index entry: the header checked against the model before anything is allocated
// from it, then the tokens read and authenticated (first AEAD section).
std::string SnapshotStore::index_one(const std::string& name, IndexEntry& ie, bool* old_format) {
  struct stat sb{};
  std::string why;
  int fd = dir_->open_read(name, &sb, &why);
  if (fd < 0) return why;
  uint8_t hdr[SnapshotCodec::kHeaderBytes];
  if (uint64_t(sb.st_size) < sizeof hdr || !read_all(fd, hdr, sizeof hdr, 0)) {
    why = "shorter than the header";
  } else if (auto c = codec_->check_header(hdr, uint64_t(sb.st_size), &why); c == SnapshotCodec::HeaderCheck::Ok) {
    std::vector<uint8_t> prefix(SnapshotCodec::index_bytes(hdr));
    if (!read_all(fd, prefix.data(), prefix.size(), 0)) why = "unreadable tokens";
    else if (auto t = codec_->index_tokens(prefix, &why)) {
      if (codec_->file_name(*t) != name) why = "file name does not match its tokens";
      else ie.tokens = std::move(*t);
    }
  } else {
    *old_format = c == SnapshotCodec::HeaderCheck::OldFormat;
  }
  ::close(fd);
  ie.size = uint64_t(sb.st_size);
  ie.last_access = uint64_t(sb.st_mtim.tv_sec) * 1000000000ull + uint64_t(sb.st_mtim.tv_nsec);
  return why;
}

// Start-up index: headers and token ids only; pages stay on disk until a hit.
void SnapshotStore::scan() {
  uint64_t old = 0;
  for (const std::string& name : dir_->list()) {
    if (name.find(".tmp") != std::string::npos) {  // an interrupted write: never complete
      dir_->remove(name);
      continue;
    }
    if (!ends_with(name, ".kvs")) continue;
    IndexEntry ie;
    bool old_format = false;
    std::string why = index_one(name, ie, &old_format);
    if (old_format) {
      ++old;
      dir_->remove(name);
      continue;
    }
    if (!why.empty()) {
      log::warn("kv snapshot " + opt_.dir + "/" + name + ": " + why + "; deleted");
      dir_->remove(name);
      ++st_.corrupt_skipped;
      continue;
    }
    clock_ = std::max(clock_, ie.last_access);
    st_.disk_bytes += ie.size;
    index_[name] = std::move(ie);
  }
  if (old) {
    log::warn("kv snapshots in " + opt_.dir + ": deleted " + std::to_string(old) +
              " entries of the old unauthenticated format (version 1); they are rebuilt as prompts recur");
    st_.old_format_purged = old;
  }
  enforce_cap_locked("");
}

void SnapshotStore::release(Queued& q) {
  if (q.src.release) q.src.release();
  q.src = {};
}

bool SnapshotStore::put(SnapshotEntry e, PageSource src) {
  Queued q{std::move(e), std::move(src)};
  {
    std::unique_lock lk(mu_);
    if (queue_.size() < opt_.queue_limit) {
      queue_.push_back(std::move(q));
      lk.unlock();
      cv_.notify_one();
      return true;
    }
    ++st_.dropped;
  }
  release(q);
  return false;
}

void SnapshotStore::flush() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void SnapshotStore::writer_loop() {
  // Background work: compressing and checksumming tens of MB should not take a core from the
  // model's threads (on 2 cores it stalls every parallel region of the next request), yet must
  // not starve on a busy machine either: nice 10 (~10 % of a contended core) for this thread.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) { if (stop_) return; continue; }
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    // Every piece of work waits for a pause in the owner's computation, all of it bounded by one
    // deadline per entry (a crash loses at most a few seconds).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kMaxDeferMs);
    try {
      give_way(deadline);
      if (q.src.gather) q.e.pages = q.src.gather();
      if (q.src.state) q.e.state = q.src.state();
      release(q);
      write_one(q.e, deadline);
    } catch (const std::exception& ex) {
      release(q);
      log::warn(std::string("kv snapshot write failed: ") + ex.what());
    }
    lk.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void SnapshotStore::give_way(std::chrono::steady_clock::time_point deadline) const {
  while (fg_busy_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

void SnapshotStore::write_one(const SnapshotEntry& e, std::chrono::steady_clock::time_point deadline) {
  give_way(deadline);
  std::vector<uint8_t> bytes = codec_->encode(e, opt_.compress, opt_.zstd_level, opt_.encrypt);
  if (opt_.limits.max_file_bytes && bytes.size() > opt_.limits.max_file_bytes) {
    log::debug("kv snapshot of " + std::to_string(e.tokens.size()) + " tokens exceeds the disk limit: not written");
    return;  // it would be refused at the next start anyway
  }
  std::string name = file_name(e.tokens);
  std::string tmp = name + ".tmp." + std::to_string(::getpid());
  int fd = dir_->create(tmp);
  // In slices, each after a pause in the owner's steps: copying tens of MB into the page cache
  // in one go took a core from a request's prefill for tens of ms.
  constexpr size_t kSlice = 4u << 20;
  bool ok = true;
  for (size_t off = 0; ok && off < bytes.size(); off += kSlice) {
    give_way(deadline);
    ok = write_all(fd, bytes.data() + off, std::min(kSlice, bytes.size() - off));
  }
  give_way(deadline);
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || !dir_->rename(tmp, name)) {
    std::string err = std::strerror(errno);
    dir_->remove(tmp);
    throw FileError(opt_.dir + "/" + name, err);
  }
  dir_->sync();  // make the rename itself durable
  std::unique_lock lk(mu_);
  auto it = index_.find(name);
  if (it != index_.end()) st_.disk_bytes -= it->second.size;
  IndexEntry& ie = index_[name];
  ie.tokens = e.tokens;
  ie.size = bytes.size();
  ie.last_access = ++clock_;
  st_.disk_bytes += ie.size;
  ++st_.writes;
  st_.bytes_written += bytes.size();
  enforce_cap_locked(name);
}

void SnapshotStore::drop_locked(const std::string& name, const char* why) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  if (why) log::warn("kv snapshot " + opt_.dir + "/" + name + ": " + why + "; deleted");
  dir_->remove(name);
  st_.disk_bytes -= it->second.size;
  index_.erase(it);
}

void SnapshotStore::enforce_cap_locked(const std::string& keep) {
  if (opt_.max_disk_bytes == 0) return;
  while (st_.disk_bytes > opt_.max_disk_bytes) {
    auto victim = index_.end();
    for (auto it = index_.begin(); it != index_.end(); ++it)
      if (it->first != keep && (victim == index_.end() || it->second.last_access < victim->second.last_access))
        victim = it;
    if (victim == index_.end()) break;  // only the newest entry is left; keep it
    drop_locked(victim->first, nullptr);
    ++st_.evictions;
  }
}

bool SnapshotStore::contains(const std::vector<int32_t>& tokens) const {
  std::lock_guard lk(mu_);
  auto it = index_.find(file_name(tokens));
  if (it != index_.end() && it->second.tokens == tokens) return true;
  for (const auto& q : queue_)
    if (q.e.tokens == tokens) return true;
  return false;
}

std::optional<SnapshotEntry> SnapshotStore::lookup(const std::vector<int32_t>& tokens, size_t min_tokens,
                                                   size_t* common) {
  std::unique_lock lk(mu_);
  for (;;) {
    std::string best;
    size_t best_len = 0;
    for (auto& [name, ie] : index_) {
      if (common) {
        // Any shared prefix counts: KV at position i depends only on tokens 0..i.
        size_t n = std::min(ie.tokens.size(), tokens.size()), k = 0;
        while (k < n && ie.tokens[k] == tokens[k]) ++k;
        if (k >= min_tokens && k > best_len) {
          best = name;
          best_len = k;
        }
        continue;
      }
      if (ie.tokens.size() > tokens.size() || ie.tokens.size() < min_tokens ||
          (ie.tokens.size() <= best_len && !best.empty()))
        continue;
      if (std::equal(ie.tokens.begin(), ie.tokens.end(), tokens.begin())) {
        best = name;
        best_len = ie.tokens.size();
      }
    }
    if (common) *common = best_len;
    if (best.empty()) { ++st_.misses; return std::nullopt; }
    std::string why;
    std::optional<SnapshotEntry> e = read_entry(best, &why);
    if (e && e->tokens != index_[best].tokens) { e.reset(); why = "tokens changed on disk"; }
    if (!e) {
      ++st_.corrupt_skipped;
      drop_locked(best, why.c_str());
      continue;  // try the next best candidate
    }
    index_[best].last_access = ++clock_;
    dir_->touch(best);  // persist recency for the next start-up
    ++st_.hits;
    return e;
  }
}

// The whole file, read only after its header's sizes were checked against the model (a planted
// 3 GB file with a valid-looking header is refused before anything is allocated), then verified.
std::optional<SnapshotEntry> SnapshotStore::read_entry(const std::string& name, std::string* why) {
  struct stat sb{};
  int fd = dir_->open_read(name, &sb, why);
  if (fd < 0) return std::nullopt;
  std::optional<SnapshotEntry> e;
  uint8_t hdr[SnapshotCodec::kHeaderBytes];
  if (uint64_t(sb.st_size) < sizeof hdr || !read_all(fd, hdr, sizeof hdr, 0)) {
    *why = "shorter than the header";
  } else if (codec_->check_header(hdr, uint64_t(sb.st_size), why) == SnapshotCodec::HeaderCheck::Ok) {
    std::vector<uint8_t> buf(size_t(sb.st_size));
    if (!read_all(fd, buf.data(), buf.size(), 0)) *why = "short read";
    else if ((e = codec_->decode(buf, why))) st_.bytes_read += buf.size();
  }
  ::close(fd);
  return e;
}

void SnapshotStore::purge() {
  std::unique_lock lk(mu_);
  std::deque<Queued> dropped = std::move(queue_);
  queue_.clear();
  lk.unlock();
  for (Queued& q : dropped) release(q);
  lk.lock();
  idle_cv_.wait(lk, [&] { return !busy_; });
  while (!index_.empty()) drop_locked(index_.begin()->first, nullptr);
  st_.disk_bytes = 0;
}

SnapshotStats SnapshotStore::stats() const {
  std::unique_lock lk(mu_);
  SnapshotStats s = st_;
  s.entries = index_.size();
  s.pending = queue_.size() + (busy_ ? 1 : 0);
  return s;
}

}  // namespace rapid::cache
