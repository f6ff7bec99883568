// Anthropic Messages request bodies → OpenAI-shaped, template-ready conversations.
#pragma once
#include <string>

#include "server/backend.h"
#include "server/json_access.h"
#include "server/sampling_options.h"
#include "server/turn.h"

namespace rapid::server {

struct MessagesRequest {
  std::string model;
  json messages = json::array();  // OpenAI-shaped (system first when given)
  json tools = json::array();     // OpenAI function tools
  ToolMode tool_mode = ToolMode::Auto;
  std::string forced_name;
  bool stream = false;
  bool parallel_tool_calls = true;  // tool_choice.disable_parallel_tool_use inverts it
  GenerationRequest gen;
  json template_extra = json::object();
};

// `for_count`: count_tokens bodies need no max_tokens.
MessagesRequest parse_messages_request(const json& body, const SamplingLimits& limits, bool for_count = false);

}  // namespace rapid::server
