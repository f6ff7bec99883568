// MXFP4 checkpoints end to end, on the tiny random-weight models of scripts/make_tiny_mxfp4.py
// (make_tiny_moe.py's gpt_oss and qwen3_moe weights): mlx-lm's own mode "mxfp4" quantization
// (every Linear, Embedding and stacked expert; gpt_oss's routers affine 8-bit by per-module
// override) against mlx-lm's greedy output, and gpt-oss's Hugging Face release layout (experts as
// *_blocks / *_scales) against the same model with those experts dequantized by transformers'
// formula (numpy) into bf16. Corrupt scales are refused with the path and the tensor at fault.
// The set is generated into $RAPID_MODEL_CACHE/mxfp4-tiny on first use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "model_parity_helpers.h"
#include "qwen35_models.h"

using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

const std::string& mxfp4_models(std::string* why) {
  return qwen35::model_set("mxfp4-tiny", "/qwen3-moe/mlx-mxfp4/greedy.json", "make_tiny_mxfp4.py", why);
}

#define REQUIRE_MXFP4()                          \
  std::string why_;                              \
  const std::string root = mxfp4_models(&why_);  \
  if (root.empty()) SET_MISSING(why_)

class MlxMxfp4 : public testing::TestWithParam<const char*> {};

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(MlxLm, MlxMxfp4, testing::Values("gpt-oss", "qwen3-moe"),
                         [](const testing::TestParamInfo<const char*>& p) {
                           std::string s = p.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// Exact path (MXFP4 dequantized to f32): mlx-lm's tokens for 5 prompts × 64 greedy steps, every
// stored logit within 1e-4 · max|logit| (mlx computes the same E2M1 values in f32).
TEST_P(MlxMxfp4, ExactGreedyMatchesMlxLm) {
  REQUIRE_MXFP4();
  const std::string d = root + "/" + GetParam() + "/mlx-mxfp4";
  auto m = qwen35::make(d, compute::MatmulPath::Exact, tensor::DType::F32);
  double worst = exact_greedy(*m, read_json(d + "/greedy.json"), 1e-4);
  std::printf("%s: worst |dlogit| / max|logit| = %.3g\n", d.c_str(), worst);
}

// A prompt in one forward call (rows grouped by expert, 4-token tiles) equals the same tokens fed
// one call at a time, bitwise on the fast path.
TEST_P(MlxMxfp4, PrefillEqualsTokenByTokenDecode) {
  REQUIRE_MXFP4();
  const std::string d = root + "/" + GetParam() + "/mlx-mxfp4";
  json g = read_json(d + "/greedy.json");
  auto m = qwen35::make(d, compute::MatmulPath::Fast, tensor::DType::F32);
  const int64_t V = m->config().vocab_size;
  auto ids = g["cases"][4]["prompt_ids"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> all(n * V), one(n * V);
  auto a = m->new_state(n);
  m->forward(ids.data(), n, *a, all.data(), true);
  auto b = m->new_state(n);
  for (int64_t t = 0; t < n; ++t) m->forward(&ids[t], 1, *b, one.data() + t * V);
  for (int64_t t = 0; t < n; ++t)
    ASSERT_TRUE(std::equal(all.begin() + t * V, all.begin() + (t + 1) * V, one.begin() + t * V)) << "token " << t;
}

// gpt-oss as released (MXFP4 *_blocks / *_scales experts, bf16 elsewhere) against the dequantized
// bf16 copy (transformers' layout and formula): 5 prompts × 32 greedy steps on the exact path, the
// same tokens and every logit within 1e-5 · max|logit| (the same values; only the expert views differ).
TEST(HfMxfp4, GptOssLogitsMatchDequantizedBf16Model) {
  REQUIRE_MXFP4();
  const std::string d = root + "/gpt-oss/";
  json g = read_json(d + "mlx-mxfp4/greedy.json");  // its prompts
  auto q = qwen35::make(d + "hf-mxfp4", compute::MatmulPath::Exact, tensor::DType::F32);
  auto r = qwen35::make(d + "hf-deq-bf16", compute::MatmulPath::Exact, tensor::DType::F32);
  const int64_t V = q->config().vocab_size;
  std::vector<float> lq(V), lr(V);
  double worst = 0;
  for (auto& c : g["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    auto sq = q->new_state(ids.size() + 32), sr = r->new_state(ids.size() + 32);
    q->forward(ids.data(), ids.size(), *sq, lq.data());
    r->forward(ids.data(), ids.size(), *sr, lr.data());
    for (int step = 0; step < 32; ++step) {
      double mx = 0, d = 0;
      for (int64_t i = 0; i < V; ++i) {
        mx = std::max(mx, std::fabs(double(lr[i])));
        d = std::max(d, std::fabs(double(lq[i]) - lr[i]));
      }
      worst = std::max(worst, d / mx);
      ASSERT_LE(d, 1e-5 * mx) << "step " << step;
      int32_t t = argmax(lq.data(), V);
      ASSERT_EQ(t, argmax(lr.data(), V)) << "step " << step;
      q->forward(&t, 1, *sq, lq.data());
      r->forward(&t, 1, *sr, lr.data());
    }
  }
  std::printf("hf-mxfp4 vs dequantized bf16: worst |dlogit| / max|logit| = %.3g\n", worst);
}

// One scales tensor of layer 0 corrupted by the generator (named in corrupt.txt): refused at load
// with the checkpoint's path, the tensor and what is wrong.
TEST(HfMxfp4, CorruptScalesAreRefusedWithPathAndReason) {
  REQUIRE_MXFP4();
  struct Bad {
    const char* dir;
    const char* reason;
  };
  for (const Bad& b : {Bad{"hf-bad-scales-dtype", "expected uint8"}, Bad{"hf-bad-scales-shape", "expected uint8"},
                       Bad{"mlx-bad-scales-dtype", "scales must be uint8"}}) {
    const std::string d = root + "/gpt-oss/" + b.dir;
    std::string tensor = first_line(d + "/corrupt.txt");
    for (const char* sfx : {".scales", "_scales"})  // the loaders name the module / the blocks pair
      if (tensor.size() > 7 && tensor.compare(tensor.size() - 7, 7, sfx) == 0) tensor.resize(tensor.size() - 7);
    try {
      qwen35::make(d, compute::MatmulPath::Fast, tensor::DType::F32);
      ADD_FAILURE() << d << " was accepted";
    } catch (const FileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.path().rfind(d, 0), 0u) << what;  // the directory or its file
      EXPECT_NE(what.find(tensor), std::string::npos) << what;
      EXPECT_NE(what.find(b.reason), std::string::npos) << what;
    }
  }
}
