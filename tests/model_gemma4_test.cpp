// Gemma 4 specifics (model/gemma4.cpp) on the tiny mlx-lm models of scripts/make_tiny_gemma4.py,
// whose parity with mlx-lm, prefill vs decode and batching are checked with every tiny model in
// model_tiny_test.cpp: the KV pages hold only the kv-owning layers at their own widths, a sequence
// resuming from another's cached pages (the prefix cache's path) continues as mlx-lm does, and
// checkpoints that do not fit their config are refused with the field or tensor at fault.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "cache/block_pool.h"
#include "common/error.h"
#include "model/paged_kv.h"
#include "gemma4_tiny.h"
#include "model_parity_helpers.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

#define REQUIRE_GEMMA4()                                   \
  std::string why_;                                        \
  const std::string root = gemma4_tiny::tiny_models(&why_); \
  if (root.empty()) GTEST_SKIP() << why_

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
