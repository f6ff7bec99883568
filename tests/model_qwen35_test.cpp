// Qwen3.5 (Gated DeltaNet hybrid) against mlx-lm, on tiny random-weight models that mlx-lm itself
// writes (scripts/make_tiny_qwen35.py: a dense tied-embedding config and one with 2 value heads
// per key head and an own lm_head; each as MLX f32, the Hugging Face layout of the same weights,
// and mlx-lm's affine 4-bit quantization), with mlx-lm's greedy output (mlx on CPU, f32) as the
// goldens. The set is generated into $RAPID_MODEL_CACHE/qwen35-tiny on first use; the tests skip
// only when that is impossible (no mlx-lm in the test venv).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cache/block_pool.h"
#include "common/error.h"
#include "compute/cpu_features.h"
#include "model/arch.h"
#include "model/paged_kv.h"
#include "model/weights.h"
#include "model_parity_helpers.h"
#include "qwen35_models.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::parity;

namespace {

const char* kConfigs[] = {"dense-tied", "vheads-untied"};

using qwen35::tiny_models;

#define REQUIRE_TINY()                                  \
  std::string why_;                                     \
  const std::string root = tiny_models(&why_);          \
  if (root.empty()) GTEST_SKIP() << why_

std::unique_ptr<Model> make(const std::string& dir, MatmulPath mp, DType kv, bool chunked = false) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = kv;
  o.chunked_deltanet = chunked;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(dir)), o);
}

// Exact path (weights as f32, f32 KV): mlx-lm's tokens for 5 prompts × 64 greedy steps (prompt in
// one forward call, then one token per call), every stored logit within 1e-4 · max|logit|; with
// the recurrent and with the chunked DeltaNet prefill (prompts of 31 and 58 tokens take it).
void exact_vs_mlx(const std::string& dir) {
  json g = read_json(dir + "/greedy.json");
  for (bool chunked : {false, true}) {
    auto m = make(dir, MatmulPath::Exact, DType::F32, chunked);
    double worst = exact_greedy(*m, g, 1e-4);
    std::printf("%s%s: worst |dlogit| / max|logit| = %.3g\n", dir.c_str(), chunked ? " (chunked)" : "", worst);
  }
}

}  // namespace

TEST(Qwen35Parity, MlxF32GreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/mlx-f32");
}

// The Hugging Face layout (model.language_model.* names, conv1d [C, 1, K], (1 + w) norms stored
// as w): the goldens come from mlx-lm loading that directory (its sanitize converts it).
TEST(Qwen35Parity, HfLayoutGreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/hf-f32");
}

// mlx-lm's own 4-bit quantization: mlx computes the quantized matmuls on the same 4-bit values
// our exact path dequantizes to f32.
TEST(Qwen35Parity, MlxQ4GreedyMatchesMlxLm) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) exact_vs_mlx(root + "/" + c + "/mlx-q4");
}

// The scalar recurrence and conv (no AVX2) give the same result.
TEST(Qwen35Parity, ScalarKernelsMatchMlxLm) {
  REQUIRE_TINY();
  Isa saved = active_isa();
  set_active_isa(Isa::Scalar);
  exact_vs_mlx(root + "/vheads-untied/mlx-f32");
  set_active_isa(saved);
}

// A prompt in one forward call (all logits; recurrent or chunked DeltaNet) equals the same tokens
// fed one call at a time.
TEST(Qwen35Model, PrefillEqualsTokenByTokenDecode) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) {
    const std::string dir = root + "/" + c + "/mlx-f32";
    json g = read_json(dir + "/greedy.json");
    for (auto [mp, chunked] : {std::pair{MatmulPath::Exact, false}, std::pair{MatmulPath::Exact, true},
                               std::pair{MatmulPath::Fast, true}}) {
      auto m = make(dir, mp, DType::F32, chunked);
      const int64_t V = m->config().vocab_size;
      std::vector<int32_t> ids = g["cases"][4]["prompt_ids"].get<std::vector<int32_t>>();
      const int64_t n = static_cast<int64_t>(ids.size());
      std::vector<float> all(static_cast<size_t>(n * V)), one(static_cast<size_t>(V));
      auto a = m->new_state(n);
      m->forward(ids.data(), n, *a, all.data(), true);
      auto b = m->new_state(n);
      double worst = 0;
      for (int64_t t = 0; t < n; ++t) {
        m->forward(&ids[t], 1, *b, one.data());
        const float* p = all.data() + t * V;
        float mx = 0;
        for (int64_t j = 0; j < V; ++j) mx = std::max(mx, std::fabs(one[j]));
        for (int64_t j = 0; j < V; ++j) worst = std::max(worst, double(std::fabs(p[j] - one[j])) / mx);
        EXPECT_EQ(argmax(p, V), argmax(one.data(), V)) << c << " token " << t;
      }
      EXPECT_LE(worst, 1e-5) << c << (chunked ? " chunked" : "");
      EXPECT_EQ(a->length(), n);
      EXPECT_EQ(b->length(), n);
    }
  }
}

// Two sequences in one forward_batch give bitwise the logits each gives alone.
TEST(Qwen35Model, BatchedForwardEqualsSeparate) {
  REQUIRE_TINY();
  const std::string dir = root + "/vheads-untied/mlx-f32";
  json g = read_json(dir + "/greedy.json");
  auto m = make(dir, MatmulPath::Fast, DType::F16);
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> p1 = g["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> p2 = g["cases"][3]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<float> l1(V), l2(V), s1(V), s2(V);
  auto a1 = m->new_state(128), a2 = m->new_state(128), b1 = m->new_state(128), b2 = m->new_state(128);
  m->forward(p1.data(), p1.size(), *a1, s1.data());
  m->forward(p2.data(), p2.size(), *a2, s2.data());
  BatchEntry e[2];
  e[0].tokens = p1.data(), e[0].n = p1.size(), e[0].state = b1.get(), e[0].logits = l1.data();
  e[1].tokens = p2.data(), e[1].n = p2.size(), e[1].state = b2.get(), e[1].logits = l2.data();
  m->forward_batch(e, 2);
  EXPECT_EQ(l1, s1);
  EXPECT_EQ(l2, s2);
  // Then one decode step of both, batched vs alone.
  int32_t t1 = argmax(l1.data(), V), t2 = argmax(l2.data(), V);
  m->forward(&t1, 1, *a1, s1.data());
  m->forward(&t2, 1, *a2, s2.data());
  e[0].tokens = &t1, e[0].n = 1, e[1].tokens = &t2, e[1].n = 1;
  m->forward_batch(e, 2);
  EXPECT_EQ(l1, s1);
  EXPECT_EQ(l2, s2);
}

// Outside a verification window (a forward over several tokens with every row's logits, see
// RollbackInsideVerifyWindowEqualsPlainDecode) the recurrent state cannot be rewound: a partial
// truncate is refused and changes nothing; truncate(0) starts the sequence over.
TEST(Qwen35Model, TruncateRefusesRollbackAndRestartsAtZero) {
  REQUIRE_TINY();
  const std::string dir = root + "/dense-tied/mlx-f32";
  json g = read_json(dir + "/greedy.json");
  auto m = make(dir, MatmulPath::Exact, DType::F32);
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

// A prefix-cache checkpoint: the recurrent state saved after p tokens, restored into a fresh
// sequence that adopts the first sequence's KV pages, continues with mlx-lm's greedy tokens
// (prompt in one call, then one token per call with mlx-lm's cache) for every cut p, including
// mid-block ones; a wrong-size state is refused.
TEST(Qwen35Model, RecurrentCheckpointResumesAsMlxLm) {
  REQUIRE_TINY();
  for (const char* cfg : kConfigs) {
    const std::string dir = root + "/" + cfg + "/mlx-f32";
    json g = read_json(dir + "/greedy.json");
    auto m = make(dir, MatmulPath::Exact, DType::F32);
    const int64_t V = m->config().vocab_size;
    const json& c = g["cases"][4];
    std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>(), want;
    for (auto& st : c["steps"]) want.push_back(st["token"].get<int32_t>());
    auto pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), m->kv_block_shape(16).block_bytes() * 40);
    for (int64_t p : {int64_t(1), int64_t(16), int64_t(23), int64_t(ids.size()) - 1}) {
      std::vector<float> logits(V);
      auto a = m->new_paged_state(pool, 256);
      m->forward(ids.data(), p, *a, logits.data());
      std::vector<uint8_t> bytes(a->recurrent_bytes());
      ASSERT_EQ(bytes.size(), m->recurrent_state_bytes());
      a->save_recurrent(bytes.data());
      auto b = m->new_paged_state(pool, 256);
      auto* pb = static_cast<PagedKvState*>(b.get());
      pb->adopt_prefix(static_cast<PagedKvState*>(a.get())->table().blocks(), p);
      EXPECT_THROW(b->restore_recurrent(bytes.data(), bytes.size() - 4), Error);
      b->restore_recurrent(bytes.data(), bytes.size());
      a.reset();  // b holds its own references on the adopted pages
      m->forward(ids.data() + p, int64_t(ids.size()) - p, *b, logits.data());
      std::vector<int32_t> got;
      for (size_t i = 0; i < want.size(); ++i) {
        int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        got.push_back(t);
        m->forward(&t, 1, *b, logits.data());
      }
      EXPECT_EQ(got, want) << cfg << " cut at " << p;
    }
  }
}

// Hostile input: out-of-vocabulary ids and overflowing the capacity are refused without
// advancing the state.
TEST(Qwen35Model, BadInputIsRefusedAndLosesNothing) {
  REQUIRE_TINY();
  auto m = make(root + "/dense-tied/mlx-q4", MatmulPath::Fast, DType::F16);
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
  if (mroot.empty()) GTEST_SKIP() << why_

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
  for (const char* c : kConfigs) {
    const std::string dir = mroot + "/" + c;
    json ref = read_json(dir + "/mtp_ref.json");
    auto m = make(dir, MatmulPath::Exact, DType::F32);
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
    std::printf("%s: MTP head vs numpy, worst |dlogit| / max|logit| = %.3g\n", c, worst);
    auto all = m->new_mtp_state(pool, T);
    std::vector<float> hout(static_cast<size_t>(H));
    MtpEntry e{&toks[1], hid.data(), T - 1, all.get(), logits.data(), hout.data(), 0};
    m->forward_mtp(&e, 1);
    EXPECT_LE(rel_err(logits.data(), ref["mtp_logits"][T - 2].get<std::vector<float>>()), 1e-4) << c;
    EXPECT_EQ(all->length(), T - 1);
  }
}

TEST(Qwen35Mtp, BadMtpInputIsRefused) {
  REQUIRE_MTP();
  auto m = make(mroot + "/dense-tied", MatmulPath::Fast, DType::F16);
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
      kv_block_shape_for(1, m->config().num_key_value_heads, m->config().head_dim, 16, DType::F32), 1u << 20);
  EXPECT_THROW(m->new_mtp_state(f32_pool, 8), Error);  // another KV dtype than the model's
}

// Speculative verification on the hybrid: a forward over the next token plus k drafts (all
// logits) gives bitwise the logits of feeding them one at a time (what plain decoding computes),
// and truncating to any length inside that window leaves the state plain decoding of the kept
// tokens leaves: the following forward's logits are bitwise equal. Outside the window it is
// refused. Both configs, the production (fast) path.
TEST(Qwen35Model, RollbackInsideVerifyWindowEqualsPlainDecode) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) {
    const std::string dir = root + "/" + c + "/mlx-q4";
    json g = read_json(dir + "/greedy.json");
    auto m = make(dir, MatmulPath::Fast, DType::F16);
    const int64_t V = m->config().vocab_size;
    std::vector<int32_t> prompt = g["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t P = static_cast<int64_t>(prompt.size());
    const std::vector<int32_t> win = {7, 100, 33, 250};  // next token + 3 drafts
    const int32_t after = 42;
    std::vector<float> l(V);
    // Plain: the prompt, then one token per call; keep every row and the next step's logits.
    std::vector<std::vector<float>> plain_rows, plain_next;
    for (size_t keep = 1; keep <= win.size(); ++keep) {
      auto st = m->new_state(64);
      m->forward(prompt.data(), P, *st, l.data());
      for (size_t t = 0; t < keep; ++t) {
        m->forward(&win[t], 1, *st, l.data());
        if (keep == win.size()) plain_rows.push_back(l);
      }
      m->forward(&after, 1, *st, l.data());
      plain_next.push_back(l);
    }
    for (size_t keep = 1; keep <= win.size(); ++keep) {
      auto st = m->new_state(64);
      m->forward(prompt.data(), P, *st, l.data());
      std::vector<float> rows(win.size() * V);
      m->forward(win.data(), static_cast<int64_t>(win.size()), *st, rows.data(), true);
      for (size_t t = 0; t < win.size(); ++t)
        EXPECT_TRUE(std::equal(plain_rows[t].begin(), plain_rows[t].end(), rows.begin() + t * V)) << c << " row " << t;
      st->truncate(P + static_cast<int64_t>(keep));
      EXPECT_EQ(st->length(), P + static_cast<int64_t>(keep));
      m->forward(&after, 1, *st, l.data());
      EXPECT_EQ(l, plain_next[keep - 1]) << c << " keeping " << keep << " of " << win.size();
      // The window is gone with the rolled-back tokens: no second rollback.
      EXPECT_THROW(st->truncate(P), Error) << c;
    }
  }
}
