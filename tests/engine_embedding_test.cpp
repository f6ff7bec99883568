// The embedding engine on the tiny random Qwen3-Embedding-shaped model
// (scripts/make_tiny_embedding_model.py; tests/python/test_embeddings.py checks its vectors
// against mlx-lm): batching and concurrency never change a vector (bit-identical to the input
// embedded alone), pooling arithmetic, refused inputs, and a model that cannot give hidden states
// (the Qwen3.5 hybrid) refused at construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/error.h"
#include "engine/embedding_engine.h"
#include "model/arch.h"
#include "model/weights.h"
#include "qwen35_models.h"

namespace rapid::engine {
namespace {

const std::string& tiny_embedding_model(std::string* why) {
  return qwen35::model_set("tiny-qwen3-embedding", "/modules.json", "make_tiny_embedding_model.py", why);
}

std::unique_ptr<engine::EmbeddingEngine> load_engine(const std::string& dir, int64_t step_tokens = 2048) {
  auto ckpt = std::shared_ptr<model::Checkpoint>(model::load_checkpoint(dir));
  model::ModelOptions mo;
  mo.kv_dtype = tensor::DType::F32;
  engine::EmbeddingEngineOptions eo;
  eo.pooling = model::read_sentence_transformers(dir).value();
  eo.max_input_tokens = 64;
  eo.max_step_tokens = step_tokens;
  return std::make_unique<engine::EmbeddingEngine>(model::create_model(ckpt, mo), eo);
}

#define NEED_MODEL(dir)                      \
  std::string why;                           \
  const std::string& dir = tiny_embedding_model(&why); \
  if (dir.empty()) SET_MISSING(why);

std::vector<std::vector<int32_t>> inputs() {
  return {{14990, 1879, 151643}, {785, 3974, 13876, 38835, 151643}, {87, 151643}, {16, 17, 18, 19, 20, 21, 22, 23}};
}

TEST(EmbeddingEngine, BatchedEqualsAloneBitForBit) {
  NEED_MODEL(dir);
  auto eng = load_engine(dir);
  auto all = eng->embed(inputs());
  ASSERT_EQ(all.size(), 4u);
  for (size_t i = 0; i < all.size(); ++i) {
    auto one = eng->embed({inputs()[i]});
    EXPECT_EQ(one[0], all[i]) << i;
    double ss = 0;
    for (float x : all[i]) ss += double(x) * x;
    EXPECT_NEAR(ss, 1.0, 1e-5);  // the model's Normalize module
  }
  EXPECT_NE(all[0], all[1]);
}

TEST(EmbeddingEngine, ConcurrentCallersUnderASmallStepBudgetGetTheirOwnVectors) {
  NEED_MODEL(dir);
  auto alone = load_engine(dir)->embed(inputs());
  auto eng = load_engine(dir, /*step_tokens=*/6);  // forces many small round-robin steps
  std::vector<std::vector<std::vector<float>>> got(8);
  std::vector<std::thread> ts;
  for (size_t t = 0; t < got.size(); ++t)
    ts.emplace_back([&, t] {
      auto in = inputs();
      std::rotate(in.begin(), in.begin() + static_cast<long>(t % in.size()), in.end());
      got[t] = eng->embed(in);
      std::rotate(got[t].rbegin(), got[t].rbegin() + static_cast<long>(t % in.size()), got[t].rend());
    });
  for (auto& t : ts) t.join();
  for (const auto& g : got) EXPECT_EQ(g, alone);
}

// A caller that stops waiting (its HTTP client left) drops the inputs not yet taken; the engine
// then serves the next caller as if nothing happened.
TEST(EmbeddingEngine, StoppedCallerDropsItsInputsAndTheNextCallerIsUnaffected) {
  NEED_MODEL(dir);
  auto alone = load_engine(dir)->embed(inputs());
  auto eng = load_engine(dir, /*step_tokens=*/6);  // thousands of small steps for `many`
  std::vector<std::vector<int32_t>> many;
  for (int r = 0; r < 1000; ++r)
    for (const auto& in : inputs()) many.push_back(in);
  int polls = 0;
  auto dropped = eng->embed_until(many, [&] {
    ++polls;
    return true;
  });
  EXPECT_FALSE(dropped.has_value());
  EXPECT_EQ(polls, 1);  // asked at once, never again
  EXPECT_EQ(eng->embed(inputs()), alone);
  auto kept = eng->embed_until(inputs(), [] { return false; });
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(*kept, alone);
}

TEST(EmbeddingEngine, RefusesEmptyLongAndOutOfVocabularyInputs) {
  NEED_MODEL(dir);
  auto eng = load_engine(dir);
  EXPECT_TRUE(eng->embed({}).empty());
  EXPECT_THROW(eng->embed({{}}), Error);
  EXPECT_THROW(eng->embed({std::vector<int32_t>(65, 5)}), Error);
  EXPECT_THROW(eng->embed({{1, -1}}), Error);
  EXPECT_THROW(eng->embed({{int32_t(eng->vocab_size())}}), Error);
  EXPECT_EQ(eng->embed({std::vector<int32_t>(64, 5)}).size(), 1u);  // the limit itself is fine
}

TEST(EmbeddingEngine, PoolingArithmetic) {
  const float rows[] = {3, 4, 1, 0, 0, 2};  // 3 tokens x 2 dimensions
  float out[2];
  engine::pool_hidden(rows, 3, 2, {model::PoolingMode::Cls, false}, out);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 4.0f);
  pool_hidden(rows, 3, 2, {model::PoolingMode::LastToken, false}, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 2.0f);
  pool_hidden(rows, 3, 2, {model::PoolingMode::Mean, false}, out);
  EXPECT_FLOAT_EQ(out[0], 4.0f / 3);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
  pool_hidden(rows, 3, 2, {model::PoolingMode::Cls, true}, out);
  EXPECT_FLOAT_EQ(out[0], 0.6f);
  EXPECT_FLOAT_EQ(out[1], 0.8f);
  const float zeros[] = {0, 0};
  pool_hidden(zeros, 1, 2, {model::PoolingMode::LastToken, true}, out);  // no NaN from a zero vector
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
}

TEST(EmbeddingEngine, HybridModelIsRefusedAtConstruction) {
  std::string why;
  const std::string& root = qwen35::tiny_models(&why);
  if (root.empty()) SET_MISSING(why);
  auto ckpt = std::shared_ptr<model::Checkpoint>(model::load_checkpoint(root + "/dense-tied/hf-f32"));
  try {
    engine::EmbeddingEngine eng(model::create_model(ckpt, model::ModelOptions{}), EmbeddingEngineOptions{});
    FAIL() << "a hybrid model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot serve embeddings"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rapid::engine
