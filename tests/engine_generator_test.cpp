// Generator on real SmolLM2 (greedy tokens from transformers, tests/golden/model) with the real
// GGUF tokenizer: stop tokens, stop strings with hold-back, max/min tokens, ignore_eos, chunked
// prefill.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/generator.h"
#include "model/arch.h"
#include "tokenizer/tokenizer.h"
#include "smollm2_fixture.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace rapid;
using namespace rapid::engine;

namespace {

using Fixture = fixtures::SmolLM2;
Fixture& fx() { return fixtures::smollm2(); }

struct GenRun {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::None;
  int events = 0;
};

GenRun run(GenerationRequest req, GeneratorOptions go = {}) {
  Generator g(*fx().model, *fx().tok, std::move(req), go);
  GenRun r;
  for (int guard = 0; guard < 10000; ++guard) {
    GenerationEvent ev = g.step();
    ++r.events;
    r.tokens.insert(r.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    r.text += ev.text;
    if (ev.finished) {
      r.reason = ev.finish_reason;
      EXPECT_EQ(ev.completion_tokens, (int64_t)r.tokens.size());
      break;
    }
  }
  return r;
}

// Case 0 of the golden: "The capital of France is Paris.<|im_end|>..." (EOS id 2 at some step).
GenerationRequest capital_request() {
  GenerationRequest q;
  q.prompt = fx().golden["cases"][0]["prompt_ids"].get<std::vector<int32_t>>();
  q.sampling.temperature = 0;
  q.max_tokens = 40;
  return q;
}

std::vector<int32_t> golden_tokens(int n) {
  std::vector<int32_t> t;
  for (auto& s : fx().golden["cases"][0]["steps"]) {
    if ((int)t.size() == n) break;
    t.push_back(s["token"].get<int32_t>());
  }
  return t;
}


}  // namespace

TEST(Generator, StopsAtEosWithTransformersTokens) {
  NEED_SMOLLM2();
  GenRun r = run(capital_request());
  auto want = golden_tokens(64);
  auto eos = std::find(want.begin(), want.end(), 2);
  ASSERT_NE(eos, want.end());
  std::vector<int32_t> upto(want.begin(), eos + 1);
  EXPECT_EQ(r.tokens, upto);
  EXPECT_EQ(r.reason, FinishReason::Stop);
  EXPECT_EQ(r.text, fx().tok->decode(std::vector<int32_t>(want.begin(), eos), true));
  EXPECT_EQ(r.text, "The capital of France is Paris.");
}

TEST(Generator, IgnoreEosAndMaxTokens) {
  NEED_SMOLLM2();
  GenerationRequest q = capital_request();
  q.ignore_eos = true;
  q.max_tokens = 12;
  GenRun r = run(q);
  EXPECT_EQ(r.tokens, golden_tokens(12));
  EXPECT_EQ(r.reason, FinishReason::Length);
}

TEST(Generator, MinTokensBlocksEos) {
  NEED_SMOLLM2();
  GenerationRequest q = capital_request();
  q.min_tokens = 12;
  q.max_tokens = 14;
  GenRun r = run(q);
  ASSERT_GE(r.tokens.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_NE(r.tokens[i], 2) << i;
}

TEST(Generator, StopStringIsNotEmittedNorItsPrefixLeaked) {
  NEED_SMOLLM2();
  GenerationRequest q = capital_request();
  q.stop = {"is Par"};  // spans tokens " is" and " Paris"
  GenRun r = run(q);
  EXPECT_EQ(r.reason, FinishReason::Stop);
  EXPECT_EQ(r.text, "The capital of France ");
  // A stop string that never completes: its partial match is released at the end.
  q.stop = {"Paris!!"};
  GenRun r2 = run(q);
  EXPECT_EQ(r2.reason, FinishReason::Stop);  // ended by EOS
  EXPECT_EQ(r2.text, "The capital of France is Paris.");
}

TEST(Generator, StopTokenIdsFromRequest) {
  NEED_SMOLLM2();
  auto want = golden_tokens(5);
  GenerationRequest q = capital_request();
  q.stop_token_ids = {want[3]};
  GenRun r = run(q);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(want.begin(), want.begin() + 4));
  EXPECT_EQ(r.reason, FinishReason::Stop);
  EXPECT_EQ(r.text, fx().tok->decode(std::vector<int32_t>(want.begin(), want.begin() + 3), true));
}

TEST(Generator, ChunkedPrefillGivesSameTokens) {
  NEED_SMOLLM2();
  GenerationRequest q = capital_request();
  q.max_tokens = 8;
  q.ignore_eos = true;
  GeneratorOptions go;
  go.prefill_chunk = 5;  // prompt of 16 tokens → 4 prefill steps
  GenRun r = run(q, go);
  EXPECT_EQ(r.tokens, golden_tokens(8));
  EXPECT_EQ(r.events, 3 + 8);  // 3 token-less prefill events, then one per token
}

TEST(Generator, BadRequestsAreRefused) {
  NEED_SMOLLM2();
  GenerationRequest q;
  EXPECT_THROW(Generator(*fx().model, *fx().tok, q), Error);  // empty prompt
  q.prompt = {1, 999999};
  EXPECT_THROW(Generator(*fx().model, *fx().tok, q), Error);
}
