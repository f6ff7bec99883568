// The engine's scheduling without weights, in milliseconds. The real BatchEngine runs over a fake
// Model (tests/engine_fake_model.h) whose KV lives in a real block pool; the reference for every
// output is the fake model's own definition run as a plain sequential loop (FakeLm::reference),
// never the engine: concurrency, chunked prefill, preemption, prefix-cache hits, cancellation and
// every speculation proposer must all give exactly its tokens.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "byte_tokenizer.h"
#include "engine/batch_engine.h"
#include "engine/sampling.h"
#include "engine_fake_model.h"

using namespace rapid;
using rapid::testing::FakeLm;
using rapid::testing::FakeModel;

namespace {

std::shared_ptr<const Tokenizer> tok() {
  static auto t = std::make_shared<rapid::testing::ByteTokenizer>();
  return t;
}

// A prompt of n tokens from seed (printable bytes, with repeats so prompt lookup finds matches).
std::vector<int32_t> prompt(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p;
  while (int64_t(p.size()) < n) {
    if (p.size() > 8 && rng() % 4 == 0) {  // copy an earlier stretch
      size_t from = rng() % (p.size() - 4), len = 4 + rng() % 8;
      for (size_t i = 0; i < len && int64_t(p.size()) < n; ++i) p.push_back(p[from + i]);
    } else {
      p.push_back(32 + int32_t(rng() % 96));
    }
  }
  return p;
}

GenerationRequest greedy(std::vector<int32_t> p, int64_t max_tokens) {
  GenerationRequest q;
  q.prompt = std::move(p);
  q.sampling.temperature = 0;
  q.max_tokens = max_tokens;
  return q;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::None;
  std::string error;
  int64_t cached = -1;
  bool done = false;
};

// Collects every request's events; waits for all of them.
class Runner {
 public:
  explicit Runner(BatchEngine& e) : e_(e) {}
  size_t submit(GenerationRequest q) {
    std::lock_guard lk(mu_);
    size_t i = res_.size();
    res_.emplace_back();
    ids_.push_back(e_.submit(std::move(q), [this, i](const GenerationEvent& ev) {
      std::lock_guard lk(mu_);
      Result& r = res_[i];
      r.tokens.insert(r.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      if (r.cached < 0) r.cached = ev.cached_tokens;
      if (ev.finished) {
        r.done = true;
        r.reason = ev.finish_reason;
        r.error = ev.error;
      }
      cv_.notify_all();
    }));
    return i;
  }
  // Waits until request i has at least n tokens (or finished).
  void wait_tokens(size_t i, size_t n) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, std::chrono::seconds(60), [&] { return res_[i].tokens.size() >= n || res_[i].done; });
  }
  std::vector<Result> wait_all() {
    std::unique_lock lk(mu_);
    EXPECT_TRUE(cv_.wait_for(lk, std::chrono::seconds(60), [&] {
      return std::all_of(res_.begin(), res_.end(), [](const Result& r) { return r.done; });
    }));
    return res_;
  }
  uint64_t id(size_t i) const { return ids_[i]; }

 private:
  BatchEngine& e_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Result> res_;
  std::vector<uint64_t> ids_;
};

BatchEngineOptions opts(SpecMode spec = SpecMode::Off) {
  BatchEngineOptions o;
  o.max_num_seqs = 8;
  o.max_step_tokens = 64;
  o.kv.block_size = 16;
  o.kv.pool_bytes = 1 << 20;
  o.spec.mode = spec;
  o.draft_pool_bytes = 1 << 20;
  return o;
}

int64_t pool_bytes(int64_t blocks) { return blocks * int64_t(FakeModel().kv_block_shape(16).block_bytes()); }

void expect_reference(const FakeModel& m, const GenerationRequest& q, const Result& got, const std::string& what) {
  EXPECT_EQ(got.tokens, m.lm().reference(q.prompt, q.max_tokens)) << what << " error: " << got.error;
  EXPECT_EQ(got.reason, FinishReason::Length) << what << " error: " << got.error;
}

// Many requests of different lengths: each gets its reference tokens; steps are real batches.
std::vector<GenerationRequest> mix(int n, int64_t max_tokens) {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < n; ++i) out.push_back(greedy(prompt(1 + (i * 37) % 150, uint32_t(i)), max_tokens - i % 5));
  return out;
}

}  // namespace

TEST(FakeEngine, SingleRequestMatchesSequentialReference) {
  auto m = std::make_shared<FakeModel>();
  BatchEngine e(m, tok(), opts());
  Runner r(e);
  auto q = greedy(prompt(40, 1), 30);
  r.submit(q);
  expect_reference(*m, q, r.wait_all()[0], "alone");
}

TEST(FakeEngine, ConcurrentRequestsEachMatchReferenceWithinBudgets) {
  auto m = std::make_shared<FakeModel>();
  BatchEngineOptions o = opts();
  BatchEngine e(m, tok(), o);
  Runner r(e);
  auto reqs = mix(24, 40);
  for (auto& q : reqs) r.submit(q);
  auto got = r.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) expect_reference(*m, reqs[i], got[i], "request " + std::to_string(i));
  size_t widest = 0;
  for (const auto& st : m->steps()) {
    int64_t total = 0;
    for (auto& en : st.entries) total += en.n;
    EXPECT_LE(total, o.max_step_tokens);
    EXPECT_LE(int64_t(st.entries.size()), o.max_num_seqs);
    widest = std::max(widest, st.entries.size());
  }
  EXPECT_EQ(int64_t(widest), o.max_num_seqs);  // really batched
}

// While a sequence decodes, a long prompt is prefilled in chunks of at most 128 tokens; alone,
// it takes the whole step budget.
TEST(FakeEngine, PrefillChunksAreCappedWhileDecoding) {
  auto m = std::make_shared<FakeModel>();
  m->set_step_hook([] { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
  BatchEngineOptions o = opts();
  o.max_step_tokens = 512;
  BatchEngine e(m, tok(), o);
  Runner r(e);
  auto first = greedy(prompt(700, 2), 100000);  // decodes until cancelled
  r.submit(first);
  r.wait_tokens(0, 2);  // decoding now
  auto second = greedy(prompt(900, 3), 10);
  r.submit(second);
  r.wait_tokens(1, 10);
  e.cancel(r.id(0));
  auto got = r.wait_all();
  EXPECT_EQ(got[0].tokens, m->lm().reference(first.prompt, int64_t(got[0].tokens.size())));
  expect_reference(*m, second, got[1], "second");
  int64_t alone_chunk = 0, capped_chunks = 0;
  for (const auto& st : m->steps()) {
    bool decoding = false;
    for (auto& en : st.entries) decoding |= en.n == 1 && en.past > 0;
    for (auto& en : st.entries) {
      if (en.n <= 1) continue;
      if (decoding) {
        EXPECT_LE(en.n, o.prefill_chunk_while_decoding);
        ++capped_chunks;
      } else {
        alone_chunk = std::max(alone_chunk, en.n);
      }
    }
  }
  EXPECT_EQ(alone_chunk, 512);  // the first prompt's first chunk: the whole budget
  EXPECT_GE(capped_chunks, 900 / 128);
}

// A pool far too small for all requests at once: sequences are preempted and resumed, every one
// gets its reference tokens, and no block leaks.
TEST(FakeEngine, PreemptionUnderTinyPoolGivesReferenceTokens) {
  auto m = std::make_shared<FakeModel>();
  BatchEngineOptions o = opts();
  o.kv.pool_bytes = uint64_t(pool_bytes(24));  // 384 token slots for 16 requests of up to ~190
  BatchEngine e(m, tok(), o);
  Runner r(e);
  auto reqs = mix(16, 40);
  for (auto& q : reqs) r.submit(q);
  auto got = r.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) expect_reference(*m, reqs[i], got[i], "request " + std::to_string(i));
  BatchEngineStats st = e.stats();
  EXPECT_GT(st.preemptions, 0u);
  e.purge_cache();
  st = e.stats();
  EXPECT_EQ(st.kv.pool.free_blocks, st.kv.pool.total_blocks);
}

// The next turn of a conversation adopts the first turn's KV from the prefix cache (the fake
// model rereads it from the pages) and still gives the reference tokens.
TEST(FakeEngine, PrefixCacheHitGivesReferenceTokens) {
  auto m = std::make_shared<FakeModel>();
  BatchEngine e(m, tok(), opts());
  auto first = greedy(prompt(100, 4), 20);
  Result a;
  {
    Runner r(e);
    r.submit(first);
    a = r.wait_all()[0];
  }
  expect_reference(*m, first, a, "first");
  EXPECT_EQ(a.cached, 0);
  std::vector<int32_t> turn2 = first.prompt;
  turn2.insert(turn2.end(), a.tokens.begin(), a.tokens.end());
  auto more = prompt(30, 5);
  turn2.insert(turn2.end(), more.begin(), more.end());
  auto second = greedy(turn2, 20);
  Runner r(e);
  r.submit(second);
  Result b = r.wait_all()[0];
  expect_reference(*m, second, b, "second");
  // The whole first exchange except the last token (its KV is never computed) is reused, in
  // whole blocks.
  EXPECT_GE(b.cached, int64_t(first.prompt.size() + a.tokens.size()) - 17);
  EXPECT_LE(b.cached, int64_t(first.prompt.size() + a.tokens.size()));
}

// A cancelled request ends with Cancelled and frees its slot; the others are not disturbed.
TEST(FakeEngine, CancelOneWhileOthersRun) {
  auto m = std::make_shared<FakeModel>();
  m->set_step_hook([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
  BatchEngineOptions o = opts();
  BatchEngine e(m, tok(), o);
  Runner r(e);
  auto endless = greedy(prompt(20, 6), 100000);
  r.submit(endless);
  auto reqs = mix(6, 60);
  for (auto& q : reqs) r.submit(q);
  r.wait_tokens(0, 10);
  e.cancel(r.id(0));
  auto got = r.wait_all();
  EXPECT_EQ(got[0].reason, FinishReason::Cancelled);
  EXPECT_LT(got[0].tokens.size(), 100000u);
  // What it did produce is its reference prefix.
  auto want = m->lm().reference(endless.prompt, int64_t(got[0].tokens.size()));
  EXPECT_EQ(got[0].tokens, want);
  for (size_t i = 0; i < reqs.size(); ++i) expect_reference(*m, reqs[i], got[i + 1], "request " + std::to_string(i));
}

// A request whose prompt cannot fit even an empty pool gets a clear error; the engine serves on.
TEST(FakeEngine, PromptLargerThanPoolIsAnError) {
  auto m = std::make_shared<FakeModel>();
  BatchEngineOptions o = opts();
  o.kv.pool_bytes = uint64_t(pool_bytes(4));  // 64 token slots
  o.max_step_tokens = 256;
  BatchEngine e(m, tok(), o);
  Runner r(e);
  r.submit(greedy(prompt(200, 7), 4));
  auto ok = greedy(prompt(20, 8), 10);
  r.submit(ok);
  auto got = r.wait_all();
  EXPECT_EQ(got[0].reason, FinishReason::Error);
  EXPECT_NE(got[0].error.find("too small"), std::string::npos) << got[0].error;
  expect_reference(*m, ok, got[1], "small request");
}

// Seeded sampling at temperature 1: each sequence has its own sampler, so a batch gives every
// request the tokens a sequential loop of the fake model and rapid::Sampler draws.
TEST(FakeEngine, SeededSamplingMatchesSequentialSampler) {
  auto m = std::make_shared<FakeModel>();
  BatchEngine e(m, tok(), opts());
  Runner r(e);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    auto q = greedy(prompt(10 + i * 13, 20 + i), 30);
    q.sampling.temperature = 1.0;
    q.sampling.seed = 100 + i;
    reqs.push_back(q);
    r.submit(q);
  }
  auto got = r.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& q = reqs[i];
    Sampler s(q.sampling);
    std::vector<int32_t> ctx = q.prompt, gen;
    std::vector<float> row(FakeLm::kVocab);
    uint32_t h = 0;
    for (size_t p = 0; p < ctx.size(); ++p) h = FakeLm::extend(h, ctx[p], int64_t(p));
    while (int64_t(gen.size()) < q.max_tokens) {
      FakeLm::logits(m->lm().next(h, ctx.back()), row.data());
      int32_t t = s.sample(row.data(), FakeLm::kVocab, q.prompt, gen).token;
      h = FakeLm::extend(h, t, int64_t(ctx.size()));
      ctx.push_back(t);
      gen.push_back(t);
    }
    EXPECT_EQ(got[i].tokens, gen) << "request " << i;
  }
}

// Every proposer drafts, some guesses are accepted and some rolled back, and the tokens are the
// reference's (greedy verification keeps exactly the target's choices).
struct SpecCase {
  SpecMode mode;
  bool draft_model;
  int mtp_layers;
};

class FakeSpeculation : public ::testing::TestWithParam<SpecCase> {};

TEST_P(FakeSpeculation, TokensMatchReferenceWithAcceptanceAndRollback) {
  const SpecCase c = GetParam();
  auto m = std::make_shared<FakeModel>(FakeLm{}, c.mtp_layers);
  BatchEngineOptions o = opts(c.mode);
  o.spec.max_draft = 4;
  if (c.draft_model) o.draft_model = std::make_shared<FakeModel>(FakeLm{true});
  BatchEngine e(m, tok(), o);
  Runner r(e);
  auto reqs = mix(10, 60);
  for (auto& q : reqs) r.submit(q);
  auto got = r.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) expect_reference(*m, reqs[i], got[i], "request " + std::to_string(i));
  BatchEngineStats st = e.stats();
  EXPECT_GT(st.spec_accepted, 0u);
  EXPECT_LT(st.spec_accepted, st.spec_drafted);
  if (c.mtp_layers) {
    EXPECT_GT(m->mtp_forwards(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Proposers, FakeSpeculation,
                         ::testing::Values(SpecCase{SpecMode::Ngram, false, 0}, SpecCase{SpecMode::Draft, true, 0},
                                           SpecCase{SpecMode::Mtp, false, 1}, SpecCase{SpecMode::Mtp, false, 2}),
                         [](const auto& info) {
                           return std::string(spec_mode_name(info.param.mode)) + std::to_string(info.index);
                         });

// Speculation under a tiny pool: drafts are dropped before anyone is preempted, preempted
// sequences lose their proposer state, and the tokens are still the reference's.
TEST(FakeEngine, SpeculationWithPreemptionKeepsReferenceTokens) {
  for (SpecCase c : {SpecCase{SpecMode::Ngram, false, 0}, SpecCase{SpecMode::Draft, true, 0},
                     SpecCase{SpecMode::Mtp, false, 1}}) {
    auto m = std::make_shared<FakeModel>(FakeLm{}, c.mtp_layers);
    BatchEngineOptions o = opts(c.mode);
    o.kv.pool_bytes = uint64_t(pool_bytes(24));
    o.draft_pool_bytes = uint64_t(pool_bytes(12));  // drafts also run out of room
    if (c.draft_model) o.draft_model = std::make_shared<FakeModel>(FakeLm{true});
    BatchEngine e(m, tok(), o);
    Runner r(e);
    auto reqs = mix(12, 40);
    for (auto& q : reqs) r.submit(q);
    auto got = r.wait_all();
    for (size_t i = 0; i < reqs.size(); ++i)
      expect_reference(*m, reqs[i], got[i], std::string(spec_mode_name(c.mode)) + " request " + std::to_string(i));
    EXPECT_GT(e.stats().preemptions, 0u) << spec_mode_name(c.mode);
  }
}
