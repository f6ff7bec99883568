// Random and mutated bytes as snapshot files never crash the loader (run under ASan/UBSan in CI):
// the store must skip them, and decode() must refuse them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cache/snapshot_store.h"

namespace fs = std::filesystem;
using namespace rapid::cache;

TEST(CacheFuzz, MutatedSnapshotsNeverCrashOrServe) {
  char tmpl[] = "/tmp/rapid_cache_fuzz_XXXXXX";
  fs::path root = ::mkdtemp(tmpl);
  std::mt19937 rng(42);
  SnapshotEntry e;
  for (int i = 0; i < 40; ++i) e.tokens.push_back(i * 3);
  e.pages.resize(2048);
  for (size_t i = 0; i < e.pages.size(); ++i) e.pages[i] = uint8_t(i / 16);
  e.state.assign(16, 7);
  CacheKey key;
  key.bytes.fill(3);
  SnapshotCodec codec(key, "m");
  std::vector<uint8_t> good_raw = codec.encode(e, false, 1, false);
  std::vector<uint8_t> good_z = codec.encode(e, true, 1, false);
  std::vector<uint8_t> good_enc = codec.encode(e, true, 1, true);
  std::string why;
  for (auto* g : {&good_raw, &good_z, &good_enc}) {
    std::vector<uint8_t> copy = *g;
    ASSERT_TRUE(codec.decode(copy, &why)) << why;
  }
  ASSERT_LT(good_z.size(), good_raw.size());
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> buf = iter % 3 == 0 ? good_z : iter % 3 == 1 ? good_raw : good_enc;
    switch (rng() % 4) {
      case 0: buf.resize(rng() % (buf.size() + 1)); break;
      case 1: for (int k = 1 + rng() % 8; k > 0; --k) buf[rng() % buf.size()] ^= uint8_t(1 + rng() % 255); break;
      case 2: buf.resize(rng() % 300); for (auto& b : buf) b = uint8_t(rng()); break;
      case 3: buf.insert(buf.begin() + rng() % buf.size(), uint8_t(rng())); break;
    }
    auto r = codec.decode(buf, &why);
    if (r) {  // only a byte-identical image may pass
      EXPECT_TRUE(*r == e) << "served a damaged entry, iteration " << iter;
    }
  }
  // Through the store: a directory full of junk files with valid-looking names.
  fs::path dir = root / "m";
  fs::create_directories(dir);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> buf = good_raw;
    if (i % 3 == 0) { buf.resize(rng() % 200); for (auto& b : buf) b = uint8_t(rng()); }
    else buf[rng() % buf.size()] ^= 0x5a;
    std::ofstream(dir / (codec.file_name(e.tokens) + std::to_string(i) + ".kvs"),
                  std::ios::binary).write(reinterpret_cast<char*>(buf.data()), std::streamsize(buf.size()));
  }
  {  // correct name and header, damaged page: found by the index, refused on the first hit
    std::vector<uint8_t> buf = good_raw;
    buf[buf.size() - 100] ^= 1;
    std::ofstream(dir / codec.file_name(e.tokens), std::ios::binary)
        .write(reinterpret_cast<char*>(buf.data()), std::streamsize(buf.size()));
  }
  SnapshotStoreOptions o;
  o.dir = dir.string();
  o.model_key = "m";
  o.key = key;
  SnapshotStore s(o);
  EXPECT_EQ(s.stats().entries, 1u);  // only the well-formed header survives the scan
  EXPECT_FALSE(s.lookup(e.tokens));
  EXPECT_EQ(s.stats().entries, 0u);
  EXPECT_EQ(s.stats().corrupt_skipped, 201u);
  fs::remove_all(root);
}
