// Mixture-of-experts GGUF files of llama.cpp's `qwen3moe` and `qwen35moe` architectures, written
// by scripts/moe_gguf.py with gguf-py (experts stacked as 3-D ffn_*_exps tensors): a tiny
// random-weight qwen3_moe (8 experts, top-2, every layer routed, renormalised top-k, as llama.cpp's
// qwen3moe computes it) and make_tiny_moe.py's qwen3_5_moe (hybrid, gated shared expert). Against
// mlx-lm's greedy output on the Hugging Face copy of the same weights, our own run of that copy,
// and (with llama-cpp-python in the test venv when the set was made) llama.cpp's greedy output on
// the f32 files. The Q8_0 qwen3moe file's expert slices against mlx-lm on gguf-py's dequantization
// of it. Generated into $RAPID_MODEL_CACHE/moe-gguf-tiny on first use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "model/arch.h"
#include "model/weights.h"
#include "model_parity_helpers.h"
#include "qwen35_models.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

const std::string& gguf_models(std::string* why) {
  return qwen35::model_set("moe-gguf-tiny", "/qwen35-moe/gguf-f32/model.gguf", "moe_gguf.py", why);
}

#define REQUIRE_GGUF()                         \
  std::string why_;                            \
  const std::string root = gguf_models(&why_); \
  if (root.empty()) GTEST_SKIP() << why_

std::unique_ptr<Model> make(const std::string& path, compute::MatmulPath mp) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = mp == compute::MatmulPath::Exact ? tensor::DType::F32 : tensor::DType::F16;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(path)), o);
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A copy of `src` at `dst` with the uint32/int32 metadata value of `key` replaced by v.
void patch_u32(const std::string& src, const fs::path& dst, const std::string& key, uint32_t v) {
  std::string b = bytes_of(src);
  size_t at = b.find(key);
  ASSERT_NE(at, std::string::npos) << key;
  at += key.size();
  uint32_t type = 0;
  std::memcpy(&type, b.data() + at, 4);
  ASSERT_TRUE(type == 4 || type == 5) << key << " has GGUF type " << type;  // UINT32 / INT32
  std::memcpy(b.data() + at + 4, &v, 4);
  std::ofstream(dst, std::ios::binary | std::ios::trunc) << b;
}

}  // namespace

// The metadata becomes the config of the HF checkpoint (norm_topk_prob true, every layer routed).
TEST(MoeGguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_GGUF();
  auto g = load_checkpoint(root + "/qwen3-moe/gguf-f32/model.gguf");
  auto h = load_checkpoint(root + "/qwen3-moe/hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "qwen3_moe");
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_TRUE(a.norm_topk_prob);
  EXPECT_EQ(a.layer_is_moe, b.layer_is_moe);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
}

TEST(MoeGguf, Qwen35MoeConfigMatchesTheHfCheckpoint) {
  REQUIRE_GGUF();
  auto g = load_checkpoint(root + "/qwen35-moe/gguf-f32/model.gguf");
  auto h = load_checkpoint(root + "/qwen35-moe/hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "qwen3_5_moe");
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.shared_expert_intermediate_size, b.shared_expert_intermediate_size);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.layer_is_moe, b.layer_is_moe);
  EXPECT_EQ(a.layer_is_linear, b.layer_is_linear);
  EXPECT_EQ(a.linear_num_value_heads, b.linear_num_value_heads);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
}

// f32 GGUF, exact path: mlx-lm's goldens of the same weights in the HF layout (tokens for 5
// prompts × 64 greedy steps, every stored logit within 1e-4 · max|logit|).
TEST(MoeGguf, F32GreedyMatchesMlxLmOnTheSameWeights) {
  REQUIRE_GGUF();
  for (const char* c : {"qwen3-moe", "qwen35-moe"}) {
    auto m = make(root + "/" + c + "/gguf-f32/model.gguf", compute::MatmulPath::Exact);
    double worst = exact_greedy(*m, read_json(root + "/" + c + "/hf-f32/greedy.json"), 1e-4);
    std::printf("%s gguf-f32 vs mlx-lm: worst |dlogit| / max|logit| = %.3g\n", c, worst);
  }
}

// Our run of `gguf` and of `hf` (the same weights) over the prompts of `goldens`, 64 greedy steps:
// the same tokens, and every logit within tol · max|logit| (0: bit-identical).
void same_as_hf_run(const std::string& gguf, const std::string& hf, const std::string& goldens, double tol) {
  const json g = read_json(goldens);
  for (auto mp : {compute::MatmulPath::Exact, compute::MatmulPath::Fast}) {
    auto a = make(gguf, mp);
    auto b = make(hf, mp);
    const int64_t V = a->config().vocab_size;
    std::vector<float> la(V), lb(V);
    double worst = 0;
    for (auto& c : g["cases"]) {
      std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
      auto sa = a->new_state(ids.size() + 64), sb = b->new_state(ids.size() + 64);
      a->forward(ids.data(), ids.size(), *sa, la.data());
      b->forward(ids.data(), ids.size(), *sb, lb.data());
      for (int step = 0; step < 64; ++step) {
        float mx = 0, d = 0;
        for (int64_t i = 0; i < V; ++i) {
          mx = std::max(mx, std::fabs(lb[i]));
          d = std::max(d, std::fabs(la[i] - lb[i]));
        }
        worst = std::max(worst, double(d / mx));
        ASSERT_LE(d, tol * mx) << gguf << " step " << step << " of " << c["prompt"].get<std::string>();
        const int32_t t = argmax(la.data(), V);
        ASSERT_EQ(t, argmax(lb.data(), V)) << gguf << " step " << step;
        a->forward(&t, 1, *sa, la.data());
        b->forward(&t, 1, *sb, lb.data());
      }
    }
    std::printf("%s (%s) vs our HF run: worst |dlogit| / max|logit| = %.3g\n", gguf.c_str(),
                mp == compute::MatmulPath::Exact ? "exact" : "fast", worst);
  }
}

// Our GGUF run and our HF run of the same weights, on the exact and the shipping path. Qwen3-MoE:
// bit-identical (the same kernels on the same numbers, so only a wrong expert slice or name can
// tell them apart); Qwen3.5-MoE: its value heads are stored tiled, which only reorders sums, and
// the (1 + w) norms come back as (m - 1) + 1: within 1e-4 · max|logit| over 64 steps, the bound
// of the mlx-lm comparisons.
TEST(MoeGguf, F32MatchesOurHfRunOfTheSameWeights) {
  REQUIRE_GGUF();
  same_as_hf_run(root + "/qwen3-moe/gguf-f32/model.gguf", root + "/qwen3-moe/hf-f32",
                 root + "/qwen3-moe/hf-f32/greedy.json", 0.0);
  same_as_hf_run(root + "/qwen35-moe/gguf-f32/model.gguf", root + "/qwen35-moe/hf-f32",
                 root + "/qwen35-moe/hf-f32/greedy.json", 1e-4);
}

// llama.cpp's greedy output on the f32 file (llama-cpp-python, f32 KV cache).
TEST(MoeGguf, F32GreedyMatchesLlamaCpp) {
  REQUIRE_GGUF();
  if (!fs::exists(root + "/qwen3-moe/gguf-f32/greedy.json"))
    GTEST_SKIP() << "no llama.cpp goldens (llama-cpp-python not in .venv when " << root << " was made)";
  for (const char* c : {"qwen3-moe", "qwen35-moe"}) {
    auto m = make(root + "/" + c + "/gguf-f32/model.gguf", compute::MatmulPath::Exact);
    double worst = exact_greedy(*m, read_json(root + "/" + c + "/gguf-f32/greedy.json"), 1e-4);
    std::printf("%s gguf-f32 vs llama.cpp: worst |dlogit| / max|logit| = %.3g\n", c, worst);
  }
}

// Q8_0 experts sliced out of the stacked 3-D tensors: the exact path (dequantized) against mlx-lm
// on gguf-py's dequantization of the same file, and the shipping int8 path teacher-forced on it.
TEST(MoeGguf, Q8_0ExpertsMatchMlxLmOnTheDequantizedWeights) {
  REQUIRE_GGUF();
  const std::string q8 = root + "/qwen3-moe/gguf-q8_0/model.gguf";
  const json g = read_json(root + "/qwen3-moe/hf-deq-q8_0/greedy.json");
  auto ex = make(q8, compute::MatmulPath::Exact);
  double worst = exact_greedy(*ex, g, 1e-4);
  std::printf("gguf-q8_0 exact vs mlx-lm (dequantized): worst %.3g\n", worst);
  // The shipping path (int8 activations × Q8_0 slices; its kernels are checked against the
  // dequantizer in compute_test): a prompt in one call, rows grouped by expert, equals the same
  // tokens fed one at a time, bitwise. Not compared with the f32 goldens: on this tiny random model
  // int8 rounding flips near-tied expert choices (teacher-forced, 285 of 320 argmaxes agreed,
  // measured 2026-12-02), as on the MLX 4-bit copies of model_tiny_test.cpp.
  auto fast = make(q8, compute::MatmulPath::Fast);
  const int64_t V = fast->config().vocab_size;
  for (auto& c : g["cases"]) {
    const std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<float> all(static_cast<size_t>(n * V)), one(all.size());
    auto a = fast->new_state(n), b = fast->new_state(n);
    fast->forward(ids.data(), n, *a, all.data(), true);
    for (int64_t t = 0; t < n; ++t) fast->forward(&ids[t], 1, *b, one.data() + t * V);
    ASSERT_EQ(all, one) << c["prompt"].get<std::string>();
  }
}

// Malformed files are refused with their path and what is wrong.
TEST(MoeGguf, MalformedFilesAreRefusedWithPathAndReason) {
  REQUIRE_GGUF();
  const std::string src = root + "/qwen3-moe/gguf-f32/model.gguf";
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-gguf-" + std::to_string(::getpid()) + ".gguf");
  struct Case {
    const char* key;
    uint32_t value;
    const char* why;
  };
  for (const Case& c : {Case{"qwen3moe.expert_used_count", 9, "must be in [1, expert_count = 8]"},
                        Case{"qwen3moe.expert_used_count", 0, "qwen3moe.expert_used_count"},
                        Case{"qwen3moe.expert_count", 16, "'blk.0.ffn_gate_inp.weight' has shape [8, 64], expected [16, 64]"},
                        Case{"qwen3moe.expert_feed_forward_length", 32,
                             "'blk.0.ffn_gate_exps.weight' has shape [8, 64, 64], expected [8, 32, 64]"}}) {
    patch_u32(src, tmp, c.key, c.value);
    try {
      make(tmp.string(), compute::MatmulPath::Fast);
      ADD_FAILURE() << c.key << " = " << c.value << " was accepted";
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), tmp.string());
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    }
  }
  // A stacked expert tensor renamed in the header (same length): the layer lacks it.
  std::string b = bytes_of(src);
  const std::string name = "blk.1.ffn_up_exps.weight";
  size_t at = b.find(name);
  ASSERT_NE(at, std::string::npos);
  b.replace(at, name.size(), "blk.1.ffn_up_expX.weight");
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << b;
  try {
    make(tmp.string(), compute::MatmulPath::Fast);
    ADD_FAILURE() << "a file without " << name << " was accepted";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), tmp.string());
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.1.ffn_up_exps.weight' is missing"), std::string::npos) << e.what();
  }
  fs::remove(tmp);
}
