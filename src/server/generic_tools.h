// Tool calling for models whose chat template knows nothing of tools (SmolLM2, Gemma, ...): what
// the template cannot show is written into the conversation itself, so every model can call tools.
// - tool schemas: a system-prompt section listing them and asking for a JSON call
//   {"name": ..., "arguments": {...}} (parsed back by the `json` output parser; forced calls are
//   constrained by the caller as for any template);
// - earlier calls: appended to the assistant's content in that same JSON shape;
// - tool results: user messages, when the template drops or refuses the `tool` role;
// - system messages (and the tool section): the start of the next user message, when the
//   template refuses or drops the system role (Gemma 2).
// What a template can show is found by rendering probes through it (as llama.cpp's minja does).
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::server {

struct TemplateToolSupport {
  bool tools = true;           // renders the offered tool schemas
  bool tool_calls = true;      // renders an assistant message's tool_calls
  bool tool_responses = true;  // renders `tool` messages
  bool system_role = true;     // renders a system message
  bool complete() const { return tools && tool_calls && tool_responses; }
};

// `render` renders one context (messages, tools, add_generation_prompt) and throws when the
// template refuses it; a refused probe counts as "not supported".
using RenderFn = std::function<std::string(const nlohmann::ordered_json& context)>;
TemplateToolSupport probe_tool_support(const RenderFn& render);

// The system-prompt section describing `tools` (OpenAI function tools) and the call format.
std::string generic_tool_prompt(const nlohmann::ordered_json& tools);

// `messages` (normalized OpenAI shape) rewritten so that a template with support `s` shows the
// system prompt, the tools offered, the calls made and their results. Unchanged when the
// template shows all of these itself.
nlohmann::ordered_json apply_generic_tools(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                           const TemplateToolSupport& s);

}  // namespace rapid::server
