#include "server/openai_request.h"

#include "server/api_error.h"
#include "server/json_limits.h"

namespace rapid::server {

static std::string idx(const std::string& p, size_t i) { return p + "[" + std::to_string(i) + "]"; }

// String content, or an array of text parts joined with newlines (as vLLM does).
static std::string content_text(const json& c, const std::string& path, bool allow_null) {
  if (c.is_null()) {
    if (allow_null) return "";
    throw bad_request("'" + path + "' must not be null", path);
  }
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad_request("'" + path + "' must be a string or an array of content parts", path);
  std::string out;
  bool first = true;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    std::string pp = idx(path, i);
    if (part.is_string()) {  // lenient: a bare string part
      out += (first ? "" : "\n") + part.get<std::string>();
      first = false;
      continue;
    }
    require_object(part, "'" + pp + "'");
    std::string type = req_string(part, "type", pp);
    if (type == "text" || type == "input_text" || type == "output_text") {
      out += (first ? "" : "\n") + req_string(part, "text", pp);
      first = false;
    } else if (type == "refusal") {  // an assistant's earlier refusal, sent back as history
      out += (first ? "" : "\n") + opt_string(part, "refusal", pp).value_or("");
      first = false;
    } else if (type == "image_url" || type == "input_image" || type == "input_audio" || type == "file" ||
               type == "input_file") {
      throw bad_request("'" + pp + "': content of type '" + type + "' is not supported by this model", pp + ".type");
    } else {
      throw bad_request("'" + pp + "': unknown content part type '" + type + "'", pp + ".type");
    }
  }
  return out;
}

// One assistant tool call → {"id","type":"function","function":{name, arguments as an object}}.
// Arguments are parsed because templates `tojson` them (vLLM does the same); text that is not
// JSON stays a string.
static json normalize_call(const json& c, const std::string& cp, const std::string& fallback_id) {
  require_object(c, "'" + cp + "'");
  const json* f = opt_object(c, "function", cp);
  if (!f) throw bad_request("'" + cp + ".function' is required", cp + ".function");
  std::string name = req_string(*f, "name", cp + ".function");
  json args = json::object();
  if (const json* a = field(*f, "arguments")) {
    if (a->is_string()) {
      auto parsed = parse_nested_json(a->get<std::string>(), cp + ".function.arguments");
      args = parsed ? std::move(*parsed) : *a;
    } else if (a->is_object()) {
      args = *a;
    } else {
      throw bad_request("'" + cp + ".function.arguments' must be a JSON string", cp + ".function.arguments");
    }
  }
  json call = {{"id", opt_string(c, "id", cp).value_or(fallback_id)}, {"type", "function"},
               {"function", {{"name", name}, {"arguments", args}}}};
  return call;
}

// The assistant's calls: `tool_calls`, or the legacy single `function_call`.
static json assistant_calls(const json& m, const std::string& p, size_t i) {
  json tc = json::array();
  auto fallback = [&](size_t k) { return "call_" + std::to_string(i) + "_" + std::to_string(k); };
  if (const json* calls = opt_array(m, "tool_calls", p)) {
    for (size_t k = 0; k < calls->size(); ++k) tc.push_back(normalize_call((*calls)[k], idx(p + ".tool_calls", k), fallback(k)));
  } else if (const json* fc = opt_object(m, "function_call", p)) {
    tc.push_back(normalize_call(json{{"function", *fc}}, p + ".function_call", fallback(0)));
  }
  return tc;
}

json normalize_openai_messages(const json& messages, const std::string& param) {
  if (!messages.is_array()) throw bad_request("'" + param + "' must be an array", param);
  if (messages.empty()) throw bad_request("'" + param + "' must contain at least one message", param);
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    std::string p = idx(param, i);
    require_object(m, "'" + p + "'");
    std::string role = req_string(m, "role", p);
    json n = json::object();
    if (role == "developer") role = "system";
    if (role == "function") role = "tool";  // the legacy function-result message
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw bad_request("'" + p + ".role' must be one of system, developer, user, assistant, tool; got '" + role + "'",
                        p + ".role");
    n["role"] = role;
    // Assistant turns (content null or absent beside tool calls, as OpenAI sends them) and tool
    // results may lack content: templates get "" as from vLLM, never a missing key, which a
    // template concatenating message['content'] rejects.
    bool content_optional = role == "assistant" || role == "tool";
    const json* c = field(m, "content");
    if (!c && !content_optional) throw bad_request("'" + p + ".content' is required", p + ".content");
    n["content"] = c ? content_text(*c, p + ".content", content_optional) : "";
    if (role == "assistant") {
      json tc = assistant_calls(m, p, i);
      if (!tc.empty()) n["tool_calls"] = std::move(tc);
      if (auto r = opt_string(m, "reasoning_content", p)) n["reasoning_content"] = *r;
      else if (auto r2 = opt_string(m, "reasoning", p)) n["reasoning_content"] = *r2;
    }
    if (role == "tool") {
      if (auto id = opt_string(m, "tool_call_id", p)) n["tool_call_id"] = *id;
    }
    if (auto name = opt_string(m, "name", p)) n["name"] = *name;
    out.push_back(std::move(n));
  }
  return out;
}

json normalize_openai_tools(const json* tools, const std::string& param) {
  json out = json::array();
  if (!tools) return out;
  if (!tools->is_array()) throw bad_request("'" + param + "' must be an array", param);
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    std::string p = idx(param, i);
    require_object(t, "'" + p + "'");
    std::string type = opt_string(t, "type", p).value_or("function");
    if (type != "function")
      throw bad_request("'" + p + ".type': only function tools are supported, got '" + type + "'", p + ".type");
    // Chat form nests under "function"; the Responses API puts name/parameters at the top.
    const json* f = opt_object(t, "function", p);
    std::string fp = f ? p + ".function" : p;
    const json& src = f ? *f : t;
    std::string name = req_string(src, "name", fp);
    if (name.empty()) throw bad_request("'" + fp + ".name' must not be empty", fp + ".name");
    json fn = {{"name", name}};
    if (auto d = opt_string(src, "description", fp)) fn["description"] = *d;
    if (const json* params = opt_object(src, "parameters", fp)) fn["parameters"] = *params;
    else fn["parameters"] = {{"type", "object"}, {"properties", json::object()}};
    if (auto s = opt_bool(src, "strict", fp)) fn["strict"] = *s;
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

static bool has_tool(const json& tools, const std::string& name) {
  for (auto& t : tools)
    if (t["function"]["name"] == name) return true;
  return false;
}

ToolChoice parse_tool_choice(const json* choice, const json& tools, const std::string& param) {
  ToolChoice tc;
  if (!choice) return tc;
  if (choice->is_string()) {
    std::string s = choice->get<std::string>();
    if (s == "auto") tc.mode = ToolMode::Auto;
    else if (s == "none") tc.mode = ToolMode::None;
    else if (s == "required") tc.mode = ToolMode::Required;
    else throw bad_request("'" + param + "' must be 'none', 'auto', 'required' or a named function", param);
  } else if (choice->is_object()) {
    const json* f = opt_object(*choice, "function", param);
    std::string name = f ? req_string(*f, "name", param + ".function") : req_string(*choice, "name", param);
    tc.mode = ToolMode::Named;
    tc.name = name;
  } else {
    throw bad_request("'" + param + "' must be a string or an object", param);
  }
  if (tc.mode == ToolMode::Named && !has_tool(tools, tc.name))
    throw bad_request("'" + param + "' names function '" + tc.name + "', which is not among the tools", param);
  if (tc.mode == ToolMode::Required && tools.empty())
    throw bad_request("'" + param + "' is 'required' but no tools were given", param);
  return tc;
}

ConstraintSpec parse_response_format(const json* rf, const std::string& param) {
  ConstraintSpec c;
  if (!rf) return c;
  require_object(*rf, "'" + param + "'");
  std::string type = req_string(*rf, "type", param);
  if (type == "text") return c;
  if (type == "json_object") {
    c.kind = ConstraintSpec::Kind::JsonObject;
    // llama.cpp's extension: json_object with a `schema` is that schema.
    if (const json* schema = field(*rf, "schema")) {
      if (!schema->is_object()) throw bad_request("'" + param + ".schema' must be an object", param + ".schema");
      c.kind = ConstraintSpec::Kind::JsonSchema;
      c.schema = *schema;
    }
    return c;
  }
  if (type == "json_schema") {
    // Chat nests {"json_schema":{"name","schema"}}; the Responses API's text.format is flat.
    const json* js = opt_object(*rf, "json_schema", param);
    const json& holder = js ? *js : *rf;
    const json* schema = opt_object(holder, "schema", js ? param + ".json_schema" : param);
    c.kind = ConstraintSpec::Kind::JsonSchema;
    c.schema = schema ? *schema : json::object();
    return c;
  }
  throw bad_request("'" + param + ".type' must be text, json_object or json_schema, got '" + type + "'",
                    param + ".type");
}

ChatRequest parse_chat_request(const json& body, const SamplingLimits& limits) {
  require_object(body, "the request body");
  ChatRequest r;
  r.model = opt_string(body, "model").value_or("");  // absent: the served model (as vLLM)
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages");
  r.messages = normalize_openai_messages(*msgs);
  r.tools = normalize_openai_tools(field(body, "tools"));
  r.tool_choice = parse_tool_choice(field(body, "tool_choice"), r.tools);
  if (r.tools.empty() && r.tool_choice.mode == ToolMode::Auto) r.tool_choice.mode = ToolMode::None;
  if (auto v = opt_bool(body, "parallel_tool_calls")) r.parallel_tool_calls = *v;
  r.constraint = parse_response_format(field(body, "response_format"));
  if (auto v = opt_bool(body, "stream")) r.stream = *v;
  if (const json* so = opt_object(body, "stream_options"))
    if (auto v = opt_bool(*so, "include_usage", "stream_options")) r.include_usage = *v;
  if (auto v = opt_int(body, "n", 1, 16)) r.n = int(*v);
  if (auto v = opt_bool(body, "logprobs")) r.logprobs = *v;
  if (auto v = opt_int(body, "top_logprobs", 0, 20)) {
    r.top_logprobs = int(*v);
    if (r.top_logprobs > 0 && !r.logprobs)
      throw bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  }
  r.gen = parse_sampling(body, limits, "max_completion_tokens");
  r.gen.sampling.logprobs = r.logprobs;
  r.gen.sampling.top_logprobs = r.top_logprobs;
  if (const json* kw = opt_object(body, "chat_template_kwargs")) r.template_extra = *kw;
  if (auto e = opt_string(body, "reasoning_effort")) r.template_extra["reasoning_effort"] = *e;
  return r;
}

CompletionRequest parse_completion_request(const json& body, const SamplingLimits& limits) {
  require_object(body, "the request body");
  CompletionRequest r;
  r.model = opt_string(body, "model").value_or("");  // absent: the served model (as vLLM)
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("'prompt' is required", "prompt");
  auto is_ids = [](const json& a) {
    if (!a.is_array() || a.empty()) return false;
    for (auto& x : a)
      if (!x.is_number_integer()) return false;
    return true;
  };
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (is_ids(*p)) {
    r.prompt_is_ids = true;
    for (auto& x : *p) {
      int64_t id = x.get<int64_t>();
      if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size))
        throw bad_request("'prompt' holds token id " + std::to_string(id) + ", outside the vocabulary", "prompt");
      r.prompt_ids.push_back(int32_t(id));
    }
  } else if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || is_ids((*p)[0]))) {
    json inner = (*p)[0];
    json b2 = body;
    b2["prompt"] = inner;
    CompletionRequest one = parse_completion_request(b2, limits);
    return one;
  } else if (p->is_array()) {
    throw bad_request("'prompt' must be a string, one string in an array, or an array of token ids "
                      "(batches of prompts are not supported)", "prompt");
  } else {
    throw bad_request("'prompt' must be a string or an array of token ids", "prompt");
  }
  if (auto v = opt_bool(body, "stream")) r.stream = *v;
  if (const json* so = opt_object(body, "stream_options"))
    if (auto v = opt_bool(*so, "include_usage", "stream_options")) r.include_usage = *v;
  if (auto v = opt_bool(body, "echo")) r.echo = *v;
  if (auto v = opt_int(body, "n", 1, 16)) r.n = int(*v);
  if (auto v = opt_int(body, "logprobs", 0, 20)) r.logprobs = int(*v);
  if (field(body, "suffix")) throw bad_request("'suffix' is not supported", "suffix");
  r.gen = parse_sampling(body, limits, "max_tokens");
  if (!field(body, "max_tokens") && limits.default_max_tokens == 0) r.gen.max_tokens = 16;  // OpenAI default
  r.gen.sampling.logprobs = r.logprobs >= 0;
  r.gen.sampling.top_logprobs = r.logprobs > 0 ? r.logprobs : 0;
  return r;
}

}  // namespace rapid::server

namespace rapid::server {

void parse_generation_prompt_flags(const json& body, json& template_extra) {
  auto cont = opt_bool(body, "continue_final_message");
  auto gen = opt_bool(body, "add_generation_prompt");
  if (cont.value_or(false) && gen.value_or(false))
    throw bad_request("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                      "continue_final_message");
  if (cont.value_or(false)) template_extra["continue_final_message"] = true;
  else if (gen) template_extra["add_generation_prompt"] = *gen;
}

}  // namespace rapid::server
