#include "server/anthropic_format.h"

#include "server/json_limits.h"
#include "server/sse.h"

namespace rapid::server {

using json = nlohmann::ordered_json;

std::string anthropic_stop_reason(engine::FinishReason r, bool has_tool_calls, const std::string& stop_sequence) {
  if (r == engine::FinishReason::Length) return "max_tokens";
  if (has_tool_calls) return "tool_use";
  if (r == engine::FinishReason::Stop && !stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

json anthropic_stop_sequence(const std::string& stop_sequence) {
  return stop_sequence.empty() ? json(nullptr) : json(stop_sequence);
}

json tool_input_object(const std::string& arguments) {
  json j = parse_output_json(arguments);
  return j.is_object() ? j : json::object();
}

static std::string toolu_id(const std::string& id) {
  return id.rfind("toolu_", 0) == 0 ? id : "toolu_" + (id.rfind("call_", 0) == 0 ? id.substr(5) : id);
}

json anthropic_usage(int64_t prompt, int64_t cached, int64_t completion) {
  // Anthropic counts cache reads apart: input + cache_read + cache_creation is the whole prompt.
  // The prefix cache stores every prompt without an explicit write step, so nothing is billed as
  // cache creation.
  return {{"input_tokens", prompt - cached}, {"output_tokens", completion}, {"cache_read_input_tokens", cached},
          {"cache_creation_input_tokens", 0}};
}

json anthropic_message(const std::string& id, const std::string& model, const TurnResult& r) {
  json content = json::array();
  if (!r.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
  if (!r.content.empty()) content.push_back({{"type", "text"}, {"text", r.content}});
  for (auto& c : r.tool_calls)
    content.push_back({{"type", "tool_use"}, {"id", toolu_id(c.id)}, {"name", c.name}, {"input", tool_input_object(c.arguments)}});
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", content},
          {"stop_reason", anthropic_stop_reason(r.reason, !r.tool_calls.empty(), r.stop_sequence)},
          {"stop_sequence", anthropic_stop_sequence(r.stop_sequence)},
          {"usage", anthropic_usage(r.prompt_tokens, r.cached_tokens, r.completion_tokens)}};
}

void AnthropicBlockWriter::open(Kind k, std::string& out, const parsers::ToolCallDelta* call) {
  close(out);
  kind_ = k;
  ++index_;
  json block;
  if (k == Kind::Thinking) block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  if (k == Kind::Text) block = {{"type", "text"}, {"text", ""}};
  if (k == Kind::Tool) {
    block = {{"type", "tool_use"}, {"id", toolu_id(call->id)}, {"name", call->name}, {"input", json::object()}};
    tool_index_ = call->index;
  }
  out += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

void AnthropicBlockWriter::close(std::string& out) {
  if (kind_ == Kind::None) return;
  out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  kind_ = Kind::None;
}

void AnthropicBlockWriter::write(const TurnDelta& d, std::string& out) {
  auto delta = [&](const json& body) {
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", body}});
  };
  if (!d.reasoning.empty()) {
    if (kind_ != Kind::Thinking) open(Kind::Thinking, out);
    delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
  }
  if (!d.content.empty()) {
    if (kind_ != Kind::Text) open(Kind::Text, out);
    delta({{"type", "text_delta"}, {"text", d.content}});
  }
  for (auto& t : d.tool_calls) {
    if (kind_ != Kind::Tool || t.index != tool_index_) {
      parsers::ToolCallDelta head = t;
      if (head.id.empty()) head.id = random_id("toolu_");
      open(Kind::Tool, out, &head);
    }
    if (!t.arguments.empty()) delta({{"type", "input_json_delta"}, {"partial_json", t.arguments}});
  }
}

}  // namespace rapid::server
