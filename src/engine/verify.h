// Sampling one step of a sequence, with speculative verification: the forward returned a logits
// row for the sequence's next token and one after each drafted token; draft i is kept when the
// token sampled from row i (Sampler::sample_draft, so the output distribution is the target's) is
// the draft, and the first rejection, stop or length limit ends the step. Every kept token is
// appended to `tokens`; the events of the step's tokens are merged into one.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/token_emitter.h"

namespace rapid::engine {

struct Verified {
  GenerationEvent event;  // the step's tokens and text (final when `finished`)
  bool finished = false;
  int accepted = 0;       // drafts kept
};

// Throws what the emitter throws (e.g. a constraint failing); the caller finishes the sequence.
Verified verify_step(TokenEmitter& out, float* logits, int64_t vocab, const std::vector<int32_t>& draft,
                     std::vector<int32_t>& tokens);

}  // namespace rapid::engine
