#include "server/responses_request.h"

#include "server/api_error.h"
#include "server/json_limits.h"

namespace rapid::server {

static std::string idx(const std::string& p, size_t i) { return p + "[" + std::to_string(i) + "]"; }

static std::string item_text(const json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request("'" + path + "' must be a string or an array of content parts", path);
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string p = idx(path, i);
    require_object(part, "'" + p + "'");
    std::string type = req_string(part, "type", p);
    if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
        type == "reasoning_text") {
      out += req_string(part, "text", p);
    } else if (type == "refusal") {
      out += opt_string(part, "refusal", p).value_or("");
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw bad_request("'" + p + "': content of type '" + type + "' is not supported by this model", p + ".type");
    } else {
      throw bad_request("'" + p + "': unknown content part type '" + type + "'", p + ".type");
    }
  }
  return out;
}

// Input items → chat messages. Consecutive function_call items join the assistant turn before them.
static json convert_input(const json& input) {
  json out = json::array();
  if (input.is_string()) {
    out.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return out;
  }
  if (!input.is_array()) throw bad_request("'input' must be a string or an array of items", "input");
  std::string pending_reasoning;
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    std::string p = idx("input", i);
    require_object(it, "'" + p + "'");
    std::string type = opt_string(it, "type", p).value_or("message");
    if (type == "message") {
      std::string role = req_string(it, "role", p);
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant")
        throw bad_request("'" + p + ".role' must be user, assistant, system or developer", p + ".role");
      const json* c = field(it, "content");
      if (!c) throw bad_request("'" + p + ".content' is required", p + ".content");
      json m = {{"role", role}, {"content", item_text(*c, p + ".content")}};
      if (role == "assistant" && !pending_reasoning.empty()) m["reasoning_content"] = pending_reasoning;
      pending_reasoning.clear();
      out.push_back(std::move(m));
    } else if (type == "function_call" || type == "custom_tool_call" || type == "local_shell_call") {
      // Codex sends back its freeform (apply_patch) and local-shell calls too: they render as
      // function calls, the freeform text as {"input": ...}, the shell action as its arguments.
      std::string call_id = req_string(it, "call_id", p);
      json args_obj;
      std::string name;
      if (type == "function_call") {
        name = req_string(it, "name", p);
        std::string args = opt_string(it, "arguments", p).value_or("{}");
        auto parsed = parse_nested_json(args, p + ".arguments");
        args_obj = parsed ? std::move(*parsed) : json(args);
      } else if (type == "custom_tool_call") {
        name = req_string(it, "name", p);
        args_obj = {{"input", opt_string(it, "input", p).value_or("")}};
      } else {
        name = "local_shell";
        const json* action = opt_object(it, "action", p);
        args_obj = action ? *action : json::object();
      }
      json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args_obj}}}};
      if (out.empty() || out.back()["role"] != "assistant") {
        json m = {{"role", "assistant"}, {"content", ""}};
        if (!pending_reasoning.empty()) m["reasoning_content"] = pending_reasoning;
        pending_reasoning.clear();
        out.push_back(std::move(m));
      }
      out.back()["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output" || type == "custom_tool_call_output" ||
               type == "local_shell_call_output") {
      // local_shell_call_output names its call by `id`.
      std::string call_id = field(it, "call_id") ? req_string(it, "call_id", p) : req_string(it, "id", p);
      const json* o = field(it, "output");
      std::string output = o ? item_text(*o, p + ".output") : "";
      out.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
    } else if (type == "reasoning") {
      // Kept for the next assistant turn (templates that render past reasoning use it).
      if (const json* s = opt_array(it, "summary", p)) pending_reasoning += item_text(*s, p + ".summary");
      if (const json* c = opt_array(it, "content", p)) pending_reasoning += item_text(*c, p + ".content");
    } else if (type == "web_search_call" || type == "file_search_call" || type == "image_generation_call") {
      // Results of the provider's built-in tools, which this server never runs: nothing to render.
    } else {
      throw bad_request("'" + p + ".type': input items of type '" + type + "' are not supported", p + ".type");
    }
  }
  if (out.empty()) throw bad_request("'input' holds no message", "input");
  return out;
}

ResponsesRequest parse_responses_request(const json& body, const SamplingLimits& limits) {
  require_object(body, "the request body");
  ResponsesRequest r;
  r.model = opt_string(body, "model").value_or("");  // absent: the served model (as vLLM)
  if (field(body, "previous_response_id"))
    throw bad_request("'previous_response_id' is not supported: this server stores no responses; send the whole "
                      "conversation in 'input'", "previous_response_id");
  const json* input = field(body, "input");
  if (!input) throw bad_request("'input' is required", "input");
  json conv = convert_input(*input);
  if (auto ins = opt_string(body, "instructions")) {
    r.instructions = *ins;
    r.messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  for (auto& m : conv) r.messages.push_back(std::move(m));
  // Validate the converted conversation with the chat rules (roles, tool-call shapes).
  r.messages = normalize_openai_messages(r.messages, "input");
  if (const json* tools = opt_array(body, "tools")) {
    json fn_tools = json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      require_object(t, "'tools[" + std::to_string(i) + "]'");
      // Built-in tools (web_search, local_shell, ...) are not ours to run: they are skipped.
      if (opt_string(t, "type", "tools[" + std::to_string(i) + "]").value_or("function") != "function") continue;
      fn_tools.push_back(t);
    }
    r.tools = normalize_openai_tools(&fn_tools);
    r.tools_echo = *tools;
  }
  if (const json* tc = field(body, "tool_choice")) {
    r.tool_choice = parse_tool_choice(tc, r.tools);
    r.tool_choice_echo = *tc;
  }
  if (r.tools.empty() && r.tool_choice.mode == ToolMode::Auto) r.tool_choice.mode = ToolMode::None;
  if (auto v = opt_bool(body, "parallel_tool_calls")) r.parallel_tool_calls = *v;
  if (const json* text = opt_object(body, "text")) {
    if (const json* fmt = opt_object(*text, "format", "text")) {
      r.constraint = parse_response_format(fmt, "text.format");
      r.text_format = *fmt;
    }
  }
  if (const json* reasoning = opt_object(body, "reasoning")) {
    if (auto e = opt_string(*reasoning, "effort", "reasoning")) r.template_extra["reasoning_effort"] = *e;
  }
  if (const json* md = opt_object(body, "metadata")) r.metadata = *md;
  if (auto v = opt_bool(body, "stream")) r.stream = *v;
  json sampling = json::object();
  for (const char* k : {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
                        "repetition_penalty"})
    if (const json* v = field(body, k)) sampling[k] = *v;
  if (const json* v = field(body, "max_output_tokens")) sampling["max_tokens"] = *v;
  try {
    r.gen = parse_sampling(sampling, limits);
  } catch (const ApiError& e) {
    std::string param = e.param() == "max_tokens" ? "max_output_tokens" : e.param();
    throw ApiError(e.status(), e.what(), param, e.code());
  }
  return r;
}

}  // namespace rapid::server
