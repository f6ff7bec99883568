// The sampling and stopping knobs shared by the OpenAI-style APIs, read from a request body into
// a GenerationRequest (prompt left empty).
#pragma once
#include "engine/engine.h"
#include "server/json_access.h"

namespace rapid::server {

struct SamplingLimits {
  int64_t vocab_size = 0;           // logit_bias keys are checked against it
  int64_t default_max_tokens = 0;   // 0: whatever the context leaves
};

// Reads temperature, top_p, top_k, min_p, seed, stop, presence/frequency/repetition penalties,
// logit_bias, ignore_eos, min_tokens and max_tokens (or `max_tokens_field`).
// Throws ApiError(400) naming the offending field.
engine::GenerationRequest parse_sampling(const json& body, const SamplingLimits& limits,
                                 const char* max_tokens_field = "max_tokens");

// "stop": a string or an array of strings.
std::vector<std::string> parse_stop(const json& body, const char* name);

}  // namespace rapid::server
