// The BERT encoder (model/bert.h) on the tiny random sentence-transformers models of
// scripts/make_tiny_bert.py (BERT with f32 and bf16 weights, RoBERTa with f16), against the last hidden states of
// mlx-embeddings' BERT stored in their golden.json (token ids from Hugging Face `tokenizers`;
// tests/python/test_embeddings_bert.py checks our tokenizer against it). Several inputs in one call give
// each the vectors it gets alone; files the encoder cannot run are refused with path and reason.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "model/bert.h"
#include "model/embedding_model.h"
#include "qwen35_models.h"

namespace rapid {
namespace {

using json = nlohmann::json;

const std::string& tiny_bert(std::string* why) {
  return qwen35::model_set("tiny-bert-st-v2", "/golden.json", "make_tiny_bert.py", why);
}

#define NEED_MODELS(root)                  \
  std::string why;                         \
  const std::string& root = tiny_bert(&why); \
  if (root.empty()) SET_MISSING(why);

std::unique_ptr<model::EmbeddingModel> encoder(const std::string& dir) {
  model::ModelOptions o;
  o.num_threads = 2;
  return model::create_embedding_model(std::shared_ptr<model::Checkpoint>(model::load_checkpoint(dir)), o);
}

std::vector<float> hidden(model::EmbeddingModel& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * m.config().hidden_size);
  float* p = out.data();
  m.hidden_states({std::span<const int32_t>(ids)}, &p);
  return out;
}

TEST(BertEncoder, HiddenStatesMatchMlxEmbeddings) {
  NEED_MODELS(root);
  const json golden = json::parse(read_file(root + "/golden.json"));
  for (const auto& [name, g] : golden["models"].items()) {
    SCOPED_TRACE(name);
    auto m = encoder(root + "/" + name);
    EXPECT_EQ(m->config().architecture, name.starts_with("roberta") ? "roberta" : "bert");
    EXPECT_EQ(m->max_input_tokens(), 128);
    for (size_t i = 0; i < g["ids"].size(); ++i) {
      const auto ids = g["ids"][i].get<std::vector<int32_t>>();
      const auto want = g["hidden"][i].get<std::vector<float>>();
      const std::vector<float> got = hidden(*m, ids);
      ASSERT_EQ(got.size(), want.size());
      float worst = 0;
      for (size_t j = 0; j < got.size(); ++j) worst = std::max(worst, std::fabs(got[j] - want[j]));
      EXPECT_LT(worst, 2e-4f) << "input " << i;  // the last input holds the pad id
    }
  }
}

TEST(BertEncoder, ManyInputsAtOnceEqualEachAloneBitForBit) {
  NEED_MODELS(root);
  auto m = encoder(root + "/mean-f32");
  const std::vector<std::vector<int32_t>> inputs = {{2, 183, 196, 3}, {2, 43, 3}, {2}, {2, 9, 10, 11, 12, 13, 14, 3}};
  std::vector<std::span<const int32_t>> spans(inputs.begin(), inputs.end());
  std::vector<std::vector<float>> outs;
  std::vector<float*> ptrs;
  for (const auto& in : inputs) outs.emplace_back(in.size() * m->config().hidden_size);
  for (auto& o : outs) ptrs.push_back(o.data());
  m->hidden_states(spans, ptrs.data());
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(outs[i], hidden(*m, inputs[i])) << "input " << i;
}

// A copy of the f32 model whose config.json is edited by `edit`.
std::string edited_copy(const std::string& root, const std::string& name, void (*edit)(json&)) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("rapid-bert-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(root + "/mean-f32", dir, fs::copy_options::recursive);
  json cfg = json::parse(read_file((dir / "config.json").string()));
  edit(cfg);
  std::ofstream(dir / "config.json") << cfg.dump();
  return dir.string();
}

TEST(BertEncoder, RefusesWhatItCannotRunWithPathAndReason) {
  NEED_MODELS(root);
  struct Case {
    const char* name;
    void (*edit)(json&);
    const char* want;
  };
  const Case cases[] = {
      {"act", [](json& c) { c["hidden_act"] = "relu"; }, "hidden_act 'relu'"},
      {"pos", [](json& c) { c["position_embedding_type"] = "relative_key"; }, "'relative_key'"},
      {"heads", [](json& c) { c["num_attention_heads"] = 5; }, "inconsistent BERT sizes"},
      {"vocab", [](json& c) { c["vocab_size"] = 100000; }, "does not have 100000 rows"},
      {"layers", [](json& c) { c["num_hidden_layers"] = 3; }, "encoder.layer.2."},
  };
  for (const Case& c : cases) {
    const std::string dir = edited_copy(root, c.name, c.edit);
    try {
      encoder(dir);
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(c.want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace rapid
