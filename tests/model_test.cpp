// Forward-pass tests against transformers: tiny random models of every architecture (goldens in
// tests/golden/tiny, from scripts/make_tiny_models.py) and greedy parity on real SmolLM2-135M
// (goldens in tests/golden/model, from scripts/make_parity_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/arch.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace rapid;

namespace {

const std::string kTiny = std::string(RAPID_SOURCE_DIR) + "/tests/golden/tiny/";

json read_json(const std::string& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot open " + p);
  return json::parse(f);
}

struct Golden {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

Golden load_golden(const std::string& p) {
  json j = read_json(p);
  Golden g;
  for (auto& t : j["tokens"]) g.tokens.push_back(t.get<int32_t>());
  for (auto& row : j["logits"]) g.logits.push_back(row.get<std::vector<float>>());
  return g;
}

std::unique_ptr<Model> make(const std::string& path, MatmulPath mp, DType kv = DType::F32, int threads = 2) {
  std::shared_ptr<Checkpoint> ck = load_checkpoint(path);
  ModelOptions o;
  o.num_threads = threads;
  o.matmul = mp;
  o.kv_dtype = kv;
  return create_model(ck, o);
}

// max |a-b| over a row, relative to max |b|.
double rel_err(const float* a, const std::vector<float>& b) {
  double m = 0, d = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    m = std::max(m, std::fabs((double)b[i]));
    d = std::max(d, std::fabs((double)a[i] - b[i]));
  }
  return d / m;
}

int argmax(const float* x, int64_t n) { return static_cast<int>(std::max_element(x, x + n) - x); }

struct TinyCase {
  const char* model;
  const char* golden;
  // llama is stored in f32; the other tiny models were saved as bf16 and their goldens computed
  // after a bf16 round trip that also rounded transformers' RoPE inv_freq buffer to bf16, which
  // shifts their logits by up to ~5e-4 relative at later positions (checked: with bf16-rounded
  // inv_freq our logits match those goldens to 1e-6).
  double prefill_tol;
};

class TinyForward : public ::testing::TestWithParam<TinyCase> {};

// Whole prompt at once, all logits, f32 weights path and f32 KV: must match transformers.
TEST_P(TinyForward, PrefillAllLogitsMatchTransformers) {
  auto c = GetParam();
  if (!fs::exists(kTiny + c.golden)) GTEST_SKIP() << "no golden " << c.golden;
  Golden g = load_golden(kTiny + c.golden);
  auto m = make(kTiny + c.model, MatmulPath::Exact);
  int64_t V = m->config().vocab_size;
  ASSERT_EQ(V, (int64_t)g.logits[0].size());
  auto st = m->new_state(64);
  std::vector<float> out(g.tokens.size() * V);
  m->forward(g.tokens.data(), g.tokens.size(), *st, out.data(), true);
  for (size_t t = 0; t < g.tokens.size(); ++t)
    EXPECT_LT(rel_err(out.data() + t * V, g.logits[t]), c.prefill_tol) << c.model << " position " << t;
}

// Token by token through the KV cache (f16 KV, default fast path): same logits within
// quantization noise and the same argmax.
TEST_P(TinyForward, DecodeStepwiseMatchesTransformers) {
  auto c = GetParam();
  if (!fs::exists(kTiny + c.golden)) GTEST_SKIP() << "no golden " << c.golden;
  Golden g = load_golden(kTiny + c.golden);
  for (MatmulPath mp : {MatmulPath::Exact, MatmulPath::Fast}) {
    auto m = make(kTiny + c.model, mp, DType::F16, 1);
    int64_t V = m->config().vocab_size;
    auto st = m->new_state(64);
    std::vector<float> out(V);
    for (size_t t = 0; t < g.tokens.size(); ++t) {
      m->forward(&g.tokens[t], 1, *st, out.data());
      double tol = mp == MatmulPath::Exact ? 2e-3 : 5e-2;
      EXPECT_LT(rel_err(out.data(), g.logits[t]), tol) << c.model << " position " << t;
    }
    EXPECT_EQ(st->length(), (int64_t)g.tokens.size());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, TinyForward,
    ::testing::Values(TinyCase{"llama", "llama/logits.json", 1e-5},
                      TinyCase{"qwen2", "qwen2/logits.json", 1e-3},
                      TinyCase{"qwen3", "qwen3/logits.json", 1e-3},
                      TinyCase{"gemma3", "gemma3/logits.json", 1e-3},
                      TinyCase{"llama-q8_0.gguf", "llama-q8_0.logits.json", 1e-5},
                      TinyCase{"qwen3-q4_0.gguf", "qwen3-q4_0.logits.json", 1e-3}),
    [](const auto& info) {
      std::string s = info.param.model;
      for (auto& ch : s) if (!isalnum((unsigned char)ch)) ch = '_';
      return s;
    });

TEST(ModelErrors, BadInputsAreRefusedClearly) {
  auto m = make(kTiny + "llama", MatmulPath::Fast);
  auto st = m->new_state(4);
  std::vector<float> out(m->config().vocab_size);
  int32_t bad = 100000;
  EXPECT_THROW(m->forward(&bad, 1, *st, out.data()), Error);
  int32_t toks[5] = {1, 2, 3, 4, 5};
  EXPECT_THROW(m->forward(toks, 5, *st, out.data()), Error);  // exceeds capacity
  m->forward(toks, 4, *st, out.data());
  EXPECT_EQ(st->length(), 4);
  st->truncate(2);
  EXPECT_EQ(st->length(), 2);
  EXPECT_THROW(st->truncate(3), Error);
}

// Rolling back the cache and replaying gives the same logits (speculation / prefix reuse).
TEST(ModelState, TruncateAndReplayIsDeterministic) {
  auto m = make(kTiny + "qwen3", MatmulPath::Fast);
  int64_t V = m->config().vocab_size;
  auto st = m->new_state(16);
  int32_t toks[6] = {5, 9, 200, 3, 77, 31};
  std::vector<float> a(V), b(V);
  m->forward(toks, 6, *st, a.data());
  st->truncate(3);
  m->forward(toks + 3, 3, *st, b.data());
  for (int64_t i = 0; i < V; ++i) ASSERT_FLOAT_EQ(a[i], b[i]);
}

}  // namespace
