// Single-sequence generation: chunked prefill, then one sampled token per step(), with stop
// tokens, stop strings (never emitted, partial matches held back), max/min tokens and ignore_eos.
// The engine thread calls step() repeatedly and can check for cancellation between calls.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampling.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapid {

struct GeneratorOptions {
  int64_t prefill_chunk = 512;  // prompt tokens per forward call (bounds scratch memory)
};

class Generator {
 public:
  // `model` and `tok` must outlive the generator. Throws Error for an empty prompt.
  Generator(Model& model, const Tokenizer& tok, GenerationRequest req, GeneratorOptions opts = {});

  // One step: a prefill chunk (event without tokens unless it was the last chunk, which also
  // samples the first token) or one decode step. The event with finished = true is the last;
  // calling step() after it returns that same final state again.
  GenerationEvent step();
  bool finished() const { return finished_; }

  // Ends the generation now (client gone); returns the final event.
  GenerationEvent cancel();

  const std::vector<int32_t>& generated() const { return generated_; }
  double prefill_seconds() const { return prefill_s_; }
  double decode_seconds() const { return decode_s_; }
  int64_t decode_steps() const { return decode_steps_; }

 private:
  GenerationEvent sample_and_emit();
  GenerationEvent finish(GenerationEvent ev, FinishReason why);
  std::string release_text(const std::string& add, bool* stop_hit);
  bool drain_text(std::string& text);
  GenerationEvent base_event() const;

  Model& model_;
  const Tokenizer& tok_;
  GenerationRequest req_;
  GeneratorOptions opts_;
  Sampler sampler_;
  StreamingDetokenizer detok_;
  std::unique_ptr<SequenceState> state_;
  std::vector<int32_t> stop_ids_;  // EOS (unless ignore_eos) + request stop ids
  std::vector<int32_t> generated_;
  std::vector<float> logits_;
  std::string held_;                // detokenized text not yet released (possible stop prefix)
  std::string stop_matched_;        // which request stop string ended the text
  int64_t prefilled_ = 0;
  int64_t capacity_ = 0;
  bool finished_ = false;
  FinishReason reason_ = FinishReason::None;
  double prefill_s_ = 0, decode_s_ = 0;
  int64_t decode_steps_ = 0;
};

}  // namespace rapid
