// Mixture-of-experts models (model/moe.h) against mlx-lm, on tiny random-weight models that
// mlx-lm itself writes (scripts/make_tiny_moe.py: qwen3_moe with a dense layer in between and no
// top-k renormalisation; qwen3_5_moe, the Gated DeltaNet hybrid with a gated shared expert;
// gpt_oss, with attention sinks, alternating sliding-window layers, biased router and experts and
// the clamped SwiGLU; 8 experts, top-2; each as MLX f32 with stacked experts, the Hugging Face
// layout of the same weights — per-expert tensors for qwen3_moe, fused gate_up_proj for
// qwen3_5_moe, transformers' transposed interleaved gate_up_proj for gpt_oss — and mlx-lm's
// affine 4-bit quantization), with mlx-lm's greedy output (mlx on CPU, f32) as the goldens. The set
// is generated into $RAPID_MODEL_CACHE/moe-tiny on first use; the tests skip only when that is
// impossible (no mlx-lm in the test venv).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "common/error.h"
#include "model/arch.h"
#include "model/convert.h"
#include "model/weights.h"
#include "model_parity_helpers.h"
#include "moe_tiny.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::parity;
using namespace rapid::moe_tiny;

namespace {

// Exact path (weights as f32, f32 KV): mlx-lm's tokens for 5 prompts × 64 greedy steps, every
// stored logit within 1e-4 · max|logit|.
void exact_vs_mlx(const std::string& dir) {
  json g = read_json(dir + "/greedy.json");
  auto m = make(dir, MatmulPath::Exact, DType::F32);
  double worst = exact_greedy(*m, g, 1e-4);
  std::printf("%s: worst |dlogit| / max|logit| = %.3g\n", dir.c_str(), worst);
}

}  // namespace

TEST(MoeParity, MlxF32GreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/mlx-f32");
}

// Per-expert (qwen3_moe), fused gate_up_proj (qwen3_5_moe) and transformers' gpt_oss expert tensors;
// the goldens come from mlx-lm loading that directory (its sanitize stacks them), for gpt_oss from
// its mlx-f32 twin (scripts/make_tiny_moe.py checks the layout against transformers' formula).
TEST(MoeParity, HfLayoutGreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/hf-f32");
}

// mlx-lm's 4-bit quantization of the stacked [E, rows, cols] expert tensors (8-bit routers in
// qwen3_5_moe and gpt_oss, by mlx-lm's per-module overrides).
TEST(MoeParity, MlxQ4GreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/mlx-q4");
}

// A prompt in one forward call (rows grouped by expert) equals the same tokens fed one call at a
// time (one row per expert call), bitwise on the fast path.
TEST(MoeModel, PrefillEqualsTokenByTokenDecode) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) {
    const std::string dir = root + "/" + c + "/mlx-q4";
    json g = read_json(dir + "/greedy.json");
    auto m = make(dir, MatmulPath::Fast, DType::F32);
    const int64_t V = m->config().vocab_size;
    std::vector<int32_t> ids = g["cases"][4]["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<float> all(static_cast<size_t>(n * V)), one(static_cast<size_t>(V));
    auto a = m->new_state(n);
    m->forward(ids.data(), n, *a, all.data(), true);
    auto b = m->new_state(n);
    for (int64_t t = 0; t < n; ++t) {
      m->forward(&ids[t], 1, *b, one.data());
      ASSERT_EQ(std::vector<float>(all.begin() + t * V, all.begin() + (t + 1) * V), one) << c << " token " << t;
    }
  }
}

// 16 sequences in one forward_batch (prefill, then decode steps) give bitwise the logits each gives
// alone, although they share experts.
TEST(MoeModel, SixteenBatchedSequencesEqualSeparate) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) {
    const std::string dir = root + "/" + c + "/mlx-q4";
    json g = read_json(dir + "/greedy.json");
    auto m = make(dir, MatmulPath::Fast, DType::F16);
    const int64_t V = m->config().vocab_size;
    constexpr int kSeqs = 16;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < kSeqs; ++i) {
      auto p = g["cases"][i % 5]["prompt_ids"].get<std::vector<int32_t>>();
      p.push_back(static_cast<int32_t>(i));  // distinct sequences
      prompts.push_back(p);
    }
    std::vector<std::unique_ptr<SequenceState>> alone, batched;
    std::vector<std::vector<float>> la(kSeqs, std::vector<float>(V)), lb(kSeqs, std::vector<float>(V));
    for (int i = 0; i < kSeqs; ++i) {
      alone.push_back(m->new_state(128));
      batched.push_back(m->new_state(128));
    }
    std::vector<int32_t> next(kSeqs);
    for (int step = 0; step < 4; ++step) {
      std::vector<BatchEntry> e(kSeqs);
      for (int i = 0; i < kSeqs; ++i) {
        const int32_t* toks = step == 0 ? prompts[i].data() : &next[i];
        const int64_t n = step == 0 ? static_cast<int64_t>(prompts[i].size()) : 1;
        m->forward(toks, n, *alone[i], la[i].data());
        e[i].tokens = toks, e[i].n = n, e[i].state = batched[i].get(), e[i].logits = lb[i].data();
      }
      m->forward_batch(e.data(), e.size());
      for (int i = 0; i < kSeqs; ++i) {
        ASSERT_EQ(la[i], lb[i]) << c << " sequence " << i << " step " << step;
        next[i] = argmax(la[i].data(), V);
      }
    }
  }
}

// Checkpoints that do not match their config are refused with the tensor at fault.
TEST(MoeModel, MismatchedExpertsAreRefused) {
  REQUIRE_TINY();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-test-" + std::to_string(::getpid()));
  for (auto [field, value, what] : {std::tuple{"num_experts", 16, "mlp.gate.weight"},
                                    std::tuple{"moe_intermediate_size", 32, "expected"},
                                    std::tuple{"num_experts_per_tok", 9, "num_experts_per_tok"}}) {
    for (const char* c : {"qwen3-moe/hf-f32", "qwen3-moe/mlx-q4"}) {
      fs::remove_all(tmp);
      fs::copy(root + "/" + c, tmp);
      json cfg = read_json((tmp / "config.json").string());
      cfg[field] = value;
      std::ofstream(tmp / "config.json") << cfg.dump();
      try {
        make(tmp.string(), MatmulPath::Fast, DType::F16);
        ADD_FAILURE() << c << " with " << field << " = " << value << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    }
  }
  fs::remove_all(tmp);
}

// convert would write a config without the MoE fields: it refuses MoE checkpoints clearly.
TEST(MoeModel, ConvertRefusesMoe) {
  REQUIRE_TINY();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-convert-" + std::to_string(::getpid()));
  try {
    convert_checkpoint(root + "/qwen3-moe/mlx-q4", tmp.string(), ConvertOptions{});
    ADD_FAILURE() << "converted a MoE checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
  }
  fs::remove_all(tmp);
}

// gpt-oss as OpenAI ships it (MXFP4 experts: *_blocks / *_scales) is refused with the tensor and a
// way out, not loaded wrong. The copy renames the HF layout's expert tensors in the header.
TEST(MoeModel, GptOssMxfp4ExpertsAreRefusedClearly) {
  REQUIRE_TINY();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-mxfp4-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::copy(root + "/gpt-oss/hf-f32", tmp);
  const fs::path st = tmp / "model.safetensors";
  std::ifstream in(st, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, hlen)), renamed;
  for (auto& [k, v] : header.items()) {
    const std::string sfx = ".experts.gate_up_proj";
    const bool fused = k.size() > sfx.size() && k.compare(k.size() - sfx.size(), sfx.size(), sfx) == 0;
    renamed[fused ? k + "_blocks" : k] = v;
  }
  std::string h = renamed.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t n = h.size();
  std::ofstream out(st, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h << bytes.substr(8 + hlen);
  out.close();
  try {
    make(tmp.string(), MatmulPath::Fast, DType::F16);
    ADD_FAILURE() << "loaded a checkpoint with MXFP4 expert names";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gate_up_proj_blocks: MXFP4"), std::string::npos) << e.what();
  }
  fs::remove_all(tmp);
}
