// Qwen3.5 from llama.cpp's `qwen35` GGUF: the tiny random-weight models of
// scripts/make_tiny_qwen35.py written as GGUF by scripts/qwen35_gguf.py (gguf-py's names and keys,
// the converter's transforms: A = -exp(A_log), folded (1 + w) norms, value heads tiled), against
// mlx-lm's greedy output on the Hugging Face copy of the same weights, and (with llama-cpp-python
// in the test venv) the f32 file against llama-cpp-python's greedy output on it. Generated into
// $RAPID_MODEL_CACHE/qwen35-tiny/<config>/gguf-* on first use.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "model/arch.h"
#include "model/weights.h"
#include "model_parity_helpers.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

const char* kConfigs[] = {"dense-tied", "vheads-untied"};

const std::string& gguf_models(std::string* why) {
  static std::string reason;
  static const std::string dir = [] {
    const char* c = std::getenv("RAPID_MODEL_CACHE");
    const char* home = std::getenv("HOME");
    const std::string root = std::string(c ? c : std::string(home ? home : "") + "/.cache/rapid-mlx/models") + "/qwen35-tiny";
    if (fs::exists(root + "/vheads-untied/gguf-q8_0/greedy.json")) return root;
    const std::string src = RAPID_SOURCE_DIR, py = src + "/.venv/bin/python ";
    std::string cmd;
    if (!fs::exists(root + "/vheads-untied/hf-f32/greedy.json"))
      cmd = py + src + "/scripts/make_tiny_qwen35.py '" + root + "' > /dev/null && ";
    cmd += py + src + "/scripts/qwen35_gguf.py '" + root + "' > /dev/null";
    if (std::system(cmd.c_str()) != 0 || !fs::exists(root + "/vheads-untied/gguf-f32/model.gguf")) {
      reason = "could not generate the tiny Qwen3.5 GGUFs (needs mlx-lm in .venv): " + cmd;
      return std::string();
    }
    return root;
  }();
  if (why) *why = reason;
  return dir;
}

#define REQUIRE_GGUF()                            \
  std::string why_;                               \
  const std::string root = gguf_models(&why_);    \
  if (root.empty()) GTEST_SKIP() << why_

// llama.cpp's goldens exist only where llama-cpp-python was installed when the set was made.
#define REQUIRE_LLAMA_GOLDENS(sub)                                                             \
  REQUIRE_GGUF();                                                                              \
  if (!fs::exists(root + "/dense-tied/" sub "/greedy.json"))                                   \
  GTEST_SKIP() << "no llama.cpp goldens (llama-cpp-python not in .venv when " << root << " was made)"

// llama.cpp's goldens of one config's copy; null for a config llama.cpp cannot load (value heads
// wider than key heads: scripts/qwen35_gguf.py writes none).
bool has_llama_goldens(const std::string& dir) {
  if (fs::exists(dir + "/greedy.json")) return true;
  std::printf("%s: no llama.cpp goldens (llama.cpp cannot load this config)\n", dir.c_str());
  return false;
}

std::unique_ptr<Model> make(const std::string& dir, compute::MatmulPath mp, tensor::DType kv, bool chunked) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = kv;
  o.chunked_deltanet = chunked;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(dir + "/model.gguf")), o);
}

}  // namespace

// The metadata becomes the Qwen3.5 config the HF checkpoint gives.
TEST(Qwen35Gguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_GGUF();
  for (const char* c : kConfigs) {
    auto g = load_checkpoint(root + "/" + c + "/gguf-f32/model.gguf");
    auto h = load_checkpoint(root + "/" + c + "/hf-f32");
    const ModelConfig &a = g->config, &b = h->config;
    EXPECT_EQ(a.architecture, "qwen3_5");
    EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers) << c;
    EXPECT_EQ(a.layer_is_linear, b.layer_is_linear) << c;
    EXPECT_EQ(a.linear_num_key_heads, b.linear_num_key_heads) << c;
    EXPECT_EQ(a.linear_num_value_heads, b.linear_num_value_heads) << c;
    EXPECT_EQ(a.linear_key_head_dim, b.linear_key_head_dim) << c;
    EXPECT_EQ(a.linear_value_head_dim, b.linear_value_head_dim) << c;
    EXPECT_EQ(a.linear_conv_kernel_dim, b.linear_conv_kernel_dim) << c;
    EXPECT_DOUBLE_EQ(a.partial_rotary_factor, b.partial_rotary_factor) << c;
    EXPECT_EQ(a.head_dim, b.head_dim) << c;
    EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads) << c;
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings) << c;
    EXPECT_TRUE(a.linear_v_heads_tiled);
    EXPECT_FALSE(b.linear_v_heads_tiled);
  }
}

// f32 GGUF, exact path, recurrent and chunked DeltaNet prefill: the goldens' tokens for 5 prompts
// × 64 greedy steps, every stored logit within 1e-4 · max|logit|.
static void exact_vs(const std::string& dir, const std::string& goldens) {
  json g = read_json(goldens);
  for (bool chunked : {false, true}) {
    auto m = make(dir, compute::MatmulPath::Exact, tensor::DType::F32, chunked);
    double worst = exact_greedy(*m, g, 1e-4);
    std::printf("%s%s vs %s: worst |dlogit| / max|logit| = %.3g\n", dir.c_str(), chunked ? " (chunked)" : "",
                goldens.c_str(), worst);
  }
}

// mlx-lm's goldens of the same weights in the HF layout: the loader undoes every transform of the
// converter (a wrong norm offset, A sign or value-head order changes the output).
TEST(Qwen35Gguf, F32GreedyMatchesMlxLmOnTheSameWeights) {
  REQUIRE_GGUF();
  for (const char* c : kConfigs)
    exact_vs(root + "/" + c + "/gguf-f32", root + "/" + c + "/hf-f32/greedy.json");
}

TEST(Qwen35Gguf, F32GreedyMatchesLlamaCpp) {
  REQUIRE_LLAMA_GOLDENS("gguf-f32");
  for (const char* c : kConfigs)
    if (has_llama_goldens(root + "/" + c + "/gguf-f32"))
      exact_vs(root + "/" + c + "/gguf-f32", root + "/" + c + "/gguf-f32/greedy.json");
}

// No Q8_0 comparison with llama.cpp here: on this random tiny model llama.cpp's own Q8_0 run lands
// up to 23% of max|logit| from its f32 run at the first step (measured 2026-12-02), so neither
// equal tokens nor a logit bound between the two Q8_0 runs is a criterion. A fair one needs
// llama.cpp's Q8_0 goldens teacher-forced on the f32 tokens (issue 17).
