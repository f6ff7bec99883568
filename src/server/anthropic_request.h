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
  engine::GenerationRequest gen;
  json template_extra = json::object();
  ConstraintSpec constraint;  // output_config.format
};

// `for_count`: count_tokens bodies need no max_tokens.
MessagesRequest parse_messages_request(const json& body, const SamplingLimits& limits, bool for_count = false);

// Structured output: `output_config.format` (or the older top-level `output_format`),
// {"type":"json_schema","schema":{...}}, enforced by constrained decoding; any other type is a 400.
// `output_config.effort` becomes the template's reasoning_effort.
ConstraintSpec parse_output_config(const json& body, json& template_extra);

// Anthropic prefill: a conversation ending in an assistant text message is continued from that
// text, not answered in a new turn. True when `messages` ends so; an empty final assistant
// message is dropped instead (nothing to continue).
bool take_assistant_prefill(json& messages);

}  // namespace rapid::server
