// The per-request half of generation that does not run the model: from a step's logits to a
// sampled token and the event the client sees (min_tokens, constraint mask, stop tokens, stop
// strings held back until they can no longer match, max_tokens / context end, streaming
// detokenization). Shared by the single-sequence Generator and the batching engine, so both end
// a generation by exactly the same rules.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampling.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace rapid::engine {

class TokenEmitter {
 public:
  // `capacity`: total tokens (prompt + generated) the sequence may reach. Validates the request
  // (non-empty prompt inside the vocabulary, max_tokens >= 0) and throws Error otherwise.
  TokenEmitter(const tok::Tokenizer& tok, const model::ModelConfig& cfg, const GenerationRequest& req, int64_t capacity);

  // Samples the next token from `logits` (modified in place) and returns its event; the event has
  // finished = true when this token ends the generation.
  GenerationEvent emit(float* logits);
  // Samples with a drafted guess (speculative decoding): greedy when temperature is 0, else
  // accepted with probability p(draft) and otherwise resampled from p without it, so the
  // result is distributed exactly as emit() would sample. `*accepted` tells which happened.
  GenerationEvent emit_with_draft(float* logits, int32_t draft, bool* accepted);
  // Ends the generation now (cancel, error, memory); the event carries the usage so far.
  GenerationEvent finish_now(FinishReason why, const std::string& error = "");

  bool finished() const { return finished_; }
  FinishReason reason() const { return reason_; }
  const std::vector<int32_t>& generated() const { return generated_; }
  const GenerationRequest& request() const { return req_; }
  int64_t capacity() const { return capacity_; }
  GenerationEvent base_event() const;  // usage counters, nothing else
  void set_cached_tokens(int64_t n) { cached_ = n; }

 private:
  GenerationEvent after_sample(const SampleResult& r);
  GenerationEvent finish(GenerationEvent ev, FinishReason why);
  std::string release_text(const std::string& add, bool* stop_hit);
  bool drain_text(std::string& text);
  void prepare_logits(float* logits) const;

  const tok::Tokenizer& tok_;
  GenerationRequest req_;
  int64_t vocab_;
  int64_t capacity_;
  Sampler sampler_;
  tok::StreamingDetokenizer detok_;
  std::vector<int32_t> stop_ids_;  // EOS (unless ignore_eos) + request stop ids, sorted
  std::vector<int32_t> generated_;
  std::string held_;          // detokenized text not yet released (possible stop prefix)
  std::string stop_matched_;  // which request stop string ended the text
  int64_t cached_ = 0;
  bool finished_ = false;
  FinishReason reason_ = FinishReason::None;
};

}  // namespace rapid::engine
