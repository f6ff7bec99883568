#include "cache/snapshot_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

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

constexpr char kMagic[8] = {'R', 'M', 'L', 'X', 'K', 'V', 'S', '1'};
constexpr uint32_t kFlagZstd = 1, kFlagState = 2;
constexpr const char* kExt = ".kvs";

#pragma pack(push, 1)
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t model_hash;
  uint64_t n_tokens;
  uint64_t pages_raw;
  uint64_t pages_stored;
  uint64_t state_bytes;
  uint64_t payload_hash;
  uint64_t header_hash;  // xxh64 of every byte above
};
#pragma pack(pop)
static_assert(sizeof(Header) == 72);

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Validates the fixed header against the file size; returns an error text or "".
std::string check_header(const Header& h, uint64_t file_size, uint64_t model_hash) {
  if (std::memcmp(h.magic, kMagic, 8) != 0) return "bad magic";
  if (XXH64(&h, offsetof(Header, header_hash), 0) != h.header_hash) return "header checksum mismatch";
  if (h.version != kSnapshotFormatVersion) return "unsupported version " + std::to_string(h.version);
  if (h.model_hash != model_hash) return "written for a different model key";
  if ((h.flags & ~(kFlagZstd | kFlagState)) != 0) return "unknown flags";
  uint64_t limit = file_size;
  if (h.n_tokens > limit / 4 || h.pages_stored > limit || h.state_bytes > limit)
    return "sizes exceed the file";
  if (sizeof(Header) + h.n_tokens * 4 + h.pages_stored + h.state_bytes != file_size)
    return "truncated or oversized (size does not match header)";
  if (!(h.flags & kFlagZstd) && h.pages_raw != h.pages_stored) return "inconsistent page sizes";
  if (h.pages_raw > (uint64_t(1) << 40)) return "implausible page size";
  return "";
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

void mkdirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      std::string d = dir.substr(0, i);
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
        throw FileError(d, std::string("cannot create cache directory: ") + std::strerror(errno));
    }
  }
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

std::string SnapshotStore::file_name(const std::vector<int32_t>& tokens) {
  return hex64(XXH64(tokens.data(), tokens.size() * sizeof(int32_t), 0)) + "-" +
         std::to_string(tokens.size()) + kExt;
}

uint64_t SnapshotStore::model_key_hash(const std::string& k) { return XXH64(k.data(), k.size(), 0); }

std::vector<uint8_t> SnapshotStore::encode(const SnapshotEntry& e, uint64_t model_hash, bool compress,
                                           int level) {
  std::vector<uint8_t> pages;
  const std::vector<uint8_t>* stored = &e.pages;
  uint32_t flags = e.state.empty() ? 0 : kFlagState;
  if (compress && !e.pages.empty()) {
    pages.resize(ZSTD_compressBound(e.pages.size()));
    size_t n = ZSTD_compress(pages.data(), pages.size(), e.pages.data(), e.pages.size(), level);
    if (!ZSTD_isError(n) && n < e.pages.size()) {  // keep raw pages when zstd does not shrink them
      pages.resize(n);
      stored = &pages;
      flags |= kFlagZstd;
    }
  }
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kSnapshotFormatVersion;
  h.flags = flags;
  h.model_hash = model_hash;
  h.n_tokens = e.tokens.size();
  h.pages_raw = e.pages.size();
  h.pages_stored = stored->size();
  h.state_bytes = e.state.size();
  std::vector<uint8_t> out(sizeof(Header) + e.tokens.size() * 4 + stored->size() + e.state.size());
  uint8_t* p = out.data() + sizeof(Header);
  if (!e.tokens.empty()) std::memcpy(p, e.tokens.data(), e.tokens.size() * 4);
  p += e.tokens.size() * 4;
  if (!stored->empty()) std::memcpy(p, stored->data(), stored->size());
  p += stored->size();
  if (!e.state.empty()) std::memcpy(p, e.state.data(), e.state.size());
  h.payload_hash = XXH64(out.data() + sizeof(Header), out.size() - sizeof(Header), 0);
  h.header_hash = XXH64(&h, offsetof(Header, header_hash), 0);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

std::optional<SnapshotEntry> SnapshotStore::decode(const uint8_t* data, size_t size, uint64_t model_hash,
                                                   std::string* why) {
  auto fail = [&](std::string w) -> std::optional<SnapshotEntry> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  if (size < sizeof(Header)) return fail("shorter than the header");
  Header h;
  std::memcpy(&h, data, sizeof h);
  if (std::string e = check_header(h, size, model_hash); !e.empty()) return fail(e);
  if (XXH64(data + sizeof(Header), size - sizeof(Header), 0) != h.payload_hash)
    return fail("payload checksum mismatch");
  SnapshotEntry e;
  const uint8_t* p = data + sizeof(Header);
  e.tokens.resize(h.n_tokens);
  if (h.n_tokens) std::memcpy(e.tokens.data(), p, h.n_tokens * 4);
  p += h.n_tokens * 4;
  if (h.flags & kFlagZstd) {
    unsigned long long content = ZSTD_getFrameContentSize(p, h.pages_stored);
    if (content != h.pages_raw) return fail("compressed pages do not match the header size");
    e.pages.resize(h.pages_raw);
    size_t n = ZSTD_decompress(e.pages.data(), e.pages.size(), p, h.pages_stored);
    if (ZSTD_isError(n) || n != h.pages_raw) return fail("zstd pages do not decompress");
  } else {
    e.pages.assign(p, p + h.pages_stored);
  }
  p += h.pages_stored;
  e.state.assign(p, p + h.state_bytes);
  return e;
}

SnapshotStore::SnapshotStore(SnapshotStoreOptions opt) : opt_(std::move(opt)) {
  if (opt_.dir.empty()) throw Error("snapshot store: empty directory");
  if (opt_.model_key.empty()) throw Error("snapshot store: empty model key");
  model_hash_ = model_key_hash(opt_.model_key);
  mkdirs(opt_.dir);
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

// Start-up index: headers and token ids only; pages stay on disk until a hit.
void SnapshotStore::scan() {
  DIR* d = ::opendir(opt_.dir.c_str());
  if (!d) throw FileError(opt_.dir, std::string("cannot open cache directory: ") + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) names.emplace_back(ent->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    std::string path = opt_.dir + "/" + name;
    if (name.find(".tmp") != std::string::npos) {  // an interrupted write: never complete
      ::unlink(path.c_str());
      continue;
    }
    if (!ends_with(name, kExt)) continue;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat sb{};
    Header h{};
    std::string why;
    IndexEntry ie;
    if (::fstat(fd, &sb) != 0 || uint64_t(sb.st_size) < sizeof(Header)) why = "shorter than the header";
    else if (!read_all(fd, &h, sizeof h, 0)) why = "unreadable header";
    else why = check_header(h, uint64_t(sb.st_size), model_hash_);
    if (why.empty()) {
      ie.tokens.resize(h.n_tokens);
      if (!read_all(fd, ie.tokens.data(), h.n_tokens * 4, sizeof(Header))) why = "unreadable tokens";
      else if (file_name(ie.tokens) != name) why = "file name does not match its tokens";
    }
    ::close(fd);
    if (!why.empty()) {
      log::warn("kv snapshot " + path + ": " + why + "; deleted");
      ::unlink(path.c_str());
      ++st_.corrupt_skipped;
      continue;
    }
    ie.size = uint64_t(sb.st_size);
    ie.last_access = uint64_t(sb.st_mtim.tv_sec) * 1000000000ull + uint64_t(sb.st_mtim.tv_nsec);
    clock_ = std::max(clock_, ie.last_access);
    st_.disk_bytes += ie.size;
    index_[name] = std::move(ie);
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
  std::vector<uint8_t> bytes = encode(e, model_hash_, opt_.compress, opt_.zstd_level);
  std::string name = file_name(e.tokens);
  std::string path = opt_.dir + "/" + name;
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw FileError(tmp, std::strerror(errno));
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
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw FileError(path, err);
  }
  if (int dfd = ::open(opt_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // make the rename itself durable
    ::close(dfd);
  }
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
  ::unlink((opt_.dir + "/" + name).c_str());
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
    std::string path = opt_.dir + "/" + best;
    std::string why;
    std::optional<SnapshotEntry> e;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat sb{};
    if (fd < 0 || ::fstat(fd, &sb) != 0) {
      why = "cannot open";
    } else {
      std::vector<uint8_t> buf(size_t(sb.st_size));
      if (!read_all(fd, buf.data(), buf.size(), 0)) why = "short read";
      else e = decode(buf.data(), buf.size(), model_hash_, &why);
      if (e && e->tokens != index_[best].tokens) { e.reset(); why = "tokens changed on disk"; }
      if (e) st_.bytes_read += buf.size();
    }
    if (fd >= 0) ::close(fd);
    if (!e) {
      ++st_.corrupt_skipped;
      drop_locked(best, why.c_str());
      continue;  // try the next best candidate
    }
    index_[best].last_access = ++clock_;
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // persist recency for the next start-up
    ++st_.hits;
    return e;
  }
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
