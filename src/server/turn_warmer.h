// Keeps an agent's next turn warm. The next request of a tool loop re-sends the whole conversation
// with this turn's answer appended, rendered again by the chat template — and templates render that
// answer differently from how it was generated: Qwen3-style templates drop the reasoning of earlier
// turns, re-tokenized text can split differently, an end-of-turn marker follows. The prefix cache
// then misses from this turn's answer on, and the agent's next turn recomputes it. After a turn we
// predict the prefix every next prompt shares and let the engine prefill it while it is idle
// (GenerationRequest::warm_only: yields to any client request).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/backend.h"
#include "server/turn.h"

namespace rapid::server {

// What the turn was rendered from: the normalized conversation, tools and template variables.
struct TurnInputs {
  nlohmann::ordered_json messages, tools, extra;
};

// This turn's answer as a client sends it back: content, tool calls with object arguments, and
// the reasoning when `with_reasoning` (Anthropic clients return thinking blocks; most OpenAI
// clients drop reasoning_content).
nlohmann::ordered_json assistant_message(const TurnResult& r, bool with_reasoning);

// The tokens every next prompt starts with: the conversation plus `assistant`, followed by what an
// agent sends next (tool results when the answer called tools, else a user message), rendered with
// two different follow-up texts — their common prefix ends where the follow-up's text begins.
// Empty when the template refuses the conversation.
std::vector<int32_t> next_turn_prefix(const Backend& backend, const TurnInputs& in,
                                      const nlohmann::ordered_json& assistant);

// Queues background prefills of the predicted next-turn prefixes (with and without this turn's
// reasoning when it had any). Never throws.
void warm_next_turn(Backend& backend, const TurnInputs& in, const TurnResult& r);

}  // namespace rapid::server
