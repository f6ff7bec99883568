// Gemma 4 specifics (model/gemma4.cpp) on the tiny mlx-lm models of scripts/make_tiny_gemma4.py,
// whose parity with mlx-lm, prefill vs decode and batching are checked with every tiny model in
// model_tiny_test.cpp: the KV pages hold only the kv-owning layers at their own widths, a sequence
// resuming from another's cached pages (the prefix cache's path) continues as mlx-lm does, and
// checkpoints that do not fit their config are refused with the field or tensor at fault. Then the
// same models as llama.cpp's `gemma4` GGUF (scripts/gemma4_gguf.py, the converter's transforms):
// their metadata becomes the HF config, their tensors the HF names, and they run as mlx-lm does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "cache/block_pool.h"
#include "common/error.h"
#include "model/gguf.h"
#include "model/gguf_names.h"
#include "model/paged_kv.h"
#include "model/weights.h"
#include "gemma4_tiny.h"
#include "gguf_file_helpers.h"
#include "model_parity_helpers.h"

namespace fs = std::filesystem;
using namespace rapid;
using gguf_test::bytes_of;
using gguf_test::expect_refused;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

#define REQUIRE_GEMMA4()                                   \
  std::string why_;                                        \
  const std::string root = gemma4_tiny::tiny_models(&why_); \
  if (root.empty()) SET_MISSING(why_)

}  // namespace

// One page holds K and V of the kv-owning layers only (kv-shared layers read their source's), each
// at its own width: the bytes the config's geometry gives, not num_hidden_layers × the widest.
TEST(Gemma4, PagesHoldOnlyKvOwningLayersAtTheirWidths) {
  REQUIRE_GEMMA4();
  for (const char* c : {"e2b", "kv"}) {
    const std::string d = root + "/" + c + "/mlx-f32";
    json cfg = read_json(d + "/config.json");
    if (cfg.contains("text_config")) cfg = cfg["text_config"];
    const int64_t layers = cfg["num_hidden_layers"].get<int64_t>() - cfg.value("num_kv_shared_layers", 0);
    int64_t floats = 0;  // K + V floats per token
    for (int64_t i = 0; i < layers; ++i) {
      const bool full = cfg["layer_types"][i] == "full_attention";
      const int64_t heads = full && cfg.value("attention_k_eq_v", false) ? cfg["num_global_key_value_heads"].get<int64_t>()
                                                                         : cfg["num_key_value_heads"].get<int64_t>();
      floats += 2 * heads * cfg[full ? "global_head_dim" : "head_dim"].get<int64_t>();
    }
    auto m = qwen35::make(d, compute::MatmulPath::Fast, tensor::DType::F32);
    const cache::BlockShape sh = m->kv_block_shape(16);
    EXPECT_EQ(sh.block_bytes(), (static_cast<size_t>(16 * floats * 4) + 63) / 64 * 64) << c;
  }
}

// A sequence that adopts another's pages after p tokens (whole and partial blocks, before and past
// the sliding window) and continues: mlx-lm's greedy tokens (prompt in one call, then one token per
// call). The kv-shared layers attend over the adopted pages of their source layers.
TEST(Gemma4, ResumeFromAdoptedPagesMatchesMlxLm) {
  REQUIRE_GEMMA4();
  for (const char* c : {"e2b", "kv", "moe"}) {
    const std::string d = root + "/" + c + "/mlx-f32";
    auto m = qwen35::make(d, compute::MatmulPath::Exact, tensor::DType::F32);
    resume_from_adopted_pages(*m, read_json(d + "/greedy.json")["cases"][4], {5, 16, 23, -1}, c);
  }
}

// Configs the weights do not fit are refused naming the field or tensor at fault.
TEST(Gemma4, MismatchedCheckpointsAreRefused) {
  REQUIRE_GEMMA4();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-gemma4-test-" + std::to_string(::getpid()));
  for (auto [copy, field, value, what] :
       {std::tuple{"moe/mlx-q4", "num_experts", json(16), "router.proj"},
        std::tuple{"moe/hf-f32", "moe_intermediate_size", json(32), "down_proj"},
        std::tuple{"e2b/mlx-q4", "num_kv_shared_layers", json(5), "no earlier layer of its type"},
        std::tuple{"e2b/hf-f32", "global_head_dim", json(64), "self_attn.q_proj"},
        std::tuple{"kv/mlx-f32", "intermediate_size", json(50), "intermediate_size"},
        std::tuple{"kv/mlx-q4", "num_global_key_value_heads", json(2), "self_attn.k_proj"},
        std::tuple{"e2b/mlx-f32", "hidden_size_per_layer_input", json(16), "embed_tokens_per_layer"}}) {
    fs::remove_all(tmp);
    fs::copy(root + "/" + copy, tmp);
    json cfg = read_json((tmp / "config.json").string());
    (cfg.contains("text_config") ? cfg["text_config"] : cfg)[field] = value;
    std::ofstream(tmp / "config.json") << cfg.dump();
    try {
      qwen35::make(tmp.string(), compute::MatmulPath::Fast, tensor::DType::F16);
      ADD_FAILURE() << copy << " with " << field << " = " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  fs::remove_all(tmp);
}

// ---- llama.cpp's gemma4 GGUF (scripts/gemma4_gguf.py; written on first use) ----
namespace {

// The GGUF copies of the tiny set, written by scripts/gemma4_gguf.py if absent (after the set itself).
const std::string& gguf_models(std::string* why) {
  static std::string root, reason;
  static bool done = false;
  if (!done) {
    done = true;
    root = gemma4_tiny::tiny_models(&reason);
    if (!root.empty()) root = qwen35::ensure_set(root, "/moe/gguf-f32-qkv/model.gguf", "gemma4_gguf.py", reason);
  }
  if (why) *why = reason;
  return root;
}

#define REQUIRE_GEMMA4_GGUF()                  \
  std::string why_;                            \
  const std::string root = gguf_models(&why_); \
  if (root.empty()) SET_MISSING(why_)

}  // namespace

// Every gemma4 name of llama.cpp's tensor map that Gemma 3's does not have, to the HF name the
// model reads (those of transformers' Gemma4 checkpoints, as Checkpoint strips the language_model).
TEST(Gemma4Gguf, TensorNamesMapToTheHfNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"per_layer_token_embd.weight", "model.embed_tokens_per_layer.weight"},
      {"per_layer_model_proj.weight", "model.per_layer_model_projection.weight"},
      {"per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight"},
      {"blk.3.inp_gate.weight", "model.layers.3.per_layer_input_gate.weight"},
      {"blk.3.proj.weight", "model.layers.3.per_layer_projection.weight"},
      {"blk.3.post_norm.weight", "model.layers.3.post_per_layer_input_norm.weight"},
      {"blk.3.layer_output_scale.weight", "model.layers.3.layer_scalar"},
      {"blk.3.ffn_norm.weight", "model.layers.3.pre_feedforward_layernorm.weight"},
      {"blk.3.post_ffw_norm.weight", "model.layers.3.post_feedforward_layernorm.weight"},
      {"blk.3.pre_ffw_norm_2.weight", "model.layers.3.pre_feedforward_layernorm_2.weight"},
      {"blk.3.post_ffw_norm_1.weight", "model.layers.3.post_feedforward_layernorm_1.weight"},
      {"blk.3.post_ffw_norm_2.weight", "model.layers.3.post_feedforward_layernorm_2.weight"},
      {"blk.3.ffn_gate_inp.weight", "model.layers.3.router.proj.weight"},
      {"blk.3.ffn_gate_inp.scale", "model.layers.3.router.scale"},
      {"blk.3.ffn_down_exps.scale", "model.layers.3.router.per_expert_scale"},
      {"blk.3.ffn_gate_up_exps.weight", "model.layers.3.experts.gate_up_proj"},
      {"blk.3.ffn_down_exps.weight", "model.layers.3.experts.down_proj"},
      {"blk.3.ffn_gate_exps.weight", "model.layers.3.experts.switch_glu.gate_proj.weight"},
      {"blk.3.ffn_up_exps.weight", "model.layers.3.experts.switch_glu.up_proj.weight"},
      {"blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"},
      {"rope_freqs.weight", "rope_freqs.weight"}};
  for (auto [g, hf] : cases) EXPECT_EQ(gguf_to_hf_name(g, "gemma4"), hf) << g;
  // Gemma 3 keeps its own names (no per-layer inputs there).
  EXPECT_EQ(gguf_to_hf_name("blk.3.proj.weight", "gemma3"), "blk.3.proj.weight");
}

// The metadata becomes the HF config of the same model: head sizes from key_length(_swa), per-layer
// KV heads and MLP widths, kv sharing, per-layer inputs, the turning fraction from rope_freqs,
// sliding layers, experts. The softcap: llama.cpp's 30 where the file has none (kv).
TEST(Gemma4Gguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_GEMMA4_GGUF();
  for (const std::string c : {"e2b", "kv", "moe"}) {
    auto g = load_checkpoint(root + "/" + c + "/gguf-f32/model.gguf");
    auto h = load_checkpoint(root + "/" + c + "/hf-f32");
    const ModelConfig &a = g->config, &b = h->config;
    EXPECT_EQ(a.architecture, "gemma4") << c;
    EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers) << c;
    EXPECT_EQ(a.hidden_size, b.hidden_size) << c;
    EXPECT_EQ(a.intermediate_size, b.intermediate_size) << c;
    EXPECT_EQ(a.use_double_wide_mlp, b.use_double_wide_mlp) << c;
    EXPECT_EQ(a.num_attention_heads, b.num_attention_heads) << c;
    EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads) << c;
    EXPECT_EQ(a.num_global_key_value_heads, b.num_global_key_value_heads) << c;
    EXPECT_EQ(a.attention_k_eq_v, b.attention_k_eq_v) << c;
    EXPECT_EQ(a.head_dim, b.head_dim) << c;
    EXPECT_EQ(a.global_head_dim, b.global_head_dim) << c;
    EXPECT_DOUBLE_EQ(a.global_partial_rotary_factor, b.global_partial_rotary_factor) << c;
    EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta) << c;
    EXPECT_DOUBLE_EQ(a.rope_local_base_freq, b.rope_local_base_freq) << c;
    EXPECT_EQ(a.sliding_window, b.sliding_window) << c;
    EXPECT_EQ(a.layer_is_sliding, b.layer_is_sliding) << c;
    EXPECT_EQ(a.num_kv_shared_layers, b.num_kv_shared_layers) << c;
    EXPECT_EQ(a.hidden_size_per_layer_input, b.hidden_size_per_layer_input) << c;
    EXPECT_EQ(a.enable_moe_block, b.enable_moe_block) << c;
    EXPECT_EQ(a.num_experts, b.num_experts) << c;
    EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok) << c;
    EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size) << c;
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings) << c;
    EXPECT_EQ(a.vocab_size, b.vocab_size) << c;
    EXPECT_DOUBLE_EQ(a.final_logit_softcapping, b.final_logit_softcapping > 0 ? b.final_logit_softcapping : 30.0) << c;
  }
}

// mlx-lm's goldens of a model without a softcap, as llama.cpp's default cap of 30 leaves them (the
// cap is monotonic: the same tokens).
json capped_goldens(json g) {
  auto cap = [](double x) { return 30.0 * std::tanh(x / 30.0); };
  for (auto& c : g["cases"])
    for (auto& s : c["steps"]) {
      s["max_abs_logit"] = cap(s["max_abs_logit"].get<double>());
      for (const char* k : {"top_logits", "probe_logits"})
        for (auto& v : s[k]) v = cap(v.get<double>());
    }
  return g;
}

// f32 GGUF, exact path: mlx-lm's goldens of the same weights (tokens, logits within 1e-4 ·
// max|logit|; kv's file has llama.cpp's default softcap, applied to mlx-lm's logits here), also
// with the converter's fused attn_qkv. Q8_0: mlx-lm's goldens of gguf-py's dequantization.
TEST(Gemma4Gguf, GreedyMatchesMlxLmOnTheSameWeights) {
  REQUIRE_GEMMA4_GGUF();
  for (const std::string c : {"e2b", "kv", "moe"})
    for (const std::string q : {"f32", "f32-qkv", "q8_0"}) {
      const std::string file = root + "/" + c + "/gguf-" + q + "/model.gguf";
      if (q == "f32-qkv") {
        ASSERT_NE(read_gguf(file).find("blk.0.attn_qkv.weight"), nullptr) << file;
      }
      auto m = qwen35::make(file, compute::MatmulPath::Exact, tensor::DType::F32);
      json g = read_json(root + "/" + c + (q == "q8_0" ? "/mlx-deq-q8_0" : "/hf-f32") + "/greedy.json");
      if (c == "kv") g = capped_goldens(std::move(g));
      std::printf("%s %s: worst |dlogit| / max|logit| = %.3g\n", c.c_str(), q.c_str(), exact_greedy(*m, g, 1e-4));
    }
}

// Bad or missing metadata: a FileError with the file's path and the key.
TEST(Gemma4Gguf, BadMetadataIsRefusedNamingTheKey) {
  REQUIRE_GEMMA4_GGUF();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-gemma4-gguf-" + std::to_string(::getpid()) + ".gguf");
  struct Case {
    const char* config;
    const char* key;      // a uint32 key to set to `value`, or (value < 0) to rename so it is missing
    int64_t value;
    const char* why;
  };
  for (const Case& c : {Case{"e2b", "gemma4.attention.key_length_swa", 0, "'gemma4.attention.key_length_swa' is missing"},
                        Case{"e2b", "gemma4.attention.key_length_swa", -1, "'gemma4.attention.key_length_swa' is missing"},
                        Case{"e2b", "gemma4.attention.sliding_window_pattern", -1,
                             "'gemma4.attention.sliding_window_pattern' is missing"},
                        Case{"e2b", "gemma4.embedding_length_per_layer_input", -1,
                             "'gemma4.embedding_length_per_layer_input' is missing"},
                        Case{"e2b", "gemma4.attention.shared_kv_layers", 6, "gemma4.attention.shared_kv_layers"},
                        Case{"e2b", "gemma4.attention.sliding_window", 0, "gemma4.attention.sliding_window"},
                        Case{"e2b", "gemma4.rope.dimension_count_swa", 8, "gemma4.rope.dimension_count_swa"},
                        Case{"kv", "gemma4.attention.value_length_swa", 32, "gemma4.attention.value_length_swa"},
                        Case{"moe", "gemma4.expert_feed_forward_length", -1, "'gemma4.expert_feed_forward_length' is missing"},
                        Case{"moe", "gemma4.expert_used_count", 9, "gemma4.expert_used_count"},
                        Case{"moe", "gemma4.expert_count", 16,
                             "'blk.0.ffn_gate_inp.weight' has shape [8, 64], expected [16, 64]"},
                        Case{"moe", "gemma4.expert_feed_forward_length", 32,
                             "'blk.0.ffn_down_exps.weight' has shape [8, 64, 64], expected [8, 64, 32]"}}) {
    std::string b = bytes_of(root + "/" + c.config + "/gguf-f32/model.gguf");
    // The key as stored: its length (uint64) then its bytes, so key_length does not match key_length_swa.
    std::string stored(8, '\0');
    const uint64_t n = std::strlen(c.key);
    std::memcpy(stored.data(), &n, 8);
    stored += c.key;
    size_t at = b.find(stored);
    ASSERT_NE(at, std::string::npos) << c.key;
    at += stored.size();
    if (c.value < 0) {
      b[at - 1] = 'X';
    } else {
      uint32_t type = 0, v = static_cast<uint32_t>(c.value);
      std::memcpy(&type, b.data() + at, 4);
      ASSERT_TRUE(type == 4 || type == 5) << c.key << " has GGUF type " << type;
      std::memcpy(b.data() + at + 4, &v, 4);
    }
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << b;
    SCOPED_TRACE(std::string(c.config) + " " + c.key);
    expect_refused(tmp, c.why);
  }
  fs::remove(tmp);
}
