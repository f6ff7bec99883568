// Single-sequence generation: chunked prefill, then one sampled token per step(), with stop
// tokens, stop strings (never emitted, partial matches held back), max/min tokens and ignore_eos
// (all in TokenEmitter). Used by `rapid-mlx run` and tests; the server runs BatchEngine.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/token_emitter.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapid::engine {

struct GeneratorOptions {
  int64_t prefill_chunk = 512;  // prompt tokens per forward call (bounds scratch memory)
};

// Total tokens a request may reach: the model context, and no more than it can generate.
int64_t sequence_capacity(const model::ModelConfig& cfg, const GenerationRequest& req, int64_t context_limit = 0);

class Generator {
 public:
  // `model` and `tok` must outlive the generator. Throws Error for an empty prompt.
  Generator(model::Model& model, const tok::Tokenizer& tok, GenerationRequest req, GeneratorOptions opts = {});

  // One step: a prefill chunk (event without tokens unless it was the last chunk, which also
  // samples the first token) or one decode step. The event with finished = true is the last;
  // calling step() after it returns that same final state again.
  GenerationEvent step();
  bool finished() const { return out_->finished(); }

  // Ends the generation now (client gone); returns the final event.
  GenerationEvent cancel();

  const std::vector<int32_t>& generated() const { return out_->generated(); }
  double prefill_seconds() const { return prefill_s_; }
  double decode_seconds() const { return decode_s_; }
  int64_t decode_steps() const { return decode_steps_; }

 private:
  model::Model& model_;
  GeneratorOptions opts_;
  std::unique_ptr<TokenEmitter> out_;
  std::unique_ptr<model::SequenceState> state_;
  std::vector<float> logits_;
  int64_t prefilled_ = 0;
  double prefill_s_ = 0, decode_s_ = 0;
  int64_t decode_steps_ = 0;
};

}  // namespace rapid::engine
