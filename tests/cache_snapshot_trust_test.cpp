// Snapshot store against a hostile disk (issue #15): a directory owned by someone else or
// writable by others, a symlink planted at the temp or entry path, a forged entry (another key,
// or the old format with correctly recomputed xxh64 checksums), a header claiming gigabytes, two
// stores on one directory, the key file's own checks, and encryption at rest.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "cache/cache_key.h"
#include "cache/snapshot_store.h"
#include "cache_temp_dir.h"
#include "common/error.h"

namespace fs = std::filesystem;
using namespace rapid::cache;

namespace {
using TempDir = CacheTempDir;

CacheKey key_of(uint8_t fill) {
  CacheKey k;
  k.bytes.fill(fill);
  return k;
}

SnapshotStoreOptions opts(const fs::path& root, uint8_t key = 0x21) {
  SnapshotStoreOptions o;
  o.dir = (root / "m").string();
  o.model_key = "m";
  o.key = key_of(key);
  return o;
}

SnapshotEntry entry(uint32_t seed, size_t n_tokens = 40, size_t page_bytes = 4096) {
  std::mt19937 rng(seed);
  SnapshotEntry e;
  for (size_t i = 0; i < n_tokens; ++i) e.tokens.push_back(int32_t(rng() % 50000));
  e.pages.resize(page_bytes);
  for (auto& b : e.pages) b = uint8_t(rng());
  return e;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
}

// Expects the constructor to refuse with a FileError whose reason contains `needle`.
void expect_refused(const SnapshotStoreOptions& o, const std::string& needle) {
  try {
    SnapshotStore s(o);
    ADD_FAILURE() << "store opened " << o.dir << "; expected refusal containing '" << needle << "'";
  } catch (const rapid::FileError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(CacheTrust, ForeignOwnedOrSharedDirectoryIsRefused) {
  TempDir td;
  SnapshotStoreOptions o = opts(td.path);
  { SnapshotStore s(o); }  // creates it, 0700, ours
  SnapshotStoreOptions other = o;
  other.owner_uid = int64_t(::geteuid()) + 1;  // as if the directory belonged to someone else
  expect_refused(other, "not by this user");
  if (::geteuid() == 0) {  // for real where we can: chown it to nobody
    ASSERT_EQ(::chown(o.dir.c_str(), 65534, 65534), 0);
    expect_refused(o, "owned by uid 65534");
    ASSERT_EQ(::chown(o.dir.c_str(), 0, 0), 0);
  }
  ::chmod(o.dir.c_str(), 0777);
  expect_refused(o, "writable by group or others");
  ::chmod(o.dir.c_str(), 0770);
  expect_refused(o, "writable by group or others");
  ::chmod(o.dir.c_str(), 0755);  // readable is the owner's choice; writable is not
  { SnapshotStore s(o); }
  // A symlink in place of the directory is not followed, even to a directory we own.
  fs::create_directory_symlink(o.dir, td.path / "link");
  SnapshotStoreOptions via_link = o;
  via_link.dir = (td.path / "link").string();
  expect_refused(via_link, "symlink");
}

TEST(CacheTrust, SecondStoreOnTheSameDirectoryIsRefusedUntilTheFirstCloses) {
  TempDir td;
  auto first = std::make_unique<SnapshotStore>(opts(td.path));
  expect_refused(opts(td.path), "in use by another");
  first->put(entry(1));
  first->flush();
  first.reset();
  SnapshotStore again(opts(td.path));
  EXPECT_EQ(again.stats().entries, 1u);
}

// The writer creates its temp file exclusively and without following links: a symlink planted
// at the temp path (or at the entry's name) never redirects a write to the file it points at.
TEST(CacheTrust, SymlinkedTempOrEntryPathDoesNotRedirectWrites) {
  TempDir td;
  fs::path victim = td.path / "victim";
  std::ofstream(victim) << "precious";
  SnapshotStoreOptions o = opts(td.path);
  auto s = std::make_unique<SnapshotStore>(o);
  SnapshotEntry a = entry(2), b = entry(3);
  const fs::path dir = o.dir;
  const fs::path tmp_a = dir / (s->file_name(a.tokens) + ".tmp." + std::to_string(::getpid()));
  fs::create_symlink(victim, tmp_a);
  fs::create_symlink(victim, dir / s->file_name(b.tokens));
  s->put(a);
  s->put(b);
  s->flush();
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_FALSE(s->contains(a.tokens));  // refused: the temp path was taken
  EXPECT_EQ(s->stats().writes, 1u);     // b replaced the link itself (rename does not follow it)
  EXPECT_FALSE(fs::is_symlink(dir / s->file_name(b.tokens)));
  auto got = s->lookup(b.tokens);
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got == b);
  // A symlinked entry found at start-up is refused, not read through.
  fs::remove(tmp_a);
  fs::create_symlink(dir / s->file_name(b.tokens), dir / s->file_name(a.tokens));
  s.reset();  // release the lock for a fresh scan of the same directory
  s = std::make_unique<SnapshotStore>(o);
  EXPECT_EQ(s->stats().entries, 1u);
  EXPECT_EQ(s->stats().corrupt_skipped, 1u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / s->file_name(a.tokens))));
  EXPECT_EQ(slurp(victim), "precious");
}

// An attacker who can write the directory but does not have the key: an entry sealed under
// another key (with the right name, valid sizes and a correct-looking layout) is refused at
// start-up and never served; the old format with recomputed xxh64 checksums is purged.
TEST(CacheTrust, ForgedEntriesAreNeverServed) {
  TempDir td;
  SnapshotStoreOptions o = opts(td.path, 0x21);
  SnapshotEntry real = entry(4), forged = entry(5);
  forged.tokens = real.tokens;  // same prompt, attacker's KV
  {
    SnapshotStore s(o);
    s.put(real);
    s.flush();
    SnapshotCodec attacker(key_of(0x99), o.model_key);
    write_file(fs::path(o.dir) / s.file_name(real.tokens), attacker.encode(forged, false, 1, false));
  }
  {
    SnapshotStore s(o);
    EXPECT_EQ(s.stats().entries, 0u);
    EXPECT_EQ(s.stats().corrupt_skipped, 1u);
    EXPECT_FALSE(s.lookup(real.tokens));
  }
  // Version 1 layout: 72-byte header, xxh64 of payload and header, as the old store wrote them.
  std::vector<uint8_t> v1(72 + forged.tokens.size() * 4 + forged.pages.size());
  uint64_t f[8] = {0};
  std::memcpy(v1.data(), "RMLXKVS1", 8);
  uint32_t ver_flags[2] = {1, 0};
  std::memcpy(v1.data() + 8, ver_flags, 8);
  f[0] = XXH64(o.model_key.data(), o.model_key.size(), 0);
  f[1] = forged.tokens.size();
  f[2] = f[3] = forged.pages.size();
  std::memcpy(v1.data() + 72, forged.tokens.data(), forged.tokens.size() * 4);
  std::memcpy(v1.data() + 72 + forged.tokens.size() * 4, forged.pages.data(), forged.pages.size());
  f[5] = XXH64(v1.data() + 72, v1.size() - 72, 0);
  std::memcpy(v1.data() + 16, f, 48);
  f[6] = XXH64(v1.data(), 64, 0);
  std::memcpy(v1.data() + 64, &f[6], 8);
  char old_name[64];
  std::snprintf(old_name, sizeof old_name, "%016llx-%zu.kvs",
                (unsigned long long)XXH64(forged.tokens.data(), forged.tokens.size() * 4, 0), forged.tokens.size());
  write_file(fs::path(o.dir) / old_name, v1);
  SnapshotStore s(o);
  EXPECT_EQ(s.stats().entries, 0u);
  EXPECT_EQ(s.stats().old_format_purged, 1u);
  EXPECT_FALSE(fs::exists(fs::path(o.dir) / old_name));
  EXPECT_FALSE(s.lookup(real.tokens));
}

// Header sizes are checked against the model (context, KV bytes per block) and the disk cap
// before anything is read or allocated: a 3 GB (sparse) file whose header matches its size is
// refused at start-up.
TEST(CacheTrust, OversizedHeaderIsRefusedBeforeAllocation) {
  TempDir td;
  SnapshotStoreOptions o = opts(td.path);
  o.limits.block_tokens = 16;
  o.limits.block_bytes = 1024;
  o.limits.max_tokens = 4096;
  SnapshotEntry e = entry(6, 40, 3 * 1024);  // 40 tokens = 3 blocks: fits the shape
  std::vector<uint8_t> good = SnapshotCodec(o.key, o.model_key, o.limits).encode(e, false, 1, false);
  std::string name;
  {
    SnapshotStore s(o);
    name = s.file_name(e.tokens);
    s.put(e);
    s.flush();
  }
  const fs::path path = fs::path(o.dir) / name;
  ASSERT_EQ(fs::file_size(path), good.size());
  SnapshotCodec codec(o.key, o.model_key, o.limits);
  std::string why;
  EXPECT_EQ(codec.check_header(good.data(), good.size(), &why), SnapshotCodec::HeaderCheck::Ok) << why;
  // Patch the header's page sizes (offsets 40/48) to 3 GB and make the file as long as it claims.
  const uint64_t huge = 3ull << 30;
  std::vector<uint8_t> big(good.begin(), good.begin() + 88);
  std::memcpy(big.data() + 40, &huge, 8);
  std::memcpy(big.data() + 48, &huge, 8);
  const uint64_t claimed = good.size() - 3 * 1024 + huge;
  EXPECT_EQ(codec.check_header(big.data(), claimed, &why), SnapshotCodec::HeaderCheck::Bad);
  EXPECT_NE(why.find("page bytes for 40 tokens"), std::string::npos) << why;
  uint64_t n_huge = 1ull << 40;  // token count beyond the context
  std::vector<uint8_t> many(good.begin(), good.begin() + 88);
  std::memcpy(many.data() + 32, &n_huge, 8);
  EXPECT_EQ(codec.check_header(many.data(), good.size(), &why), SnapshotCodec::HeaderCheck::Bad);
  EXPECT_NE(why.find("limit is 4096"), std::string::npos) << why;
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.write(reinterpret_cast<const char*>(big.data()), 88);
  }
  fs::resize_file(path, claimed);  // sparse: no disk used
  SnapshotStore s(o);
  EXPECT_EQ(s.stats().entries, 0u);
  EXPECT_EQ(s.stats().corrupt_skipped, 1u);
  EXPECT_FALSE(fs::exists(path));
  // Without a model shape, the disk cap still bounds what a header may claim.
  SnapshotCodec capped(o.key, o.model_key, SnapshotLimits{4096, 0, 0, 1 << 20, 1 << 20});
  EXPECT_EQ(capped.check_header(big.data(), claimed, &why), SnapshotCodec::HeaderCheck::Bad);
}

TEST(CacheTrust, EncryptedEntriesHoldNoPlaintextAndRoundTrip) {
  SnapshotEntry e = entry(7, 200, 8192);
  std::string tok_bytes(reinterpret_cast<const char*>(e.tokens.data()), e.tokens.size() * 4);
  std::string page_bytes(reinterpret_cast<const char*>(e.pages.data()), 256);
  for (bool encrypt : {false, true}) {
    TempDir d;
    SnapshotStoreOptions o = opts(d.path);
    o.encrypt = encrypt;
    std::string file;
    {
      SnapshotStore s(o);
      s.put(e);
      s.flush();
      file = slurp(fs::path(o.dir) / s.file_name(e.tokens));
    }
    EXPECT_EQ(file.find(tok_bytes) != std::string::npos, !encrypt);
    EXPECT_EQ(file.find(page_bytes) != std::string::npos, !encrypt);
    auto s = std::make_unique<SnapshotStore>(o);  // the index reads the (decrypted, authenticated) tokens
    ASSERT_EQ(s->stats().entries, 1u);
    auto back = s->lookup(e.tokens);
    ASSERT_TRUE(back);
    EXPECT_TRUE(*back == e);
    SnapshotStoreOptions wrong = o;
    wrong.key = key_of(0x55);
    s.reset();
    s = std::make_unique<SnapshotStore>(wrong);
    EXPECT_EQ(s->stats().entries, 0u);  // another install's key opens nothing
  }
}

TEST(CacheTrust, KeyFileIsCreatedPrivateAndCheckedOnLoad) {
  TempDir td;
  fs::path p = td.path / "cfg" / "rapid-mlx" / "kv-cache.key";
  CacheKey a = load_or_create_cache_key(p.string());
  CacheKey b = load_or_create_cache_key(p.string());
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, CacheKey{}.bytes);
  struct stat sb{};
  ASSERT_EQ(::stat(p.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_EQ(sb.st_size, 32);
  ASSERT_EQ(::stat(p.parent_path().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0700u);
  auto refused = [&](const fs::path& q, const std::string& needle) {
    try {
      load_or_create_cache_key(q.string());
      ADD_FAILURE() << q << " accepted";
    } catch (const rapid::FileError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ::chmod(p.c_str(), 0644);
  refused(p, "group/others");
  ::chmod(p.c_str(), 0600);
  fs::create_symlink(p, td.path / "link.key");
  refused(td.path / "link.key", "symlink");
  std::ofstream(td.path / "short.key") << "abc";
  ::chmod((td.path / "short.key").c_str(), 0600);
  refused(td.path / "short.key", "not 32 bytes");
}
