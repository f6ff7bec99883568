// The forward-pass contract between architectures and the engine.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model_config.h"
#include "model/weights.h"

namespace rapid {

// Per-sequence state (KV cache, later recurrent state). Owned by the engine; one per sequence.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t length() const = 0;       // tokens already processed
  virtual void truncate(int64_t n) = 0;     // roll back to the first n tokens (speculation)
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::unique_ptr<SequenceState> new_state(int64_t max_tokens) = 0;
  // Processes `n` tokens appended after state.length() and advances the state.
  // Writes vocab_size logits for the last token into `logits` (or for every token, n*vocab_size
  // floats, when all_logits is true — used by speculative verification and tests).
  virtual void forward(const int32_t* tokens, int64_t n, SequenceState& state, float* logits,
                       bool all_logits = false) = 0;
};

// Builds the architecture named in the checkpoint's config over its weights.
std::unique_ptr<Model> create_model(std::shared_ptr<Checkpoint> ckpt, int num_threads = 0);

}  // namespace rapid
