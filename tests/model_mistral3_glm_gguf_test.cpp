// Devstral Small 2 / Ministral 3 as llama.cpp's `mistral3` GGUF files (scripts/mistral3_gguf.py:
// the converter's Ministral3Model transforms with gguf-py, Q/K rows permuted into RoPE pair order,
// YaRN under rope.scaling.*, mscale_all_dim as yarn_log_multiplier, llama_4_scaling_beta as
// attention.temperature_scale) of make_tiny_mistral3.py's two models: devstral (the mistral3
// wrapper's language model, own lm_head, attention factor 1, beta 0.1) and ministral3 (tied,
// attention factor (1 + 0.1 ln 16) / (1 + 0.05 ln 16), beta 0.2). Both run 64 greedy steps past the
// 16-position original context, where YaRN and the query scaling matter. Against mlx-lm's goldens
// of the HF copy of the same weights, llama.cpp's greedy output on the f32 file, and our own run of
// the HF copy. Generated into $RAPID_MODEL_CACHE/mistral3-tiny on first use. GLM-4.7-Flash as
// llama.cpp's `deepseek2` GGUF (scripts/glm_gguf.py) below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "model/arch.h"
#include "model/convert.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "gguf_file_helpers.h"
#include "model_parity_helpers.h"
#include "qwen35_models.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;
using gguf_test::bytes_of;
using gguf_test::patch4;

namespace {

const char* kConfigs[] = {"devstral", "ministral3"};

#define REQUIRE_SET()                                                                                        \
  std::string why_;                                                                                          \
  const std::string root =                                                                                   \
      qwen35::model_set("mistral3-tiny", "/ministral3/gguf-f32/greedy.json", "mistral3_gguf.py", &why_);     \
  if (root.empty()) SET_MISSING(why_)

std::unique_ptr<Model> make(const std::string& path, compute::MatmulPath mp) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = mp == compute::MatmulPath::Exact ? tensor::DType::F32 : tensor::DType::F16;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(path)), o);
}

template <class T>
void expect_refused(const std::string& src, const std::string& key, T value, const std::string& why) {
  const fs::path tmp = fs::temp_directory_path() / ("rapid-mistral3-gguf-" + std::to_string(::getpid()) + ".gguf");
  patch4(src, tmp, key, value);
  gguf_test::expect_refused(tmp, why);
  fs::remove(tmp);
}

// Our run of `gguf` and of `hf` (the same weights) over the prompts of hf's greedy.json, exact and
// shipping paths, a prompt then 64 greedy steps: the same tokens, every logit within tol · max|logit|
// (tol_exact on the exact path, tol_fast on the shipping one).
void same_as_hf_run(const std::string& gguf, const std::string& hf, double tol_exact, double tol_fast) {
  const json g = read_json(hf + "/greedy.json");
  for (auto mp : {compute::MatmulPath::Exact, compute::MatmulPath::Fast}) {
    auto a = make(gguf, mp);
    auto b = make(hf, mp);
    const double tol = mp == compute::MatmulPath::Exact ? tol_exact : tol_fast;
    const double worst = lockstep_greedy(*a, *b, g, tol, gguf + " vs our HF run");
    std::printf("%s (%s) vs our HF run: worst %.3g\n", gguf.c_str(), mp == compute::MatmulPath::Exact ? "exact" : "fast",
                worst);
  }
}

// A prompt in one call equals the same tokens fed one at a time, bitwise, on the shipping path.
void prompt_at_once_equals_one_by_one(const std::string& model, const std::string& goldens) {
  auto fast = make(model, compute::MatmulPath::Fast);
  const int64_t V = fast->config().vocab_size;
  for (auto& cs : read_json(goldens)["cases"]) {
    const std::vector<int32_t> ids = cs["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<float> all(static_cast<size_t>(n * V)), one(all.size());
    auto a = fast->new_state(n), b = fast->new_state(n);
    fast->forward(ids.data(), n, *a, all.data(), true);
    for (int64_t t = 0; t < n; ++t) fast->forward(&ids[t], 1, *b, one.data() + t * V);
    ASSERT_EQ(all, one) << model << ": " << cs["prompt"].get<std::string>();
  }
}

}  // namespace

// The metadata becomes the config of the HF checkpoint: YaRN's factor, original context, betas and
// attention factor (from yarn_log_multiplier), the query scaling's beta and interval.
TEST(Mistral3Gguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_SET();
  for (const std::string c : kConfigs) {
    SCOPED_TRACE(c);
    auto g = load_checkpoint(root + "/" + c + "/gguf-f32/model.gguf");
    auto h = load_checkpoint(root + "/" + c + "/hf-f32");
    const ModelConfig &a = g->config, &b = h->config;
    EXPECT_EQ(a.architecture, "ministral3");
    EXPECT_EQ(b.architecture, "ministral3");
    EXPECT_TRUE(g->rope_interleaved_qk);
    EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
    EXPECT_EQ(a.vocab_size, b.vocab_size);
    EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
    EXPECT_EQ(a.rope_scaling.type, "yarn");
    EXPECT_DOUBLE_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
    EXPECT_EQ(a.rope_scaling.original_max_position_embeddings, b.rope_scaling.original_max_position_embeddings);
    EXPECT_DOUBLE_EQ(a.rope_scaling.beta_fast, b.rope_scaling.beta_fast);
    EXPECT_DOUBLE_EQ(a.rope_scaling.beta_slow, b.rope_scaling.beta_slow);
    ASSERT_TRUE(a.rope_scaling.attention_factor && b.rope_scaling.attention_factor);
    EXPECT_NEAR(*a.rope_scaling.attention_factor, *b.rope_scaling.attention_factor, 1e-6);  // float32 key
    EXPECT_NEAR(a.query_scale_beta, b.query_scale_beta, 1e-7);
    EXPECT_EQ(a.query_scale_interval, b.query_scale_interval);
    EXPECT_EQ(a.bos_token_id, b.bos_token_id);
    EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  }
}

// f32 GGUF, exact path: mlx-lm's goldens on the HF copy and llama.cpp's on the file (5 prompts ×
// 64 greedy steps, every stored logit within 1e-4 · max|logit|).
TEST(Mistral3Gguf, F32GreedyMatchesMlxLmAndLlamaCpp) {
  REQUIRE_SET();
  for (const std::string c : kConfigs) {
    auto m = make(root + "/" + c + "/gguf-f32/model.gguf", compute::MatmulPath::Exact);
    double w = exact_greedy(*m, read_json(root + "/" + c + "/hf-f32/greedy.json"), 1e-4);
    std::printf("%s gguf-f32 vs mlx-lm: worst |dlogit| / max|logit| = %.3g\n", c.c_str(), w);
    w = exact_greedy(*m, read_json(root + "/" + c + "/gguf-f32/greedy.json"), 1e-4);
    std::printf("%s gguf-f32 vs llama.cpp: worst |dlogit| / max|logit| = %.3g\n", c.c_str(), w);
  }
}

// Our GGUF run (pair-ordered Q/K, adjacent pairs rotated) and our HF run of the same weights, on
// the exact and the shipping path, a prompt then 64 greedy steps: the same tokens; the rotation is
// the same arithmetic on permuted rows, but q·k sums in another order, which the shipping path's
// f16 KV rounding magnifies: logits within 1e-5 (exact) and 1e-3 (shipping) · max|logit|.
TEST(Mistral3Gguf, F32MatchesOurHfRunOfTheSameWeights) {
  REQUIRE_SET();
  for (const std::string c : kConfigs)
    same_as_hf_run(root + "/" + c + "/gguf-f32/model.gguf", root + "/" + c + "/hf-f32", 1e-5, 1e-3);
}

// `rapid-mlx convert` of the f32 GGUF to HF safetensors keeps what makes it Ministral 3: the
// converted checkpoint (Q/K back in HF order, YaRN with its attention factor and the query scaling
// in config.json's rope_scaling) gives mlx-lm's greedy output.
TEST(Mistral3Gguf, ConvertedToHfKeepsYarnAndQueryScaling) {
  REQUIRE_SET();
  for (const std::string c : kConfigs) {
    const fs::path out = fs::temp_directory_path() / ("rapid-mistral3-convert-" + std::to_string(::getpid()));
    fs::remove_all(out);
    convert_checkpoint(root + "/" + c + "/gguf-f32/model.gguf", out.string(), ConvertOptions{});
    auto h = load_checkpoint(out.string());
    EXPECT_EQ(h->config.architecture, "ministral3");
    EXPECT_NEAR(h->config.query_scale_beta, c == "devstral" ? 0.1 : 0.2, 1e-7);
    EXPECT_EQ(h->config.query_scale_interval, 16);
    auto m = make(out.string(), compute::MatmulPath::Exact);
    double w = exact_greedy(*m, read_json(root + "/" + c + "/hf-f32/greedy.json"), 1e-4);
    std::printf("%s converted from gguf-f32 vs mlx-lm: worst %.3g\n", c.c_str(), w);
    fs::remove_all(out);
  }
}

// The quantized files on the exact path (weights dequantized, f32 arithmetic): mlx-lm's goldens on
// gguf-py's dequantization of the same file, Q/K rows back in HF order (5 prompts × 64 greedy
// steps within 1e-4 · max|logit|): the pair-ordered quantized Q/K rows are read right.
TEST(Mistral3Gguf, QuantizedFilesMatchMlxLmOnTheDequantizedWeights) {
  REQUIRE_SET();
  for (const std::string c : kConfigs)
    for (const std::string q : {"q8_0", "q4_k"}) {
      const std::string dir = root + "/" + c + "/";
      if (!fs::exists(dir + "hf-deq-" + q + "/greedy.json")) continue;
      auto m = make(dir + "gguf-" + q + "/model.gguf", compute::MatmulPath::Exact);
      double w = exact_greedy(*m, read_json(dir + "hf-deq-" + q + "/greedy.json"), 1e-4);
      std::printf("%s gguf-%s exact vs mlx-lm (dequantized): worst %.3g\n", c.c_str(), q.c_str(), w);
    }
}

// The quantized files (Q8_0 by gguf-py; llama.cpp's Q4_K_M, which falls back to Q5_0 / Q8_0 for
// these 64- and 128-wide rows) on the shipping path. No greedy-text criterion: quantization moves
// this random model's near-tied logits (as for the other tiny GGUF sets).
TEST(Mistral3Gguf, QuantizedFilesRunConsistently) {
  REQUIRE_SET();
  for (const std::string c : kConfigs)
    for (const std::string q : {"gguf-q8_0", "gguf-q4_k"})
      if (fs::exists(root + "/" + c + "/" + q + "/model.gguf"))
        prompt_at_once_equals_one_by_one(root + "/" + c + "/" + q + "/model.gguf", root + "/" + c + "/hf-f32/greedy.json");
}

// Malformed files are refused with their path and the key at fault.
TEST(Mistral3Gguf, MalformedFilesAreRefusedWithPathAndKey) {
  REQUIRE_SET();
  const std::string src = root + "/ministral3/gguf-f32/model.gguf";
  expect_refused(src, "mistral3.rope.scaling.original_context_length", uint32_t(0),
                 "'mistral3.rope.scaling.original_context_length' is missing or invalid");
  expect_refused(src, "mistral3.rope.scaling.factor", 0.5f, "'mistral3.rope.scaling.factor' must be at least 1");
  expect_refused(src, "mistral3.attention.temperature_scale", std::nanf(""),
                 "'mistral3.attention.temperature_scale' is not finite");
  expect_refused(src, "mistral3.attention.head_count_kv", uint32_t(3), "cannot be split into 3 heads");
}

// GLM-4.7-Flash as llama.cpp's `deepseek2` GGUF (scripts/glm_gguf.py: the converter's
// Glm4MoeLiteModel transforms with gguf-py, --no-mtp): make_tiny_glm.py's model (MLA with a q
// bottleneck, V narrower than K, layer 0 dense, then 8 sigmoid-scored experts in 2 groups with a
// correction bias, top-2, renormalised and scaled by 1.8, one shared expert). kv_b_proj arrives
// split per head as attn_k_b / attn_v_b, routed_scaling_factor as expert_weights_scale.
#define REQUIRE_GLM()                                                                                       \
  std::string why_;                                                                                         \
  const std::string root = qwen35::model_set("glm-tiny", "/glm/gguf-f32-kvb/greedy.json", "glm_gguf.py", &why_); \
  if (root.empty()) SET_MISSING(why_);                                                                   \
  const std::string d = root + "/glm/"

TEST(GlmGguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_GLM();
  auto g = load_checkpoint(d + "gguf-f32/model.gguf");
  auto h = load_checkpoint(d + "hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "glm4_moe_lite");
  EXPECT_FALSE(g->rope_interleaved_qk);  // deepseek2's rope part is stored as HF has it
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
  EXPECT_EQ(a.kv_lora_rank, b.kv_lora_rank);
  EXPECT_EQ(a.qk_nope_head_dim, b.qk_nope_head_dim);
  EXPECT_EQ(a.qk_rope_head_dim, b.qk_rope_head_dim);
  EXPECT_EQ(a.v_head_dim, b.v_head_dim);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.shared_expert_intermediate_size, b.shared_expert_intermediate_size);
  EXPECT_EQ(a.layer_is_moe, b.layer_is_moe);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.n_group, b.n_group);
  EXPECT_EQ(a.topk_group, b.topk_group);
  EXPECT_NEAR(a.routed_scaling_factor, b.routed_scaling_factor, 1e-6);  // float32 key
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, "default");
}

// f32 GGUF, exact path: mlx-lm's goldens on the HF copy and llama.cpp's on the file (5 prompts ×
// 64 greedy steps, every stored logit within 1e-4 · max|logit|).
TEST(GlmGguf, F32GreedyMatchesMlxLmAndLlamaCpp) {
  REQUIRE_GLM();
  auto m = make(d + "gguf-f32/model.gguf", compute::MatmulPath::Exact);
  double w = exact_greedy(*m, read_json(d + "hf-f32/greedy.json"), 1e-4);
  std::printf("glm gguf-f32 vs mlx-lm: worst |dlogit| / max|logit| = %.3g\n", w);
  w = exact_greedy(*m, read_json(d + "gguf-f32/greedy.json"), 1e-4);
  std::printf("glm gguf-f32 vs llama.cpp: worst |dlogit| / max|logit| = %.3g\n", w);
}

// Our GGUF run (kv_b_proj rebuilt from attn_k_b / attn_v_b) and our HF run: the same numbers in the
// same layout, so bitwise on both paths.
TEST(GlmGguf, F32MatchesOurHfRunOfTheSameWeights) {
  REQUIRE_GLM();
  same_as_hf_run(d + "gguf-f32/model.gguf", d + "hf-f32", 0.0, 0.0);
}

// A file with the MTP block the converter appends by default (block_count 4, nextn_predict_layers
// 1): the trunk is the same three layers, the block is not loaded, the logits are the same bits as
// the file without it (and llama.cpp's, which skips the block too).
TEST(GlmGguf, AppendedMtpBlockIsLeftOut) {
  REQUIRE_GLM();
  auto g = load_checkpoint(d + "gguf-f32-mtp/model.gguf");
  EXPECT_EQ(g->config.num_hidden_layers, 3);
  EXPECT_EQ(g->config.layer_is_moe, (std::vector<bool>{false, true, true}));
  auto a = make(d + "gguf-f32-mtp/model.gguf", compute::MatmulPath::Fast);
  auto b = make(d + "gguf-f32/model.gguf", compute::MatmulPath::Fast);
  const int64_t V = a->config().vocab_size;
  for (auto& cs : read_json(d + "hf-f32/greedy.json")["cases"]) {
    const std::vector<int32_t> ids = cs["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<float> la(V), lb(V);
    auto sa = a->new_state(ids.size()), sb = b->new_state(ids.size());
    a->forward(ids.data(), ids.size(), *sa, la.data());
    b->forward(ids.data(), ids.size(), *sb, lb.data());
    ASSERT_EQ(la, lb) << cs["prompt"].get<std::string>();
  }
  auto m = make(d + "gguf-f32-mtp/model.gguf", compute::MatmulPath::Exact);
  exact_greedy(*m, read_json(d + "gguf-f32-mtp/greedy.json"), 1e-4);
}

// A file as the converter wrote it before MLA absorption (glm_gguf.py's gguf-f32-kvb): kv_b_proj
// whole as attn_kv_b, no key_length_mla / value_length_mla (the heads' sizes are key_length /
// value_length): the same config, llama.cpp's greedy output on it, bitwise our run of the new file.
TEST(GlmGguf, PreAbsorptionFileWithWholeKvBMatches) {
  REQUIRE_GLM();
  const std::string f = d + "gguf-f32-kvb/model.gguf";
  auto g = load_checkpoint(f);
  auto h = load_checkpoint(d + "gguf-f32/model.gguf");
  EXPECT_EQ(g->config.qk_nope_head_dim, h->config.qk_nope_head_dim);
  EXPECT_EQ(g->config.v_head_dim, h->config.v_head_dim);
  EXPECT_EQ(g->config.head_dim, h->config.head_dim);
  EXPECT_TRUE(g->weights.find("model.layers.0.self_attn.kv_b_proj.weight"));
  auto m = make(f, compute::MatmulPath::Exact);
  exact_greedy(*m, read_json(d + "gguf-f32-kvb/greedy.json"), 1e-4);
  same_as_hf_run(f, d + "hf-f32", 0.0, 0.0);
}

// The quantized files on the exact path (weights dequantized, f32 arithmetic): mlx-lm's goldens on
// gguf-py's dequantization of the same file with the converter's transforms undone (attn_k_b /
// attn_v_b back into kv_b_proj, experts unstacked), 5 prompts × 64 greedy steps within 1e-4 ·
// max|logit|. A block read from the wrong row of the split or stacked tensors would not match.
TEST(GlmGguf, QuantizedFilesMatchMlxLmOnTheDequantizedWeights) {
  REQUIRE_GLM();
  for (const std::string q : {"q8_0", "q4_k"}) {
    if (!fs::exists(d + "hf-deq-" + q + "/greedy.json")) continue;
    auto m = make(d + "gguf-" + q + "/model.gguf", compute::MatmulPath::Exact);
    double w = exact_greedy(*m, read_json(d + "hf-deq-" + q + "/greedy.json"), 1e-4);
    std::printf("glm gguf-%s exact vs mlx-lm (dequantized): worst %.3g\n", q.c_str(), w);
  }
}

// The Q8_0 file (gguf-py) and llama.cpp's own Q4_K_M quantization of the f32 file, shipping path.
TEST(GlmGguf, QuantizedFilesRunConsistently) {
  REQUIRE_GLM();
  for (const std::string q : {"gguf-q8_0", "gguf-q4_k"})
    if (fs::exists(d + q + "/model.gguf")) prompt_at_once_equals_one_by_one(d + q + "/model.gguf", d + "hf-f32/greedy.json");
}

// Files glm4_moe_lite cannot compute are refused with their path and the key at fault: softmax
// scores (DeepSeek-V2), groups that do not divide the experts, more dense layers than layers.
TEST(GlmGguf, MalformedOrOtherDeepseek2FilesAreRefusedWithPathAndKey) {
  REQUIRE_GLM();
  const std::string src = d + "gguf-f32/model.gguf";
  expect_refused(src, "deepseek2.expert_gating_func", uint32_t(1), "'deepseek2.expert_gating_func' is 1");
  expect_refused(src, "deepseek2.expert_group_count", uint32_t(3), "'deepseek2.expert_group_count'");
  expect_refused(src, "deepseek2.leading_dense_block_count", uint32_t(4), "'deepseek2.leading_dense_block_count'");
  expect_refused(src, "deepseek2.attention.key_length_mla", uint32_t(8), "'deepseek2.rope.dimension_count'");
  expect_refused(src, "deepseek2.expert_feed_forward_length", uint32_t(32),
                 "'blk.1.ffn_gate_exps.weight' has shape [8, 64, 64], expected [8, 32, 64]");
}

// Corrupted headers of the mistral3 and deepseek2 files (random bytes, bit flips, 0xff runs in the
// metadata and tensor infos): loading either succeeds or throws a FileError with the path, never
// another exception, so every new key's bad value is caught by the config reader.
TEST(Mistral3GlmGguf, CorruptedHeadersAreRefusedWithFileError) {
  std::string why;
  const std::string m = qwen35::model_set("mistral3-tiny", "/ministral3/gguf-f32/greedy.json", "mistral3_gguf.py", &why);
  const std::string g = qwen35::model_set("glm-tiny", "/glm/gguf-f32-kvb/greedy.json", "glm_gguf.py", &why);
  if (m.empty() || g.empty()) SET_MISSING(why);
  const fs::path tmp = fs::temp_directory_path() / ("rapid-m3glm-fuzz-" + std::to_string(::getpid()) + ".gguf");
  for (const std::string& src : {m + "/devstral/gguf-f32/model.gguf", g + "/glm/gguf-f32/model.gguf",
                                g + "/glm/gguf-f32-kvb/model.gguf"}) {
    const std::string orig = bytes_of(src);
    const size_t hdr = size_t(read_gguf(src).data_offset);
    std::mt19937_64 rng(11);
    int refused = 0;
    for (int it = 0; it < 300; ++it) {
      std::string b = orig;
      for (int k = 0, n = 1 + int(rng() % 4); k < n; ++k) {
        const size_t pos = 24 + size_t(rng() % (hdr - 24));  // past magic, version and counts
        switch (rng() % 3) {
          case 0: b[pos] = char(rng()); break;
          case 1: b[pos] = char(b[pos] ^ (1 << (rng() % 8))); break;
          default: b[pos] = char(0xff); break;
        }
      }
      std::ofstream(tmp, std::ios::binary | std::ios::trunc) << b;
      try {
        load_checkpoint(tmp.string());
      } catch (const FileError& e) {
        EXPECT_EQ(e.path(), tmp.string());
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << src << " iteration " << it << ": not a FileError: " << e.what();
      }
    }
    std::printf("%s: %d of 300 corrupted headers refused\n", src.c_str(), refused);
  }
  fs::remove(tmp);
}
