// Speculative decoding on the Qwen3.5 hybrid (Gated DeltaNet + gated attention) in the batching
// engine: rejected drafts roll the recurrent state back (model/qwen3_5.cpp, HybridState), so
// greedy output equals plain decoding (the single-sequence Generator, no speculation) token for
// token — with the model's own MTP heads (random weights: scripts/make_qwen35_mtp.py), with prompt
// lookup, and with test proposers that know the plain continuation and draft it wrong at every
// position, right at every position, or right for a varying prefix (every partial accept length).
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "engine/batch_engine.h"
#include "engine/generator.h"
#include "engine_run_helpers.h"
#include "model/arch.h"
#include "qwen35_models.h"
#include "tokenizer/tokenizer.h"

using namespace rapid;
using namespace rapid::engine;

namespace {

#define REQUIRE_MTP()                                   \
  std::string why_;                                     \
  const std::string mroot = qwen35::mtp_models(&why_);  \
  if (mroot.empty()) SET_MISSING(why_)

struct Tiny {
  std::shared_ptr<model::Model> model;
  std::shared_ptr<const tok::Tokenizer> tok;
};

Tiny load(const std::string& dir) {
  model::ModelOptions o;
  o.num_threads = 2;
  return {std::shared_ptr<model::Model>(model::create_model(model::load_checkpoint(dir), o)), tok::load_tokenizer(dir + "/tokenizer.json")};
}

std::vector<GenerationRequest> requests(int n, int64_t vocab) {
  std::mt19937 rng(11);
  std::vector<GenerationRequest> out;
  for (int i = 0; i < n; ++i) {
    GenerationRequest q;
    std::vector<int32_t> motif;  // repetitive prompts, so prompt lookup has something to guess from
    for (int k = 0; k < 2 + i % 3; ++k) motif.push_back(1 + int32_t(rng() % uint32_t(vocab - 1)));
    for (int k = 0; k < 3 + i; ++k) q.prompt.insert(q.prompt.end(), motif.begin(), motif.end());
    q.sampling.temperature = 0;
    q.max_tokens = 24;
    q.ignore_eos = true;
    out.push_back(q);
  }
  return out;
}

std::vector<int32_t> plain(const Tiny& t, const GenerationRequest& q) {
  return test::plain_tokens(*t.model, *t.tok, q);
}

BatchEngineOptions options(SpecMode mode) {
  BatchEngineOptions o;
  o.spec.mode = mode;
  o.spec.max_draft = 3;
  o.kv.pool_bytes = 8ull << 20;
  o.draft_pool_bytes = 4ull << 20;
  o.max_step_tokens = 64;
  return o;
}

// Knows every request's plain continuation and drafts from it: Wrong (every draft off by one
// token), Right (all correct), or Partial (the first `size % (k + 1)` correct, then wrong).
class OracleProposer : public DraftProposer {
 public:
  enum Kind { Wrong, Right, Partial };
  OracleProposer(std::vector<std::vector<int32_t>> full, int64_t vocab, Kind kind)
      : full_(std::move(full)), vocab_(vocab), kind_(kind) {}
  void propose(std::vector<DraftJob>& jobs) override {
    for (DraftJob& j : jobs) {
      const std::vector<int32_t>& t = *j.tokens;
      const std::vector<int32_t>* f = nullptr;
      for (const auto& c : full_)
        if (c.size() > t.size() && std::equal(t.begin(), t.end(), c.begin())) f = &c;
      if (!f) continue;
      const size_t right = kind_ == Right ? size_t(j.k) : kind_ == Partial ? t.size() % size_t(j.k + 1) : 0;
      for (int i = 0; i < j.k && t.size() + size_t(i) < f->size(); ++i) {
        const int32_t want = (*f)[t.size() + size_t(i)];
        j.draft.push_back(size_t(i) < right ? want : int32_t((want + 1) % vocab_));
      }
    }
  }
  void advance(uint64_t, int64_t, int64_t, const float*, bool) override {}
  void forget(uint64_t) override {}

 private:
  std::vector<std::vector<int32_t>> full_;
  int64_t vocab_;
  Kind kind_;
};

}  // namespace

// The model's own MTP heads (forced, and chosen by auto), prompt lookup, and no speculation: the
// same greedy tokens as plain decoding, alone and batched, on both configs.
TEST(Qwen35Speculation, GreedyOutputEqualsPlainDecoding) {
  REQUIRE_MTP();
  for (const char* c : {"dense-tied", "vheads-untied"}) {
    Tiny t = load(mroot + "/" + c);
    ASSERT_EQ(t.model->mtp_layers(), 1);
    auto qs = requests(5, t.model->config().vocab_size);
    std::vector<std::vector<int32_t>> want;
    for (auto& q : qs) want.push_back(plain(t, q));
    for (SpecMode mode : {SpecMode::Mtp, SpecMode::Auto, SpecMode::Ngram, SpecMode::Off}) {
      BatchEngine e(t.model, t.tok, options(mode));
      EXPECT_EQ(test::run_all(e, {qs[0]})[0], want[0]) << c << " " << spec_mode_name(mode);
      auto got = test::run_all(e, qs);
      for (size_t i = 0; i < qs.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << c << " " << spec_mode_name(mode) << " request " << i;
      if (mode == SpecMode::Mtp || mode == SpecMode::Ngram) {
        EXPECT_GT(e.stats().spec_drafted, 0u) << c;
      }
      if (mode == SpecMode::Off) {
        EXPECT_EQ(e.stats().spec_drafted, 0u) << c;
      }
    }
  }
}

// Drafts wrong at every position, right at every position, and right for every prefix length in
// turn: output stays exact, and the acceptance counts show which of the three happened.
TEST(Qwen35Speculation, RollbackKeepsOutputExactForAnyAcceptedPrefix) {
  REQUIRE_MTP();
  Tiny t = load(mroot + "/vheads-untied");
  const int64_t V = t.model->config().vocab_size;
  auto qs = requests(4, V);
  std::vector<std::vector<int32_t>> want, full;
  for (auto& q : qs) {
    want.push_back(plain(t, q));
    full.push_back(q.prompt);
    full.back().insert(full.back().end(), want.back().begin(), want.back().end());
  }
  for (auto kind : {OracleProposer::Wrong, OracleProposer::Right, OracleProposer::Partial}) {
    BatchEngineOptions o = options(SpecMode::Ngram);
    o.proposer = [&] { return std::make_unique<OracleProposer>(full, V, kind); };
    BatchEngine e(t.model, t.tok, o);
    auto got = test::run_all(e, qs);
    for (size_t i = 0; i < qs.size(); ++i) EXPECT_EQ(got[i], want[i]) << "proposer " << kind << " request " << i;
    const BatchEngineStats st = e.stats();
    EXPECT_GT(st.spec_drafted, 0u);
    if (kind == OracleProposer::Wrong) {
      EXPECT_EQ(st.spec_accepted, 0u);
    }
    if (kind == OracleProposer::Right) {
      EXPECT_EQ(st.spec_accepted, st.spec_drafted);
      // 24 tokens each take at least 24 steps without drafts; about 4 tokens a step with them.
      EXPECT_LT(st.steps, 16u);
    }
    if (kind == OracleProposer::Partial) {
      EXPECT_GT(st.spec_accepted, 0u);
      EXPECT_LT(st.spec_accepted, st.spec_drafted);
    }
  }
}

// A draft model steps one token at a time and rolls back several: a hybrid cannot be one.
TEST(Qwen35Speculation, HybridDraftModelIsRefused) {
  REQUIRE_MTP();
  Tiny t = load(mroot + "/dense-tied");
  BatchEngineOptions o = options(SpecMode::Draft);
  o.draft_model = t.model;
  EXPECT_THROW(BatchEngine(t.model, t.tok, o), Error);
}
