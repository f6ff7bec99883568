// Disk snapshot store: round trip through a fresh store object, corruption / truncation / foreign
// model key detection, 0600 modes, LRU disk cap, purge, and a kill -9 crash test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <atomic>
#include <random>
#include <thread>

#include "cache/page_io.h"
#include "cache/radix_cache.h"
#include "cache/snapshot_store.h"
#include "cache_temp_dir.h"

namespace fs = std::filesystem;
using namespace rapid::cache;

namespace {
using TempDir = CacheTempDir;

SnapshotEntry make_entry(std::mt19937& rng, size_t n_tokens, size_t page_bytes, size_t state_bytes,
                         bool compressible = false) {
  SnapshotEntry e;
  for (size_t i = 0; i < n_tokens; ++i) e.tokens.push_back(int32_t(rng() % 50000));
  e.pages.resize(page_bytes);
  for (size_t i = 0; i < page_bytes; ++i) e.pages[i] = compressible ? uint8_t(i / 64) : uint8_t(rng());
  e.state.resize(state_bytes);
  for (auto& b : e.state) b = uint8_t(rng());
  return e;
}

CacheKey test_key(uint8_t fill = 0x11) {
  CacheKey k;
  k.bytes.fill(fill);
  return k;
}

SnapshotStoreOptions opts(const fs::path& root, const std::string& key = "modelA") {
  SnapshotStoreOptions o;
  o.dir = (root / key).string();
  o.model_key = key;
  o.key = test_key();
  return o;
}

std::vector<fs::path> kvs_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kvs") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST(CacheSnapshot, ModelIdentityKeySeparatesEveryField) {
  std::string k = model_identity_key("w", "t", KvDType::F16);
  EXPECT_EQ(k.size(), 16u);
  EXPECT_EQ(k, model_identity_key("w", "t", KvDType::F16));
  EXPECT_NE(k, model_identity_key("w2", "t", KvDType::F16));
  EXPECT_NE(k, model_identity_key("w", "t2", KvDType::F16));
  EXPECT_NE(k, model_identity_key("w", "t", KvDType::BF16));
  EXPECT_NE(k, model_identity_key("w", "t", KvDType::F16, 2));
  EXPECT_NE(model_identity_key("ab", "c", KvDType::F16), model_identity_key("a", "bc", KvDType::F16));
  EXPECT_NE(default_cache_root().find("rapid-mlx/kv"), std::string::npos);
}

TEST(CacheSnapshot, RoundTripThroughNewStoreWithModes) {
  TempDir td;
  std::mt19937 rng(1);
  std::vector<SnapshotEntry> entries;
  for (bool compress : {false, true}) {
    auto o = opts(td.path);
    o.compress = compress;
    SnapshotStore s(o);
    for (int i = 0; i < 4; ++i) {
      entries.push_back(make_entry(rng, 10 + i * 7, 3000 + i * 1000, i % 2 ? 100 : 0, i >= 2));
      ASSERT_TRUE(s.put(entries.back()));
    }
    s.flush();
    EXPECT_EQ(s.stats().entries, entries.size());
  }
  SnapshotStore s2(opts(td.path));  // fresh object: index rebuilt from disk
  EXPECT_EQ(s2.stats().entries, entries.size());
  for (auto& e : entries) {
    std::vector<int32_t> q = e.tokens;
    q.push_back(7);  // a longer query finds the stored prefix
    auto got = s2.lookup(q);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == e);
  }
  EXPECT_FALSE(s2.lookup({1, 2, 3}));
  EXPECT_EQ(s2.stats().hits, entries.size());
  struct stat sb{};
  for (auto& f : kvs_files(td.path / "modelA")) {
    ASSERT_EQ(::stat(f.c_str(), &sb), 0);
    EXPECT_EQ(sb.st_mode & 0777, 0600u) << f;
  }
  ASSERT_EQ(::stat((td.path / "modelA").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0700u);
  s2.purge();
  EXPECT_EQ(s2.stats().entries, 0u);
  EXPECT_TRUE(kvs_files(td.path / "modelA").empty());
}

TEST(CacheSnapshot, LongestStoredPrefixWins) {
  TempDir td;
  std::mt19937 rng(2);
  SnapshotStore s(opts(td.path));
  SnapshotEntry a = make_entry(rng, 20, 100, 0);
  SnapshotEntry b = a;
  b.tokens.resize(10);
  b.pages.assign(50, 9);
  s.put(a);
  s.put(b);
  s.flush();
  auto q = a.tokens;
  q.push_back(1);
  EXPECT_EQ(s.lookup(q)->tokens.size(), 20u);
  q[15] ^= 1;
  auto got = s.lookup(q);
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got == b);
}

// Every kind of damage is detected, logged, deleted and never served.
TEST(CacheSnapshot, CorruptTruncatedAndForeignEntriesAreSkipped) {
  std::mt19937 rng(3);
  for (int kind = 0; kind < 5; ++kind) {
    TempDir td;
    SnapshotEntry e = make_entry(rng, 32, 4096, 64);
    {
      SnapshotStore s(opts(td.path));
      s.put(e);
      s.flush();
    }
    auto files = kvs_files(td.path / "modelA");
    ASSERT_EQ(files.size(), 1u);
    fs::path f = files[0];
    auto size = fs::file_size(f);
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    auto flip = [&](std::streamoff off) {
      io.seekg(off);
      char c;
      io.read(&c, 1);
      c ^= 0x10;
      io.seekp(off);
      io.write(&c, 1);
    };
    SnapshotStoreOptions o = opts(td.path);
    switch (kind) {
      case 0: flip(std::streamoff(size - 10)); break;   // page/state byte: payload checksum
      case 1: flip(40); break;                           // header field (page bytes): sizes disagree
      case 2: io.close(); fs::resize_file(f, size - 100); break;  // truncated
      case 3: flip(88 + 4); break;                       // token id: the index's tag
      case 4: o = opts(td.path, "modelB"); fs::rename(td.path / "modelA", td.path / "modelB"); break;
    }
    if (io.is_open()) io.close();
    SnapshotStore s(o);
    auto q = e.tokens;
    EXPECT_FALSE(s.lookup(q)) << "kind " << kind;
    EXPECT_GE(s.stats().corrupt_skipped, 1u) << "kind " << kind;
    EXPECT_TRUE(kvs_files(o.dir).empty()) << "kind " << kind;
  }
}

TEST(CacheSnapshot, DiskCapEvictsLeastRecentlyUsed) {
  TempDir td;
  std::mt19937 rng(4);
  auto o = opts(td.path);
  std::vector<SnapshotEntry> es;
  for (int i = 0; i < 4; ++i) es.push_back(make_entry(rng, 8, 1000, 0));
  uint64_t one = SnapshotCodec(o.key, o.model_key).encode(es[0], false, 1, false).size();
  o.max_disk_bytes = one * 3;
  SnapshotStore s(o);
  for (int i = 0; i < 3; ++i) { s.put(es[i]); s.flush(); }
  ASSERT_TRUE(s.lookup(es[0].tokens));  // 0 is now more recent than 1
  s.put(es[3]);
  s.flush();
  SnapshotStats st = s.stats();
  EXPECT_EQ(st.entries, 3u);
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_LE(st.disk_bytes, o.max_disk_bytes);
  EXPECT_FALSE(s.lookup(es[1].tokens));
  EXPECT_TRUE(s.lookup(es[0].tokens));
  EXPECT_TRUE(s.lookup(es[2].tokens));
  EXPECT_TRUE(s.lookup(es[3].tokens));
  EXPECT_EQ(kvs_files(o.dir).size(), 3u);
}

TEST(CacheSnapshot, QueueBoundDropsInsteadOfGrowing) {
  TempDir td;
  std::mt19937 rng(5);
  auto o = opts(td.path);
  o.queue_limit = 1;
  SnapshotStore s(o);
  int accepted = 0;
  for (int i = 0; i < 20; ++i) accepted += s.put(make_entry(rng, 4, 200000, 0));
  s.flush();
  SnapshotStats st = s.stats();
  EXPECT_EQ(st.writes, uint64_t(accepted));
  EXPECT_EQ(st.dropped, uint64_t(20 - accepted));
  EXPECT_EQ(st.entries, size_t(accepted));
}

// A child writes snapshots in a loop and reports each flushed one through a pipe; it is killed
// with SIGKILL while still writing. Every reported entry must be found intact and nothing corrupt
// may be served.
TEST(CacheSnapshot, SurvivesKillDashNineMidWrite) {
  TempDir td;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::mt19937 rng(6);
    SnapshotStore s(opts(td.path));
    for (uint32_t i = 0;; ++i) {
      SnapshotEntry e = make_entry(rng, 16, 1 << 20, 32);
      e.tokens[0] = int32_t(i);
      s.put(e);
      s.flush();
      if (::write(fds[1], &i, sizeof i) != sizeof i) ::_exit(1);
      s.put(make_entry(rng, 16, 4 << 20, 0));  // keep a large write in flight
    }
  }
  ::close(fds[1]);
  uint32_t got = 0, n = 0;
  while (n < 5 && ::read(fds[0], &got, sizeof got) == sizeof got) ++n;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  // Drain what the child reported before it died.
  while (::read(fds[0], &got, sizeof got) == sizeof got) ++n;
  ::close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_GE(n, 5u);

  SnapshotStore s(opts(td.path));
  for (auto& e : fs::directory_iterator(td.path / "modelA"))
    if (e.path().filename() != SnapshotDir::kLockName) {
      EXPECT_EQ(e.path().extension(), ".kvs") << "left-over temp file " << e.path();
    }
  std::mt19937 rng(6);  // regenerate the child's sequence to know every reported entry
  for (uint32_t i = 0; i < n; ++i) {
    SnapshotEntry e = make_entry(rng, 16, 1 << 20, 32);
    e.tokens[0] = int32_t(i);
    auto back = s.lookup(e.tokens);
    ASSERT_TRUE(back) << "flushed entry " << i << " lost";
    EXPECT_TRUE(*back == e) << "entry " << i;
    make_entry(rng, 16, 4 << 20, 0);
  }
  EXPECT_EQ(s.stats().corrupt_skipped, 0u);  // atomic rename: a torn write is never visible
}

// Radix cache → disk → a new process's pool and tree: the restored blocks hold the same bytes.
TEST(CacheSnapshot, PagesRestoreIntoAFreshPoolAndTree) {
  TempDir td;
  BlockShape sh;
  sh.num_layers = 2; sh.kv_heads = 2; sh.head_dim = 8; sh.block_size = 4; sh.dtype = KvDType::BF16;
  std::vector<int32_t> toks{5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  std::vector<uint8_t> original;
  {
    BlockPool pool(sh, sh.block_bytes() * 8);
    RadixCache rc(pool);
    BlockTable t(4);
    std::mt19937 rng(9);
    for (size_t i = 0; i < toks.size(); ++i) {
      auto slot = t.append_token(pool);
      ASSERT_TRUE(slot);
      for (size_t k = 0; k < sh.block_bytes(); k += 7) pool.data(slot->block)[k] ^= uint8_t(rng());
    }
    rc.insert(toks, t.blocks());
    t.release(pool);
    PrefixMatch m = rc.match_prefix(toks);
    original = gather_pages(pool, m.blocks);
    SnapshotStore s(opts(td.path));
    s.put(SnapshotEntry{toks, original, {}});
  }
  BlockPool pool(sh, sh.block_bytes() * 8);
  RadixCache rc(pool);
  SnapshotStore s(opts(td.path));
  auto e = s.lookup(toks);
  ASSERT_TRUE(e);
  auto blocks = scatter_pages(pool, e->pages);
  ASSERT_TRUE(blocks);
  ASSERT_EQ(blocks->size(), 3u);
  rc.insert(e->tokens, *blocks);
  for (BlockId b : *blocks) pool.decref(b);  // the tree keeps its own references
  PrefixMatch m = rc.match_prefix(toks);
  EXPECT_EQ(m.matched, 10);
  EXPECT_EQ(gather_pages(pool, m.blocks), original);
  EXPECT_FALSE(scatter_pages(pool, std::vector<uint8_t>(sh.block_bytes() * 6)));  // only 5 free
  EXPECT_FALSE(scatter_pages(pool, std::vector<uint8_t>(sh.block_bytes() + 1)));
  EXPECT_EQ(pool.free_count(), 5u);
}

// Pages handed over as a PageSource are gathered by the writer (not the caller), land on disk
// byte for byte, and the source is released exactly once whether the entry is written, refused
// by a full queue, or dropped by purge() — what lets the engine pin pool blocks for the writer.
TEST(CacheSnapshot, DeferredPagesAreGatheredByTheWriterAndReleasedOnce) {
  TempDir td;
  std::mt19937 rng(11);
  auto o = opts(td.path);
  o.queue_limit = 1;
  SnapshotStore s(o);
  std::atomic<int> gathered{0}, released[3] = {0, 0, 0};
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> gathered_on_caller{false};
  auto source = [&](const std::vector<uint8_t>& pages, int i) {
    PageSource src;
    src.gather = [&, pages] {
      if (std::this_thread::get_id() == caller) gathered_on_caller = true;
      ++gathered;
      return pages;
    };
    src.release = [&, i] { ++released[i]; };
    return src;
  };
  SnapshotEntry a = make_entry(rng, 8, 4096, 0), b = make_entry(rng, 9, 4096, 0), c = make_entry(rng, 10, 4096, 0);
  const std::vector<uint8_t> a_pages = a.pages;
  a.pages.clear();
  // Hold the writer back (as while the engine steps), so the queue really fills.
  s.set_foreground_busy(true);
  ASSERT_TRUE(s.put(a, source(a_pages, 0)));
  // The writer may already have taken `a` (it then waits, busy): fill the one queue slot with b.
  while (!s.put(b, source(b.pages, 1))) {
    EXPECT_EQ(released[1].load(), 1);  // refused: released at once
    released[1] = 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(s.put(c, source(c.pages, 2)));  // queue full
  EXPECT_EQ(released[2].load(), 1);
  s.set_foreground_busy(false);
  s.flush();
  EXPECT_FALSE(gathered_on_caller.load());
  EXPECT_EQ(released[0].load(), 1);
  EXPECT_EQ(released[1].load(), 1);
  auto got = s.lookup(a.tokens);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->pages, a_pages);
  // purge() drops what is still queued: released without being gathered.
  s.set_foreground_busy(true);
  const int before = gathered.load();
  SnapshotEntry d = make_entry(rng, 11, 4096, 0), e = make_entry(rng, 12, 4096, 0);
  std::atomic<int> rd{0}, re{0};
  PageSource sd, se;
  sd.gather = [&] { ++gathered; return d.pages; };
  sd.release = [&] { ++rd; };
  se.gather = [&] { ++gathered; return e.pages; };
  se.release = [&] { ++re; };
  s.put(d, sd);
  s.put(e, se);
  s.purge();  // waits for an entry the writer already holds, deleting everything
  EXPECT_EQ(rd.load(), 1);
  EXPECT_EQ(re.load(), 1);
  EXPECT_LE(gathered.load(), before + 1);  // at most the one the writer had taken
  s.set_foreground_busy(false);
  s.flush();
  EXPECT_EQ(s.stats().entries, 0u);
}

// A hybrid's recurrent-state checkpoint rides in the authenticated second section: a byte flipped
// inside the state (not the tag) is refused on the hit with the file's path and the reason, and
// the entry is deleted; an entry whose state is not this model's size is refused at start-up
// (header check) before anything is read. The deferred state source is copied by the writer.
TEST(CacheSnapshot, RecurrentStateIsAuthenticatedAndSizeChecked) {
  std::mt19937 rng(9);
  TempDir td;
  SnapshotEntry e = make_entry(rng, 40, 4096, 1000);
  SnapshotStoreOptions o = opts(td.path);
  o.limits.state_bytes = 1000;
  {
    SnapshotStore s(o);
    SnapshotEntry shell = e;
    shell.pages.clear();
    shell.state.clear();
    PageSource src;
    src.gather = [&] { return e.pages; };
    src.state = [&] { return e.state; };
    ASSERT_TRUE(s.put(shell, src));
    s.flush();
  }
  {
    SnapshotStore s(o);  // intact: the state comes back bit for bit
    auto back = s.lookup(e.tokens);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->state, e.state);
  }
  auto files = kvs_files(td.path / "modelA");
  ASSERT_EQ(files.size(), 1u);
  const fs::path f = files[0];
  {
    SnapshotStoreOptions other = o;
    other.limits.state_bytes = 2000;  // another hybrid's state size
    testing::internal::CaptureStderr();
    SnapshotStore s(other);
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(s.stats().entries, 0u);
    EXPECT_NE(log.find(f.filename().string()), std::string::npos) << log;
    EXPECT_NE(log.find("recurrent state of 1000 bytes; this model's is 2000"), std::string::npos) << log;
  }
  EXPECT_TRUE(kvs_files(td.path / "modelA").empty());  // refused and deleted
  {
    SnapshotStore s(o);
    s.put(e);
    s.flush();
  }
  files = kvs_files(td.path / "modelA");
  ASSERT_EQ(files.size(), 1u);
  {
    const auto size = fs::file_size(files[0]);
    std::fstream io(files[0], std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff off = std::streamoff(size - SnapshotCodec::kTagBytes - 500);  // mid-state
    io.seekg(off);
    char c;
    io.read(&c, 1);
    c ^= 0x01;
    io.seekp(off);
    io.write(&c, 1);
  }
  SnapshotStore s(o);
  EXPECT_EQ(s.stats().entries, 1u);  // the index (section 1) is intact
  testing::internal::CaptureStderr();
  EXPECT_FALSE(s.lookup(e.tokens));
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find(files[0].string()), std::string::npos) << log;
  EXPECT_NE(log.find("authentication failed"), std::string::npos) << log;
  EXPECT_EQ(s.stats().corrupt_skipped, 1u);
  EXPECT_TRUE(kvs_files(td.path / "modelA").empty());
}
