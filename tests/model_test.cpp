// Forward-pass tests against transformers: tiny random models of every architecture (goldens in
// tests/golden/tiny, from scripts/make_tiny_models.py) and greedy parity on real SmolLM2-135M
// (goldens in tests/golden/model, from scripts/make_parity_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/error.h"
#include "compute/kernels.h"
#include "model/arch.h"
#include "model/lane_repack.h"
#include "model/paged_kv.h"
#include "model/weights.h"
#include "resident_bytes.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/lane_layout.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace rapid;
using namespace rapid::model;

namespace {

const std::string kTiny = std::string(RAPID_SOURCE_DIR) + "/tests/golden/tiny/";

json read_json(const std::string& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot open " + p);
  return json::parse(f);
}

struct Golden {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

Golden load_golden(const std::string& p) {
  json j = read_json(p);
  Golden g;
  for (auto& t : j["tokens"]) g.tokens.push_back(t.get<int32_t>());
  for (auto& row : j["logits"]) g.logits.push_back(row.get<std::vector<float>>());
  return g;
}

std::unique_ptr<Model> make(const std::string& path, compute::MatmulPath mp, tensor::DType kv = tensor::DType::F32, int threads = 2) {
  std::shared_ptr<Checkpoint> ck = load_checkpoint(path);
  ModelOptions o;
  o.num_threads = threads;
  o.matmul = mp;
  o.kv_dtype = kv;
  return create_model(ck, o);
}

// max |a-b| over a row, relative to max |b|.
double rel_err(const float* a, const std::vector<float>& b) {
  double m = 0, d = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    m = std::max(m, std::fabs((double)b[i]));
    d = std::max(d, std::fabs((double)a[i] - b[i]));
  }
  return d / m;
}

struct TinyCase {
  const char* model;
  const char* golden;
  // llama is stored in f32; the other tiny models were saved as bf16 and their goldens computed
  // after a bf16 round trip that also rounded transformers' RoPE inv_freq buffer to bf16, which
  // shifts their logits by up to ~5e-4 relative at later positions (checked: with bf16-rounded
  // inv_freq our logits match those goldens to 1e-6).
  double prefill_tol;
};

class TinyForward : public ::testing::TestWithParam<TinyCase> {};

// Whole prompt at once, all logits, f32 weights path and f32 KV: must match transformers.
TEST_P(TinyForward, PrefillAllLogitsMatchTransformers) {
  auto c = GetParam();
  if (!fs::exists(kTiny + c.golden)) GTEST_SKIP() << "no golden " << c.golden;
  Golden g = load_golden(kTiny + c.golden);
  auto m = make(kTiny + c.model, compute::MatmulPath::Exact);
  int64_t V = m->config().vocab_size;
  ASSERT_EQ(V, (int64_t)g.logits[0].size());
  auto st = m->new_state(64);
  std::vector<float> out(g.tokens.size() * V);
  m->forward(g.tokens.data(), g.tokens.size(), *st, out.data(), true);
  for (size_t t = 0; t < g.tokens.size(); ++t)
    EXPECT_LT(rel_err(out.data() + t * V, g.logits[t]), c.prefill_tol) << c.model << " position " << t;
}

// Token by token through the KV cache (f16 KV, default fast path): same logits within
// quantization noise and the same argmax.
TEST_P(TinyForward, DecodeStepwiseMatchesTransformers) {
  auto c = GetParam();
  if (!fs::exists(kTiny + c.golden)) GTEST_SKIP() << "no golden " << c.golden;
  Golden g = load_golden(kTiny + c.golden);
  for (compute::MatmulPath mp : {compute::MatmulPath::Exact, compute::MatmulPath::Fast}) {
    auto m = make(kTiny + c.model, mp, tensor::DType::F16, 1);
    int64_t V = m->config().vocab_size;
    auto st = m->new_state(64);
    std::vector<float> out(V);
    for (size_t t = 0; t < g.tokens.size(); ++t) {
      m->forward(&g.tokens[t], 1, *st, out.data());
      double tol = mp == compute::MatmulPath::Exact ? 2e-3 : 5e-2;
      EXPECT_LT(rel_err(out.data(), g.logits[t]), tol) << c.model << " position " << t;
    }
    EXPECT_EQ(st->length(), (int64_t)g.tokens.size());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, TinyForward,
    ::testing::Values(TinyCase{"llama", "llama/logits.json", 1e-5},
                      TinyCase{"qwen2", "qwen2/logits.json", 1e-3},
                      TinyCase{"qwen3", "qwen3/logits.json", 1e-3},
                      TinyCase{"gemma3", "gemma3/logits.json", 1e-3},
                      TinyCase{"llama-q8_0.gguf", "llama-q8_0.logits.json", 1e-5},
                      TinyCase{"qwen3-q4_0.gguf", "qwen3-q4_0.logits.json", 1e-3}),
    [](const auto& info) {
      std::string s = info.param.model;
      for (auto& ch : s) if (!isalnum((unsigned char)ch)) ch = '_';
      return s;
    });

TEST(ModelErrors, BadInputsAreRefusedClearly) {
  auto m = make(kTiny + "llama", compute::MatmulPath::Fast);
  auto st = m->new_state(4);
  std::vector<float> out(m->config().vocab_size);
  int32_t bad = 100000;
  EXPECT_THROW(m->forward(&bad, 1, *st, out.data()), Error);
  int32_t toks[5] = {1, 2, 3, 4, 5};
  EXPECT_THROW(m->forward(toks, 5, *st, out.data()), Error);  // exceeds capacity
  m->forward(toks, 4, *st, out.data());
  EXPECT_EQ(st->length(), 4);
  st->truncate(2);
  EXPECT_EQ(st->length(), 2);
  EXPECT_THROW(st->truncate(3), Error);
}

// Rolling back the cache and replaying gives the same logits (speculation / prefix reuse).
TEST(ModelState, TruncateAndReplayIsDeterministic) {
  auto m = make(kTiny + "qwen3", compute::MatmulPath::Fast);
  int64_t V = m->config().vocab_size;
  auto st = m->new_state(16);
  int32_t toks[6] = {5, 9, 200, 3, 77, 31};
  std::vector<float> a(V), b(V);
  m->forward(toks, 6, *st, a.data());
  st->truncate(3);
  m->forward(toks + 3, 3, *st, b.data());
  for (int64_t i = 0; i < V; ++i) ASSERT_FLOAT_EQ(a[i], b[i]);
}


// ---- Paged KV and batched forward ----

struct BatchCase {
  const char* model;
  compute::MatmulPath path;
  tensor::DType kv;
};

void PrintTo(const BatchCase& c, std::ostream* os) {
  *os << c.model << (c.path == compute::MatmulPath::Fast ? " fast " : " exact ") << tensor::dtype_name(c.kv);
}

std::string batch_case_name(const ::testing::TestParamInfo<BatchCase>& info) {
  std::string s = std::string(info.param.model) + (info.param.path == compute::MatmulPath::Fast ? "_fast_" : "_exact_") +
                  tensor::dtype_name(info.param.kv);
  for (auto& ch : s) if (!isalnum((unsigned char)ch)) ch = '_';
  return s;
}

// Deterministic token ids of sequence `seq` (vocab 256 in the tiny models).
std::vector<int32_t> seq_tokens(int seq, int64_t n) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = int32_t((seq * 67 + i * 31 + 7) % 251 + 2);
  return t;
}

// Logits of every position of `toks` run alone: a one-shot prefill of the first `prompt` tokens
// (all logits), then one token per forward.
std::vector<float> solo_rows(Model& m, const std::vector<int32_t>& toks, int64_t prompt) {
  const int64_t V = m.config().vocab_size, n = toks.size();
  std::vector<float> rows(n * V);
  auto st = m.new_state(n);
  m.forward(toks.data(), prompt, *st, rows.data(), true);
  for (int64_t t = prompt; t < n; ++t) m.forward(&toks[t], 1, *st, rows.data() + t * V);
  return rows;
}

bool rows_equal(const float* a, const float* b, int64_t V) { return std::memcmp(a, b, V * sizeof(float)) == 0; }

class BatchForward : public ::testing::TestWithParam<BatchCase> {};

// Chunked prefill (7 + 1 + 9 tokens) and token-by-token decode give bitwise the logits of a
// one-shot prefill: every row is computed with the same arithmetic whatever the chunking.
TEST_P(BatchForward, ChunkedPrefillIsBitwiseOneShot) {
  auto c = GetParam();
  auto m = make(kTiny + c.model, c.path, c.kv);
  const int64_t V = m->config().vocab_size;
  auto toks = seq_tokens(3, 17);
  std::vector<float> one(17 * V), chunked(17 * V), stepwise(17 * V);
  auto a = m->new_state(17);
  m->forward(toks.data(), 17, *a, one.data(), true);
  auto b = m->new_state(17);
  int64_t at = 0;
  for (int64_t n : {7, 1, 9}) {
    m->forward(toks.data() + at, n, *b, chunked.data() + at * V, true);
    at += n;
  }
  auto s = m->new_state(17);
  for (int64_t t = 0; t < 17; ++t) m->forward(&toks[t], 1, *s, stepwise.data() + t * V);
  for (int64_t t = 0; t < 17; ++t) {
    EXPECT_TRUE(rows_equal(one.data() + t * V, chunked.data() + t * V, V)) << "chunked, position " << t;
    EXPECT_TRUE(rows_equal(one.data() + t * V, stepwise.data() + t * V, V)) << "stepwise, position " << t;
  }
}

// Five sequences of different prompt lengths join a running batch at different steps, prefill in
// chunks of varying size while others decode; every logits row equals the sequence run alone.
TEST_P(BatchForward, MixedBatchesAreBitwiseSolo) {
  auto c = GetParam();
  auto m = make(kTiny + c.model, c.path, c.kv);
  const int64_t V = m->config().vocab_size;
  const int64_t prompts[5] = {5, 13, 1, 21, 34}, gen = 6;
  const int join[5] = {0, 0, 1, 3, 4};
  auto pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), m->kv_block_shape(16).block_bytes() * 64);
  struct S {
    std::vector<int32_t> toks;
    std::vector<float> want, got;
    std::unique_ptr<SequenceState> st;
    int64_t prompt, done = 0;
    int chunk = 0;
  };
  std::vector<S> seqs(5);
  for (int i = 0; i < 5; ++i) {
    S& s = seqs[i];
    s.prompt = prompts[i];
    s.toks = seq_tokens(i, s.prompt + gen);
    s.want = solo_rows(*m, s.toks, s.prompt);
    s.got.assign(s.toks.size() * V, NAN);
    // One sequence keeps a private pool (new_state): a batch may mix pools.
    s.st = i == 2 ? m->new_state(s.toks.size()) : m->new_paged_state(pool, s.toks.size());
  }
  const int64_t chunks[4] = {7, 1, 9, 4};
  std::vector<float> last(5 * V);
  for (int step = 0; step < 40; ++step) {
    std::vector<BatchEntry> batch;
    std::vector<int> who;
    for (int i = 0; i < 5; ++i) {
      S& s = seqs[i];
      if (step < join[i] || s.done == (int64_t)s.toks.size()) continue;
      BatchEntry e;
      e.tokens = s.toks.data() + s.done;
      e.n = s.done < s.prompt ? std::min(chunks[s.chunk++ % 4], s.prompt - s.done) : 1;
      e.state = s.st.get();
      e.all_logits = (i + step) % 2 == 0;
      e.logits = e.all_logits ? s.got.data() + s.done * V : last.data() + i * V;
      batch.push_back(e);
      who.push_back(i);
    }
    if (batch.empty()) break;
    m->forward_batch(batch.data(), batch.size());
    for (size_t k = 0; k < batch.size(); ++k) {
      S& s = seqs[who[k]];
      if (!batch[k].all_logits)
        std::memcpy(s.got.data() + (s.done + batch[k].n - 1) * V, last.data() + who[k] * V, V * sizeof(float));
      s.done += batch[k].n;
      ASSERT_EQ(s.st->length(), s.done);
    }
  }
  for (int i = 0; i < 5; ++i) {
    S& s = seqs[i];
    ASSERT_EQ(s.done, (int64_t)s.toks.size()) << "sequence " << i << " did not finish";
    int compared = 0;
    for (size_t t = 0; t < s.toks.size(); ++t) {
      if (std::isnan(s.got[t * V])) continue;  // a chunk's inner row whose logits were not asked for
      ++compared;
      EXPECT_TRUE(rows_equal(s.got.data() + t * V, s.want.data() + t * V, V)) << "sequence " << i << " position " << t;
    }
    EXPECT_GE(compared, gen) << "sequence " << i;
  }
  seqs.clear();
  EXPECT_EQ(pool->free_count(), pool->total_blocks());
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, BatchForward,
    ::testing::Values(BatchCase{"llama", compute::MatmulPath::Exact, tensor::DType::F32},
                      BatchCase{"qwen3", compute::MatmulPath::Fast, tensor::DType::F16},
                      BatchCase{"gemma3", compute::MatmulPath::Fast, tensor::DType::BF16},
                      BatchCase{"llama-q8_0.gguf", compute::MatmulPath::Fast, tensor::DType::F16},
                      BatchCase{"qwen3-q4_0.gguf", compute::MatmulPath::Fast, tensor::DType::F16},
                      BatchCase{"qwen3-q4_0.gguf", compute::MatmulPath::Exact, tensor::DType::F32}),
    batch_case_name);

PagedKvState& paged(SequenceState& s) { return dynamic_cast<PagedKvState&>(s); }

std::vector<uint8_t> block_bytes(cache::BlockPool& pool, const std::vector<cache::BlockId>& blocks) {
  std::vector<uint8_t> out;
  for (auto b : blocks) out.insert(out.end(), pool.data(b), pool.data(b) + pool.shape().block_bytes());
  return out;
}

// A second sequence adopts the first one's prefix pages (ending inside a block) and continues
// differently: its logits equal a cold run, and the source's pages are never written (COW).
TEST(PagedKv, SharedPrefixIsCopyOnWrite) {
  auto m = make(kTiny + "qwen3-q4_0.gguf", compute::MatmulPath::Fast, tensor::DType::F16);
  const int64_t V = m->config().vocab_size;
  auto pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), m->kv_block_shape(16).block_bytes() * 16);
  auto toks_a = seq_tokens(1, 21);
  auto toks_b = toks_a;
  toks_b.resize(18);  // B shares A's first 18 tokens, then diverges
  for (int i = 0; i < 9; ++i) toks_b.push_back(int32_t(100 + i));

  auto a = m->new_paged_state(pool, 64);
  std::vector<float> la(21 * V);
  m->forward(toks_a.data(), 21, *a, la.data(), true);
  const auto a_blocks = paged(*a).table().blocks();
  ASSERT_EQ(a_blocks.size(), 2u);
  const auto a_pages = block_bytes(*pool, a_blocks);

  auto b = m->new_paged_state(pool, 64);
  paged(*b).adopt_prefix(a_blocks, 18);
  EXPECT_EQ(b->length(), 18);
  EXPECT_EQ(pool->refcount(a_blocks[1]), 2);
  EXPECT_EQ(paged(*b).blocks_needed(1), 1);   // the shared partial page is copied first
  EXPECT_EQ(paged(*b).blocks_needed(15), 2);  // ... and position 32 opens a new page
  std::vector<float> lb(9 * V);
  m->forward(toks_b.data() + 18, 9, *b, lb.data(), true);
  EXPECT_EQ(paged(*b).table().blocks()[0], a_blocks[0]);  // full page still shared
  EXPECT_NE(paged(*b).table().blocks()[1], a_blocks[1]);  // partial page was copied
  EXPECT_EQ(block_bytes(*pool, a_blocks), a_pages) << "source pages were written";

  auto cold = m->new_state(27);
  std::vector<float> lc(27 * V);
  m->forward(toks_b.data(), 27, *cold, lc.data(), true);
  for (int64_t t = 0; t < 9; ++t)
    EXPECT_TRUE(rows_equal(lb.data() + t * V, lc.data() + (18 + t) * V, V)) << "position " << 18 + t;

  // A continues after B's writes and still matches its own cold run.
  toks_a.push_back(42);
  std::vector<float> la2(V);
  m->forward(&toks_a[21], 1, *a, la2.data());
  auto cold_a = m->new_state(22);
  std::vector<float> lca(22 * V);
  m->forward(toks_a.data(), 22, *cold_a, lca.data(), true);
  EXPECT_TRUE(rows_equal(la2.data(), lca.data() + 21 * V, V));
  a.reset();
  b.reset();
  EXPECT_EQ(pool->free_count(), pool->total_blocks());
}

// Speculation rollback: truncating (across a page boundary) and forwarding again reproduces the
// same logits bitwise, and dropped pages go back to the pool.
TEST(PagedKv, TruncateThenReforwardIsBitwise) {
  for (compute::MatmulPath mp : {compute::MatmulPath::Fast, compute::MatmulPath::Exact}) {
    auto m = make(kTiny + "gemma3", mp, tensor::DType::F16);
    const int64_t V = m->config().vocab_size;
    auto pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), m->kv_block_shape(16).block_bytes() * 8);
    auto st = m->new_paged_state(pool, 40);
    auto toks = seq_tokens(4, 35);
    std::vector<float> a(35 * V), b(26 * V);
    m->forward(toks.data(), 35, *st, a.data(), true);
    EXPECT_EQ(pool->free_count(), pool->total_blocks() - 3);
    st->truncate(9);
    EXPECT_EQ(pool->free_count(), pool->total_blocks() - 1);
    m->forward(toks.data() + 9, 26, *st, b.data(), true);
    for (int64_t t = 0; t < 26; ++t)
      EXPECT_TRUE(rows_equal(a.data() + (9 + t) * V, b.data() + t * V, V)) << "position " << 9 + t;
  }
}

// A batch the pool cannot hold is refused with rapid::Error before any state changes.
TEST(PagedKv, PoolExhaustionThrowsAndLeavesStatesUnchanged) {
  auto m = make(kTiny + "llama", compute::MatmulPath::Fast, tensor::DType::F16);
  const int64_t V = m->config().vocab_size;
  auto pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), m->kv_block_shape(16).block_bytes() * 3);
  ASSERT_EQ(pool->total_blocks(), 3u);
  auto a = m->new_paged_state(pool, 100), b = m->new_paged_state(pool, 100);
  auto ta = seq_tokens(0, 21), tb = seq_tokens(1, 20);
  std::vector<float> la(V), lb(V), ref(V);
  m->forward(ta.data(), 20, *a, la.data());  // 2 pages, 1 free
  BatchEntry e[2];
  e[0] = BatchEntry{ta.data() + 20, 1, a.get(), la.data(), false};  // fits in A's last page
  e[1] = BatchEntry{tb.data(), 17, b.get(), lb.data(), false};      // needs 2 pages
  EXPECT_THROW(m->forward_batch(e, 2), Error);
  EXPECT_EQ(a->length(), 20);
  EXPECT_EQ(b->length(), 0);
  EXPECT_EQ(pool->free_count(), 1u);
  EXPECT_THROW(m->forward(tb.data(), 17, *b, lb.data()), Error);
  EXPECT_EQ(b->length(), 0);
  // Other refusals are errors too, and leave the states alone.
  e[1].n = 16;
  BatchEntry dup[2] = {e[0], e[0]};
  EXPECT_THROW(m->forward_batch(dup, 2), Error);
  int32_t bad = 999;
  BatchEntry badtok[2] = {e[0], BatchEntry{&bad, 1, b.get(), lb.data(), false}};
  EXPECT_THROW(m->forward_batch(badtok, 2), Error);
  auto other = make(kTiny + "qwen3", compute::MatmulPath::Fast, tensor::DType::F16);  // different page geometry
  auto foreign = other->new_state(8);
  BatchEntry wrong[1] = {BatchEntry{ta.data(), 1, foreign.get(), lb.data(), false}};
  EXPECT_THROW(m->forward_batch(wrong, 1), Error);
  EXPECT_EQ(a->length(), 20);
  EXPECT_EQ(b->length(), 0);
  // What fits runs, and matches a solo run.
  m->forward_batch(e, 2);
  EXPECT_EQ(a->length(), 21);
  EXPECT_EQ(b->length(), 16);
  EXPECT_EQ(pool->free_count(), 0u);
  auto solo = m->new_state(16);
  m->forward(tb.data(), 16, *solo, ref.data());
  EXPECT_TRUE(rows_equal(lb.data(), ref.data(), V));
  a.reset();
  b.reset();
  EXPECT_EQ(pool->free_count(), 3u);
}

}  // namespace

// MTP head (tests/golden/tiny/qwen3-mtp from scripts/make_mtp_model.py: tiny Qwen3 + random
// Qwen3-Next-style mtp.* weights; reference = an independent numpy Qwen3 that reproduces
// transformers' logits of the base model, then the head as vLLM's Qwen3NextMultiTokenPredictor).
TEST(Mtp, HeadMatchesNumpyReference) {
  const std::string dir = kTiny + "qwen3-mtp";
  json g = read_json(dir + "/mtp_logits.json");
  std::vector<int32_t> toks = g["tokens"].get<std::vector<int32_t>>();
  const int64_t T = int64_t(toks.size());
  auto m = make(dir, compute::MatmulPath::Exact);
  ASSERT_EQ(m->mtp_layers(), 1);
  const int64_t H = m->config().hidden_size, V = m->config().vocab_size;
  // Target hidden states (final-normed) for every position.
  auto st = m->new_state(64);
  std::vector<float> logits(static_cast<size_t>(V)), hidden(static_cast<size_t>(T * H));
  BatchEntry e{toks.data(), T, st.get(), logits.data(), false, hidden.data()};
  m->forward_batch(&e, 1);
  for (int64_t t = 0; t < T; ++t)
    EXPECT_LT(rel_err(hidden.data() + t * H, g["hidden"][t].get<std::vector<float>>()), 1e-5) << t;
  // The head one row at a time (as when decoding): row i pairs (h_i, t_{i+1}) → logits for t_{i+2}.
  auto pool = std::make_shared<cache::BlockPool>(m->mtp_block_shape(16), m->mtp_block_shape(16).block_bytes() * 4);
  auto ms = m->new_mtp_state(pool, 64);
  std::vector<float> out(static_cast<size_t>(V)), hout(static_cast<size_t>(H));
  for (int64_t i = 0; i + 1 < T; ++i) {
    MtpEntry me{&toks[size_t(i + 1)], hidden.data() + i * H, 1, ms.get(), out.data(), hout.data(), 0};
    m->forward_mtp(&me, 1);
    EXPECT_LT(rel_err(out.data(), g["mtp_logits"][i].get<std::vector<float>>()), 1e-5) << i;
  }
  EXPECT_EQ(ms->length(), T - 1);
  // All rows in one call (catching up after a prefill) give the last row's logits too.
  auto ms2 = m->new_mtp_state(pool, 64);
  MtpEntry all{&toks[1], hidden.data(), T - 1, ms2.get(), out.data(), nullptr, 0};
  m->forward_mtp(&all, 1);
  EXPECT_LT(rel_err(out.data(), g["mtp_logits"][T - 2].get<std::vector<float>>()), 1e-5);
  // A model without heads says so; a wrong layer index is refused.
  auto plain = make(kTiny + "qwen3", compute::MatmulPath::Exact);
  EXPECT_EQ(plain->mtp_layers(), 0);
  EXPECT_THROW(plain->mtp_block_shape(16), Error);
  MtpEntry bad{&toks[1], hidden.data(), 1, ms2.get(), out.data(), nullptr, 3};
  EXPECT_THROW(m->forward_mtp(&bad, 1), Error);
}

// ---- Load-time repacking (model/lane_repack.h) ----

namespace {
std::string cached_model(const std::string& rel) {
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  const char* h = std::getenv("HOME");
  return (c && *c ? std::string(c) : std::string(h ? h : "/root") + "/.cache/rapid-mlx/models") + "/" + rel;
}
tensor::Tensor q8_tensor(const std::string& name, int64_t rows, int64_t cols, const std::vector<uint8_t>& buf) {
  tensor::Tensor t;
  t.name = name, t.dtype = tensor::DType::Q8_0, t.shape = {rows, cols}, t.data = buf.data(), t.nbytes = buf.size();
  return t;
}
}  // namespace

// Q8_0 / Q4_0 / Q4_1 / IQ4_NL rows holding an 8-block group become *_LANES with the same values; two names
// over the same bytes (tied embeddings) share one copy; shorter rows and other formats stay.
TEST(LaneRepack, RepacksGroupedRowsOnceAndLeavesTheRest) {
  const compute::Kernels& k = compute::kernels();
  if (!k.dot_q8_0_lanes || !k.dot_q4_0_lanes || !k.dot_q4_1_lanes || !k.dot_iq4_nl_lanes) GTEST_SKIP() << "nothing is repacked on this ISA";
  std::vector<uint8_t> a(4 * 9 * 34), c(4 * 7 * 34), q4(4 * 8 * 18), q5(4 * 8 * 24), nl(4 * 8 * 18);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i % 34 == 1 ? 0x2c : i * 7);  // d ≈ 0.06
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>(i % 34 == 1 ? 0x2c : i * 5);
  for (size_t i = 0; i < q4.size(); ++i) q4[i] = static_cast<uint8_t>(i % 18 == 1 ? 0x2c : i * 3);
  for (size_t i = 0; i < nl.size(); ++i) nl[i] = static_cast<uint8_t>(i % 18 == 1 ? 0x2c : i * 11);
  WeightStore ws;
  ws.add(q8_tensor("a", 4, 288, a));  // a group and a tail block
  ws.add(q8_tensor("tied", 4, 288, a));
  ws.add(q8_tensor("c", 4, 224, c));  // 7 blocks: no group
  tensor::Tensor t4 = q8_tensor("q4", 4, 256, q4), t5 = q8_tensor("q5_1", 4, 256, q5);
  t4.dtype = tensor::DType::Q4_0, t5.dtype = tensor::DType::Q5_1;  // Q5_1: no lane layout
  tensor::Tensor tn = q8_tensor("nl", 4, 256, nl);
  tn.dtype = tensor::DType::IQ4_NL;
  ws.add(t4);
  ws.add(t5);
  ws.add(tn);
  tensor::Tensor ex = q8_tensor("experts", 2, 256, q4);  // stacked experts stay mapped
  ex.dtype = tensor::DType::Q4_0, ex.shape = {2, 2, 256};
  ws.add(ex);
  // Copies over 60 % of the available memory: nothing is repacked.
  const RepackReport none = repack_for_lane_kernels(ws, (a.size() + q4.size() + nl.size()) * 3 / 2);
  EXPECT_EQ(none.tensors, 0);
  EXPECT_EQ(none.skipped_bytes, a.size() + q4.size() + nl.size());
  EXPECT_EQ(ws.get("a").dtype, tensor::DType::Q8_0);
  const RepackReport rep = repack_for_lane_kernels(ws);
  EXPECT_EQ(rep.tensors, 4);
  EXPECT_EQ(rep.bytes, a.size() + q4.size() + nl.size());
  EXPECT_EQ(ws.get("q4").dtype, tensor::DType::Q4_0_LANES);
  EXPECT_EQ(ws.get("nl").dtype, tensor::DType::IQ4_NL_LANES);
  EXPECT_EQ(ws.get("q5_1").dtype, tensor::DType::Q5_1);
  EXPECT_EQ(ws.get("q5_1").data, static_cast<const void*>(q5.data()));
  EXPECT_EQ(ws.get("experts").dtype, tensor::DType::Q4_0);
  const tensor::Tensor &pa = ws.get("a"), &pt = ws.get("tied"), &pc = ws.get("c");
  EXPECT_EQ(pa.dtype, tensor::DType::Q8_0_LANES);
  EXPECT_EQ(pa.data, pt.data);
  EXPECT_NE(pa.data, static_cast<const void*>(a.data()));
  EXPECT_EQ(pc.dtype, tensor::DType::Q8_0);
  EXPECT_EQ(pc.data, static_cast<const void*>(c.data()));
  for (const auto& [orig, name] : {std::pair{t4, "q4"}, std::pair{tn, "nl"}, std::pair{q8_tensor("a", 4, 288, a), "a"}})
    for (int64_t r = 0; r < 4; ++r) {
      std::vector<float> x(orig.cols()), y(orig.cols());
      tensor::dequantize_row(orig, r, x.data());
      tensor::dequantize_row(ws.get(name), r, y.data());
      ASSERT_EQ(x, y) << name << " row " << r;
    }
  EXPECT_EQ(repack_for_lane_kernels(ws).tensors, 0);  // nothing left to repack
}

// MLX affine 4- and 8-bit rows the loader already holds on the heap (its aligned copies) are put in
// lane order where they are: nothing copied, the same values; other bit widths stay.
TEST(LaneRepack, MlxRowsOnTheHeapRepackInPlace) {
  const bool lanes8 = compute::kernels().dot_mlx8_lanes != nullptr;
  const bool lanes4 = compute::kernels().dot_mlx4_lanes != nullptr;
  if (!lanes8 && !lanes4) GTEST_SKIP() << "no MLX lane kernels on this ISA";
  const int64_t rows = 3, cols = 576;
  std::vector<uint8_t> w8(rows * cols), w4(rows * cols / 2), w6(rows * cols * 6 / 8);
  for (auto* w : {&w8, &w4, &w6})
    for (size_t i = 0; i < w->size(); ++i) (*w)[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint16_t> sc(rows * cols / 64, tensor::f32_to_bf16(0.01f)), bi(rows * cols / 64, tensor::f32_to_bf16(-1.0f));
  auto mlx = [&](const char* name, int bits, std::vector<uint8_t>& data) {
    tensor::Tensor t;
    t.name = name, t.dtype = tensor::DType::MLX_AFFINE, t.shape = {rows, cols}, t.data = data.data();
    t.nbytes = data.size(), t.bits = bits, t.group_size = 64, t.group_dtype = tensor::DType::BF16;
    t.scales = sc.data(), t.biases = bi.data();
    return t;
  };
  const std::vector<uint8_t> orig8 = w8, orig4 = w4;
  WeightStore ws;
  ws.add(mlx("w8", 8, w8));
  ws.add(mlx("w4", 4, w4));
  ws.add(mlx("w6", 6, w6));
  const RepackReport rep = repack_for_lane_kernels(ws);
  EXPECT_EQ(rep.tensors, int(lanes8) + int(lanes4));  // AVX2 has the 8-bit one only
  EXPECT_EQ(rep.bytes, 0u);
  EXPECT_TRUE(rep.sources.empty());
  EXPECT_EQ(ws.get("w6").dtype, tensor::DType::MLX_AFFINE);
  if (!lanes4) {
    EXPECT_EQ(ws.get("w4").dtype, tensor::DType::MLX_AFFINE);
  }
  for (auto [name, bits, data, orig] : {std::tuple{"w8", 8, &w8, &orig8}, std::tuple{"w4", 4, &w4, &orig4}}) {
    if (!(bits == 8 ? lanes8 : lanes4)) continue;
    const tensor::Tensor& p = ws.get(name);
    EXPECT_EQ(p.dtype, tensor::DType::MLX_LANES) << name;
    EXPECT_EQ(p.data, static_cast<const void*>(data->data())) << name;
    EXPECT_NE(*data, *orig) << name;  // rewritten where it was
    std::vector<uint8_t> keep = *orig;
    const tensor::Tensor before = mlx(name, bits, keep);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> x(cols), y(cols);
      tensor::dequantize_row(before, r, x.data());
      tensor::dequantize_row(p, r, y.data());
      ASSERT_EQ(x, y) << name << " row " << r;
    }
  }
}

// End to end on real models (SmolLM2 Q4_1, the default model, its Q8_0 and MLX 8- and 4-bit copies, and
// Gemma 3 270M's Q4_K_M: Q4_K, Q8_0 rows with a partial group, Q6_K / Q5_0 left as they are): a
// prefill long enough for AMX panels, then greedy decode steps, give bitwise the logits of the
// file's layout.
struct RepackCase {
  const char* file;
  const char* tensor;  // one that must be repacked
  tensor::DType lanes;
};
void PrintTo(const RepackCase& c, std::ostream* os) { *os << c.file; }
class LaneRepackModels : public ::testing::TestWithParam<RepackCase> {};
INSTANTIATE_TEST_SUITE_P(
    Real, LaneRepackModels,
    ::testing::Values(RepackCase{"smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf", "model.layers.3.self_attn.q_proj.weight",
                                 tensor::DType::Q4_1_LANES},
                      RepackCase{"smollm2-135m-instruct/SmolLM2-135M-Instruct.Q8_0.gguf", "model.layers.0.mlp.up_proj.weight",
                                 tensor::DType::Q8_0_LANES},
                      RepackCase{"gemma-3-270m/gemma-3-270m-q4_k_m.gguf", "", tensor::DType::Q4_K_LANES},
                      RepackCase{"gemma-3-270m/gemma-3-270m-q4_k_m.gguf", "", tensor::DType::Q6_K_LANES},
                      RepackCase{"smollm2-135m-instruct/mlx-q8", "model.layers.0.mlp.up_proj.weight",
                                 tensor::DType::MLX_LANES},
                      RepackCase{"smollm2-135m-instruct/mlx-q4", "model.layers.0.mlp.up_proj.weight",
                                 tensor::DType::MLX_LANES}));
TEST_P(LaneRepackModels, LogitsAreBitwiseTheFileLayouts) {
  const std::string path = cached_model(GetParam().file);
  if (!fs::exists(path)) GTEST_SKIP() << path << " absent (scripts/fetch_models.sh / derive_models.sh)";
  const tensor::DType lanes = GetParam().lanes;
  // Whether the active ISA has the kernel that reads this case's layout (AVX2: not Q4_K / Q6_K).
  const compute::Kernels& k = compute::kernels();
  bool kernel = false;
  switch (lanes) {
    case tensor::DType::MLX_LANES:
      kernel = (std::strstr(GetParam().file, "mlx-q8") ? k.dot_mlx8_lanes : k.dot_mlx4_lanes) != nullptr;
      break;
    case tensor::DType::Q4_1_LANES: kernel = k.dot_q4_1_lanes != nullptr; break;
    case tensor::DType::Q8_0_LANES: kernel = k.dot_q8_0_lanes != nullptr; break;
    case tensor::DType::Q4_K_LANES: kernel = k.dot_q4_k_lanes != nullptr; break;
    case tensor::DType::Q6_K_LANES: kernel = k.dot_q6_k_lanes != nullptr; break;
    default: FAIL() << "no lane kernel listed for " << tensor::dtype_name(lanes);
  }
  if (!kernel) GTEST_SKIP() << tensor::dtype_name(lanes) << ": no lane kernel on this ISA";
  ModelOptions o;
  o.num_threads = 2;
  std::shared_ptr<Checkpoint> ck = load_checkpoint(path);
  const std::string file = fs::is_directory(path) ? path + "/model.safetensors" : path;
  // The repack reads the file with pread and copies the tensors kept in the file's layout out too:
  // the model's reads in the mapping mapped the page-cache folios around them on Linux 6.18 (up to
  // 2 MB each), repacked weights included (SmolLM2 Q4_1 peaked at 147.8 MB over 98.4 MB of
  // weights, Gemma 3 270M Q4_K_M ran 15 MB over). So after it no tensor is left in the mapping,
  // and next to nothing of the file is mapped, before or after running the model.
  const RepackReport rep = repack_for_lane_kernels(ck->weights);
  EXPECT_GT(rep.tensors, 0);
  for (auto& [name, t] : ck->weights.all()) {  // these models tie their embeddings
    EXPECT_EQ(ck->weights.mapping_of(t.data), nullptr) << name;
    if (t.scales) {
      EXPECT_EQ(ck->weights.mapping_of(t.scales), nullptr) << name;
    }
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_LE(test_mem::resident_bytes_of(file), 64 * page);
  auto packed = create_model(ck, o);
  EXPECT_LE(test_mem::resident_bytes_of(file), 64 * page);
  setenv("RAPID_REPACK", "0", 1);
  std::shared_ptr<Checkpoint> plain_ck = load_checkpoint(path);
  auto plain = create_model(plain_ck, o);
  unsetenv("RAPID_REPACK");
  int packed_tensors = 0;
  for (auto& [name, t] : ck->weights.all()) packed_tensors += t.dtype == lanes;
  EXPECT_GT(packed_tensors, 0) << tensor::dtype_name(lanes);
  if (*GetParam().tensor) {
    EXPECT_EQ(ck->weights.get(GetParam().tensor).dtype, lanes);
  }
  for (auto& [name, t] : plain_ck->weights.all()) ASSERT_NE(t.dtype, lanes) << name;
  const int64_t V = plain->config().vocab_size;
  auto sa = plain->new_state(128), sb = packed->new_state(128);
  std::vector<int32_t> toks(40);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>(100 + 37 * i);
  std::vector<float> la(V), lb(V);
  plain->forward(toks.data(), 40, *sa, la.data());
  packed->forward(toks.data(), 40, *sb, lb.data());
  for (int step = 0; step < 8; ++step) {
    ASSERT_EQ(std::memcmp(la.data(), lb.data(), V * 4), 0) << "step " << step;
    const int32_t next = static_cast<int32_t>(std::max_element(la.begin(), la.end()) - la.begin());
    plain->forward(&next, 1, *sa, la.data());
    packed->forward(&next, 1, *sb, lb.data());
  }
  // Running the model reads nothing from the file: an MLX tensor's scales read from it brought
  // back ~13 MB of SmolLM2's MLX 8-bit weights before they were copied out too.
  plain.reset(), plain_ck.reset();
  EXPECT_LE(test_mem::resident_bytes_of(file), 64 * page);
}
