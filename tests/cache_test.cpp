// Block pool and radix prefix cache, checked against simple reference models: a refcount map for
// the pool, and brute-force longest-common-prefix over the inserted sequences for the tree. KV
// "contents" are stamped with the token id written at each slot, so every block a match returns
// is checked to hold exactly the query's tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "cache/block_pool.h"
#include "cache/pool_sizing.h"
#include "cache/radix_cache.h"
#include "common/error.h"

using namespace rapid::cache;

namespace {
BlockShape small_shape(int32_t bs = 4, KvDType dt = KvDType::F32) {
  BlockShape s;
  s.num_layers = 2; s.kv_heads = 2; s.head_dim = 4; s.block_size = bs; s.dtype = dt;
  return s;
}
}  // namespace

// The serving policy, against figures worked out by hand from docs/api.md ("--kv-cache-memory":
// --max-num-seqs full contexts, at most 25 % of RAM; --ctx: the model's, capped at 32768).
TEST(CachePoolSizing, FullContextsCappedByRam) {
  BlockShape s = small_shape();  // 2 layers x (K,V) x 2 heads x 4 slots x 4 dims x 4 bytes = 512
  ASSERT_EQ(s.block_bytes(), 512u);
  const uint64_t ram = 64ull << 30;
  // 3 sequences x 10 tokens = 30 slots = 7 whole blocks (of 4), + 4 spare = 11 blocks.
  EXPECT_EQ(kv_pool_bytes(std::nullopt, s, 3, 10, ram), 11u * 512);
  EXPECT_EQ(draft_pool_bytes(s, 3, 10, ram), 11u * 512);
  // The caps: a quarter of RAM for the model's pool, an eighth for the draft pool.
  EXPECT_EQ(kv_pool_bytes(std::nullopt, s, 16, 1 << 20, 4000), 1000u);
  EXPECT_EQ(draft_pool_bytes(s, 16, 1 << 20, 4000), 500u);
  // An explicit size wins, even above the cap.
  EXPECT_EQ(kv_pool_bytes(uint64_t(3000), s, 16, 1 << 20, 4000), 3000u);
  EXPECT_EQ(full_context_pool_bytes(s, 1, 4, 1ull << 40), 5u * 512);
}

TEST(CachePoolSizing, ServingContext) {
  EXPECT_EQ(serving_context(0, 131072), 32768);
  EXPECT_EQ(serving_context(0, 2048), 2048);
  EXPECT_EQ(serving_context(0, 0), 4096);  // the model does not say
  EXPECT_EQ(serving_context(100, 131072), 100);
  EXPECT_EQ(serving_context(65536, 2048), 65536);  // an explicit --ctx is not capped
}

TEST(CacheMemory, ParsesSizesAndFractions) {
  const uint64_t ram = 24ull << 30;
  EXPECT_EQ(parse_memory_size("2GiB", ram), 2ull << 30);
  EXPECT_EQ(parse_memory_size("512MiB", ram), 512ull << 20);
  EXPECT_EQ(parse_memory_size("1.5g", ram), 3ull << 29);
  EXPECT_EQ(parse_memory_size("4096", ram), 4096u);
  EXPECT_EQ(parse_memory_size("0.25", ram), 6ull << 30);
  EXPECT_EQ(parse_memory_size("1", ram), ram);  // a plain number <= 1 is a fraction
  EXPECT_EQ(parse_memory_size(" 64 KB ", ram), 64u << 10);
  for (const char* bad : {"", "abc", "2XB", "-1", "0", "1GiB extra", ".", "0.0"})
    EXPECT_THROW(parse_memory_size(bad, ram), rapid::Error) << bad;
  EXPECT_GT(system_ram_bytes(), 0u);
}

TEST(CacheBlockPool, LayoutMatchesDocumentedOffsets) {
  BlockShape s = small_shape(4, KvDType::F16);
  EXPECT_EQ(s.plane_bytes(), 2u * 4 * 4 * 2);
  EXPECT_EQ(s.k_offset(0), 0u);
  EXPECT_EQ(s.v_offset(0), s.plane_bytes());
  EXPECT_EQ(s.k_offset(1), 2 * s.plane_bytes());
  EXPECT_EQ(s.slot_offset(1, 2), (1u * 4 + 2) * 4 * 2);
  EXPECT_EQ(s.block_bytes() % 64, 0u);
  BlockShape q = small_shape(4, KvDType::Int8);
  EXPECT_EQ(q.scale_bytes(), 2u * 2 * 2 * 4);
  EXPECT_GE(q.block_bytes(), 2 * 2 * q.plane_bytes() + q.scale_bytes());
  BlockShape z = s; z.head_dim = 0;
  EXPECT_THROW(BlockPool(z, 1 << 20), rapid::Error);
  EXPECT_THROW(BlockPool(s, 10), rapid::Error);
}

TEST(CacheBlockPool, RandomOpsMatchRefcountModel) {
  BlockShape s = small_shape();
  BlockPool pool(s, s.block_bytes() * 37 + 5);
  ASSERT_EQ(pool.total_blocks(), 37u);
  std::map<BlockId, int> model;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    int op = rng() % 3;
    if (op == 0) {
      auto b = pool.allocate();
      if (model.size() == 37) { EXPECT_FALSE(b); continue; }
      ASSERT_TRUE(b);
      ASSERT_EQ(model.count(*b), 0u) << "allocated a live block";
      model[*b] = 1;
      std::memset(pool.data(*b), int(*b & 0xff), s.block_bytes());
    } else if (!model.empty()) {
      auto it = std::next(model.begin(), rng() % model.size());
      // Data of a live block is never clobbered by other allocations.
      ASSERT_EQ(pool.data(it->first)[s.block_bytes() - 1], uint8_t(it->first & 0xff));
      if (op == 1) { pool.incref(it->first); ++it->second; }
      else { pool.decref(it->first); if (--it->second == 0) model.erase(it); }
    }
    ASSERT_EQ(pool.free_count(), 37 - model.size());
  }
  for (auto& [b, r] : model) EXPECT_EQ(pool.refcount(b), r);
  for (auto& [b, r] : model) for (int i = 0; i < r; ++i) pool.decref(b);
  EXPECT_EQ(pool.free_count(), 37u);
  EXPECT_THROW(pool.decref(0), rapid::Error);
  EXPECT_THROW(pool.incref(0), rapid::Error);
  EXPECT_THROW(pool.refcount(99), rapid::Error);
  PoolStats st = pool.stats();
  EXPECT_EQ(st.used_blocks, 0u);
  EXPECT_EQ(st.allocations, st.frees);
}

TEST(CacheBlockTable, AppendSlotsAndCopyOnWrite) {
  BlockShape s = small_shape(4);
  BlockPool pool(s, s.block_bytes() * 8);
  BlockTable a(4);
  for (int i = 0; i < 6; ++i) {
    auto slot = a.append_token(pool);
    ASSERT_TRUE(slot);
    EXPECT_EQ(slot->offset, i % 4);
    EXPECT_EQ(slot->block, a.blocks()[i / 4]);
    pool.data(slot->block)[slot->offset] = uint8_t(10 + i);
  }
  EXPECT_EQ(a.blocks().size(), 2u);
  // b shares a's 6 tokens: its first append must copy the partly-filled last block.
  BlockTable b(4);
  b.adopt_prefix(pool, a.blocks(), 6);
  EXPECT_EQ(pool.refcount(a.blocks()[1]), 2);
  auto slot = b.append_token(pool);
  ASSERT_TRUE(slot);
  EXPECT_NE(slot->block, a.blocks()[1]);
  EXPECT_EQ(slot->offset, 2);
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);  // full shared block stays shared
  EXPECT_EQ(pool.data(slot->block)[4 + 1 - 4], 15);  // copied contents (token 5 at slot 1)
  pool.data(slot->block)[2] = 99;
  EXPECT_EQ(pool.refcount(a.blocks()[1]), 1);
  auto sa = a.append_token(pool);  // a now owns its last block alone: no copy
  ASSERT_TRUE(sa);
  EXPECT_EQ(sa->block, a.blocks()[1]);
  EXPECT_NE(pool.data(sa->block)[2], 99);
  a.release(pool);
  b.release(pool);
  EXPECT_EQ(pool.free_count(), 8u);
  // Exhaustion leaves the table unchanged.
  BlockTable c(4);
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(c.append_token(pool));
  EXPECT_FALSE(c.append_token(pool));
  EXPECT_EQ(c.length(), 32);
  c.truncate(pool, 5);
  EXPECT_EQ(c.blocks().size(), 2u);
  EXPECT_EQ(pool.free_count(), 6u);
  c.release(pool);
}

namespace {
// Builds a sequence's blocks with every slot stamped with its token id (layer 0 K, head 0, elem 0).
struct Seq {
  std::vector<Token> toks;
  BlockTable table;
};

bool fill(BlockPool& pool, RadixCache& rc, Seq& s) {
  const BlockShape& sh = pool.shape();
  while (s.table.length() < int64_t(s.toks.size())) {
    auto slot = s.table.append_token(pool);
    if (!slot) {
      if (!rc.ensure_free(1)) return false;
      continue;
    }
    float v = float(s.toks[s.table.length() - 1]);
    std::memcpy(pool.data(slot->block) + sh.k_offset(0) + sh.slot_offset(0, slot->offset), &v, 4);
  }
  return true;
}

Token stamped(const BlockPool& pool, BlockId b, int32_t slot) {
  float v;
  const BlockShape& sh = pool.shape();
  std::memcpy(&v, pool.data(b) + sh.k_offset(0) + sh.slot_offset(0, slot), 4);
  return Token(v);
}

size_t brute_lcp(const std::vector<std::vector<Token>>& seqs, const std::vector<Token>& q) {
  size_t best = 0;
  for (auto& s : seqs) {
    size_t i = 0;
    while (i < s.size() && i < q.size() && s[i] == q[i]) ++i;
    best = std::max(best, i);
  }
  return best;
}
}  // namespace

// Without eviction the tree must find exactly the brute-force longest common prefix, and the
// blocks it returns must hold the query's own tokens.
TEST(CacheRadix, MatchesBruteForceWithoutEviction) {
  for (int bs : {1, 2, 4, 5}) {
    BlockShape sh = small_shape(bs);
    BlockPool pool(sh, sh.block_bytes() * 4000);
    RadixCache rc(pool);
    std::vector<std::vector<Token>> inserted;
    std::mt19937 rng(100 + bs);
    for (int step = 0; step < 400; ++step) {
      std::vector<Token> q;
      if (!inserted.empty() && rng() % 2) {  // start from a stored prefix to share blocks
        auto& base = inserted[rng() % inserted.size()];
        q.assign(base.begin(), base.begin() + rng() % (base.size() + 1));
      }
      for (size_t extra = 1 + rng() % 12; extra > 0; --extra) q.push_back(Token(rng() % 3));
      PrefixMatch m = rc.match_prefix(q);
      ASSERT_EQ(size_t(m.matched), brute_lcp(inserted, q)) << "bs=" << bs << " step=" << step;
      ASSERT_EQ(m.blocks.size(), (size_t(m.matched) + bs - 1) / bs);
      for (int64_t i = 0; i < m.matched; ++i)
        ASSERT_EQ(stamped(pool, m.blocks[i / bs], int32_t(i % bs)), q[i]) << "pos " << i;
      if (rng() % 2) {
        Seq s{q, BlockTable(bs)};
        s.table.adopt_prefix(pool, m.blocks, m.matched);
        ASSERT_TRUE(fill(pool, rc, s));
        rc.insert(q, s.table.blocks());
        s.table.release(pool);
        inserted.push_back(q);
      }
    }
    RadixStats st = rc.stats();
    EXPECT_GT(st.hit_tokens, 0u);
    EXPECT_LE(st.hit_tokens, st.queried_tokens);
    EXPECT_EQ(pool.total_blocks() - pool.free_count(), st.cached_blocks);
    rc.evict(SIZE_MAX);
    EXPECT_EQ(pool.free_count(), pool.total_blocks()) << "leaked blocks, bs=" << bs;
  }
}

// With a small pool: eviction under pressure, locked paths survive, refcounts return to zero.
TEST(CacheRadix, EvictionNeverTouchesLockedPathsAndLeaksNothing) {
  for (int bs : {2, 4}) {
    BlockShape sh = small_shape(bs);
    BlockPool pool(sh, sh.block_bytes() * 40);
    std::vector<std::vector<Token>> inserted;
    {
      RadixCache rc(pool);
      struct Held { std::vector<Token> toks; int64_t len; RadixNode* node; std::vector<BlockId> blocks; };
      std::vector<Held> held;
      std::mt19937 rng(5 + bs);
      for (int step = 0; step < 3000; ++step) {
        int op = rng() % 4;
        std::vector<Token> q(1 + rng() % 20);
        for (auto& t : q) t = Token(rng() % 2);
        if (op == 0 || op == 1) {
          PrefixMatch m = rc.match_prefix(q);
          ASSERT_LE(size_t(m.matched), brute_lcp(inserted, q));
          for (int64_t i = 0; i < m.matched; ++i)
            ASSERT_EQ(stamped(pool, m.blocks[i / bs], int32_t(i % bs)), q[i]);
          if (op == 0 && m.node && held.size() < 6) {
            rc.lock(m.node);
            held.push_back({q, m.matched, m.node, m.blocks});
          } else {
            Seq s{q, BlockTable(bs)};
            s.table.adopt_prefix(pool, m.blocks, m.matched);
            if (fill(pool, rc, s)) { rc.insert(q, s.table.blocks()); inserted.push_back(q); }
            s.table.release(pool);
          }
        } else if (op == 2) {
          rc.evict(1 + rng() % 6);
        } else if (!held.empty()) {
          size_t k = rng() % held.size();
          rc.unlock(held[k].node);
          held.erase(held.begin() + k);
        }
        // Every locked path is still cached: its blocks (the test holds no reference of its
        // own) are still live and still hold the locked tokens, so they were never freed.
        for (auto& h : held) {
          ASSERT_GE(rc.match_prefix(h.toks).matched, h.len);
          for (BlockId b : h.blocks) ASSERT_GE(pool.refcount(b), 1);
          for (int64_t i = 0; i < h.len; ++i)
            ASSERT_EQ(stamped(pool, h.blocks[i / bs], int32_t(i % bs)), h.toks[i]);
        }
        ASSERT_EQ(pool.total_blocks() - pool.free_count(), rc.cached_blocks());
      }
      for (auto& h : held) rc.unlock(h.node);
      rc.evict(SIZE_MAX);
      EXPECT_EQ(rc.stats().nodes, 0u);
      EXPECT_GT(rc.stats().evicted_blocks, 0u);
    }
    EXPECT_EQ(pool.free_count(), pool.total_blocks());
  }
}

TEST(CacheRadix, EvictsLeastRecentlyUsedFirstAndCarriesState) {
  BlockShape sh = small_shape(2);
  BlockPool pool(sh, sh.block_bytes() * 16);
  RadixCache rc(pool);
  auto add = [&](std::vector<Token> t, std::shared_ptr<StateSnapshot> st = nullptr) {
    Seq s{t, BlockTable(2)};
    ASSERT_TRUE(fill(pool, rc, s));
    rc.insert(t, s.table.blocks(), st);
    s.table.release(pool);
  };
  auto st = std::make_shared<StateSnapshot>(StateSnapshot{4, {1, 2, 3}});
  add({1, 1, 1, 1}, st);
  add({2, 2, 2, 2});
  add({3, 3, 3, 3});
  rc.match_prefix({1, 1});  // touch 1 and 3 so 2 is least recently used
  rc.match_prefix({3, 3, 3});
  EXPECT_EQ(rc.evict(1), 2u);  // one leaf = two blocks
  EXPECT_EQ(rc.match_prefix({2, 2, 2, 2}).matched, 0);
  EXPECT_EQ(rc.match_prefix({3, 3, 3, 3}).matched, 4);
  PrefixMatch m = rc.match_prefix({1, 1, 1, 1, 5});
  EXPECT_EQ(m.matched, 4);
  ASSERT_TRUE(m.state);
  EXPECT_EQ(m.state->position, 4);
  EXPECT_EQ(m.state->bytes, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_FALSE(rc.match_prefix({1, 1, 1}).state);  // snapshot only valid at its end position
  EXPECT_THROW(rc.insert({1, 2, 3}, {0}), rapid::Error);
  PrefixMatch three = rc.match_prefix({3, 3, 3, 3});
  EXPECT_THROW(rc.unlock(three.node), rapid::Error);  // unlock without lock
  rc.lock(three.node);
  rc.evict(SIZE_MAX);
  EXPECT_EQ(rc.match_prefix({3, 3, 3, 3}).matched, 4);  // locked: survives a full eviction
  EXPECT_EQ(rc.match_prefix({1, 1}).matched, 0);
  rc.unlock(three.node);
  rc.evict(SIZE_MAX);
  EXPECT_EQ(pool.free_count(), pool.total_blocks());
}

namespace {
// A checkpoint "of" a prefix: its bytes are the prefix's tokens, so whatever a match returns can
// be checked against the query itself.
std::shared_ptr<StateSnapshot> checkpoint_of(const std::vector<Token>& toks, size_t p) {
  auto st = std::make_shared<StateSnapshot>();
  st->position = int64_t(p);
  st->bytes.assign(toks.begin(), toks.begin() + p);
  return st;
}

// Reference: the deepest checkpointed prefix of q among those inserted.
size_t brute_checkpoint(const std::vector<std::vector<Token>>& ckpts, const std::vector<Token>& q) {
  size_t best = 0;
  for (auto& c : ckpts)
    if (c.size() <= q.size() && c.size() > best && std::equal(c.begin(), c.end(), q.begin())) best = c.size();
  return best;
}
}  // namespace

// Recurrent checkpoints at arbitrary positions (mid-block, mid-edge, later split by other
// inserts): a match returns exactly the deepest checkpointed prefix of the query, the brute-force
// answer, with that prefix's own bytes.
TEST(CacheRadix, CheckpointsMatchBruteForceAcrossSplits) {
  for (int bs : {1, 3, 4}) {
    BlockShape sh = small_shape(bs);
    BlockPool pool(sh, sh.block_bytes() * 4000);
    RadixCache rc(pool);
    std::vector<std::vector<Token>> inserted, ckpts;
    size_t attached = 0, attached_bytes = 0;
    std::mt19937 rng(700 + bs);
    for (int step = 0; step < 500; ++step) {
      std::vector<Token> q;
      if (!inserted.empty() && rng() % 3) {
        auto& base = inserted[rng() % inserted.size()];
        q.assign(base.begin(), base.begin() + rng() % (base.size() + 1));
      }
      for (size_t extra = 1 + rng() % 10; extra > 0; --extra) q.push_back(Token(rng() % 3));
      PrefixMatch m = rc.match_prefix(q);
      const size_t want = brute_checkpoint(ckpts, q);
      ASSERT_EQ(m.state ? size_t(m.state->position) : 0u, want) << "bs=" << bs << " step=" << step;
      if (m.state) {
        ASSERT_LE(m.state->position, m.matched);
        ASSERT_TRUE(std::equal(m.state->bytes.begin(), m.state->bytes.end(), q.begin()));
      }
      Seq s{q, BlockTable(bs)};
      s.table.adopt_prefix(pool, m.blocks, m.matched);
      ASSERT_TRUE(fill(pool, rc, s));
      const bool with = rng() % 2;
      const size_t p = 1 + rng() % q.size();
      rc.insert(q, s.table.blocks(), with ? checkpoint_of(q, p) : nullptr);
      s.table.release(pool);
      inserted.push_back(q);
      std::vector<Token> key(q.begin(), q.begin() + p);
      if (with && std::find(ckpts.begin(), ckpts.end(), key) == ckpts.end()) ckpts.push_back(key);
      if (with) { ++attached; attached_bytes += p; }
    }
    // Siblings that diverge inside a block repeat their first tokens, so one prefix may be
    // checkpointed in two of them: at least one per distinct prefix, at most one per insert.
    RadixStats st = rc.stats();
    EXPECT_GE(st.checkpoints, ckpts.size());
    EXPECT_LE(st.checkpoints, attached);
    EXPECT_LE(st.checkpoint_bytes, attached_bytes);
    EXPECT_GT(st.checkpoints, 100u);
    rc.evict(SIZE_MAX);
    EXPECT_EQ(rc.stats().checkpoints, 0u);
    EXPECT_EQ(rc.stats().checkpoint_bytes, 0u);
    EXPECT_EQ(pool.free_count(), pool.total_blocks());
  }
}

// Under KV eviction and a checkpoint budget, a match never returns a checkpoint whose prefix is
// not the query's or that lies past the KV it matched; the budget holds; nothing leaks.
TEST(CacheRadix, CheckpointsNeverOutliveTheirKvAndKeepTheBudget) {
  BlockShape sh = small_shape(2);
  BlockPool pool(sh, sh.block_bytes() * 30);
  std::mt19937 rng(17);
  {
    RadixCache rc(pool);
    const size_t budget = 40;
    for (int step = 0; step < 3000; ++step) {
      std::vector<Token> q(1 + rng() % 16);
      for (auto& t : q) t = Token(rng() % 2);
      PrefixMatch m = rc.match_prefix(q);
      if (m.state) {
        ASSERT_LE(m.state->position, m.matched);
        ASSERT_TRUE(std::equal(m.state->bytes.begin(), m.state->bytes.end(), q.begin()));
        ASSERT_EQ(m.state->bytes.size(), size_t(m.state->position));
      }
      if (rng() % 4 == 0) { rc.evict(1 + rng() % 4); continue; }
      Seq s{q, BlockTable(2)};
      s.table.adopt_prefix(pool, m.blocks, m.matched);
      if (fill(pool, rc, s)) rc.insert(q, s.table.blocks(), checkpoint_of(q, 1 + rng() % q.size()));
      s.table.release(pool);
      rc.evict_checkpoints(budget);
      ASSERT_LE(rc.stats().checkpoint_bytes, budget);
    }
    EXPECT_GT(rc.stats().evicted_checkpoints, 0u);
    rc.evict(SIZE_MAX);
    EXPECT_EQ(rc.stats().checkpoints, 0u);
  }
  EXPECT_EQ(pool.free_count(), pool.total_blocks());
}

// The budget drops checkpoints of the least recently used path first and never drops KV.
TEST(CacheRadix, CheckpointBudgetDropsLeastRecentlyUsedFirst) {
  BlockShape sh = small_shape(2);
  BlockPool pool(sh, sh.block_bytes() * 16);
  RadixCache rc(pool);
  auto add = [&](const std::vector<Token>& t, size_t p) {
    Seq s{t, BlockTable(2)};
    ASSERT_TRUE(fill(pool, rc, s));
    rc.insert(t, s.table.blocks(), checkpoint_of(t, p));
    s.table.release(pool);
  };
  add({1, 1, 1, 1}, 3);
  add({2, 2, 2, 2}, 4);
  add({3, 3, 3, 3}, 2);
  rc.match_prefix({1, 1, 1, 1});  // 2 is now the least recently used
  EXPECT_EQ(rc.evict_checkpoints(6), 1u);  // 3 + 4 + 2 bytes -> drop 2's (4 bytes)
  EXPECT_FALSE(rc.match_prefix({2, 2, 2, 2, 0}).state);
  EXPECT_EQ(rc.match_prefix({2, 2, 2, 2, 0}).matched, 4);  // its KV stays
  EXPECT_EQ(rc.match_prefix({1, 1, 1, 1, 0}).state->position, 3);
  EXPECT_EQ(rc.match_prefix({3, 3, 3}).state->position, 2);
  EXPECT_THROW(rc.insert({4, 4}, {0}, checkpoint_of({4, 4}, 0)), rapid::Error);
  rc.evict(SIZE_MAX);
  EXPECT_EQ(pool.free_count(), pool.total_blocks());
}
