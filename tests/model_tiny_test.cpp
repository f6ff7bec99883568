// Every tiny random-weight model set against mlx-lm, one parameterised suite: Qwen3.5 dense
// (scripts/make_tiny_qwen35.py: tied embeddings; more value than key heads with an own lm_head)
// and the mixture-of-experts set (scripts/make_tiny_moe.py: qwen3_moe, qwen3_5_moe, qwen3_next,
// gpt_oss — whose HF-layout goldens are its mlx-f32 twin's: mlx-lm cannot load that layout) and
// Gemma 4 (scripts/make_tiny_gemma4.py: E2B-like kv-shared layers and per-layer inputs; 31B-like
// keys doubling as values; 26B-A4B-like experts beside the dense MLP) and GLM-4.7-Flash
// (scripts/make_tiny_glm.py: multi-head latent attention, DeepSeek-V3-routed experts with a
// shared expert after a dense first layer; its HF-layout goldens are mlx-lm's on that directory,
// and the script checks transformers' formulas against mlx-lm's logits) and Mistral 3
// (scripts/make_tiny_mistral3.py: Devstral Small 2's mistral3 wrapper and a text-only ministral3,
// YaRN RoPE and the llama-4 query scaling past the original context).
// mlx-lm writes each model itself (random init, save_model) as MLX f32, in the Hugging Face layout
// of the same weights, and as its own affine 4-bit quantization, and its greedy output (mlx on
// CPU, f32) is the golden. The sets are generated into $RAPID_MODEL_CACHE on first use; the tests
// skip only when that is impossible (no mlx-lm in the test venv). Family-specific checks stay in
// model_qwen35_test.cpp (truncate, MTP) and model_moe_test.cpp (expert shapes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cache/block_pool.h"
#include "common/error.h"
#include "compute/cpu_features.h"
#include "model/paged_kv.h"
#include "model_parity_helpers.h"
#include "gemma4_tiny.h"
#include "glm_tiny.h"
#include "moe_tiny.h"

using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

struct TinyModel {
  const char* set;     // directory under $RAPID_MODEL_CACHE
  const char* config;  // model under it
  bool hybrid;         // Gated DeltaNet layers: recurrent state, chunked prefill, rollback window
};

const TinyModel kModels[] = {
    {"qwen35-tiny", "dense-tied", true}, {"qwen35-tiny", "vheads-untied", true}, {"moe-tiny", "qwen3-moe", false},
    {"moe-tiny", "qwen35-moe", true},    {"moe-tiny", "qwen3-next", true}, {"moe-tiny", "gpt-oss", false},
    {"gemma4-tiny", "e2b", false},       {"gemma4-tiny", "kv", false},      {"gemma4-tiny", "moe", false},
    {"glm-tiny", "glm", false},
    {"mistral3-tiny", "devstral", false}, {"mistral3-tiny", "ministral3", false},
};

// The set a model belongs to, generated on first use.
const std::string& model_set(const std::string& set, std::string* why) {
  if (set == "moe-tiny") return moe_tiny::tiny_models(why);
  if (set == "gemma4-tiny") return gemma4_tiny::tiny_models(why);
  if (set == "glm-tiny") return glm_tiny::tiny_models(why);
  if (set == "mistral3-tiny")
    return qwen35::model_set("mistral3-tiny", "/ministral3/mlx-q4/greedy.json", "make_tiny_mistral3.py", why);
  return qwen35::tiny_models(why);
}

class Tiny : public testing::TestWithParam<TinyModel> {
 protected:
  void SetUp() override {
    std::string why;
    const TinyModel& t = GetParam();
    root_ = model_set(t.set, &why);
    if (root_.empty()) SET_MISSING(why);
  }
  std::string dir(const char* copy) const { return root_ + "/" + GetParam().config + "/" + copy; }

  // Exact path (weights as f32, f32 KV): mlx-lm's tokens for 5 prompts × 64 greedy steps (prompt
  // in one forward call, then one token per call), every stored logit within 1e-4 · max|logit|;
  // hybrids also with the chunked DeltaNet prefill (the prompts of 31 and 58 tokens take it).
  void exact_vs_mlx(const char* copy) {
    const std::string d = dir(copy);
    json g = read_json(d + "/greedy.json");
    for (bool chunked : {false, true}) {
      if (chunked && !GetParam().hybrid) break;
      auto m = qwen35::make(d, compute::MatmulPath::Exact, tensor::DType::F32, chunked);
      double worst = exact_greedy(*m, g, 1e-4);
      std::printf("%s%s: worst |dlogit| / max|logit| = %.3g\n", d.c_str(), chunked ? " (chunked)" : "", worst);
    }
  }

  std::string root_;
};

// The hybrids alone: the checks of the recurrent state.
class TinyHybrid : public Tiny {};

std::vector<TinyModel> hybrids() {
  std::vector<TinyModel> v;
  for (const TinyModel& m : kModels)
    if (m.hybrid) v.push_back(m);
  return v;
}

std::string name(const testing::TestParamInfo<TinyModel>& p) {
  std::string s = p.param.config;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// The logits of a prompt's rows from one forward call (all rows), then from the same tokens fed one
// call at a time: [n][V] each.
std::pair<std::vector<float>, std::vector<float>> prefill_and_decode(Model& m, const std::vector<int32_t>& ids) {
  const int64_t V = m.config().vocab_size, n = static_cast<int64_t>(ids.size());
  std::vector<float> all(static_cast<size_t>(n * V)), one(all.size());
  auto a = m.new_state(n);
  m.forward(ids.data(), n, *a, all.data(), true);
  auto b = m.new_state(n);
  for (int64_t t = 0; t < n; ++t) m.forward(&ids[t], 1, *b, one.data() + t * V);
  EXPECT_EQ(a->length(), n);
  EXPECT_EQ(b->length(), n);
  return {all, one};
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(MlxLm, Tiny, testing::ValuesIn(kModels), name);
INSTANTIATE_TEST_SUITE_P(MlxLm, TinyHybrid, testing::ValuesIn(hybrids()), name);

TEST_P(Tiny, MlxF32GreedyMatchesMlxLm) { exact_vs_mlx("mlx-f32"); }

// The Hugging Face layout (conv1d [C, 1, K], (1 + w) norms stored as w, model.language_model.*
// names for Qwen3.5, experts per expert or fused gate_up_proj): the goldens come from mlx-lm
// loading that directory (its sanitize converts it).
TEST_P(Tiny, HfLayoutGreedyMatchesMlxLm) { exact_vs_mlx("hf-f32"); }

// mlx-lm's own 4-bit quantization (8-bit routers where mlx-lm's per-module overrides say so): mlx
// computes the quantized matmuls on the same 4-bit values our exact path dequantizes to f32.
TEST_P(Tiny, MlxQ4GreedyMatchesMlxLm) { exact_vs_mlx("mlx-q4"); }

// The scalar DeltaNet recurrence and conv (no AVX2) give the same result.
TEST_P(TinyHybrid, ScalarKernelsMatchMlxLm) {
  compute::Isa saved = compute::active_isa();
  compute::set_active_isa(compute::Isa::Scalar);
  exact_vs_mlx("mlx-f32");
  compute::set_active_isa(saved);
}

// A prompt in one forward call (rows grouped by expert) equals the same tokens fed one call at a
// time, bitwise on the fast path.
TEST_P(Tiny, PrefillEqualsTokenByTokenDecode) {
  json g = read_json(dir("mlx-q4") + "/greedy.json");
  auto m = qwen35::make(dir("mlx-q4"), compute::MatmulPath::Fast, tensor::DType::F32);
  const int64_t V = m->config().vocab_size;
  auto [all, one] = prefill_and_decode(*m, g["cases"][4]["prompt_ids"].get<std::vector<int32_t>>());
  for (size_t t = 0; t < all.size() / V; ++t)
    ASSERT_TRUE(std::equal(all.begin() + t * V, all.begin() + (t + 1) * V, one.begin() + t * V)) << "token " << t;
}

// The chunked DeltaNet prefill (exact and fast path) and the exact recurrent one agree with
// token-by-token decode within f32 rounding, and pick the same tokens.
TEST_P(TinyHybrid, ChunkedPrefillEqualsTokenByTokenDecode) {
  json g = read_json(dir("mlx-f32") + "/greedy.json");
  for (auto [mp, chunked] : {std::pair{compute::MatmulPath::Exact, false}, std::pair{compute::MatmulPath::Exact, true},
                             std::pair{compute::MatmulPath::Fast, true}}) {
    auto m = qwen35::make(dir("mlx-f32"), mp, tensor::DType::F32, chunked);
    const int64_t V = m->config().vocab_size;
    auto [all, one] = prefill_and_decode(*m, g["cases"][4]["prompt_ids"].get<std::vector<int32_t>>());
    double worst = 0;
    for (size_t t = 0; t < all.size() / V; ++t) {
      const float *p = all.data() + t * V, *q = one.data() + t * V;
      float mx = 0;
      for (int64_t j = 0; j < V; ++j) mx = std::max(mx, std::fabs(q[j]));
      for (int64_t j = 0; j < V; ++j) worst = std::max(worst, double(std::fabs(p[j] - q[j])) / mx);
      EXPECT_EQ(argmax(p, V), argmax(q, V)) << "token " << t;
    }
    EXPECT_LE(worst, 1e-5) << (chunked ? "chunked" : "recurrent");
  }
}

// 16 sequences in one forward_batch (prefill, then decode steps) give bitwise the logits each gives
// alone, although they share experts and layers.
TEST_P(Tiny, SixteenBatchedSequencesEqualSeparate) {
  json g = read_json(dir("mlx-q4") + "/greedy.json");
  auto m = qwen35::make(dir("mlx-q4"), compute::MatmulPath::Fast, tensor::DType::F16);
  const int64_t V = m->config().vocab_size;
  constexpr int kSeqs = 16;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kSeqs; ++i) {
    auto p = g["cases"][i % 5]["prompt_ids"].get<std::vector<int32_t>>();
    p.push_back(static_cast<int32_t>(i));  // distinct sequences
    prompts.push_back(p);
  }
  std::vector<std::unique_ptr<SequenceState>> alone, batched;
  std::vector<std::vector<float>> la(kSeqs, std::vector<float>(V)), lb(kSeqs, std::vector<float>(V));
  for (int i = 0; i < kSeqs; ++i) {
    alone.push_back(m->new_state(128));
    batched.push_back(m->new_state(128));
  }
  std::vector<int32_t> next(kSeqs);
  for (int step = 0; step < 4; ++step) {
    std::vector<BatchEntry> e(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
      const int32_t* toks = step == 0 ? prompts[i].data() : &next[i];
      const int64_t n = step == 0 ? static_cast<int64_t>(prompts[i].size()) : 1;
      m->forward(toks, n, *alone[i], la[i].data());
      e[i].tokens = toks, e[i].n = n, e[i].state = batched[i].get(), e[i].logits = lb[i].data();
    }
    m->forward_batch(e.data(), e.size());
    for (int i = 0; i < kSeqs; ++i) {
      ASSERT_EQ(la[i], lb[i]) << "sequence " << i << " step " << step;
      next[i] = argmax(la[i].data(), V);
    }
  }
}

// A prefix-cache checkpoint: the recurrent state saved after p tokens, restored into a fresh
// sequence that adopts the first sequence's KV pages, continues with mlx-lm's greedy tokens
// (prompt in one call, then one token per call with mlx-lm's cache) for every cut p, including
// mid-block ones; a wrong-size state is refused.
TEST_P(TinyHybrid, RecurrentCheckpointResumesAsMlxLm) {
  json g = read_json(dir("mlx-f32") + "/greedy.json");
  auto m = qwen35::make(dir("mlx-f32"), compute::MatmulPath::Exact, tensor::DType::F32);
  const int64_t V = m->config().vocab_size;
  const json& c = g["cases"][4];
  std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>(), want;
  for (auto& st : c["steps"]) want.push_back(st["token"].get<int32_t>());
  auto pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), m->kv_block_shape(16).block_bytes() * 40);
  for (int64_t p : {int64_t(1), int64_t(16), int64_t(23), int64_t(ids.size()) - 1}) {
    std::vector<float> logits(V);
    auto a = m->new_paged_state(pool, 256);
    m->forward(ids.data(), p, *a, logits.data());
    std::vector<uint8_t> bytes(a->recurrent_bytes());
    ASSERT_EQ(bytes.size(), m->recurrent_state_bytes());
    a->save_recurrent(bytes.data());
    auto b = m->new_paged_state(pool, 256);
    auto* pb = static_cast<PagedKvState*>(b.get());
    pb->adopt_prefix(static_cast<PagedKvState*>(a.get())->table().blocks(), p);
    EXPECT_THROW(b->restore_recurrent(bytes.data(), bytes.size() - 4), Error);
    b->restore_recurrent(bytes.data(), bytes.size());
    a.reset();  // b holds its own references on the adopted pages
    m->forward(ids.data() + p, int64_t(ids.size()) - p, *b, logits.data());
    std::vector<int32_t> got;
    for (size_t i = 0; i < want.size(); ++i) {
      int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got.push_back(t);
      m->forward(&t, 1, *b, logits.data());
    }
    EXPECT_EQ(got, want) << "cut at " << p;
  }
}

// Speculative verification on the hybrid: a forward over the next token plus k drafts (all
// logits) gives bitwise the logits of feeding them one at a time (what plain decoding computes),
// and truncating to any length inside that window leaves the state plain decoding of the kept
// tokens leaves: the following forward's logits are bitwise equal. Outside the window it is
// refused. The production (fast) path.
TEST_P(TinyHybrid, RollbackInsideVerifyWindowEqualsPlainDecode) {
  json g = read_json(dir("mlx-q4") + "/greedy.json");
  auto m = qwen35::make(dir("mlx-q4"), compute::MatmulPath::Fast, tensor::DType::F16);
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> prompt = g["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  const int64_t P = static_cast<int64_t>(prompt.size());
  const std::vector<int32_t> win = {7, 100, 33, 250};  // next token + 3 drafts
  const int32_t after = 42;
  std::vector<float> l(V);
  // Plain: the prompt, then one token per call; keep every row and the next step's logits.
  std::vector<std::vector<float>> plain_rows, plain_next;
  for (size_t keep = 1; keep <= win.size(); ++keep) {
    auto st = m->new_state(64);
    m->forward(prompt.data(), P, *st, l.data());
    for (size_t t = 0; t < keep; ++t) {
      m->forward(&win[t], 1, *st, l.data());
      if (keep == win.size()) plain_rows.push_back(l);
    }
    m->forward(&after, 1, *st, l.data());
    plain_next.push_back(l);
  }
  for (size_t keep = 1; keep <= win.size(); ++keep) {
    auto st = m->new_state(64);
    m->forward(prompt.data(), P, *st, l.data());
    std::vector<float> rows(win.size() * V);
    m->forward(win.data(), static_cast<int64_t>(win.size()), *st, rows.data(), true);
    for (size_t t = 0; t < win.size(); ++t)
      EXPECT_TRUE(std::equal(plain_rows[t].begin(), plain_rows[t].end(), rows.begin() + t * V)) << "row " << t;
    st->truncate(P + static_cast<int64_t>(keep));
    EXPECT_EQ(st->length(), P + static_cast<int64_t>(keep));
    m->forward(&after, 1, *st, l.data());
    EXPECT_EQ(l, plain_next[keep - 1]) << "keeping " << keep << " of " << win.size();
    // The window is gone with the rolled-back tokens: no second rollback.
    EXPECT_THROW(st->truncate(P), Error);
  }
}
