// Greedy parity on real checkpoints. SmolLM2-135M Q4_1 GGUF and Gemma-3-270M Q4_K_M GGUF vs transformers (which dequantizes the GGUF to f32) and vs
// llama-cpp-python: goldens from scripts/make_parity_goldens.py --gemma3 / --gemma3-long and
// scripts/make_parity_goldens_llamacpp.py --gemma3. The MLX 4-bit SmolLM2 copy vs mlx_lm:
// scripts/make_parity_goldens_mlx.py. All in tests/golden/model. Each test skips only when its
// model is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/arch.h"
#include "model/weights.h"
#include "model_parity_helpers.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

std::string golden(const std::string& name) {
  return std::string(RAPID_SOURCE_DIR) + "/tests/golden/model/" + name;
}

std::string model_path(const char* env, const std::string& rel) {
  if (const char* e = std::getenv(env)) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/rapid-mlx/models/" + rel;
}

std::unique_ptr<Model> make(const std::shared_ptr<Checkpoint>& ck, compute::MatmulPath mp, tensor::DType kv) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = kv;
  return create_model(ck, o);
}

// ---- SmolLM2-135M-Instruct Q4_1 GGUF (goldens: scripts/make_parity_goldens.py and
// scripts/make_parity_goldens_llamacpp.py) ----
std::string smollm2_path() {
  return model_path("RAPID_SMOLLM2_GGUF", "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
}

std::shared_ptr<Checkpoint> smollm2() {
  static std::shared_ptr<Checkpoint> ck = load_checkpoint(smollm2_path());
  return ck;
}

// ---- Gemma-3-270M Q4_K_M GGUF ----
std::string gemma_path() { return model_path("RAPID_GEMMA3_GGUF", "gemma-3-270m/gemma-3-270m-q4_k_m.gguf"); }

std::shared_ptr<Checkpoint> gemma() {
  static std::shared_ptr<Checkpoint> ck = load_checkpoint(gemma_path());
  return ck;
}

}  // namespace

// Dequantized-f32 path (what transformers computes): free-running greedy decoding must pick
// exactly transformers' tokens for 5 prompts × 64 steps, and every stored logit (top 8 + 64 fixed
// probes per step) must lie within 1e-3 · max|logit| of transformers' f32 logits.
TEST(SmolLM2Parity, ExactPathGreedyTokensAndLogitsMatchTransformers) {
  if (!fs::exists(smollm2_path())) GTEST_SKIP() << "model not downloaded: " << smollm2_path();
  json g = read_json(golden("smollm2_q4_1_greedy.json"));
  auto m = make(smollm2(), compute::MatmulPath::Exact, tensor::DType::F32);
  double worst = exact_greedy(*m, g, 1e-3);
  std::printf("worst |dlogit| / max|logit| = %.3g\n", worst);
}

// The shipping configuration (int8 activations × 4/8-bit weights, f16 KV), teacher-forced on
// transformers' tokens, against both references. llama.cpp on the same GGUF (which also
// quantizes activations to 8 bits) is itself within 6.2e-2 · max|logit| of transformers and
// agrees on 316/320 argmaxes. Our worst logit moves with any change of rounding, since 8-bit
// activations turn a last-bit difference into a different quantization draw: with attention
// summed in three orders (each within 1.5e-5 of an f64 softmax), 5.3e-2, 6.7e-2 and 8.3e-2 vs
// transformers and 7.9e-2, 8.8e-2 and 0.108 vs llama.cpp. So: logits within 1e-1 · max|logit| of
// transformers and within 1.2e-1 · max|logit| of llama.cpp (the two quantize activations differently), and the same
// argmax as transformers wherever its choice is decisive (top-1 ahead of top-2 by
// > 3e-2 · max|logit|; near-ties flip under any quantized arithmetic, llama.cpp's included).
TEST(SmolLM2Parity, FastPathMatchesTransformersAndLlamaCpp) {
  if (!fs::exists(smollm2_path())) GTEST_SKIP() << "model not downloaded: " << smollm2_path();
  json g = read_json(golden("smollm2_q4_1_greedy.json"));
  json lc = read_json(golden("smollm2_q4_1_llamacpp.json"));
  auto m = make(smollm2(), compute::MatmulPath::Fast, tensor::DType::F16);
  fast_teacher_forced(*m, g, &lc, FastTol{1e-1, 1.2e-1, 3e-2});
}

TEST(Gemma3Parity, ExactPathGreedyTokensAndLogitsMatchTransformers) {
  if (!fs::exists(gemma_path())) GTEST_SKIP() << "model not downloaded: " << gemma_path();
  json g = read_json(golden("gemma3_270m_q4_k_m_greedy.json"));
  auto m = make(gemma(), compute::MatmulPath::Exact, tensor::DType::F32);
  double worst = exact_greedy(*m, g, 1e-3);
  std::printf("worst |dlogit| / max|logit| = %.4g\n", worst);
}

TEST(Gemma3Parity, FastPathMatchesTransformersAndLlamaCpp) {
  if (!fs::exists(gemma_path())) GTEST_SKIP() << "model not downloaded: " << gemma_path();
  json g = read_json(golden("gemma3_270m_q4_k_m_greedy.json"));
  json lc = read_json(golden("gemma3_270m_q4_k_m_llamacpp.json"));
  auto m = make(gemma(), compute::MatmulPath::Fast, tensor::DType::F16);
  fast_teacher_forced(*m, g, &lc, FastTol{8e-2, 1.2e-1, 3e-2});
}

// One 1287-token prompt (Gemma-3-270M's sliding window is 512): the local layers must drop the
// keys that fell out of the window, the global ones keep them all. 32 greedy steps.
TEST(Gemma3Parity, ExactPathBeyondSlidingWindowMatchesTransformers) {
  if (!fs::exists(gemma_path())) GTEST_SKIP() << "model not downloaded: " << gemma_path();
  json g = read_json(golden("gemma3_270m_q4_k_m_long.json"));
  ASSERT_GT(g["cases"][0]["prompt_ids"].size(), 600u);
  auto m = make(gemma(), compute::MatmulPath::Exact, tensor::DType::F32);
  double worst = exact_greedy(*m, g, 1e-3);
  std::printf("worst |dlogit| / max|logit| = %.4g\n", worst);
}

// ---- SmolLM2-135M-Instruct, MLX affine 4-bit copy (scripts/derive_models.sh) vs mlx_lm ----
namespace {
std::string smollm2_mlx_q4_path() {
  return model_path("RAPID_SMOLLM2_MLX_Q4", "smollm2-135m-instruct/mlx-q4");
}
}  // namespace

// mlx_lm (mlx on CPU, model cast to f32) computes the quantized matmuls on the same 4-bit
// weights, so our exact path (weights dequantized to f32) must follow it token for token.
TEST(SmolLM2MlxQ4Parity, ExactPathGreedyTokensAndLogitsMatchMlxLm) {
  if (!fs::exists(smollm2_mlx_q4_path() + "/model.safetensors"))
    GTEST_SKIP() << "model not derived: " << smollm2_mlx_q4_path();
  json g = read_json(golden("smollm2_mlx_q4_greedy.json"));
  auto m = make(load_checkpoint(smollm2_mlx_q4_path()), compute::MatmulPath::Exact, tensor::DType::F32);
  double worst = exact_greedy(*m, g, 1e-3);
  std::printf("worst |dlogit| / max|logit| = %.4g\n", worst);
}

// Fast path (int8 activations × MLX 4-bit weights, f16 KV) teacher-forced on mlx_lm's tokens.
// llama.cpp run on the same weights (MLX affine 4-bit is Q4_1 with repeated group scales; see
// scripts/make_parity_goldens_mlx_llamacpp.py) is itself within 1.11e-1 · max|logit| of mlx_lm
// and agrees on 304/320 argmaxes, so the bound is 1.2e-1. Measured here: worst 9.0e-2 (tail probe
// logits at two steps whose max|logit| is low), argmax agreement 313/320.
TEST(SmolLM2MlxQ4Parity, FastPathMatchesMlxLm) {
  if (!fs::exists(smollm2_mlx_q4_path() + "/model.safetensors"))
    GTEST_SKIP() << "model not derived: " << smollm2_mlx_q4_path();
  json g = read_json(golden("smollm2_mlx_q4_greedy.json"));
  auto m = make(load_checkpoint(smollm2_mlx_q4_path()), compute::MatmulPath::Fast, tensor::DType::F16);
  fast_teacher_forced(*m, g, nullptr, FastTol{1.2e-1, 0, 3e-2});
}
