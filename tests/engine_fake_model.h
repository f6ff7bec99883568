// A weightless Model for engine tests that run in milliseconds (the role of vLLM's fake model
// runner). Its next token is a deterministic function of the whole context:
//   h_p = (31·h_{p-1} + token_p·(p+1) + 7) mod 1000003 over every position p, and
//   next = a jump 32 + (h/5 mod 96) when h mod 5 == 0, else the last token counted up (32..127).
// Counting up makes prompt lookup and a counting draft model guess right most of the time; the
// jumps make them guess wrong sometimes, so both acceptance and rollback run.
// The KV is real: each position's token is written into its page of a cache::BlockPool and the
// hash is recomputed from the pages at every forward, so a wrong cached prefix, a bad
// copy-on-write or a lost page after preemption changes the output. `reference()` is the same
// definition as a plain sequential loop — the independent oracle the engine is compared with.
// Optional MTP heads: hidden row p is (h_p, token_p, p), and a head given row p and token p+1
// predicts token p+2 — right except where h_{p+1} mod 7 == 0 (and wrong from the zero rows the
// engine uses for unknown positions), so MTP drafts are accepted and rolled back.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "model/paged_kv.h"

namespace rapid::testing {

struct FakeLm {
  static constexpr int64_t kVocab = 258;  // ByteTokenizer ids; the model only writes 32..127
  static constexpr int64_t kHidden = 4;
  bool counting_only = false;  // a draft model: always counts up (never jumps)

  static uint32_t extend(uint32_t h, int32_t tok, int64_t pos) {
    return uint32_t((uint64_t(h) * 31 + uint64_t(uint32_t(tok)) * uint64_t(pos + 1) + 7) % 1000003);
  }
  int32_t next(uint32_t h, int32_t last) const {
    if (!counting_only && h % 5 == 0) return 32 + int32_t(h / 5 % 96);
    return 32 + (last + 1) % 96;
  }
  // The greedy continuation of `prompt` (n tokens), one token at a time.
  std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int64_t n) const {
    uint32_t h = 0;
    for (size_t i = 0; i < prompt.size(); ++i) h = extend(h, prompt[i], int64_t(i));
    std::vector<int32_t> out;
    int32_t last = prompt.back();
    for (int64_t p = int64_t(prompt.size()); int64_t(out.size()) < n; ++p) {
      last = next(h, last);
      out.push_back(last);
      h = extend(h, last, p);
    }
    return out;
  }
  // One-hot-ish logits: the next token leads by 8 (sampling at temperature > 0 still varies).
  static void logits(int32_t tok, float* row) {
    std::fill(row, row + kVocab, 0.0f);
    row[tok] = 8.0f;
  }
};

// What the engine asked of the model, for tests that check budgets (thread-safe).
struct FakeStep {
  struct Entry {
    int64_t n, past;  // tokens computed, KV length before
    bool all_logits;
  };
  std::vector<Entry> entries;
};

class FakeModel : public model::Model {
 public:
  explicit FakeModel(FakeLm lm = {}, int mtp_layers = 0) : lm_(lm), mtp_layers_(mtp_layers) {
    cfg_.architecture = "fake";
    cfg_.vocab_size = FakeLm::kVocab;
    cfg_.hidden_size = FakeLm::kHidden;
    cfg_.num_hidden_layers = cfg_.num_attention_heads = cfg_.num_key_value_heads = 1;
    cfg_.head_dim = 1;
    cfg_.max_position_embeddings = 1 << 16;
    cfg_.eos_token_ids = {256};
  }
  const FakeLm& lm() const { return lm_; }
  // Called at the start of every batched forward (e.g. a delay that keeps requests running).
  void set_step_hook(std::function<void()> f) {
    std::lock_guard lk(mu_);
    hook_ = std::move(f);
  }
  std::vector<FakeStep> steps() const {
    std::lock_guard lk(mu_);
    return steps_;
  }
  uint64_t mtp_forwards() const {
    std::lock_guard lk(mu_);
    return mtp_forwards_;
  }

  const model::ModelConfig& config() const override { return cfg_; }
  cache::BlockShape kv_block_shape(int32_t block_size) const override {
    cache::BlockShape s;
    s.num_layers = 1;
    s.kv_heads = 1;
    s.head_dim = 1;
    s.block_size = block_size;
    s.dtype = cache::KvDType::F32;
    return s;
  }
  std::unique_ptr<model::SequenceState> new_paged_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    return std::make_unique<model::PagedKvState>(std::move(pool), max_tokens);
  }
  std::unique_ptr<model::SequenceState> new_state(int64_t max_tokens) override {
    if (!own_pool_) own_pool_ = std::make_shared<cache::BlockPool>(kv_block_shape(16), 1 << 20);
    return new_paged_state(own_pool_, max_tokens);
  }
  void forward(const int32_t* tokens, int64_t n, model::SequenceState& state, float* logits, bool all_logits) override {
    model::BatchEntry e{tokens, n, &state, logits, all_logits};
    run(e);
  }
  void forward_batch(const model::BatchEntry* entries, size_t count) override {
    std::function<void()> hook;
    {
      std::lock_guard lk(mu_);
      hook = hook_;
      FakeStep st;
      for (size_t i = 0; i < count; ++i)
        st.entries.push_back({entries[i].n, entries[i].state->length(), entries[i].all_logits});
      steps_.push_back(std::move(st));
    }
    if (hook) hook();
    for (size_t i = 0; i < count; ++i) run(entries[i]);
  }

  int mtp_layers() const override { return mtp_layers_; }
  cache::BlockShape mtp_block_shape(int32_t block_size) const override { return kv_block_shape(block_size); }
  std::unique_ptr<model::SequenceState> new_mtp_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    return new_paged_state(std::move(pool), max_tokens);
  }
  void forward_mtp(const model::MtpEntry* entries, size_t count) override {
    {
      std::lock_guard lk(mu_);
      ++mtp_forwards_;
    }
    for (size_t i = 0; i < count; ++i) {
      const model::MtpEntry& e = entries[i];
      static_cast<model::PagedKvState*>(e.state)->append(e.n);  // the heads' KV (not read by this fake)
      const float* row = e.hidden + (e.n - 1) * FakeLm::kHidden;
      const int32_t tok = e.tokens[e.n - 1];
      const int64_t p = int64_t(row[2]) + 1;
      const uint32_t h = FakeLm::extend(uint32_t(row[0]), tok, p);
      if (e.layer < 0 || e.layer >= mtp_layers_) throw std::runtime_error("fake MTP: no head " + std::to_string(e.layer));
      // An imperfect head: where h mod 7 == 0 it guesses a count-up instead (drafts get rejected).
      FakeLm::logits(h % 7 == 0 ? 32 + (tok + 1) % 96 : lm_.next(h, tok), e.logits);
      if (e.hidden_out) write_hidden(e.hidden_out, h, tok, p);
    }
  }

 private:
  static void write_hidden(float* out, uint32_t h, int32_t tok, int64_t p) {
    out[0] = float(h);
    out[1] = float(tok);
    out[2] = float(p);
    out[3] = 0.0f;
  }
  // Writes the new tokens into their pages, then rereads the whole context from the pages.
  void run(const model::BatchEntry& e) {
    auto& kv = static_cast<model::PagedKvState&>(*e.state);
    const int64_t past = kv.length();
    kv.append(e.n);
    compute::KvView v = kv.layer(0);
    for (int64_t i = 0; i < e.n; ++i) *reinterpret_cast<float*>(v.key_at(past + i, 0)) = float(e.tokens[i]);
    uint32_t h = 0;
    for (int64_t p = 0; p < past + e.n; ++p) {
      const int32_t tok = int32_t(*reinterpret_cast<const float*>(v.key_at(p, 0)));
      h = FakeLm::extend(h, tok, p);
      if (p < past) continue;
      const int64_t row = p - past;
      if (e.all_logits || row == e.n - 1)
        FakeLm::logits(lm_.next(h, tok), e.logits + (e.all_logits ? row : 0) * FakeLm::kVocab);
      if (e.hidden) write_hidden(e.hidden + row * FakeLm::kHidden, h, tok, p);
    }
  }

  FakeLm lm_;
  int mtp_layers_;
  model::ModelConfig cfg_;
  std::shared_ptr<cache::BlockPool> own_pool_;
  mutable std::mutex mu_;
  std::function<void()> hook_;
  std::vector<FakeStep> steps_;
  uint64_t mtp_forwards_ = 0;
};

}  // namespace rapid::testing
