// KV-cache events from the radix prefix cache. Reference model: a subscriber's index rebuilt from
// the events alone (hash -> parent and tokens) must name exactly the block-aligned prefixes of the
// sequences the tree holds, through random inserts (with splits), evictions and full purges. Block
// hashes are checked against FNV-1a 64 computed here from its published constants, and the msgpack
// writer against byte strings from the MessagePack specification.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>

#include "cache/block_pool.h"
#include "cache/kv_events.h"
#include "cache/radix_cache.h"
#include "common/msgpack_writer.h"

using namespace rapid::cache;

namespace {
BlockShape shape(int32_t bs) {
  BlockShape s;
  s.num_layers = 1; s.kv_heads = 1; s.head_dim = 4; s.block_size = bs; s.dtype = KvDType::F32;
  return s;
}

// What a router knows: each live hash's full token prefix, rebuilt from the events in order.
struct Index {
  std::map<uint64_t, std::vector<Token>> prefix;
  void apply(const std::vector<KvEvent>& evs, int32_t bs) {
    for (const KvEvent& e : evs) {
      if (e.kind == KvEventKind::AllCleared) { prefix.clear(); continue; }
      if (e.kind == KvEventKind::Removed) {
        for (uint64_t h : e.block_hashes) ASSERT_EQ(prefix.erase(h), 1u) << "removed an unknown block";
        continue;
      }
      ASSERT_EQ(e.token_ids.size(), e.block_hashes.size() * size_t(bs));
      std::vector<Token> p;
      if (e.parent_hash) {
        ASSERT_TRUE(prefix.count(*e.parent_hash)) << "parent not stored before its child";
        p = prefix[*e.parent_hash];
      }
      for (size_t i = 0; i < e.block_hashes.size(); ++i) {
        p.insert(p.end(), e.token_ids.begin() + i * bs, e.token_ids.begin() + (i + 1) * bs);
        ASSERT_TRUE(prefix.emplace(e.block_hashes[i], p).second) << "block stored twice";
      }
    }
  }
  std::set<std::vector<Token>> prefixes() const {
    std::set<std::vector<Token>> s;
    for (auto& [h, p] : prefix) s.insert(p);
    return s;
  }
};

std::set<std::vector<Token>> tree_prefixes(const RadixCache& rc, int32_t bs) {
  std::set<std::vector<Token>> s;
  for (auto& seq : rc.sequences())
    for (size_t k = size_t(bs); k <= seq.size(); k += size_t(bs)) s.insert({seq.begin(), seq.begin() + k});
  return s;
}

// One step of a random workload over the alphabet {0, 1, 2} (so prefixes are shared and edges
// split): a query that often extends a part of an earlier one, inserted with its blocks (evicting
// when the pool is full). checkpoints: most inserts carry a recurrent checkpoint at a random
// position of the query, as a hybrid's do.
void random_insert(RadixCache& rc, BlockPool& pool, int32_t bs, std::mt19937& rng,
                   std::vector<std::vector<Token>>& seen, bool checkpoints) {
  std::vector<Token> q;
  if (!seen.empty() && rng() % 3) {
    auto& base = seen[rng() % seen.size()];
    q.assign(base.begin(), base.begin() + rng() % (base.size() + 1));
  }
  for (size_t extra = 1 + rng() % 10; extra > 0; --extra) q.push_back(Token(rng() % 3));
  PrefixMatch m = rc.match_prefix(q);
  BlockTable t(bs);
  t.adopt_prefix(pool, m.blocks, m.matched);
  bool ok = true;
  while (ok && t.length() < int64_t(q.size()))
    if (!t.append_token(pool)) ok = rc.ensure_free(1);
  if (ok) {
    std::shared_ptr<StateSnapshot> st;
    if (checkpoints && rng() % 4) {
      st = std::make_shared<StateSnapshot>();
      st->position = 1 + int64_t(rng() % q.size());
      st->bytes.resize(8 + rng() % 8);
    }
    rc.insert(q, t.blocks(), st);
    seen.push_back(q);
  }
  t.release(pool);
}

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (uint8_t b : bytes) { h ^= b; h *= 1099511628211ull; }
  return h;
}
}  // namespace

TEST(CacheKvEvents, IndexFromEventsEqualsTreeThroughInsertsEvictionsAndPurges) {
  for (int32_t bs : {1, 2, 4}) {
    BlockShape sh = shape(bs);
    BlockPool pool(sh, sh.block_bytes() * 40);  // small: inserts force evictions
    RadixCache rc(pool);
    rc.record_events(true);
    Index idx;
    std::vector<std::vector<Token>> seen;
    std::mt19937 rng(7 + bs);
    for (int step = 0; step < 600; ++step) {
      random_insert(rc, pool, bs, rng, seen, false);
      if (step % 97 == 96) rc.evict(SIZE_MAX);
      idx.apply(rc.take_events(), bs);
      ASSERT_FALSE(HasFailure()) << "bs=" << bs << " step=" << step;
      ASSERT_EQ(idx.prefixes(), tree_prefixes(rc, bs)) << "bs=" << bs << " step=" << step;
    }
    EXPECT_GT(rc.stats().evicted_blocks, 0u);
  }
}

// A hybrid's block is servable only with a recurrent checkpoint at or after its end on its path:
// the reference index is, by that definition, every block-aligned prefix of every checkpoint's
// prefix. Random inserts with checkpoints (splits, replacements), checkpoint-budget evictions,
// leaf evictions and purges; the index rebuilt from the events must equal it after every step.
TEST(CacheKvEvents, HybridAnnouncesExactlyTheBlocksACheckpointCovers) {
  for (int32_t bs : {1, 2, 4}) {
    BlockShape sh = shape(bs);
    BlockPool pool(sh, sh.block_bytes() * 40);
    RadixCache rc(pool);
    rc.record_events(true, /*need_checkpoint=*/true);
    Index idx;
    std::vector<std::vector<Token>> seen;
    std::mt19937 rng(11 + bs);
    size_t announced_max = 0;
    for (int step = 0; step < 800; ++step) {
      random_insert(rc, pool, bs, rng, seen, true);
      if (step % 5 == 4) rc.evict_checkpoints(size_t(rng() % 200));
      if (step % 131 == 130) rc.evict(SIZE_MAX);
      idx.apply(rc.take_events(), bs);
      ASSERT_FALSE(HasFailure()) << "bs=" << bs << " step=" << step;
      std::set<std::vector<Token>> want;
      for (auto& cp : rc.checkpoint_prefixes())
        for (size_t k = size_t(bs); k <= cp.size(); k += size_t(bs)) want.insert({cp.begin(), cp.begin() + k});
      ASSERT_EQ(idx.prefixes(), want) << "bs=" << bs << " step=" << step;
      announced_max = std::max(announced_max, want.size());
    }
    EXPECT_GT(rc.stats().evicted_checkpoints, 0u);
    EXPECT_GT(announced_max, 10u);  // the walk really announced blocks
  }
}

TEST(CacheKvEvents, NothingRecordedUntilAskedAndPartialBlocksNeverAnnounced) {
  BlockShape sh = shape(4);
  BlockPool pool(sh, sh.block_bytes() * 16);
  RadixCache rc(pool);
  auto put = [&](std::vector<Token> q) {
    BlockTable t(4);
    while (t.length() < int64_t(q.size())) ASSERT_TRUE(t.append_token(pool));
    rc.insert(q, t.blocks());
    t.release(pool);
  };
  put({1, 2, 3, 4, 5});
  EXPECT_TRUE(rc.take_events().empty());
  rc.record_events(true);
  put({9, 9, 9});  // no full block
  EXPECT_TRUE(rc.take_events().empty());
  put({7, 7, 7, 7, 8, 8, 8, 8, 6});
  std::vector<KvEvent> ev = rc.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].block_hashes.size(), 2u);
  EXPECT_FALSE(ev[0].parent_hash.has_value());
  EXPECT_EQ(ev[0].token_ids, (std::vector<Token>{7, 7, 7, 7, 8, 8, 8, 8}));
}

TEST(CacheKvEvents, BlockHashIsChainedFnv1aOfLittleEndianBytes) {
  const int32_t a[] = {1, 258, -1};
  std::vector<uint8_t> first = {1, 0, 0, 0, 2, 1, 0, 0, 0xff, 0xff, 0xff, 0xff};
  uint64_t h1 = fnv1a(first) & 0x7fffffffffffffffull;
  EXPECT_EQ(block_hash(std::nullopt, a, 3), h1);
  std::vector<uint8_t> second;
  for (int i = 0; i < 8; ++i) second.push_back(uint8_t(h1 >> (8 * i)));
  second.insert(second.end(), {5, 0, 0, 0});
  const int32_t b[] = {5};
  EXPECT_EQ(block_hash(h1, b, 1), fnv1a(second) & 0x7fffffffffffffffull);
  EXPECT_NE(block_hash(std::nullopt, b, 1), block_hash(h1, b, 1));
}

TEST(CacheKvEvents, MsgpackWriterMatchesTheSpecification) {
  auto enc = [](auto fn) {
    rapid::msgpack::Writer w;
    fn(w);
    return w.take();
  };
  using W = rapid::msgpack::Writer;
  EXPECT_EQ(enc([](W& w) { w.uint(127); }), std::string("\x7f", 1));
  EXPECT_EQ(enc([](W& w) { w.uint(128); }), std::string("\xcc\x80", 2));
  EXPECT_EQ(enc([](W& w) { w.uint(65536); }), std::string("\xce\x00\x01\x00\x00", 5));
  EXPECT_EQ(enc([](W& w) { w.uint(1ull << 32); }), std::string("\xcf\x00\x00\x00\x01\x00\x00\x00\x00", 9));
  EXPECT_EQ(enc([](W& w) { w.sint(-1); }), std::string("\xff", 1));
  EXPECT_EQ(enc([](W& w) { w.sint(-33); }), std::string("\xd0\xdf", 2));
  EXPECT_EQ(enc([](W& w) { w.sint(-129); }), std::string("\xd1\xff\x7f", 3));
  EXPECT_EQ(enc([](W& w) { w.float64(1.0); }), std::string("\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00", 9));
  EXPECT_EQ(enc([](W& w) { w.str("type"); }), std::string("\xa4type", 5));
  EXPECT_EQ(enc([](W& w) { w.str(std::string(32, 'x')); }), std::string("\xd9\x20", 2) + std::string(32, 'x'));
  EXPECT_EQ(enc([](W& w) { w.str(std::string(256, 'y')); }), std::string("\xda\x01\x00", 3) + std::string(256, 'y'));
  EXPECT_EQ(enc([](W& w) { w.bin("abc"); }), std::string("\xc4\x03" "abc", 5));
  EXPECT_EQ(enc([](W& w) { w.bin(std::string(300, 'z')); }), std::string("\xc5\x01\x2c", 3) + std::string(300, 'z'));
  EXPECT_EQ(enc([](W& w) { w.array(16); }), std::string("\xdc\x00\x10", 3));
  EXPECT_EQ(enc([](W& w) { w.map(1); w.nil(); w.boolean(true); }), std::string("\x81\xc0\xc3", 3));
  EXPECT_EQ(enc([](W& w) { w.map16(8); }), std::string("\xde\x00\x08", 3));
}
