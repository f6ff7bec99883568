#include "server/responses_format.h"

#include "server/sse.h"

namespace rapid::server {

using json = nlohmann::ordered_json;

json responses_usage(int64_t prompt, int64_t cached, int64_t completion) {
  return {{"input_tokens", prompt},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", completion},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", prompt + completion}};
}

json response_object(const ResponseShell& s, const std::string& status, const json& output, const json& usage,
                     const json& incomplete) {
  const ResponsesRequest& r = *s.req;
  return {{"id", s.id},
          {"object", "response"},
          {"created_at", s.created_at},
          {"status", status},
          {"model", s.model},
          {"output", output},
          {"usage", usage},
          {"error", nullptr},
          {"incomplete_details", incomplete},
          {"instructions", r.instructions.empty() ? json(nullptr) : json(r.instructions)},
          {"metadata", r.metadata},
          {"parallel_tool_calls", r.parallel_tool_calls},
          {"tool_choice", r.tool_choice_echo},
          {"tools", r.tools_echo},
          {"temperature", r.gen.sampling.temperature},
          {"top_p", r.gen.sampling.top_p},
          {"max_output_tokens", r.gen.max_tokens},
          {"text", {{"format", r.text_format}}},
          {"store", false}};
}

static json message_item(const std::string& id, const std::string& text, const std::string& status) {
  json content = json::array();
  if (status != "in_progress") content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}});
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

static json reasoning_item(const std::string& id, const std::string& text, const std::string& status) {
  json content = json::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()}, {"content", content}, {"status", status}};
}

static json call_item(const std::string& id, const std::string& call_id, const std::string& name,
                      const std::string& args, const std::string& status) {
  return {{"type", "function_call"}, {"id", id}, {"call_id", call_id}, {"name", name}, {"arguments", args},
          {"status", status}};
}

json responses_output(const TurnResult& r) {
  json out = json::array();
  if (!r.reasoning.empty()) out.push_back(reasoning_item(random_id("rs_"), r.reasoning, "completed"));
  if (!r.content.empty() || r.tool_calls.empty()) out.push_back(message_item(random_id("msg_"), r.content, "completed"));
  for (auto& c : r.tool_calls) out.push_back(call_item(random_id("fc_"), c.id, c.name, c.arguments, "completed"));
  if (r.reason == engine::FinishReason::Length) mark_incomplete(out);
  return out;
}

void mark_incomplete(json& output) {
  // The item being written when max_output_tokens ran out is the last one.
  if (!output.empty() && output.back().contains("status")) output.back()["status"] = "incomplete";
}

json empty_message_item(const std::string& status) { return message_item(random_id("msg_"), "", status); }

std::string ResponsesEventWriter::event(const std::string& type, json body) {
  body["type"] = type;
  body["sequence_number"] = (*seq_)++;
  return sse_event(type, body);
}

void ResponsesEventWriter::open(Kind k, std::string& out, const parsers::ToolCallDelta* call) {
  close(out);
  kind_ = k;
  text_.clear();
  int oi = int(output_.size());
  if (k == Kind::Reasoning) item_ = reasoning_item(random_id("rs_"), "", "in_progress");
  if (k == Kind::Message) item_ = message_item(random_id("msg_"), "", "in_progress");
  if (k == Kind::Call) {
    item_ = call_item(random_id("fc_"), call->id.empty() ? random_id("call_") : call->id, call->name, "", "in_progress");
    tool_index_ = call->index;
  }
  out += event("response.output_item.added", {{"output_index", oi}, {"item", item_}});
  if (k == Kind::Message)
    out += event("response.content_part.added",
                 {{"item_id", item_["id"]}, {"output_index", oi}, {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
}

void ResponsesEventWriter::close(std::string& out, bool truncated) {
  if (kind_ == Kind::None) return;
  int oi = int(output_.size());
  json id = item_["id"];
  std::string status = truncated ? "incomplete" : "completed";
  if (kind_ == Kind::Reasoning) {
    out += event("response.reasoning_text.done", {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"text", text_}});
    item_ = reasoning_item(id, text_, status);
  } else if (kind_ == Kind::Message) {
    json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
    out += event("response.output_text.done", {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"text", text_}});
    out += event("response.content_part.done", {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"part", part}});
    item_ = message_item(id, text_, status);
  } else {
    out += event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", oi}, {"arguments", text_}});
    item_["arguments"] = text_;
    item_["status"] = status;
  }
  out += event("response.output_item.done", {{"output_index", oi}, {"item", item_}});
  output_.push_back(item_);
  kind_ = Kind::None;
}

void ResponsesEventWriter::write(const TurnDelta& d, std::string& out) {
  int oi = int(output_.size());
  if (!d.reasoning.empty()) {
    if (kind_ != Kind::Reasoning) open(Kind::Reasoning, out);
    text_ += d.reasoning;
    out += event("response.reasoning_text.delta",
                 {{"item_id", item_["id"]}, {"output_index", oi}, {"content_index", 0}, {"delta", d.reasoning}});
  }
  if (!d.content.empty()) {
    if (kind_ != Kind::Message) open(Kind::Message, out);
    oi = int(output_.size());
    text_ += d.content;
    out += event("response.output_text.delta",
                 {{"item_id", item_["id"]}, {"output_index", oi}, {"content_index", 0}, {"delta", d.content}});
  }
  for (auto& t : d.tool_calls) {
    if (kind_ != Kind::Call || t.index != tool_index_) open(Kind::Call, out, &t);
    oi = int(output_.size());
    if (!t.arguments.empty()) {
      text_ += t.arguments;
      out += event("response.function_call_arguments.delta", {{"item_id", item_["id"]}, {"output_index", oi}, {"delta", t.arguments}});
    }
  }
}

}  // namespace rapid::server
