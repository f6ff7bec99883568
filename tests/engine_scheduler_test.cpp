// The engine's scheduling without weights, in milliseconds, in two layers:
// - Scheduler alone (engine/scheduler.h) over plain descriptors and a block-counting host: the
//   plans are checked against the policy's rules written out here (FCFS, budgets, the 128-token
//   cap, newest-first preemption, the controller's depth), and long random runs for starvation.
// - The real BatchEngine over a fake Model (tests/engine_fake_model.h) whose KV lives in a real
//   block pool; the reference for every output is the fake model's own definition run as a plain
//   sequential loop (FakeLm::reference), never the engine: concurrency, chunked prefill,
//   preemption, prefix-cache hits, cancellation and every speculation proposer must all give
//   exactly its tokens.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "byte_tokenizer.h"
#include "engine/batch_engine.h"
#include "engine/sampling.h"
#include "engine/scheduler.h"
#include "engine_fake_model.h"

using namespace rapid;
using namespace rapid::engine;
using rapid::testing::FakeLm;
using rapid::testing::FakeModel;

namespace {

std::shared_ptr<const tok::Tokenizer> fake_tokenizer() {
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

// Many requests of different lengths.
std::vector<GenerationRequest> mix(int n, int64_t max_tokens) {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < n; ++i) out.push_back(greedy(prompt(1 + (i * 37) % 150, uint32_t(i)), max_tokens - i % 5));
  return out;
}

// Submits them all at once and checks that each gets its reference tokens.
void run_all(BatchEngine& e, const FakeModel& m, const std::vector<GenerationRequest>& reqs, const std::string& what) {
  Runner r(e);
  for (auto& q : reqs) r.submit(q);
  auto got = r.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) expect_reference(m, reqs[i], got[i], what + " request " + std::to_string(i));
}

}  // namespace

TEST(FakeEngine, SingleRequestMatchesSequentialReference) {
  auto m = std::make_shared<FakeModel>();
  BatchEngine e(m, fake_tokenizer(), opts());
  Runner r(e);
  auto q = greedy(prompt(40, 1), 30);
  r.submit(q);
  expect_reference(*m, q, r.wait_all()[0], "alone");
}

TEST(FakeEngine, ConcurrentRequestsEachMatchReferenceWithinBudgets) {
  auto m = std::make_shared<FakeModel>();
  BatchEngineOptions o = opts();
  BatchEngine e(m, fake_tokenizer(), o);
  run_all(e, *m, mix(24, 40), "");
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
  BatchEngine e(m, fake_tokenizer(), o);
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
  // 384 token slots for 16 requests of up to ~270: any two of the longest overflow the pool, so
  // preemption happens however the arrivals interleave with the engine's steps (with answers of
  // 40 tokens a loaded machine sometimes finished the early requests before the late ones came).
  o.kv.pool_bytes = uint64_t(pool_bytes(24));
  BatchEngine e(m, fake_tokenizer(), o);
  run_all(e, *m, mix(16, 120), "");
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
  BatchEngine e(m, fake_tokenizer(), opts());
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
  BatchEngine e(m, fake_tokenizer(), o);
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

// Background warming fills the prefix cache while the engine is idle, and yields to a client at
// once: the client's request cancels it after the step in flight, and adopts what it computed.
TEST(FakeEngine, WarmingFillsThePrefixCacheAndYieldsToAClient) {
  auto m = std::make_shared<FakeModel>();
  BatchEngine e(m, fake_tokenizer(), opts());
  auto warm = greedy(prompt(200, 9), 1);
  warm.warm_only = true;
  {
    Runner r(e);
    r.submit(warm);
    Result w = r.wait_all()[0];
    EXPECT_EQ(w.reason, FinishReason::Stop);
    EXPECT_TRUE(w.tokens.empty());
  }
  std::vector<int32_t> p = warm.prompt;
  auto extra = prompt(20, 10);
  p.insert(p.end(), extra.begin(), extra.end());
  {
    Runner r(e);
    auto q = greedy(p, 12);
    r.submit(q);
    Result got = r.wait_all()[0];
    expect_reference(*m, q, got, "after warming");
    EXPECT_EQ(got.cached, 200);  // the whole warmed prompt
  }
  // Warming a long prompt; a client arrives during its first step.
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, client_in = false;
  m->set_step_hook([&] {
    std::unique_lock lk(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lk, [&] { return client_in; });
  });
  auto long_warm = greedy(prompt(2000, 11), 1);
  long_warm.warm_only = true;
  Runner r(e);
  r.submit(long_warm);
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return entered; });
  }
  std::vector<int32_t> cp(long_warm.prompt.begin(), long_warm.prompt.begin() + 100);
  auto client = greedy(cp, 8);
  r.submit(client);
  {
    std::lock_guard lk(mu);
    client_in = true;
  }
  cv.notify_all();
  auto got = r.wait_all();
  EXPECT_EQ(got[0].reason, FinishReason::Cancelled);
  expect_reference(*m, client, got[1], "client");
  EXPECT_EQ(got[1].cached, 64);  // the one warming step (the whole 64-token budget)
}

// DELETE /v1/cache leaves the cache empty although turns warm their successors in the background:
// the purge cancels warming that is running, and warming predicted before it (stamped with an
// older cache generation, as a turn that ended just before the purge queues it) is dropped.
TEST(FakeEngine, PurgeCancelsWarmingAndDropsWarmingPredictedBeforeIt) {
  auto m = std::make_shared<FakeModel>();
  BatchEngine e(m, fake_tokenizer(), opts());
  auto cached_blocks = [&] { return e.stats().kv.pool.total_blocks - e.stats().kv.pool.free_blocks; };
  // Every step of the warming waits for `release`, so it cannot finish before the purge is queued.
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  std::atomic<bool> purging{false};
  m->set_step_hook([&] {
    std::unique_lock lk(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lk, [&] { return release; });
  });
  auto warm = greedy(prompt(2000, 12), 1);
  warm.warm_only = true;
  warm.cache_generation = e.cache_generation();
  Runner r(e);
  r.submit(warm);
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return entered; });  // the warming is inside its first step
  }
  std::thread purger([&] {
    purging = true;
    e.purge_cache();  // queued behind that step
  });
  while (!purging) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // slack for the purge to reach the queue
  {
    std::lock_guard lk(mu);
    release = true;
  }
  cv.notify_all();
  purger.join();
  m->set_step_hook(nullptr);
  EXPECT_EQ(r.wait_all()[0].reason, FinishReason::Cancelled);
  EXPECT_EQ(cached_blocks(), 0u);
  EXPECT_EQ(e.cache_generation(), warm.cache_generation + 1);

  // The same prediction arriving after the purge is dropped; a fresh one is served.
  Runner stale(e);
  stale.submit(warm);
  EXPECT_EQ(stale.wait_all()[0].reason, FinishReason::Cancelled);
  EXPECT_EQ(cached_blocks(), 0u);
  warm.cache_generation = e.cache_generation();
  Runner fresh(e);
  fresh.submit(warm);
  EXPECT_EQ(fresh.wait_all()[0].reason, FinishReason::Stop);
  EXPECT_GT(cached_blocks(), 0u);
}

// A request whose prompt cannot fit even an empty pool gets a clear error; the engine serves on.
TEST(FakeEngine, PromptLargerThanPoolIsAnError) {
  auto m = std::make_shared<FakeModel>();
  BatchEngineOptions o = opts();
  o.kv.pool_bytes = uint64_t(pool_bytes(4));  // 64 token slots
  o.max_step_tokens = 256;
  BatchEngine e(m, fake_tokenizer(), o);
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
  BatchEngine e(m, fake_tokenizer(), opts());
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
  BatchEngine e(m, fake_tokenizer(), o);
  run_all(e, *m, mix(10, 60), spec_mode_name(c.mode));
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
    BatchEngine e(m, fake_tokenizer(), o);
    // The first step waits for all 12 requests, so that they compete for the pool however this
    // thread is scheduled (submitted one by one on a loaded machine, they once ran without
    // preemption).
    auto all_in = std::make_shared<std::atomic<bool>>(false);
    m->set_step_hook([all_in] {
      while (!all_in->load()) std::this_thread::yield();
    });
    Runner r(e);
    const auto reqs = mix(12, 40);
    for (auto& q : reqs) r.submit(q);
    all_in->store(true);
    auto got = r.wait_all();
    for (size_t i = 0; i < reqs.size(); ++i)
      expect_reference(*m, reqs[i], got[i], std::string(spec_mode_name(c.mode)) + " request " + std::to_string(i));
    EXPECT_GT(e.stats().preemptions, 0u) << spec_mode_name(c.mode);
  }
}

// ---------------------------------------------------------------------------------------------
// The Scheduler alone.

namespace {

// The KV side as block arithmetic: a sequence holding KV for `computed` tokens holds
// ceil(computed / 16) blocks; nothing is cached, so only finishing or preemption frees blocks.
class CountingHost : public SchedulerHost {
 public:
  explicit CountingHost(int64_t total) : total_(total) {}
  int64_t admit(SchedSeq& s) override {
    holding_.push_back(&s);
    return cached.count(s.id) ? cached[s.id] : 0;
  }
  void unadmit(SchedSeq& s) override { std::erase(holding_, &s); }
  int64_t blocks_needed(const SchedSeq& s, int64_t n) override { return blocks(s.computed + n) - blocks(s.computed); }
  bool make_free(int64_t n) override { return free_blocks() >= n; }
  int64_t free_blocks() const override {
    int64_t used = 0;
    for (const SchedSeq* s : holding_) used += blocks(s->computed);
    return total_ - used;
  }
  int64_t total_blocks() const override { return total_; }
  void preempt(SchedSeq& s) override {
    preempted.push_back(s.id);
    std::erase(holding_, &s);
  }
  void reject(SchedSeq& s, const std::string& why) override {
    rejected.push_back(s.id);
    reason = why;
    std::erase(holding_, &s);
  }
  int drafts(SchedSeq& s, int k) override {
    offered.push_back({s.id, k});
    return std::min(k, proposer_has);
  }
  void release(SchedSeq& s) { std::erase(holding_, &s); }
  static int64_t blocks(int64_t tokens) { return (tokens + 15) / 16; }

  std::map<uint64_t, int64_t> cached;  // prefix-cache hit per id
  std::vector<uint64_t> preempted, rejected;
  std::vector<std::pair<uint64_t, int>> offered;
  std::string reason;
  int proposer_has = 1 << 20;  // drafts the proposer can make

 private:
  int64_t total_;
  std::vector<SchedSeq*> holding_;
};

// Sequences plus a step executor that does what the engine does with a plan: the KV grows by the
// planned tokens; a step that completes the prompt samples one token and keeps `accept` drafts.
struct Sim {
  explicit Sim(SchedulerOptions o, int64_t blocks = 1 << 20, SpeculationOptions so = {SpecMode::Off, 0})
      : spec(so), sched(o, spec), host(blocks) {}
  SchedSeq* add(int64_t prompt, int64_t max_new, bool warm = false) {
    auto s = std::make_unique<SchedSeq>();
    s->id = seqs.size();
    s->length = prompt;
    s->warm = warm;
    max_new_.push_back(max_new);
    generated.push_back(0);
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  std::vector<ScheduledSeq> step(int accept = 0) {
    for (auto& s : seqs) s->draft_room = max_new_[s->id] - generated[s->id] - 1;
    std::vector<ScheduledSeq> plan = sched.schedule(host);
    int64_t total = 0;
    for (const ScheduledSeq& p : plan) {
      SchedSeq& s = *p.seq;
      total += p.n + p.draft;
      s.computed += p.n;
      if (s.computed < s.length) continue;  // a prefill chunk
      const int64_t gained = 1 + std::min(accept, p.draft);
      s.length += gained;
      s.computed = s.length - 1;  // rejected drafts rolled back; the newest token runs next step
      generated[s.id] += gained;
      if (generated[s.id] >= max_new_[s.id]) {
        sched.remove(&s);
        host.release(s);
        finished.push_back(s.id);
      }
    }
    return plan;
  }
  bool done(uint64_t id) const { return std::find(finished.begin(), finished.end(), id) != finished.end(); }

  SpeculationController spec;
  Scheduler sched;
  CountingHost host;
  std::vector<std::unique_ptr<SchedSeq>> seqs;
  std::vector<int64_t> generated, max_new_;
  std::vector<uint64_t> finished;
};

SchedulerOptions sopts(int64_t seqs, int64_t tokens, int64_t cap = 128) { return {seqs, tokens, cap}; }

std::vector<uint64_t> ids(const std::vector<ScheduledSeq>& plan) {
  std::vector<uint64_t> out;
  for (auto& p : plan) out.push_back(p.seq->id);
  return out;
}
std::vector<int64_t> sizes(const std::vector<ScheduledSeq>& plan) {
  std::vector<int64_t> out;
  for (auto& p : plan) out.push_back(p.n);
  return out;
}

}  // namespace

TEST(Scheduler, AdmitsFirstComeFirstServedUpToMaxNumSeqs) {
  Sim sim(sopts(4, 512));
  for (int i = 0; i < 6; ++i) sim.add(10, i == 1 ? 1 : 5);
  auto plan = sim.step();
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{10, 10, 10, 10}));
  ASSERT_EQ(sim.sched.waiting().size(), 2u);
  EXPECT_EQ(sim.sched.waiting().front()->id, 4u);
  // Sequence 1 finished (one token): its slot goes to the oldest waiting one, 4, not 5.
  plan = sim.step();
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0, 2, 3, 4}));
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{1, 1, 1, 10}));
}

TEST(Scheduler, ChunkedPrefillFillsTheStepBudget) {
  Sim sim(sopts(8, 256));
  sim.add(1000, 3);
  std::vector<int64_t> chunks;
  for (int i = 0; i < 4; ++i) chunks.push_back(sim.step()[0].n);
  EXPECT_EQ(chunks, (std::vector<int64_t>{256, 256, 256, 232}));
  EXPECT_EQ(sim.generated[0], 1);
  // Two prompts together: the budget goes to the older first, the rest to the next one.
  Sim two(sopts(8, 256));
  two.add(300, 2);
  two.add(300, 2);
  auto plan = two.step();
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0}));  // nothing left for the second
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{256}));
  plan = two.step();
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{44, 212}));
  plan = two.step();  // 0 decodes first; 1 finishes its prompt
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{1, 88}));
}

TEST(Scheduler, PrefillChunksCappedWhileAnySequenceDecodes) {
  Sim sim(sopts(8, 512, 128));
  sim.add(20, 12);  // decodes from step 2 on, for 11 steps
  sim.step();
  sim.add(1000, 1);
  for (int i = 0; i < 11; ++i) {
    auto plan = sim.step();
    ASSERT_EQ(ids(plan), (std::vector<uint64_t>{0, 1})) << "step " << i;
    EXPECT_EQ(plan[0].n, 1);
    EXPECT_EQ(plan[1].n, i < 7 ? 128 : 1000 - 7 * 128) << "step " << i;
    if (i == 7) break;  // the prompt is done
  }
  // Alone, a prompt takes the whole budget; with the cap set to 32 while decoding, 32.
  Sim other(sopts(8, 512, 32));
  other.add(5, 10);
  other.add(600, 1);
  auto plan = other.step();
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{5, 507}));  // nobody decodes yet: no cap
  plan = other.step();
  EXPECT_EQ(sizes(plan), (std::vector<int64_t>{1, 32}));
}

TEST(Scheduler, PreemptsTheNewestRunningSequenceFirst) {
  // 10 blocks; three 47-token prompts take 3 blocks each. Their 49th tokens need a 4th block
  // each: only one is free, so the newest are preempted, newest first.
  Sim sim(sopts(8, 512), 10);
  for (int i = 0; i < 3; ++i) sim.add(47, 20);
  sim.step();  // prefill: 47 each, 3 blocks each
  sim.step();  // decode position 47 (48 tokens): still 3 blocks
  auto plan = sim.step();  // position 48 needs block 4 for everyone: one free
  EXPECT_EQ(sim.host.preempted, (std::vector<uint64_t>{2}));  // newest
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0, 1}));        // 1 takes the block 2 freed
  ASSERT_EQ(sim.sched.waiting().size(), 1u);
  // A later arrival queues behind the preempted sequence, which resumes first.
  sim.add(10, 1);
  EXPECT_EQ(sim.sched.waiting().front()->id, 2u);
  bool resumed = false;
  for (int i = 0; i < 200 && sim.finished.size() < 4; ++i) {
    auto ran = ids(sim.step());
    if (!resumed && std::count(ran.begin(), ran.end(), 3u)) {
      ASSERT_TRUE(std::count(ran.begin(), ran.end(), 2u));  // not before 2
      EXPECT_LT(std::find(ran.begin(), ran.end(), 2u), std::find(ran.begin(), ran.end(), 3u));
    }
    resumed |= std::count(ran.begin(), ran.end(), 2u) > 0;
  }
  EXPECT_TRUE(resumed);
  EXPECT_EQ(sim.finished.size(), 4u);
  EXPECT_EQ(sim.host.preempted, (std::vector<uint64_t>{2}));
}

TEST(Scheduler, NoAdmissionInAStepThatPreempted) {
  Sim sim(sopts(8, 512), 7);
  sim.add(47, 20);
  sim.add(47, 20);
  sim.step();
  sim.step();
  sim.add(5, 1);  // would fit the freed block, but the memory goes to running sequences first
  auto plan = sim.step();
  EXPECT_EQ(sim.host.preempted, (std::vector<uint64_t>{1}));
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0}));
}

TEST(Scheduler, RejectsAPromptNoEmptyPoolCouldHold) {
  Sim sim(sopts(8, 512), 4);  // 64 token slots
  sim.add(200, 1);
  sim.add(20, 1);
  auto plan = sim.step();
  EXPECT_EQ(sim.host.rejected, (std::vector<uint64_t>{0}));
  EXPECT_NE(sim.host.reason.find("4 blocks"), std::string::npos) << sim.host.reason;
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{1}));
}

TEST(Scheduler, WaitsForMemoryWithoutSkippingTheQueue) {
  Sim sim(sopts(8, 512), 4);
  sim.add(60, 3);   // 4 blocks
  sim.add(30, 1);   // needs 2: waits
  sim.add(5, 1);    // would fit nothing either, and must not jump ahead of 1
  auto plan = sim.step();
  EXPECT_EQ(ids(plan), (std::vector<uint64_t>{0}));
  EXPECT_EQ(sim.sched.waiting().front()->id, 1u);
  for (int i = 0; i < 10 && sim.finished.size() < 3; ++i) sim.step();
  EXPECT_EQ(sim.finished, (std::vector<uint64_t>{0, 1, 2}));
}

TEST(Scheduler, WarmingRunsOnlyWhileNoClientWorks) {
  Sim sim(sopts(8, 512));
  sim.add(20, 50);                        // a client request
  sim.step();
  sim.add(40, 1, /*warm=*/true);
  EXPECT_EQ(ids(sim.step()), (std::vector<uint64_t>{0}));  // the client decodes alone
  Sim idle(sopts(8, 512));
  idle.add(40, 1, true);
  EXPECT_EQ(ids(idle.step()), (std::vector<uint64_t>{0}));
}

// Random arrivals into a pool that holds a fraction of them: over thousands of steps every
// sequence finishes, arrival order is kept within the batch width, and no waiting sequence is
// passed over for long while it is the oldest.
TEST(Scheduler, NoStarvationOverManySteps) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    std::mt19937 rng(seed);
    Sim sim(sopts(6, 96, 32), 30);
    int64_t steps = 0, oldest_wait = 0, worst_oldest_wait = 0;
    uint64_t oldest = UINT64_MAX;
    const int n = 60;
    while (int(sim.finished.size()) < n && steps < 20000) {
      if (int(sim.seqs.size()) < n && rng() % 3 == 0) sim.add(1 + rng() % 120, 1 + rng() % 60);
      auto plan = sim.step();
      ++steps;
      // The oldest unfinished sequence.
      uint64_t o = UINT64_MAX;
      for (auto& s : sim.seqs)
        if (!sim.done(s->id)) o = std::min(o, s->id);
      const bool ran = std::any_of(plan.begin(), plan.end(), [&](auto& p) { return p.seq->id == o; });
      oldest_wait = o == oldest && !ran ? oldest_wait + 1 : 0;
      oldest = o;
      worst_oldest_wait = std::max(worst_oldest_wait, oldest_wait);
      int64_t tokens = 0;
      for (auto& p : plan) tokens += p.n + p.draft;
      ASSERT_LE(tokens, 96);
      ASSERT_LE(int64_t(plan.size()), 6);
    }
    EXPECT_EQ(int(sim.finished.size()), n) << "seed " << seed << " after " << steps << " steps";
    // The oldest can wait (e.g. preempted as the only unplanned sequence) only until memory
    // frees: until a running request ends, at most its whole life of 120/32 prefill chunks and
    // 60 decode steps, twice over.
    EXPECT_LE(worst_oldest_wait, 2 * (4 + 60)) << "seed " << seed;
    EXPECT_GT(sim.host.preempted.size(), 0u) << "seed " << seed;  // the pool really was short
  }
}

TEST(Scheduler, DraftDepthComesFromTheController) {
  SpeculationOptions so{SpecMode::Ngram, 4};
  Sim sim(sopts(8, 512), 1 << 20, so);
  sim.add(10, 100);
  sim.add(10, 3);  // room for one draft only (max_new - generated - 1)
  sim.step();      // prefills
  auto plan = sim.step();
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].draft, 4);  // Ngram: always max_draft
  EXPECT_EQ(plan[1].draft, 1);  // clamped to its room
  // The proposer had fewer guesses: the plan carries what it will really verify.
  sim.host.proposer_has = 2;
  plan = sim.step(/*accept=*/2);
  EXPECT_EQ(plan[0].draft, 2);
  // A step budget smaller than the drafts: clamped to what is left.
  Sim tight(sopts(2, 3), 1 << 20, so);
  tight.add(2, 50);
  tight.step();
  plan = tight.step();
  EXPECT_EQ(plan[0].draft, 2);  // 3 tokens: the decode and 2 drafts
  // Auto: each sequence gets the expected-value rule's depth for its own acceptance.
  SpeculationOptions ao{SpecMode::Auto, 6};
  Sim autos(sopts(8, 512), 1 << 20, ao);
  for (int i = 0; i < 3; ++i) autos.add(10, 100);
  autos.seqs[0]->spec.accepted = 50;  // mostly right
  autos.seqs[2]->spec.rejected = 50;  // mostly wrong
  autos.step();
  for (int i = 0; i < 3; ++i) autos.spec.observe_step(8 + 4 * i, 0.010 + 0.0001 * (8 + 4 * i));
  plan = autos.step();
  ASSERT_EQ(plan.size(), 3u);
  int64_t planned = 3;  // each sequence's choice sees the step so far: 3 tokens and the drafts before it
  for (auto& p : plan) {
    SpecChoice c = autos.spec.choose(p.seq->spec, 3, planned);
    EXPECT_EQ(p.draft, c.k) << "sequence " << p.seq->id;
    EXPECT_EQ(p.probe, c.probe);
    planned += p.draft;
  }
  EXPECT_GT(plan[0].draft, plan[2].draft);
  // Off: nobody drafts, the proposer is never asked.
  Sim off(sopts(8, 512));
  off.add(10, 10);
  off.step();
  EXPECT_EQ(off.step()[0].draft, 0);
  EXPECT_TRUE(off.host.offered.empty());
}

TEST(Scheduler, DropsDraftsBeforePreempting) {
  SpeculationOptions so{SpecMode::Ngram, 8};
  Sim sim(sopts(8, 512), 2, so);  // 32 token slots
  sim.add(15, 10);
  sim.add(10, 10);
  sim.step();
  auto plan = sim.step();  // 16 + 11 tokens: both fit one block each, but not 8 drafts each
  EXPECT_TRUE(sim.host.preempted.empty());
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].draft + plan[1].draft, 0);
}
