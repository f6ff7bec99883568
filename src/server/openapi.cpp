#include "server/openapi.h"

namespace rapid::server {

using json = nlohmann::ordered_json;

static json str() { return {{"type", "string"}}; }
static json num(double lo, double hi) { return {{"type", "number"}, {"minimum", lo}, {"maximum", hi}}; }
static json integer(int64_t lo, int64_t hi) { return {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}}; }
static json boolean() { return {{"type", "boolean"}}; }
static json arr(json items) { return {{"type", "array"}, {"items", std::move(items)}}; }
static json obj(json props, json required = json::array()) {
  return {{"type", "object"}, {"properties", std::move(props)}, {"required", std::move(required)}};
}
static json one_of(std::initializer_list<json> v) {
  json a = json::array();
  for (auto& x : v) a.push_back(x);
  return {{"oneOf", a}};
}

static json error_response() {
  return {{"description", "Error"},
          {"content", {{"application/json", {{"schema", obj({{"error", {{"type", "object"}}}}, {"error"})}}}}}};
}

static json post(const std::string& summary, const json& body_schema) {
  json ok = {{"description", "OK"},
             {"content", {{"application/json", {{"schema", {{"type", "object"}}}}},
                          {"text/event-stream", {{"schema", str()}}}}}};
  return {{"post",
           {{"summary", summary},
            {"requestBody", {{"required", true}, {"content", {{"application/json", {{"schema", body_schema}}}}}}},
            {"responses", {{"200", ok}, {"400", error_response()}, {"401", error_response()},
                           {"404", error_response()}, {"413", error_response()}}}}}};
}

static json get(const std::string& summary, const std::string& type = "application/json") {
  json schema = type == "application/json" ? json{{"type", "object"}} : str();
  json ok = {{"description", "OK"}, {"content", {{type, {{"schema", schema}}}}}};
  return {{"get", {{"summary", summary}, {"responses", {{"200", ok}, {"401", error_response()}}}}}};
}

static json sampling_props() {
  return {{"temperature", num(0, 2)}, {"top_p", num(0, 1)}, {"top_k", integer(-1, 1000000)},
          {"min_p", num(0, 1)}, {"seed", {{"type", "integer"}}},
          {"presence_penalty", num(-2, 2)}, {"frequency_penalty", num(-2, 2)},
          {"repetition_penalty", num(0, 10)},
          {"stop", one_of({str(), arr(str())})},
          {"max_tokens", integer(1, 1 << 30)}, {"min_tokens", integer(0, 1 << 30)},
          {"ignore_eos", boolean()},
          {"logit_bias", {{"type", "object"}, {"additionalProperties", num(-100, 100)}}},
          {"stream", boolean()},
          {"stream_options", obj({{"include_usage", boolean()}})},
          {"n", integer(1, 16)}};
}

// The document itself: its length is the schema, data rather than logic, so it stays one literal
// a reader can compare with the routes.
json openapi_spec(const std::string& model_id) {
  json text_part = obj({{"type", {{"type", "string"}, {"enum", {"text"}}}}, {"text", str()}}, {"type", "text"});
  json fn_call = obj({{"id", str()}, {"type", {{"type", "string"}, {"enum", {"function"}}}},
                      {"function", obj({{"name", str()}, {"arguments", str()}}, {"name", "arguments"})}},
                     {"id", "type", "function"});
  json chat_message = obj({{"role", {{"type", "string"}, {"enum", {"system", "developer", "user", "assistant", "tool"}}}},
                           {"content", one_of({str(), arr(text_part), {{"type", "null"}}})},
                           {"name", str()}, {"tool_call_id", str()}, {"tool_calls", arr(fn_call)}},
                          {"role"});
  json tool = obj({{"type", {{"type", "string"}, {"enum", {"function"}}}},
                   {"function", obj({{"name", str()}, {"description", str()}, {"parameters", {{"type", "object"}}}},
                                    {"name"})}},
                  {"type", "function"});
  json tool_choice = one_of({{{"type", "string"}, {"enum", {"none", "auto", "required"}}},
                             obj({{"type", {{"type", "string"}, {"enum", {"function"}}}},
                                  {"function", obj({{"name", str()}}, {"name"})}},
                                 {"type", "function"})});
  json chat_props = sampling_props();
  chat_props["model"] = {{"type", "string"}, {"example", model_id}};
  chat_props["messages"] = {{"type", "array"}, {"items", chat_message}, {"minItems", 1}};
  chat_props["tools"] = arr(tool);
  chat_props["tool_choice"] = tool_choice;
  chat_props["parallel_tool_calls"] = boolean();
  chat_props["max_completion_tokens"] = integer(1, 1 << 30);
  chat_props["logprobs"] = boolean();
  chat_props["top_logprobs"] = integer(0, 20);
  chat_props["response_format"] =
      obj({{"type", {{"type", "string"}, {"enum", {"text", "json_object", "json_schema"}}}},
           {"json_schema", obj({{"name", str()}, {"schema", {{"type", "object"}}}, {"strict", boolean()}})}},
          {"type"});
  chat_props["chat_template_kwargs"] = {{"type", "object"}};
  chat_props["continue_final_message"] = boolean();
  chat_props["add_generation_prompt"] = boolean();
  chat_props["reasoning_effort"] = str();

  json comp_props = sampling_props();
  comp_props["model"] = {{"type", "string"}, {"example", model_id}};
  comp_props["prompt"] = one_of({str(), arr({{"type", "integer"}, {"minimum", 0}})});
  comp_props["echo"] = boolean();
  comp_props["logprobs"] = integer(0, 20);

  json a_block = obj({{"type", {{"type", "string"}, {"enum", {"text", "tool_use", "tool_result", "thinking"}}}},
                      {"text", str()}, {"id", str()}, {"name", str()}, {"input", {{"type", "object"}}},
                      {"tool_use_id", str()}, {"content", one_of({str(), arr(text_part)})}, {"thinking", str()},
                      {"is_error", boolean()}},
                     {"type"});
  json a_message = obj({{"role", {{"type", "string"}, {"enum", {"user", "assistant"}}}},
                        {"content", one_of({str(), arr(a_block)})}},
                       {"role", "content"});
  json a_tool = obj({{"name", str()}, {"description", str()}, {"input_schema", {{"type", "object"}}}},
                    {"name", "input_schema"});
  json a_props = {{"model", {{"type", "string"}, {"example", model_id}}},
                  {"messages", {{"type", "array"}, {"items", a_message}, {"minItems", 1}}},
                  {"system", one_of({str(), arr(text_part)})},
                  {"max_tokens", integer(1, 1 << 30)},
                  {"stop_sequences", arr(str())},
                  {"stream", boolean()},
                  {"temperature", num(0, 1)}, {"top_p", num(0, 1)}, {"top_k", integer(0, 1000000)},
                  {"tools", arr(a_tool)},
                  {"tool_choice", obj({{"type", {{"type", "string"}, {"enum", {"auto", "any", "tool", "none"}}}},
                                       {"name", str()}},
                                      {"type"})},
                  {"thinking", obj({{"type", {{"type", "string"}, {"enum", {"enabled", "disabled"}}}},
                                    {"budget_tokens", integer(0, 1 << 30)}},
                                   {"type"})}};
  json a_format = obj({{"type", {{"type", "string"}, {"enum", {"json_schema"}}}}, {"schema", {{"type", "object"}}}},
                      {"type", "schema"});
  a_props["output_config"] = obj({{"format", a_format}, {"effort", str()}});
  a_props["output_format"] = a_format;
  json count_props = a_props;
  count_props.erase("max_tokens");
  count_props.erase("stream");

  json r_item = obj({{"type", {{"type", "string"}, {"enum", {"message", "function_call", "function_call_output"}}}},
                     {"role", {{"type", "string"}, {"enum", {"user", "assistant", "system", "developer"}}}},
                     {"content", one_of({str(), arr(obj({{"type", {{"type", "string"}, {"enum", {"input_text", "output_text"}}}},
                                                          {"text", str()}},
                                                         {"type", "text"}))})},
                     {"call_id", str()}, {"name", str()}, {"arguments", str()}, {"output", str()}});
  json r_props = {{"model", {{"type", "string"}, {"example", model_id}}},
                  {"input", one_of({str(), arr(r_item)})},
                  {"instructions", str()},
                  {"tools", arr(obj({{"type", {{"type", "string"}, {"enum", {"function"}}}}, {"name", str()},
                                     {"description", str()}, {"parameters", {{"type", "object"}}}},
                                    {"type", "name"}))},
                  {"tool_choice", tool_choice},
                  {"stream", boolean()},
                  {"temperature", num(0, 2)}, {"top_p", num(0, 1)},
                  {"max_output_tokens", integer(1, 1 << 30)},
                  {"parallel_tool_calls", boolean()},
                  {"text", obj({{"format", {{"type", "object"}}}})},
                  {"reasoning", obj({{"effort", str()}})}};

  json e_props = {{"model", {{"type", "string"}, {"example", model_id}}},
                  {"input", one_of({str(), arr(str()), arr(integer(0, 1 << 30)), arr(arr(integer(0, 1 << 30)))})},
                  {"encoding_format", {{"type", "string"}, {"enum", {"float", "base64"}}}},
                  {"dimensions", integer(1, 1 << 20)},
                  {"user", str()}};

  json paths = {
      {"/v1/embeddings", post("OpenAI embeddings (with an embedding model; 400 otherwise)", obj(e_props, {"input"}))},
      {"/v1/chat/completions", post("OpenAI chat completion", obj(chat_props, {"messages"}))},
      {"/v1/completions", post("OpenAI text completion", obj(comp_props, {"prompt"}))},
      {"/v1/messages", post("Anthropic message", obj(a_props, {"model", "messages", "max_tokens"}))},
      {"/v1/messages/count_tokens", post("Anthropic token count", obj(count_props, {"model", "messages"}))},
      {"/v1/responses", post("OpenAI Responses API", obj(r_props, {"input"}))},
      {"/v1/chat/completions/render", post("Prompt token ids of a chat completion (vLLM's render)", obj(chat_props, {"messages"}))},
      {"/v1/completions/render", post("Prompt token ids of a text completion (vLLM's render)", obj(comp_props, {"prompt"}))},
      {"/v1/messages/render", post("Prompt token ids of an Anthropic message (vLLM's render)", obj(a_props, {"model", "messages", "max_tokens"}))},
      {"/v1/responses/render", post("Prompt token ids of a Responses request (vLLM's render)", obj(r_props, {"input"}))},
      {"/v1/models", get("List models")},
      {"/health", get("Liveness")},
      {"/metrics", get("Prometheus metrics", "text/plain")},
      {"/openapi.json", get("This document")},
  };
  paths["/v1/models/{model}"] = get("One model");
  paths["/v1/models/{model}"]["get"]["parameters"] =
      json::array({{{"name", "model"}, {"in", "path"}, {"required", true}, {"schema", str()}}});
  paths["/v1/models/{model}"]["get"]["responses"]["404"] = error_response();
  return {{"openapi", "3.1.0"},
          {"info", {{"title", "rapid-mlx"}, {"version", "0.1.0"},
                    {"description", "OpenAI- and Anthropic-compatible local inference server"}}},
          {"paths", paths},
          {"components", {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}},
                                               {"apiKey", {{"type", "apiKey"}, {"in", "header"}, {"name", "x-api-key"}}}}}}},
          {"security", json::array({{{"bearer", json::array()}}, {{"apiKey", json::array()}}, json::object()})}};
}

}  // namespace rapid::server
