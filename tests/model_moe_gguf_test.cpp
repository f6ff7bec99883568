// Mixture-of-experts GGUF files of llama.cpp's `qwen3moe` and `qwen35moe` architectures, written
// by scripts/moe_gguf.py with gguf-py (experts stacked as 3-D ffn_*_exps tensors): a tiny
// random-weight qwen3_moe (8 experts, top-2, every layer routed, renormalised top-k, as llama.cpp's
// qwen3moe computes it) and make_tiny_moe.py's qwen3_5_moe (hybrid, gated shared expert). Against
// mlx-lm's greedy output on the Hugging Face copy of the same weights, our own run of that copy,
// and (with llama-cpp-python in the test venv when the set was made) llama.cpp's greedy output on
// the f32 files. The Q8_0 qwen3moe file's expert slices against mlx-lm on gguf-py's dequantization
// of it. Generated into $RAPID_MODEL_CACHE/moe-gguf-tiny on first use. Qwen3-Next (qwen3next) and
// gpt-oss (gpt-oss) below, each from its own set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "model/arch.h"
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

const std::string& gguf_models(std::string* why) {
  return qwen35::model_set("moe-gguf-tiny", "/qwen35-moe/gguf-f32/model.gguf", "moe_gguf.py", why);
}

#define REQUIRE_GGUF()                         \
  std::string why_;                            \
  const std::string root = gguf_models(&why_); \
  if (root.empty()) SET_MISSING(why_)

std::unique_ptr<Model> make(const std::string& path, compute::MatmulPath mp) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = mp == compute::MatmulPath::Exact ? tensor::DType::F32 : tensor::DType::F16;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(path)), o);
}

// The configs of a GGUF and of the HF checkpoint of the same model agree on the MoE geometry.
void expect_same_moe_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.shared_expert_intermediate_size, b.shared_expert_intermediate_size);
  EXPECT_EQ(a.layer_is_moe, b.layer_is_moe);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
}

// `model` on the exact path against greedy goldens (exact_greedy within tol · max|logit|).
void greedy_matches(const std::string& model, const std::string& goldens, double tol, const std::string& what) {
  auto m = make(model, compute::MatmulPath::Exact);
  double worst = exact_greedy(*m, read_json(goldens), tol);
  std::printf("%s: worst |dlogit| / max|logit| = %.3g\n", what.c_str(), worst);
}

// Each metadata key of `src` patched to a bad value: the load fails with the copy's path and `why`.
struct BadKey {
  const char* key;
  uint32_t value;
  const char* why;
};
void expect_refused(const std::string& src, std::initializer_list<BadKey> cases) {
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-gguf-" + std::to_string(::getpid()) + ".gguf");
  for (const BadKey& c : cases) {
    patch4(src, tmp, c.key, c.value);
    gguf_test::expect_refused(tmp, c.why);
  }
  fs::remove(tmp);
}

}  // namespace

// The metadata becomes the config of the HF checkpoint (norm_topk_prob true, every layer routed).
TEST(MoeGguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_GGUF();
  auto g = load_checkpoint(root + "/qwen3-moe/gguf-f32/model.gguf");
  auto h = load_checkpoint(root + "/qwen3-moe/hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "qwen3_moe");
  expect_same_moe_config(a, b);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_TRUE(a.norm_topk_prob);
}

TEST(MoeGguf, Qwen35MoeConfigMatchesTheHfCheckpoint) {
  REQUIRE_GGUF();
  auto g = load_checkpoint(root + "/qwen35-moe/gguf-f32/model.gguf");
  auto h = load_checkpoint(root + "/qwen35-moe/hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "qwen3_5_moe");
  expect_same_moe_config(a, b);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.layer_is_linear, b.layer_is_linear);
  EXPECT_EQ(a.linear_num_value_heads, b.linear_num_value_heads);
}

// f32 GGUF, exact path: mlx-lm's goldens of the same weights in the HF layout (tokens for 5
// prompts × 64 greedy steps, every stored logit within 1e-4 · max|logit|).
TEST(MoeGguf, F32GreedyMatchesMlxLmOnTheSameWeights) {
  REQUIRE_GGUF();
  for (const std::string c : {"qwen3-moe", "qwen35-moe"})
    greedy_matches(root + "/" + c + "/gguf-f32/model.gguf", root + "/" + c + "/hf-f32/greedy.json", 1e-4,
                   c + " gguf-f32 vs mlx-lm");
}

// Two checkpoints of `gguf` (made by load(false) / load(true)) over the prompts of `goldens`, prefill
// then 64 greedy steps, exact and shipping paths: the same tokens, and every logit within
// tol · max|logit| (0: bit-identical).
void same_run(const std::function<std::shared_ptr<Checkpoint>(bool)>& load, const std::string& gguf,
              const std::string& what, const std::string& goldens, double tol) {
  const json g = read_json(goldens);
  for (auto mp : {compute::MatmulPath::Exact, compute::MatmulPath::Fast}) {
    auto with = [&](bool second) {
      ModelOptions o;
      o.num_threads = 2;
      o.matmul = mp;
      o.kv_dtype = mp == compute::MatmulPath::Exact ? tensor::DType::F32 : tensor::DType::F16;
      return create_model(load(second), o);
    };
    auto a = with(false);
    auto b = with(true);
    const double worst = lockstep_greedy(*a, *b, g, tol, gguf + " vs " + what);
    std::printf("%s (%s) vs %s: worst |dlogit| / max|logit| = %.3g\n", gguf.c_str(),
                mp == compute::MatmulPath::Exact ? "exact" : "fast", what.c_str(), worst);
  }
}

// Our run of `gguf` and of `hf` (the same weights).
void same_as_hf_run(const std::string& gguf, const std::string& hf, const std::string& goldens, double tol) {
  same_run([&](bool second) { return std::shared_ptr<Checkpoint>(load_checkpoint(second ? hf : gguf)); }, gguf,
           "our HF run", goldens, tol);
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
  for (const std::string c : {"qwen3-moe", "qwen35-moe"})
    greedy_matches(root + "/" + c + "/gguf-f32/model.gguf", root + "/" + c + "/gguf-f32/greedy.json", 1e-4,
                   c + " gguf-f32 vs llama.cpp");
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
  expect_refused(src, {{"qwen3moe.expert_used_count", 9, "must be in [1, expert_count = 8]"},
                       {"qwen3moe.expert_used_count", 0, "qwen3moe.expert_used_count"},
                       {"qwen3moe.expert_count", 16, "'blk.0.ffn_gate_inp.weight' has shape [8, 64], expected [16, 64]"},
                       {"qwen3moe.expert_feed_forward_length", 32,
                        "'blk.0.ffn_gate_exps.weight' has shape [8, 64, 64], expected [8, 32, 64]"}});
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-gguf-" + std::to_string(::getpid()) + ".gguf");
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

// Qwen3-Next as llama.cpp's `qwen3next` GGUF (scripts/qwen3next_gguf.py: the converter's split of
// in_proj_qkvz into attn_qkv / attn_gate, the fused ssm_ba kept, value heads grouped by key head):
// a tiny random-weight qwen3_next (8 experts, top-2, gated shared expert, every layer routed as
// llama.cpp's qwen3next requires). Generated into $RAPID_MODEL_CACHE/qwen3next-gguf-tiny on first use.
namespace {

const std::string& next_models(std::string* why) {
  return qwen35::model_set("qwen3next-gguf-tiny", "/qwen3-next-mtp/gguf-f32/model.gguf", "qwen3next_gguf.py", why);
}

// The set of `models` (skipped when it cannot be made), `d` its model directory `sub`.
#define REQUIRE_SET(models, sub)           \
  std::string why_;                        \
  const std::string root = models(&why_);  \
  if (root.empty()) SET_MISSING(why_);  \
  const std::string d = root + sub
#define REQUIRE_NEXT_GGUF() REQUIRE_SET(next_models, "/qwen3-next/")

}  // namespace

TEST(Qwen3NextGguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_NEXT_GGUF();
  auto g = load_checkpoint(d + "gguf-f32/model.gguf");
  auto h = load_checkpoint(d + "hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "qwen3_next");
  expect_same_moe_config(a, b);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.layer_is_linear, b.layer_is_linear);
  EXPECT_EQ(a.linear_num_key_heads, b.linear_num_key_heads);
  EXPECT_EQ(a.linear_num_value_heads, b.linear_num_value_heads);
  EXPECT_EQ(a.linear_value_head_dim, b.linear_value_head_dim);
  EXPECT_EQ(a.linear_v_heads_tiled, b.linear_v_heads_tiled);
  EXPECT_FALSE(a.linear_v_heads_tiled);
  EXPECT_DOUBLE_EQ(a.partial_rotary_factor, b.partial_rotary_factor);
  // ssm_ba split into Qwen3.5's separate b / a projections, value heads in the HF grouped order:
  // row h*r + j of in_proj_b is row h*2r + j of HF's in_proj_ba (r value heads per key head).
  const int64_t r = b.linear_num_value_heads / b.linear_num_key_heads, H = b.hidden_size;
  const auto& ba = h->weights.get("model.layers.0.linear_attn.in_proj_ba.weight");
  const auto& bb = g->weights.get("model.layers.0.linear_attn.in_proj_b.weight");
  const auto& aa = g->weights.get("model.layers.0.linear_attn.in_proj_a.weight");
  ASSERT_EQ(bb.dtype, tensor::DType::F32);
  const float* src = static_cast<const float*>(ba.data);
  for (int64_t v = 0; v < b.linear_num_value_heads; ++v) {
    const int64_t row = v / r * 2 * r + v % r;
    EXPECT_EQ(0, std::memcmp(static_cast<const float*>(bb.data) + v * H, src + row * H, H * 4)) << "b head " << v;
    EXPECT_EQ(0, std::memcmp(static_cast<const float*>(aa.data) + v * H, src + (row + r) * H, H * 4)) << "a head " << v;
  }
}

// f32 GGUF, exact path: mlx-lm's goldens on the HF copy (5 prompts × 64 greedy steps). mlx-lm is
// the one apart on these weights: 1.2e-4 · max|logit| from our GGUF and our HF run alike, 1.1e-4
// from llama.cpp, while llama.cpp and our GGUF run are 6.1e-5 apart (measured 2026-12-03); the
// Q8_0 comparison below 1.9e-4. Hence 3e-4 against mlx-lm, 1e-4 against llama.cpp.
TEST(Qwen3NextGguf, F32GreedyMatchesMlxLmOnTheSameWeights) {
  REQUIRE_NEXT_GGUF();
  greedy_matches(d + "gguf-f32/model.gguf", d + "hf-f32/greedy.json", 3e-4, "qwen3-next gguf-f32 vs mlx-lm");
}

// Our GGUF run (separate projections) and our HF run (fused in_proj_qkvz / in_proj_ba, split after
// the matmul) of the same weights, exact and shipping paths: A_log comes back as log(exp(A_log)),
// so not bitwise; within 1e-4 · max|logit| over 64 steps.
TEST(Qwen3NextGguf, F32MatchesOurHfRunOfTheSameWeights) {
  REQUIRE_NEXT_GGUF();
  same_as_hf_run(d + "gguf-f32/model.gguf", d + "hf-f32", d + "hf-f32/greedy.json", 1e-4);
}

// llama.cpp's greedy output on the f32 file (llama-cpp-python, f32 KV cache).
TEST(Qwen3NextGguf, F32GreedyMatchesLlamaCpp) {
  REQUIRE_NEXT_GGUF();
  if (!fs::exists(d + "gguf-f32/greedy.json"))
    GTEST_SKIP() << "no llama.cpp goldens (llama-cpp-python not in .venv when " << root << " was made)";
  greedy_matches(d + "gguf-f32/model.gguf", d + "gguf-f32/greedy.json", 1e-4, "qwen3-next gguf-f32 vs llama.cpp");
}

// The MTP head (scripts/qwen3next_gguf.py's qwen3-next-mtp: a random head shaped like the
// released one, a gated full-attention layer with routed experts and a gated shared expert) as the
// converter writes it, the nextn block after the trunk, loads as the Hugging Face checkpoint's own
// tensors: each expert a slice of the stacked switch_mlp tensor, the norms as the (1 + w)
// multipliers (f32 both: bitwise but for the norms' (1 + w) - 1 round trip).
TEST(Qwen3NextGguf, MtpHeadLoadsTheHfTensors) {
  REQUIRE_SET(next_models, "/qwen3-next-mtp/");
  auto hf = load_checkpoint(d + "hf-f32");
  auto gg = load_checkpoint(d + "gguf-f32/model.gguf");
  EXPECT_EQ(gg->config.num_hidden_layers, hf->config.num_hidden_layers) << "nextn blocks are not the trunk's";
  const std::string experts = ".mlp.experts.";
  int compared = 0;
  for (auto& [name, t] : hf->weights.all()) {
    if (name.rfind("mtp.", 0) != 0) continue;
    SCOPED_TRACE(name);
    std::string gname = name;
    int64_t expert = -1;
    if (const size_t at = name.find(experts); at != std::string::npos) {
      const size_t dot = name.find('.', at + experts.size());
      expert = std::stoll(name.substr(at + experts.size(), dot - at - experts.size()));
      gname = name.substr(0, at) + ".mlp.switch_mlp." + name.substr(dot + 1);
    }
    const tensor::Tensor* g = gg->weights.find(gname);
    ASSERT_TRUE(g) << gname << " missing in the GGUF checkpoint";
    ASSERT_EQ(g->dtype, tensor::DType::F32);
    ASSERT_EQ(g->numel(), expert < 0 ? t.numel() : t.numel() * g->shape[0]);
    const float* a = static_cast<const float*>(t.data);
    const float* b = static_cast<const float*>(g->data) + (expert < 0 ? 0 : expert * t.numel());
    const bool norm = name.find("norm") != std::string::npos;
    int64_t bad = 0;
    for (int64_t i = 0; i < t.numel(); ++i) bad += norm ? a[i] + 1.0f != b[i] + 1.0f : a[i] != b[i];
    EXPECT_EQ(bad, 0);
    ++compared;
  }
  // fc, three norms; the layer's two norms, six attention tensors (q, k, v, o, q/k norms), the
  // router, the shared expert (3 + its gate) and 8 experts x 3.
  EXPECT_EQ(compared, 4 + 2 + 6 + 1 + 4 + 24);
}

// Q8_0 weights (ssm_ba split by rows of Q8_0 blocks), exact path: mlx-lm on gguf-py's
// dequantization of the same weights.
TEST(Qwen3NextGguf, Q8_0MatchesMlxLmOnTheDequantizedWeights) {
  REQUIRE_NEXT_GGUF();
  greedy_matches(d + "gguf-q8_0/model.gguf", d + "hf-deq-q8_0/greedy.json", 3e-4,
                 "qwen3-next gguf-q8_0 exact vs mlx-lm (dequantized)");
}

// An older converter's file (in_proj_qkvz whole as ssm_in, so ssm_ba stays fused too): the model's
// fused path, as for the HF checkpoint; against our HF run and llama.cpp's greedy output on it.
TEST(Qwen3NextGguf, LegacySsmInFileMatchesOurHfRunAndLlamaCpp) {
  REQUIRE_NEXT_GGUF();
  const std::string legacy = d + "gguf-f32-legacy/model.gguf";
  auto g = load_checkpoint(legacy);
  EXPECT_NE(g->weights.find("model.layers.0.linear_attn.in_proj_qkvz.weight"), nullptr);
  EXPECT_NE(g->weights.find("model.layers.0.linear_attn.in_proj_ba.weight"), nullptr);
  EXPECT_EQ(g->weights.find("model.layers.0.linear_attn.in_proj_b.weight"), nullptr);
  same_as_hf_run(legacy, d + "hf-f32", d + "hf-f32/greedy.json", 1e-4);
  if (!fs::exists(d + "gguf-f32-legacy/greedy.json"))
    GTEST_SKIP() << "no llama.cpp goldens (llama-cpp-python not in .venv when " << root << " was made)";
  greedy_matches(legacy, d + "gguf-f32-legacy/greedy.json", 1e-4, "qwen3-next gguf-f32-legacy vs llama.cpp");
}

// An ssm_ba whose rows do not match ssm.time_step_rank is refused with the path and the reason.
TEST(Qwen3NextGguf, MismatchedSsmBaIsRefused) {
  REQUIRE_NEXT_GGUF();
  expect_refused(d + "gguf-f32/model.gguf",
                 {{"qwen3next.ssm.time_step_rank", 8, "ssm_ba.weight': expected 2 x ssm.time_step_rank = 16 rows"}});
}

// gpt-oss as llama.cpp's `gpt-oss` GGUF (scripts/gpt_oss_gguf.py: the converter's transforms of
// the transformers layout: gate_up_proj de-interleaved into ffn_gate_exps / ffn_up_exps, experts
// transposed, biases per expert, sinks as attn_sinks.weight): make_tiny_moe.py's gpt_oss (window
// 12 on alternate layers, sinks, YaRN, clamped SwiGLU). Generated into
// $RAPID_MODEL_CACHE/gpt-oss-gguf-tiny on first use.
namespace {

const std::string& oss_models(std::string* why) {
  return qwen35::model_set("gpt-oss-gguf-tiny", "/gpt-oss/mlx-deq-mxfp4/greedy.json", "gpt_oss_gguf.py", why);
}

#define REQUIRE_OSS_GGUF() REQUIRE_SET(oss_models, "/gpt-oss/")

}  // namespace

TEST(GptOssGguf, ConfigMatchesTheHfCheckpoint) {
  REQUIRE_OSS_GGUF();
  auto g = load_checkpoint(d + "gguf-f32/model.gguf");
  auto h = load_checkpoint(d + "hf-f32");
  const ModelConfig &a = g->config, &b = h->config;
  EXPECT_EQ(a.architecture, "gpt_oss");
  expect_same_moe_config(a, b);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.layer_is_sliding, b.layer_is_sliding);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings, b.rope_scaling.original_max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rope_scaling.beta_fast, b.rope_scaling.beta_fast);
  EXPECT_DOUBLE_EQ(a.rope_scaling.beta_slow, b.rope_scaling.beta_slow);
  EXPECT_DOUBLE_EQ(a.swiglu_limit, b.swiglu_limit);
}

// f32 GGUF, exact path: mlx-lm's goldens of the same weights (5 prompts × 64 greedy steps, every
// stored logit within 1e-4 · max|logit|).
TEST(GptOssGguf, F32GreedyMatchesMlxLmOnTheSameWeights) {
  REQUIRE_OSS_GGUF();
  greedy_matches(d + "gguf-f32/model.gguf", d + "hf-f32/greedy.json", 1e-4, "gpt-oss gguf-f32 vs mlx-lm");
}

// Our GGUF run (experts sliced from the stacked tensors) and our HF run (transformers'
// gate_up_proj, transposed per expert) of the same weights, exact and shipping paths.
TEST(GptOssGguf, F32MatchesOurHfRunOfTheSameWeights) {
  REQUIRE_OSS_GGUF();
  same_as_hf_run(d + "gguf-f32/model.gguf", d + "hf-f32", d + "hf-f32/greedy.json", 0.0);
}

// llama.cpp's greedy output on the f32 file (llama-cpp-python, f32 KV cache).
TEST(GptOssGguf, F32GreedyMatchesLlamaCpp) {
  REQUIRE_OSS_GGUF();
  if (!fs::exists(d + "gguf-f32/greedy.json"))
    GTEST_SKIP() << "no llama.cpp goldens (llama-cpp-python not in .venv when " << root << " was made)";
  greedy_matches(d + "gguf-f32/model.gguf", d + "gguf-f32/greedy.json", 1e-4, "gpt-oss gguf-f32 vs llama.cpp");
}

// Q8_0 experts, attention and embeddings (router f32), exact path: mlx-lm on gguf-py's
// dequantization of the same weights.
TEST(GptOssGguf, Q8_0MatchesMlxLmOnTheDequantizedWeights) {
  REQUIRE_OSS_GGUF();
  greedy_matches(d + "gguf-q8_0/model.gguf", d + "mlx-deq-q8_0/greedy.json", 1e-4,
                 "gpt-oss gguf-q8_0 exact vs mlx-lm (dequantized)");
}

// GGML MXFP4 experts (the released gpt-oss GGUFs' type; gguf-py's quantizer, the rest f32),
// read in place: the exact path against mlx-lm on gguf-py's dequantization of the same weights.
// Not against llama.cpp's greedy output on the file: its CPU MXFP4 kernel quantizes the
// activations to Q8_0, which on this random model leaves the tokens of the dequantized f32 weights
// within 0-19 steps (measured 2026-12-03).
TEST(GptOssGguf, Mxfp4MatchesMlxLmOnTheDequantizedWeights) {
  REQUIRE_OSS_GGUF();
  auto g = load_checkpoint(d + "gguf-mxfp4/model.gguf");
  const tensor::Tensor& t = g->weights.get("model.layers.0.mlp.experts.gate_proj.weight");
  EXPECT_EQ(t.dtype, tensor::DType::MXFP4_GGML);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{8, 64, 64}));
  greedy_matches(d + "gguf-mxfp4/model.gguf", d + "mlx-deq-mxfp4/greedy.json", 1e-4,
                 "gpt-oss gguf-mxfp4 exact vs mlx-lm (dequantized)");
}

namespace {

// The file that /proc/self/maps says is mapped at p ("" for the heap, the stack or anonymous memory).
std::string mapped_file_at(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || a < lo || a >= hi) continue;
    const size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

}  // namespace

// No copy of the experts: every MXFP4 tensor (all of them, whole) lies in the kernel's mapping of
// the .gguf itself, so pages of experts never routed to are never read.
TEST(GptOssGguf, Mxfp4ExpertsAreReadInPlaceFromTheFileMapping) {
  REQUIRE_OSS_GGUF();
  const std::string path = d + "gguf-mxfp4/model.gguf";
  auto g = load_checkpoint(path);
  int n = 0;
  for (const auto& [name, t] : g->weights.all()) {
    if (t.dtype != tensor::DType::MXFP4_GGML) continue;
    ++n;
    EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel() / 32 * 17)) << name;
    EXPECT_EQ(t.scales, nullptr) << name;
    EXPECT_EQ(mapped_file_at(t.data), fs::canonical(path).string()) << name;
    EXPECT_EQ(mapped_file_at(static_cast<const uint8_t*>(t.data) + t.nbytes - 1), fs::canonical(path).string()) << name;
  }
  EXPECT_EQ(n, 3 * g->config.num_hidden_layers);  // gate, up and down experts of every layer
  const std::vector<uint8_t> copy(1 << 20);        // what a repacked copy would be: in no file
  EXPECT_EQ(mapped_file_at(copy.data()), "");
}

// In place or repacked into DType::MXFP4 (separate nibbles and scales: how the loader held them
// before), the same model: every logit bitwise equal over prefill and 64 greedy steps, exact and
// shipping paths (the kernels put both layouts' values through the same operations).
TEST(GptOssGguf, Mxfp4InPlaceEqualsTheRepackedExpertsBitwise) {
  REQUIRE_OSS_GGUF();
  const std::string path = d + "gguf-mxfp4/model.gguf";
  auto load = [&](bool repacked) {
    std::shared_ptr<Checkpoint> c(load_checkpoint(path));
    if (!repacked) return c;
    std::vector<tensor::Tensor> fp4;
    for (const auto& [name, t] : c->weights.all())
      if (t.dtype == tensor::DType::MXFP4_GGML) fp4.push_back(t);
    for (tensor::Tensor t : fp4) {
      const size_t blocks = t.nbytes / 17;
      auto nib = std::make_shared<std::vector<uint8_t>>(blocks * 16);
      auto sc = std::make_shared<std::vector<uint8_t>>(blocks);
      const auto* in = static_cast<const uint8_t*>(t.data);
      for (size_t b = 0; b < blocks; ++b, in += 17) {
        (*sc)[b] = in[0];
        auto code = [&](int i) { return i < 16 ? in[1 + i] & 0x0f : in[1 + i - 16] >> 4; };
        for (int k = 0; k < 16; ++k) (*nib)[16 * b + k] = static_cast<uint8_t>(code(2 * k) | code(2 * k + 1) << 4);
      }
      t.dtype = tensor::DType::MXFP4;
      t.data = nib->data();
      t.nbytes = nib->size();
      t.scales = sc->data();
      t.bits = 4;
      t.group_size = 32;
      t.group_dtype = tensor::DType::U8;
      c->weights.keep_alive(nib);
      c->weights.keep_alive(sc);
      c->weights.add(t);
    }
    EXPECT_EQ(fp4.size(), static_cast<size_t>(3 * c->config.num_hidden_layers));
    return c;
  };
  same_run(load, path, "its experts repacked", d + "mlx-deq-mxfp4/greedy.json", 0.0);
}

// The experts in place on the shipping path: a prompt in one forward call (rows grouped by expert,
// 4-token tiles) gives bitwise the logits of the same tokens fed one call at a time.
TEST(GptOssGguf, Mxfp4PrefillEqualsTokenByTokenDecode) {
  REQUIRE_OSS_GGUF();
  auto m = make(d + "gguf-mxfp4/model.gguf", compute::MatmulPath::Fast);
  const int64_t V = m->config().vocab_size;
  auto ids = read_json(d + "mlx-deq-mxfp4/greedy.json")["cases"][4]["prompt_ids"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(ids.size());
  ASSERT_GT(n, 8);
  std::vector<float> all(n * V), one(n * V);
  auto a = m->new_state(n);
  m->forward(ids.data(), n, *a, all.data(), true);
  auto b = m->new_state(n);
  for (int64_t t = 0; t < n; ++t) m->forward(&ids[t], 1, *b, one.data() + t * V);
  for (int64_t t = 0; t < n; ++t)
    ASSERT_TRUE(std::equal(all.begin() + t * V, all.begin() + (t + 1) * V, one.begin() + t * V)) << "token " << t;
}

TEST(GptOssGguf, MalformedFilesAreRefusedWithPathAndReason) {
  REQUIRE_OSS_GGUF();
  expect_refused(d + "gguf-f32/model.gguf",
                 {{"gpt-oss.attention.sliding_window", 0, "'gpt-oss.attention.sliding_window' is missing"},
                  {"gpt-oss.expert_feed_forward_length", 32,
                   "'blk.0.ffn_gate_exps.weight' has shape [8, 64, 64], expected [8, 32, 64]"}});
}
