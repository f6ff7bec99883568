#include "server/anthropic_request.h"

#include "server/api_error.h"

namespace rapid::server {

static std::string idx(const std::string& p, size_t i) { return p + "[" + std::to_string(i) + "]"; }

static std::string text_of_blocks(const json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request("'" + path + "' must be a string or an array of content blocks", path);
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& b = content[i];
    std::string p = idx(path, i);
    require_object(b, "'" + p + "'");
    std::string type = req_string(b, "type", p);
    if (type == "text") {
      out += (out.empty() ? "" : "\n") + req_string(b, "text", p);
    } else if (type == "image" || type == "document") {
      throw bad_request("'" + p + "': content of type '" + type + "' is not supported by this model", p + ".type");
    } else {
      throw bad_request("'" + p + "': a block of type '" + type + "' is not allowed here", p + ".type");
    }
  }
  return out;
}

static void convert_message(const json& m, const std::string& p, json& out) {
  require_object(m, "'" + p + "'");
  std::string role = req_string(m, "role", p);
  if (role != "user" && role != "assistant")
    throw bad_request("'" + p + ".role' must be 'user' or 'assistant', got '" + role + "'", p + ".role");
  const json* content = field(m, "content");
  if (!content) throw bad_request("'" + p + ".content' is required", p + ".content");
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return;
  }
  if (!content->is_array()) throw bad_request("'" + p + ".content' must be a string or an array of blocks", p + ".content");
  std::string text, thinking;
  json calls = json::array();
  auto flush_user_text = [&] {
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const json& b = (*content)[i];
    std::string bp = idx(p + ".content", i);
    require_object(b, "'" + bp + "'");
    std::string type = req_string(b, "type", bp);
    if (type == "text") {
      text += (text.empty() ? "" : "\n") + req_string(b, "text", bp);
    } else if (type == "thinking" && role == "assistant") {
      thinking += opt_string(b, "thinking", bp).value_or("");
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Opaque to this server: nothing to render.
    } else if (type == "tool_use" && role == "assistant") {
      std::string id = req_string(b, "id", bp);
      std::string name = req_string(b, "name", bp);
      const json* input = field(b, "input");
      if (input && !input->is_object()) throw bad_request("'" + bp + ".input' must be an object", bp + ".input");
      calls.push_back({{"id", id}, {"type", "function"},
                       {"function", {{"name", name}, {"arguments", input ? *input : json::object()}}}});
    } else if (type == "tool_result" && role == "user") {
      flush_user_text();
      std::string id = req_string(b, "tool_use_id", bp);
      std::string result;
      if (const json* c = field(b, "content")) result = text_of_blocks(*c, bp + ".content");
      if (opt_bool(b, "is_error", bp).value_or(false)) result = "Error: " + result;
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else if (type == "image" || type == "document") {
      throw bad_request("'" + bp + "': content of type '" + type + "' is not supported by this model", bp + ".type");
    } else {
      throw bad_request("'" + bp + "': a block of type '" + type + "' is not allowed in a " + role + " message",
                        bp + ".type");
    }
  }
  if (role == "user") {
    flush_user_text();
    return;
  }
  json msg = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
}

MessagesRequest parse_messages_request(const json& body, const SamplingLimits& limits, bool for_count) {
  require_object(body, "the request body");
  MessagesRequest r;
  r.model = req_string(body, "model");
  const json* msgs = opt_array(body, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages");
  if (msgs->empty()) throw bad_request("'messages' must contain at least one message", "messages");
  if (const json* sys = field(body, "system")) {
    std::string s = text_of_blocks(*sys, "system");
    if (!s.empty()) r.messages.push_back({{"role", "system"}, {"content", s}});
  }
  for (size_t i = 0; i < msgs->size(); ++i) convert_message((*msgs)[i], idx("messages", i), r.messages);

  if (const json* tools = opt_array(body, "tools")) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      std::string p = idx("tools", i);
      require_object(t, "'" + p + "'");
      if (auto type = opt_string(t, "type", p); type && *type != "custom" && type->rfind("function", 0) != 0)
        throw bad_request("'" + p + ".type': server tools ('" + *type + "') are not supported", p + ".type");
      json fn = {{"name", req_string(t, "name", p)}};
      if (auto d = opt_string(t, "description", p)) fn["description"] = *d;
      const json* schema = opt_object(t, "input_schema", p);
      if (!schema) throw bad_request("'" + p + ".input_schema' is required", p + ".input_schema");
      fn["parameters"] = *schema;
      r.tools.push_back({{"type", "function"}, {"function", fn}});
    }
  }
  r.tool_mode = r.tools.empty() ? ToolMode::None : ToolMode::Auto;
  if (const json* tc = opt_object(body, "tool_choice")) {
    std::string type = req_string(*tc, "type", "tool_choice");
    if (type == "auto") {
    } else if (type == "none") {
      r.tool_mode = ToolMode::None;
    } else if (type == "any") {
      r.tool_mode = ToolMode::Required;
    } else if (type == "tool") {
      r.tool_mode = ToolMode::Named;
      r.forced_name = req_string(*tc, "name", "tool_choice");
      bool found = false;
      for (auto& t : r.tools) found |= t["function"]["name"] == r.forced_name;
      if (!found) throw bad_request("'tool_choice.name' names tool '" + r.forced_name + "', which is not among the tools",
                                    "tool_choice.name");
    } else {
      throw bad_request("'tool_choice.type' must be auto, any, tool or none", "tool_choice.type");
    }
    if (auto d = opt_bool(*tc, "disable_parallel_tool_use", "tool_choice")) r.parallel_tool_calls = !*d;
    if ((r.tool_mode == ToolMode::Required) && r.tools.empty())
      throw bad_request("'tool_choice' requires tools", "tool_choice");
  }
  if (const json* th = opt_object(body, "thinking")) {
    std::string type = req_string(*th, "type", "thinking");
    if (type == "enabled") r.template_extra["enable_thinking"] = true;
    else if (type == "disabled") r.template_extra["enable_thinking"] = false;
    else if (type != "adaptive") throw bad_request("'thinking.type' must be enabled or disabled", "thinking.type");
  }
  if (auto v = opt_bool(body, "stream")) r.stream = *v;
  json sampling = json::object();  // Anthropic's names → the shared reader
  if (const json* t = field(body, "temperature")) sampling["temperature"] = *t;
  if (const json* t = field(body, "top_p")) sampling["top_p"] = *t;
  if (const json* t = field(body, "top_k")) sampling["top_k"] = *t;
  if (const json* t = field(body, "stop_sequences")) {
    if (!t->is_array()) throw bad_request("'stop_sequences' must be an array of strings", "stop_sequences");
    sampling["stop"] = *t;
  }
  if (!for_count) {
    auto mt = opt_int(body, "max_tokens", 1, 1 << 30);
    if (!mt) throw bad_request("'max_tokens' is required", "max_tokens");
    sampling["max_tokens"] = *mt;
  }
  if (auto t = opt_number(body, "temperature", 0.0, 1.0)) (void)t;  // Anthropic's range is [0, 1]
  try {
    r.gen = parse_sampling(sampling, limits);
  } catch (const ApiError& e) {
    std::string param = e.param() == "stop" ? "stop_sequences" : e.param();
    throw ApiError(e.status(), e.what(), param, e.code());
  }
  return r;
}

}  // namespace rapid::server

namespace rapid::server {

ConstraintSpec parse_output_config(const json& body, json& template_extra) {
  ConstraintSpec c;
  // `output_config.format` (current) or the older top-level `output_format` (structured-outputs beta).
  const json* fmt = nullptr;
  std::string path = "output_config.format";
  if (const json* oc = opt_object(body, "output_config")) {
    if (auto effort = opt_string(*oc, "effort", "output_config")) template_extra["reasoning_effort"] = *effort;
    fmt = opt_object(*oc, "format", "output_config");
  }
  if (!fmt) {
    fmt = opt_object(body, "output_format");
    path = "output_format";
  }
  if (!fmt) return c;
  std::string type = req_string(*fmt, "type", path);
  if (type != "json_schema") throw bad_request("'" + path + ".type' must be 'json_schema', got '" + type + "'", path + ".type");
  const json* schema = opt_object(*fmt, "schema", path);
  if (!schema) throw bad_request("'" + path + ".schema' is required", path + ".schema");
  c.kind = ConstraintSpec::Kind::JsonSchema;
  c.schema = *schema;
  return c;
}

bool take_assistant_prefill(json& messages) {
  if (messages.empty()) return false;
  json& last = messages.back();
  if (last.value("role", "") != "assistant" || last.contains("tool_calls") || !last.contains("content") ||
      !last["content"].is_string())
    return false;
  const std::string& text = last["content"].get_ref<const std::string&>();
  if (text.find_first_not_of(" \t\r\n") != std::string::npos) return true;
  // Nothing to continue: answer as if the empty turn were not there.
  messages.erase(messages.size() - 1);
  return false;
}

}  // namespace rapid::server
