// Responses API: the response object and the streamed event sequence.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/responses_request.h"
#include "server/turn.h"

namespace rapid::server {

struct ResponseShell {  // the parts of a response object fixed at the start
  std::string id, model;
  int64_t created_at = 0;
  const ResponsesRequest* req = nullptr;
};

nlohmann::ordered_json response_object(const ResponseShell& s, const std::string& status, const nlohmann::ordered_json& output,
                               const nlohmann::ordered_json& usage, const nlohmann::ordered_json& incomplete = nullptr);
nlohmann::ordered_json responses_usage(int64_t prompt, int64_t cached, int64_t completion);
// The output items of a finished turn; when it ran out of max_output_tokens, the last item is
// marked "incomplete".
nlohmann::ordered_json responses_output(const TurnResult& r);
// Marks the last item of `output` (the one cut short) "incomplete".
void mark_incomplete(nlohmann::ordered_json& output);
// A message item with no text (an empty answer is still one message).
nlohmann::ordered_json empty_message_item(const std::string& status);

// Streams deltas as output items (reasoning, message, function_call), with sequence numbers.
class ResponsesEventWriter {
 public:
  explicit ResponsesEventWriter(int* seq) : seq_(seq) {}
  void write(const TurnDelta& d, std::string& out);
  // `truncated`: the turn ran out of max_output_tokens, so the item closed is "incomplete".
  void close(std::string& out, bool truncated = false);
  const nlohmann::ordered_json& output() const { return output_; }  // finished items so far
  std::string event(const std::string& type, nlohmann::ordered_json body);

 private:
  enum class Kind { None, Reasoning, Message, Call };
  void open(Kind k, std::string& out, const parsers::ToolCallDelta* call = nullptr);
  int* seq_;
  Kind kind_ = Kind::None;
  nlohmann::ordered_json item_;
  std::string text_;  // accumulated text / arguments of the open item
  int tool_index_ = -1;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();
};

}  // namespace rapid::server
