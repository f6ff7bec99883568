// OpenAI chat-completion / completion responses and stream chunks.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/turn.h"
#include "tokenizer/tokenizer.h"

namespace rapid::server {

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// "stop" | "length" | "tool_calls"
std::string openai_finish_reason(engine::FinishReason r, bool has_tool_calls);
nlohmann::ordered_json openai_usage(const Usage& u);
// Chat logprobs: {"content":[{"token","logprob","bytes","top_logprobs":[...]}]}
nlohmann::ordered_json chat_logprobs(const tok::Tokenizer& tok, const std::vector<engine::SampleResult>& samples);
// Completions logprobs: {"tokens","token_logprobs","top_logprobs","text_offset"}
nlohmann::ordered_json completion_logprobs(const tok::Tokenizer& tok, const std::vector<engine::SampleResult>& samples,
                                   size_t text_offset0);

nlohmann::ordered_json chat_message(const TurnResult& r);
nlohmann::ordered_json chat_tool_call_delta(const parsers::ToolCallDelta& t);

struct ChatChunker {  // builds "chat.completion.chunk" objects sharing one id/created/model
  std::string id, model, fingerprint;
  int64_t created = 0;
  bool include_usage = false;
  nlohmann::ordered_json chunk(int index, nlohmann::ordered_json delta, const nlohmann::ordered_json& finish_reason = nullptr,
                       const nlohmann::ordered_json& logprobs = nullptr) const;
  nlohmann::ordered_json usage_chunk(const Usage& u) const;
};

int64_t unix_now();
// "fp_" + 12 hex digits naming the backend configuration (model, context): equal fingerprints mean
// the same model and settings served the answers, so seeded requests are comparable.
std::string system_fingerprint(const std::string& model_id, int64_t context_length);

}  // namespace rapid::server
