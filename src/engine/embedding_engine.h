// Embeddings from a model's final hidden states (decoder or BERT encoder, model/embedding_model.h): prefill-only requests, no KV kept. One
// worker thread owns the model instance (its own scratch and thread pool, so chat generation on
// the BatchEngine never waits for it, nor it for chat: they only share the CPU). Each step runs
// one batched forward over inputs taken round-robin from the waiting requests under a token
// budget, so a request with thousands of inputs does not hold back a one-line query behind it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "model/embedding_model.h"
#include "model/sentence_transformers.h"

namespace rapid::engine {

struct EmbeddingEngineOptions {
  model::EmbeddingPooling pooling;
  int64_t max_input_tokens = 8192;  // longer inputs are refused (the caller checks first)
  int64_t max_step_tokens = 2048;   // tokens per batched forward (one longer input runs alone)
};

class EmbeddingEngine {
 public:
  // Runs a one-token forward first, so a model that cannot produce hidden states (e.g. a hybrid
  // architecture) is refused at startup with its reason, not at the first request.
  EmbeddingEngine(std::unique_ptr<model::EmbeddingModel> model, EmbeddingEngineOptions opts);
  // A decoder, through decoder_embedding_model.
  EmbeddingEngine(std::shared_ptr<model::Model> model, EmbeddingEngineOptions opts);
  ~EmbeddingEngine();
  EmbeddingEngine(const EmbeddingEngine&) = delete;
  EmbeddingEngine& operator=(const EmbeddingEngine&) = delete;

  int64_t dimensions() const { return model_->config().hidden_size; }
  int64_t vocab_size() const { return model_->config().vocab_size; }
  const EmbeddingEngineOptions& options() const { return opts_; }

  // One pooled (and, per the pooling, normalised) vector per input, in order; blocks until done.
  // Every input must hold 1..max_input_tokens ids inside the vocabulary (Error otherwise).
  std::vector<std::vector<float>> embed(std::vector<std::vector<int32_t>> inputs);
  // As embed, polling `stop` at once and then every 100 ms while it waits: once it returns true
  // the inputs not yet computed are dropped (the step running finishes) and the result is
  // nullopt, unless every input was already done.
  std::optional<std::vector<std::vector<float>>> embed_until(std::vector<std::vector<int32_t>> inputs,
                                                             const std::function<bool()>& stop);

 private:
  struct Job;
  struct Item {
    Job* job;
    size_t index;
  };
  void run();
  bool has_work() const;
  std::vector<Item> next_batch();
  void compute(const std::vector<Item>& batch);

  std::unique_ptr<model::EmbeddingModel> model_;
  EmbeddingEngineOptions opts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> jobs_;
  size_t rr_ = 0;  // round-robin position among the waiting jobs
  bool stop_ = false;
  std::thread worker_;
};

// Scales v to unit L2 norm (as torch.nn.functional.normalize: the norm is clamped at 1e-12, so an
// all-zero vector stays zero).
void l2_normalize(float* v, int64_t n);

// Pools `n` rows of `h` floats (token-major) into `out` (h floats) and L2-normalises when asked.
void pool_hidden(const float* rows, int64_t n, int64_t h, const model::EmbeddingPooling& p, float* out);

}  // namespace rapid::engine
