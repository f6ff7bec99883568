// The engine's public contract, shaped for continuous batching: the HTTP layer submits requests
// and receives a stream of events on its own thread; it never runs the model itself.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampling.h"

namespace rapid::engine {

// Constrained decoding (response_format, forced tool calls): consulted before each sampled token.
class TokenMaskProvider {
 public:
  virtual ~TokenMaskProvider() = default;
  virtual const std::vector<bool>& mask() = 0;  // at least vocab-sized; true = allowed next
  virtual void accept(int32_t token) = 0;       // the token that was sampled under mask()
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 256;
  int64_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;         // stop strings (matched on detokenized text)
  std::vector<int32_t> stop_token_ids;   // in addition to the model's EOS ids
  std::shared_ptr<TokenMaskProvider> constraint;  // null: unconstrained
  // Background warming: prefill the prompt into the prefix cache and generate nothing. Runs only
  // while no other request is running or waiting, and is cancelled (keeping the KV computed so
  // far) when one arrives, so it never delays a client; its final event has no tokens.
  bool warm_only = false;
  // warm_only: the engine's cache_generation() when the turn it predicts from began. A purge since
  // then drops the request, so a turn that ended before DELETE /v1/cache cannot refill the cache.
  uint64_t cache_generation = 0;
  // A position inside the prompt where a hybrid model's prefix cache also checkpoints the
  // recurrent state: where the last message ends, which the next turn's prompt shares. 0: none.
  int64_t checkpoint_at = 0;
};

enum class FinishReason { None, Stop, Length, Cancelled, Error };

// What speculative decoding did for one request (on its final event; /metrics, the debug trace).
struct SpeculationSummary {
  int64_t decode_steps = 0;  // steps that produced tokens for it (the first one ends the prompt)
  int64_t draft_steps = 0;   // of those, steps that verified drafts
  int64_t probe_steps = 0;   // of those, probes: drafted although the depth rule said 0
  int64_t drafted = 0, accepted = 0;
  bool ran() const { return draft_steps > 0; }
  double mean_depth() const { return draft_steps ? double(drafted) / double(draft_steps) : 0.0; }
  double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
};

// One event per generated token (text may be empty while a UTF-8 sequence or a possible stop
// string is held back), then a final event with finished = true.
struct GenerationEvent {
  std::vector<int32_t> tokens;      // tokens accepted this step (several under speculation)
  std::string text;                 // newly released text
  std::vector<SampleResult> samples;  // per token, when logprobs were asked for
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string stop_string;          // the request stop string that ended generation, if one did
  std::string error;                // when finish_reason == Error
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;        // prompt tokens served from the prefix cache
  int64_t completion_tokens = 0;
  SpeculationSummary speculation;   // on the final event
};

using EventCallback = std::function<void(const GenerationEvent&)>;

class Engine {
 public:
  virtual ~Engine() = default;
  // Queues the request; `on_event` is called from the engine's thread. Returns an id for cancel().
  virtual uint64_t submit(GenerationRequest req, EventCallback on_event) = 0;
  // Stops a request (client gone); its final event carries FinishReason::Cancelled.
  virtual void cancel(uint64_t id) = 0;
  // Counts prefix-cache purges (see GenerationRequest::cache_generation).
  virtual uint64_t cache_generation() const { return 0; }
};

}  // namespace rapid::engine
