// Anthropic Messages responses and the streamed event sequence (message_start, content blocks,
// message_delta, message_stop).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "server/turn.h"

namespace rapid::server {

// "end_turn" | "max_tokens" | "tool_use" | "stop_sequence"
// `stop_sequence`: the request stop string that ended the turn ("" if none did).
std::string anthropic_stop_reason(engine::FinishReason r, bool has_tool_calls, const std::string& stop_sequence = "");
// The message's `stop_sequence` field: the matched string, or null.
nlohmann::ordered_json anthropic_stop_sequence(const std::string& stop_sequence);
// Tool-call arguments as the object Anthropic's tool_use.input must be ({} when not JSON).
nlohmann::ordered_json tool_input_object(const std::string& arguments);
// {"input_tokens": prompt - cached, "output_tokens", "cache_read_input_tokens": cached,
//  "cache_creation_input_tokens": 0}
nlohmann::ordered_json anthropic_usage(int64_t prompt, int64_t cached, int64_t completion);
nlohmann::ordered_json anthropic_message(const std::string& id, const std::string& model, const TurnResult& r);

// Turns turn deltas into content-block events, opening and closing blocks as the kind changes.
class AnthropicBlockWriter {
 public:
  // Appends the events for this delta.
  void write(const TurnDelta& d, std::string& out);
  // Closes the open block, if any.
  void close(std::string& out);

 private:
  enum class Kind { None, Thinking, Text, Tool };
  void open(Kind k, std::string& out, const parsers::ToolCallDelta* call = nullptr);
  Kind kind_ = Kind::None;
  int index_ = -1;     // content block index
  int tool_index_ = -1;  // OpenAI tool-call index of the open tool block
};

}  // namespace rapid::server
