// OpenAI Responses API request bodies (as Codex CLI sends them) → chat-shaped requests.
#pragma once
#include <string>

#include "server/backend.h"
#include "server/json_access.h"
#include "server/openai_request.h"

namespace rapid::server {

struct ResponsesRequest {
  std::string model;
  json messages = json::array();  // OpenAI chat shape
  json tools = json::array();     // chat shape
  json tools_echo = json::array();  // as given, echoed back in the response object
  ToolChoice tool_choice;
  json tool_choice_echo = "auto";
  bool parallel_tool_calls = true;
  ConstraintSpec constraint;
  json text_format = {{"type", "text"}};
  bool stream = false;
  std::string instructions;
  engine::GenerationRequest gen;
  json template_extra = json::object();
  json metadata = json::object();
};

ResponsesRequest parse_responses_request(const json& body, const SamplingLimits& limits);

}  // namespace rapid::server
