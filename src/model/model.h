// The forward-pass contract between architectures and the engine.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/block_pool.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace rapid::model {

// Per-sequence state (KV cache, later recurrent state). Owned by the engine; one per sequence.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t length() const = 0;       // tokens already processed
  virtual void truncate(int64_t n) = 0;     // roll back to the first n tokens (speculation)
  // A recurrent state (Gated DeltaNet conv + SSM) as opaque bytes, valid at length(): what the
  // prefix cache checkpoints. 0 bytes for a state that is only KV.
  virtual size_t recurrent_bytes() const { return 0; }
  virtual void save_recurrent(uint8_t* out) const { (void)out; }
  // Sets the recurrent state from save_recurrent()'s bytes (the KV of the first length() tokens
  // is already in place); a size that is not recurrent_bytes() is an Error.
  virtual void restore_recurrent(const uint8_t* bytes, size_t n);
};

// One sequence's share of a batched forward: n new tokens appended after state->length().
struct BatchEntry {
  const int32_t* tokens = nullptr;
  int64_t n = 0;
  SequenceState* state = nullptr;
  float* logits = nullptr;   // vocab_size floats (last token) or n*vocab_size when all_logits
  bool all_logits = false;
  // Optional: the final-normed hidden state of every token (n*hidden_size floats), the input an
  // MTP head needs next to the following token, and what embeddings pool. The dense decoder
  // accepts an entry with hidden and no logits (no lm_head work for it).
  float* hidden = nullptr;
};

// One sequence's share of an MTP-head forward (multi-token prediction, Qwen3-Next / Qwen3.5
// `mtp.*` weights). Row i pairs hidden[i] (the target's final-normed hidden state at position
// p = state->length() + i, or the head's own output when chaining drafts) with tokens[i] (the token
// at p+1); the head predicts the token at p+2. The head keeps its own KV (state).
struct MtpEntry {
  const int32_t* tokens = nullptr;
  const float* hidden = nullptr;   // n * hidden_size
  int64_t n = 0;
  SequenceState* state = nullptr;  // from new_mtp_state
  float* logits = nullptr;         // vocab_size floats for the last row
  float* hidden_out = nullptr;     // optional: the head's normed output for the last row (chaining)
  int layer = 0;                   // which MTP layer (draft step % mtp_layers())
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::unique_ptr<SequenceState> new_state(int64_t max_tokens) = 0;
  // Processes `n` tokens appended after state.length() and advances the state.
  // Writes vocab_size logits for the last token into `logits` (or for every token, n*vocab_size
  // floats, when all_logits is true — used by speculative verification and tests).
  // (By default the one-entry forward_batch.)
  virtual void forward(const int32_t* tokens, int64_t n, SequenceState& state, float* logits,
                       bool all_logits = false);

  // Paged KV (continuous batching). The page geometry of this model for `block_size` token slots
  // per block, so the engine can size one shared pool from --kv-cache-memory.
  virtual cache::BlockShape kv_block_shape(int32_t block_size) const = 0;
  // A sequence whose KV pages come from `pool`, shared with other sequences and the prefix cache
  // (see model/paged_kv.h). `max_tokens` bounds its length (context limit).
  virtual std::unique_ptr<SequenceState> new_paged_state(std::shared_ptr<cache::BlockPool> pool,
                                                         int64_t max_tokens) = 0;
  // One forward over several sequences: every linear layer runs once over all their tokens
  // (weights are read once per step, not once per sequence); attention stays per sequence.
  // Each entry's result is bit-identical to forward() on that entry alone (batch invariance).
  // The states must be paged states of distinct sequences; the caller has made sure the pool
  // holds PagedKvState::blocks_needed(n) free blocks for each entry.
  virtual void forward_batch(const BatchEntry* entries, size_t count) = 0;

  // True when a sequence's state holds more than KV (Qwen3.5's DeltaNet layers): it cannot be
  // truncated to an arbitrary length nor rebuilt from KV pages.
  virtual bool has_recurrent_state() const { return false; }
  // Bytes of one sequence's recurrent state (SequenceState::recurrent_bytes); 0 without one.
  virtual size_t recurrent_state_bytes() const { return 0; }

  // MTP heads shipped with the weights (0 = none). Their KV pages have their own geometry.
  virtual int mtp_layers() const { return 0; }
  virtual cache::BlockShape mtp_block_shape(int32_t block_size) const;
  virtual std::unique_ptr<SequenceState> new_mtp_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens);
  virtual void forward_mtp(const MtpEntry* entries, size_t count);
};

// Builds the architecture named in the checkpoint's config over its weights.
std::unique_ptr<Model> create_model(std::shared_ptr<Checkpoint> ckpt, int num_threads = 0);

}  // namespace rapid::model
