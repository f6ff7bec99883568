// Qwen3.5 (Gated DeltaNet hybrid) checks of its own, on the tiny random-weight models that mlx-lm
// itself writes (scripts/make_tiny_qwen35.py, goldens from mlx-lm's greedy output): the truncate
// rules, hostile input, and the MTP head. What every tiny model shares (parity with mlx-lm per
// layout, scalar kernels, prefill vs decode, batching, recurrent checkpoints, rollback)
// is in model_tiny_test.cpp. The set is generated into $RAPID_MODEL_CACHE/qwen35-tiny on first
// use; the tests skip only when that is impossible (no mlx-lm in the test venv).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cache/block_pool.h"
#include "common/error.h"
#include "model/arch.h"
#include "model/paged_kv.h"
#include "model/weights.h"
#include "model_parity_helpers.h"
#include "qwen35_models.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

const char* kConfigs[] = {"dense-tied", "vheads-untied"};

using qwen35::make;
using qwen35::tiny_models;

#define REQUIRE_TINY()                                  \
  std::string why_;                                     \
  const std::string root = tiny_models(&why_);          \
  if (root.empty()) SET_MISSING(why_)

}  // namespace

// Outside a verification window (a forward over several tokens with every row's logits, see
// RollbackInsideVerifyWindowEqualsPlainDecode) the recurrent state cannot be rewound: a partial
// truncate is refused and changes nothing; truncate(0) starts the sequence over.
TEST(Qwen35Model, TruncateRefusesRollbackAndRestartsAtZero) {
  REQUIRE_TINY();
  const std::string dir = root + "/dense-tied/mlx-f32";
  json g = read_json(dir + "/greedy.json");
  auto m = make(dir, compute::MatmulPath::Exact, tensor::DType::F32);
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> ids = g["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<float> first(V), again(V);
  auto st = m->new_state(64);
  m->forward(ids.data(), ids.size(), *st, first.data());
  EXPECT_THROW(st->truncate(3), Error);
  EXPECT_EQ(st->length(), static_cast<int64_t>(ids.size()));
  st->truncate(0);
  EXPECT_EQ(st->length(), 0);
  m->forward(ids.data(), ids.size(), *st, again.data());
  EXPECT_EQ(first, again);
}

// Hostile input: out-of-vocabulary ids and overflowing the capacity are refused without
// advancing the state.
TEST(Qwen35Model, BadInputIsRefusedAndLosesNothing) {
  REQUIRE_TINY();
  auto m = make(root + "/dense-tied/mlx-q4", compute::MatmulPath::Fast, tensor::DType::F16);
  const int64_t V = m->config().vocab_size;
  std::vector<float> logits(V);
  auto st = m->new_state(4);
  int32_t bad[2] = {1, static_cast<int32_t>(V)};
  EXPECT_THROW(m->forward(bad, 2, *st, logits.data()), Error);
  EXPECT_EQ(st->length(), 0);
  int32_t five[5] = {1, 2, 3, 4, 5};
  EXPECT_THROW(m->forward(five, 5, *st, logits.data()), Error);
  EXPECT_EQ(st->length(), 0);
  EXPECT_NO_THROW(m->forward(five, 4, *st, logits.data()));
  EXPECT_EQ(st->length(), 4);
}

// ---- MTP head and speculative rollback ----------------------------------------------------

namespace {

// Tiny Qwen3.5 models with random `mtp.*` heads (scripts/make_qwen35_mtp.py); their mtp_ref.json
// holds mlx-lm's hidden rows of the target and a numpy reference of the head (its layer checked
// against mlx-lm's).
using qwen35::mtp_models;

#define REQUIRE_MTP()                               \
  std::string why_;                                 \
  const std::string mroot = mtp_models(&why_);      \
  if (mroot.empty()) SET_MISSING(why_)

double rel_err(const float* got, const std::vector<float>& want) {
  double mx = 0, worst = 0;
  for (float w : want) mx = std::max(mx, double(std::fabs(w)));
  for (size_t j = 0; j < want.size(); ++j) worst = std::max(worst, double(std::fabs(got[j] - want[j])));
  return worst / mx;
}

}  // namespace

// The head as shipped in Qwen3.5 checkpoints (Hugging Face layout, tied and own lm_head) against
// the numpy reference: fed mlx-lm's hidden rows, every position's logits within 1e-4 (one row
// per call, the head's KV growing), and the last row of one call over all positions. The
// target's own hidden rows (BatchEntry::hidden) match mlx-lm's too.
TEST(Qwen35Mtp, HeadMatchesNumpyReference) {
  REQUIRE_MTP();
  // Each checkpoint as shipped and as llama.cpp's converter writes it (the head as the nextn block).
  std::vector<std::pair<std::string, std::string>> runs;  // (label, model path)
  for (const char* c : kConfigs) {
    runs.emplace_back(c, mroot + "/" + c);
    runs.emplace_back(std::string(c) + " gguf", mroot + "/" + c + "/gguf-f32/model.gguf");
  }
  for (const auto& [c, path] : runs) {
    const std::string dir = mroot + "/" + c.substr(0, c.find(' '));
    json ref = read_json(dir + "/mtp_ref.json");
    auto m = make(path, compute::MatmulPath::Exact, tensor::DType::F32);
    ASSERT_EQ(m->mtp_layers(), 1) << c;
    const int64_t V = m->config().vocab_size, H = m->config().hidden_size;
    std::vector<int32_t> toks = ref["tokens"].get<std::vector<int32_t>>();
    const int64_t T = static_cast<int64_t>(toks.size());
    std::vector<float> hid;
    for (auto& row : ref["hidden"]) for (float v : row.get<std::vector<float>>()) hid.push_back(v);

    // The target's hidden rows.
    std::vector<float> mine(static_cast<size_t>(T * H)), logits(static_cast<size_t>(V));
    auto st = m->new_state(T);
    BatchEntry be;
    be.tokens = toks.data(), be.n = T, be.state = st.get(), be.logits = logits.data(), be.hidden = mine.data();
    m->forward_batch(&be, 1);
    EXPECT_LE(rel_err(mine.data(), hid), 1e-4) << c;

    auto pool = std::make_shared<cache::BlockPool>(m->mtp_block_shape(16), 1u << 20);
    auto one = m->new_mtp_state(pool, T);
    double worst = 0;
    for (int64_t i = 0; i + 1 < T; ++i) {
      MtpEntry e{&toks[i + 1], hid.data() + i * H, 1, one.get(), logits.data(), nullptr, 0};
      m->forward_mtp(&e, 1);
      std::vector<float> want = ref["mtp_logits"][i].get<std::vector<float>>();
      worst = std::max(worst, rel_err(logits.data(), want));
      EXPECT_EQ(argmax(logits.data(), V), argmax(want.data(), V)) << c << " position " << i;
    }
    EXPECT_LE(worst, 1e-4) << c;
    std::printf("%s: MTP head vs numpy, worst |dlogit| / max|logit| = %.3g\n", c.c_str(), worst);
    auto all = m->new_mtp_state(pool, T);
    std::vector<float> hout(static_cast<size_t>(H));
    MtpEntry e{&toks[1], hid.data(), T - 1, all.get(), logits.data(), hout.data(), 0};
    m->forward_mtp(&e, 1);
    EXPECT_LE(rel_err(logits.data(), ref["mtp_logits"][T - 2].get<std::vector<float>>()), 1e-4) << c;
    EXPECT_EQ(all->length(), T - 1);
  }
}

// The head as llama.cpp's converter writes it (nextn block after the trunk, (1 + w) norms) loads
// as the very tensors of the Hugging Face checkpoint (f32 both: bitwise; the norms as the
// multipliers 1 + w the model uses, since (1 + w) - 1 need not give back w's last bits).
TEST(Qwen35Mtp, GgufHeadLoadsTheHfTensors) {
  REQUIRE_MTP();
  for (const char* c : kConfigs) {
    const std::string dir = mroot + "/" + c;
    auto hf = load_checkpoint(dir);
    auto gg = load_checkpoint(dir + "/gguf-f32/model.gguf");
    int compared = 0;
    for (auto& [name, t] : hf->weights.all()) {
      if (name.rfind("mtp.", 0) != 0) continue;
      SCOPED_TRACE(std::string(c) + " " + name);
      const tensor::Tensor* g = gg->weights.find(name);
      ASSERT_TRUE(g) << "missing in the GGUF checkpoint";
      ASSERT_EQ(g->shape, t.shape);
      ASSERT_EQ(g->dtype, tensor::DType::F32);
      const float* a = static_cast<const float*>(t.data);
      const float* b = static_cast<const float*>(g->data);
      const bool norm = name.find("norm") != std::string::npos;  // every norm of the head is (1 + w)
      int64_t bad = 0;
      for (int64_t i = 0; i < t.numel(); ++i) bad += norm ? a[i] + 1.0f != b[i] + 1.0f : a[i] != b[i];
      EXPECT_EQ(bad, 0);
      ++compared;
    }
    EXPECT_GE(compared, 14) << c;  // fc, three norms and the layer's ten tensors
  }
}

TEST(Qwen35Mtp, BadMtpInputIsRefused) {
  REQUIRE_MTP();
  auto m = make(mroot + "/dense-tied", compute::MatmulPath::Fast, tensor::DType::F16);
  const int64_t V = m->config().vocab_size, H = m->config().hidden_size;
  auto pool = std::make_shared<cache::BlockPool>(m->mtp_block_shape(16), 1u << 20);
  auto st = m->new_mtp_state(pool, 8);
  std::vector<float> hid(static_cast<size_t>(H), 0.1f), logits(static_cast<size_t>(V));
  int32_t bad = static_cast<int32_t>(V);
  MtpEntry e{&bad, hid.data(), 1, st.get(), logits.data(), nullptr, 0};
  EXPECT_THROW(m->forward_mtp(&e, 1), Error);
  int32_t ok = 5;
  e.tokens = &ok;
  e.layer = 1;  // the model has one MTP layer
  EXPECT_THROW(m->forward_mtp(&e, 1), Error);
  EXPECT_EQ(st->length(), 0);
  auto f32_pool = std::make_shared<cache::BlockPool>(
      kv_block_shape_for(1, m->config().num_key_value_heads, m->config().head_dim, 16, tensor::DType::F32), 1u << 20);
  EXPECT_THROW(m->new_mtp_state(f32_pool, 8), Error);  // another KV dtype than the model's
}
