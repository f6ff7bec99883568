// OpenAI chat-completions and completions request bodies → validated, template-ready requests.
#pragma once
#include <string>
#include <variant>
#include <vector>

#include "server/backend.h"
#include "server/json_access.h"
#include "server/sampling_options.h"
#include "server/turn.h"

namespace rapid::server {

struct ToolChoice {
  ToolMode mode = ToolMode::Auto;
  std::string name;  // ToolMode::Named
};

struct ChatRequest {
  std::string model;
  json messages = json::array();  // normalized: see normalize_openai_messages
  json tools = json::array();     // [{"type":"function","function":{name,description,parameters}}]
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  ConstraintSpec constraint;
  bool stream = false;
  bool include_usage = false;
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  engine::GenerationRequest gen;            // sampling + stopping; prompt filled by the handler
  json template_extra = json::object();  // chat_template_kwargs, reasoning_effort
};

ChatRequest parse_chat_request(const json& body, const SamplingLimits& limits);

// OpenAI messages as HF chat templates expect them: content parts joined to a string,
// developer → system, tool-call arguments also parsed into objects (templates `tojson` them).
json normalize_openai_messages(const json& messages, const std::string& param = "messages");
// Validates OpenAI function tools (also accepts the flat Responses-API form) → chat form.
json normalize_openai_tools(const json* tools, const std::string& param = "tools");
// "none" | "auto" | "required" | {"type":"function","function":{"name":..}} (or {"name":..}).
ToolChoice parse_tool_choice(const json* choice, const json& tools, const std::string& param = "tool_choice");
// response_format → constraint spec.
ConstraintSpec parse_response_format(const json* rf, const std::string& param = "response_format");

struct CompletionRequest {
  std::string model;
  std::string prompt_text;          // when given as text
  std::vector<int32_t> prompt_ids;  // when given as token ids
  bool prompt_is_ids = false;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  int n = 1;
  int logprobs = -1;  // -1: none; else top-N alternatives (0..5)
  engine::GenerationRequest gen;
};

CompletionRequest parse_completion_request(const json& body, const SamplingLimits& limits);

// vLLM's prompt-shape flags: `continue_final_message` (continue the final message's text instead of
// starting a new turn; the prefill) and `add_generation_prompt` (default true); both true is a 400.
void parse_generation_prompt_flags(const json& body, json& template_extra);

}  // namespace rapid::server
