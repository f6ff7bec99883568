// MTP speculation in the batching engine, on the tiny Qwen3 with random MTP heads
// (tests/golden/tiny/qwen3-mtp, scripts/make_mtp_model.py; the head itself is checked against a
// numpy reference in model_test). No small model with trained heads can be had here, so this
// proves exactness, not speed: greedy output with MTP drafts equals plain decoding (the
// single-sequence Generator), alone, batched and across prefix-cache hits.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "engine/batch_engine.h"
#include "engine/generator.h"
#include "engine_run_helpers.h"
#include "model/arch.h"
#include "tokenizer/tokenizer.h"

using namespace rapid;
using namespace rapid::engine;

namespace {

// The tiny models have no tokenizer: ids are bytes (eos 2, as in their config).
class ByteIds : public tok::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool, bool) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string decode(const std::vector<int32_t>& ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s += char(id);
    return s;
  }
  int64_t vocab_size() const override { return 256; }
  std::string token_bytes(int32_t id) const override { return std::string(1, char(id)); }
  std::string id_to_piece(int32_t id) const override { return token_bytes(id); }
  bool is_special(int32_t id) const override { return id < 3; }
  std::optional<int32_t> bos_id() const override { return 1; }
  std::vector<int32_t> eos_ids() const override { return {2}; }
  std::string bos_token() const override { return ""; }
  std::string eos_token() const override { return ""; }
  std::string chat_template() const override { return ""; }
};

std::shared_ptr<model::Model> tiny_mtp() {
  static std::shared_ptr<model::Model> m = [] {
    model::ModelOptions o;
    o.num_threads = 2;
    return std::shared_ptr<model::Model>(model::create_model(model::load_checkpoint(std::string(RAPID_SOURCE_DIR) + "/tests/golden/tiny/qwen3-mtp"), o));
  }();
  return m;
}

std::vector<GenerationRequest> requests(int n) {
  std::mt19937 rng(7);
  std::vector<GenerationRequest> out;
  for (int i = 0; i < n; ++i) {
    GenerationRequest q;
    // Repetitive prompts so even a weak guesser is sometimes right.
    std::vector<int32_t> motif;
    for (int k = 0; k < 3 + i % 4; ++k) motif.push_back(3 + int32_t(rng() % 250));
    for (int k = 0; k < 6 + i; ++k) q.prompt.insert(q.prompt.end(), motif.begin(), motif.end());
    q.sampling.temperature = 0;
    q.max_tokens = 40;
    q.ignore_eos = true;
    out.push_back(q);
  }
  return out;
}

std::vector<int32_t> plain(const GenerationRequest& q, const tok::Tokenizer& tok) {
  return test::plain_tokens(*tiny_mtp(), tok, q);
}

}  // namespace

TEST(MtpSpeculation, GreedyOutputEqualsPlainDecoding) {
  auto tok = std::make_shared<ByteIds>();
  auto qs = requests(6);
  std::vector<std::vector<int32_t>> want;
  for (auto& q : qs) want.push_back(plain(q, *tok));
  for (SpecMode mode : {SpecMode::Mtp, SpecMode::Auto}) {
    BatchEngineOptions o;
    o.spec.mode = mode;
    o.spec.max_draft = 3;
    o.kv.pool_bytes = 8ull << 20;
    o.draft_pool_bytes = 4ull << 20;
    o.max_step_tokens = 32;
    BatchEngine e(tiny_mtp(), tok, o);
    auto alone = test::run_all(e, {qs[0]});
    EXPECT_EQ(alone[0], want[0]) << spec_mode_name(mode);
    auto got = test::run_all(e, qs);  // batched; qs[0] now hits the prefix cache
    for (size_t i = 0; i < qs.size(); ++i) EXPECT_EQ(got[i], want[i]) << spec_mode_name(mode) << " request " << i;
    BatchEngineStats st = e.stats();
    EXPECT_GT(st.spec_drafted, 0u) << spec_mode_name(mode);
  }
}

TEST(MtpSpeculation, MtpModeNeedsHeads) {
  auto tok = std::make_shared<ByteIds>();
  model::ModelOptions mo;
  mo.num_threads = 1;
  std::shared_ptr<model::Model> plain_model = model::create_model(model::load_checkpoint(std::string(RAPID_SOURCE_DIR) + "/tests/golden/tiny/qwen3"), mo);
  BatchEngineOptions o;
  o.spec.mode = SpecMode::Mtp;
  o.kv.pool_bytes = 1ull << 20;
  EXPECT_THROW(BatchEngine(plain_model, tok, o), Error);
}
