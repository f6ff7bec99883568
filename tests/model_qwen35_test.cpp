// Qwen3.5 (Gated DeltaNet hybrid) against mlx-lm, on tiny random-weight models that mlx-lm itself
// writes (scripts/make_tiny_qwen35.py: a dense tied-embedding config and one with 2 value heads
// per key head and an own lm_head; each as MLX f32, the Hugging Face layout of the same weights,
// and mlx-lm's affine 4-bit quantization), with mlx-lm's greedy output (mlx on CPU, f32) as the
// goldens. The set is generated into $RAPID_MODEL_CACHE/qwen35-tiny on first use; the tests skip
// only when that is impossible (no mlx-lm in the test venv).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "compute/cpu_features.h"
#include "model/arch.h"
#include "model/weights.h"
#include "model_parity_helpers.h"
#include "tiny_model_set.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::parity;

namespace {

const char* kConfigs[] = {"dense-tied", "vheads-untied"};

// The model set, generated once if absent. Empty string (and the reason) when it cannot be.
const std::string& tiny_models(std::string* why) {
  static std::string reason;
  static const std::string dir =
      tiny::model_set("qwen35-tiny", "make_tiny_qwen35.py", "vheads-untied/mlx-q4/greedy.json", reason);
  if (why) *why = reason;
  return dir;
}

#define REQUIRE_TINY()                                  \
  std::string why_;                                     \
  const std::string root = tiny_models(&why_);          \
  if (root.empty()) GTEST_SKIP() << why_

std::unique_ptr<Model> make(const std::string& dir, MatmulPath mp, DType kv, bool chunked = false) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = kv;
  o.chunked_deltanet = chunked;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(dir)), o);
}

// Exact path (weights as f32, f32 KV): mlx-lm's tokens for 5 prompts × 64 greedy steps (prompt in
// one forward call, then one token per call), every stored logit within 1e-4 · max|logit|; with
// the recurrent and with the chunked DeltaNet prefill (prompts of 31 and 58 tokens take it).
void exact_vs_mlx(const std::string& dir) {
  json g = read_json(dir + "/greedy.json");
  for (bool chunked : {false, true}) {
    auto m = make(dir, MatmulPath::Exact, DType::F32, chunked);
    double worst = exact_greedy(*m, g, 1e-4);
    std::printf("%s%s: worst |dlogit| / max|logit| = %.3g\n", dir.c_str(), chunked ? " (chunked)" : "", worst);
  }
}

}  // namespace

TEST(Qwen35Parity, MlxF32GreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/mlx-f32");
}

// The Hugging Face layout (model.language_model.* names, conv1d [C, 1, K], (1 + w) norms stored
// as w): the goldens come from mlx-lm loading that directory (its sanitize converts it).
TEST(Qwen35Parity, HfLayoutGreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/hf-f32");
}

// mlx-lm's own 4-bit quantization: mlx computes the quantized matmuls on the same 4-bit values
// our exact path dequantizes to f32.
TEST(Qwen35Parity, MlxQ4GreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/mlx-q4");
}

// The scalar recurrence and conv (no AVX2) give the same result.
TEST(Qwen35Parity, ScalarKernelsMatchMlxLm) {
  REQUIRE_TINY();
  Isa saved = active_isa();
  set_active_isa(Isa::Scalar);
  exact_vs_mlx(root + "/vheads-untied/mlx-f32");
  set_active_isa(saved);
}

// A prompt in one forward call (all logits; recurrent or chunked DeltaNet) equals the same tokens
// fed one call at a time.
TEST(Qwen35Model, PrefillEqualsTokenByTokenDecode) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) {
    const std::string dir = root + "/" + c + "/mlx-f32";
    json g = read_json(dir + "/greedy.json");
    for (auto [mp, chunked] : {std::pair{MatmulPath::Exact, false}, std::pair{MatmulPath::Exact, true},
                               std::pair{MatmulPath::Fast, true}}) {
      auto m = make(dir, mp, DType::F32, chunked);
      const int64_t V = m->config().vocab_size;
      std::vector<int32_t> ids = g["cases"][4]["prompt_ids"].get<std::vector<int32_t>>();
      const int64_t n = static_cast<int64_t>(ids.size());
      std::vector<float> all(static_cast<size_t>(n * V)), one(static_cast<size_t>(V));
      auto a = m->new_state(n);
      m->forward(ids.data(), n, *a, all.data(), true);
      auto b = m->new_state(n);
      double worst = 0;
      for (int64_t t = 0; t < n; ++t) {
        m->forward(&ids[t], 1, *b, one.data());
        const float* p = all.data() + t * V;
        float mx = 0;
        for (int64_t j = 0; j < V; ++j) mx = std::max(mx, std::fabs(one[j]));
        for (int64_t j = 0; j < V; ++j) worst = std::max(worst, double(std::fabs(p[j] - one[j])) / mx);
        EXPECT_EQ(argmax(p, V), argmax(one.data(), V)) << c << " token " << t;
      }
      EXPECT_LE(worst, 1e-5) << c << (chunked ? " chunked" : "");
      EXPECT_EQ(a->length(), n);
      EXPECT_EQ(b->length(), n);
    }
  }
}

// Two sequences in one forward_batch give bitwise the logits each gives alone.
TEST(Qwen35Model, BatchedForwardEqualsSeparate) {
  REQUIRE_TINY();
  const std::string dir = root + "/vheads-untied/mlx-f32";
  json g = read_json(dir + "/greedy.json");
  auto m = make(dir, MatmulPath::Fast, DType::F16);
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> p1 = g["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> p2 = g["cases"][3]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<float> l1(V), l2(V), s1(V), s2(V);
  auto a1 = m->new_state(128), a2 = m->new_state(128), b1 = m->new_state(128), b2 = m->new_state(128);
  m->forward(p1.data(), p1.size(), *a1, s1.data());
  m->forward(p2.data(), p2.size(), *a2, s2.data());
  BatchEntry e[2];
  e[0].tokens = p1.data(), e[0].n = p1.size(), e[0].state = b1.get(), e[0].logits = l1.data();
  e[1].tokens = p2.data(), e[1].n = p2.size(), e[1].state = b2.get(), e[1].logits = l2.data();
  m->forward_batch(e, 2);
  EXPECT_EQ(l1, s1);
  EXPECT_EQ(l2, s2);
  // Then one decode step of both, batched vs alone.
  int32_t t1 = argmax(l1.data(), V), t2 = argmax(l2.data(), V);
  m->forward(&t1, 1, *a1, s1.data());
  m->forward(&t2, 1, *a2, s2.data());
  e[0].tokens = &t1, e[0].n = 1, e[1].tokens = &t2, e[1].n = 1;
  m->forward_batch(e, 2);
  EXPECT_EQ(l1, s1);
  EXPECT_EQ(l2, s2);
}

// The recurrent state cannot be rewound: a partial truncate is refused and changes nothing;
// truncate(0) starts the sequence over.
TEST(Qwen35Model, TruncateRefusesRollbackAndRestartsAtZero) {
  REQUIRE_TINY();
  const std::string dir = root + "/dense-tied/mlx-f32";
  json g = read_json(dir + "/greedy.json");
  auto m = make(dir, MatmulPath::Exact, DType::F32);
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> ids = g["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<float> first(V), again(V);
  auto st = m->new_state(64);
  m->forward(ids.data(), ids.size(), *st, first.data());
  EXPECT_THROW(st->truncate(3), Error);
  EXPECT_EQ(st->length(), static_cast<int64_t>(ids.size()));
  st->truncate(0);
  EXPECT_EQ(st->length(), 0);
  m->forward(ids.data(), ids.size(), *st, again.data());
  EXPECT_EQ(first, again);
}

// Hostile input: out-of-vocabulary ids and overflowing the capacity are refused without
// advancing the state.
TEST(Qwen35Model, BadInputIsRefusedAndLosesNothing) {
  REQUIRE_TINY();
  auto m = make(root + "/dense-tied/mlx-q4", MatmulPath::Fast, DType::F16);
  const int64_t V = m->config().vocab_size;
  std::vector<float> logits(V);
  auto st = m->new_state(4);
  int32_t bad[2] = {1, static_cast<int32_t>(V)};
  EXPECT_THROW(m->forward(bad, 2, *st, logits.data()), Error);
  EXPECT_EQ(st->length(), 0);
  int32_t five[5] = {1, 2, 3, 4, 5};
  EXPECT_THROW(m->forward(five, 5, *st, logits.data()), Error);
  EXPECT_EQ(st->length(), 0);
  EXPECT_NO_THROW(m->forward(five, 4, *st, logits.data()));
  EXPECT_EQ(st->length(), 4);
}
