#include "server/openai_format.h"

#include <chrono>
#include <cstdio>

namespace rapid::server {

using json = nlohmann::ordered_json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string system_fingerprint(const std::string& model_id, int64_t context_length) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : model_id + "/" + std::to_string(context_length)) h = (h ^ c) * 1099511628211ull;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(h & 0xffffffffffffull));
  return std::string("fp_") + buf;
}

std::string openai_finish_reason(engine::FinishReason r, bool has_tool_calls) {
  if (r == engine::FinishReason::Length) return "length";
  if (has_tool_calls) return "tool_calls";
  return "stop";
}

json openai_usage(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

static json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

static json token_entry(const tok::Tokenizer& tok, int32_t id, float lp) {
  std::string text = tok.decode({id}, false);
  return {{"token", text}, {"logprob", lp}, {"bytes", bytes_of(tok.token_bytes(id))}};
}

json chat_logprobs(const tok::Tokenizer& tok, const std::vector<engine::SampleResult>& samples) {
  json content = json::array();
  for (auto& s : samples) {
    json e = token_entry(tok, s.token, s.logprob);
    json top = json::array();
    for (auto& t : s.top) top.push_back(token_entry(tok, t.token, t.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", content}};
}

json completion_logprobs(const tok::Tokenizer& tok, const std::vector<engine::SampleResult>& samples, size_t offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (auto& s : samples) {
    std::string text = tok.decode({s.token}, false);
    tokens.push_back(text);
    lps.push_back(s.logprob);
    json top = json::object();
    for (auto& t : s.top) top[tok.decode({t.token}, false)] = t.logprob;
    tops.push_back(std::move(top));
    offs.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json chat_message(const TurnResult& r) {
  json m = {{"role", "assistant"}, {"content", nullptr}};
  if (!r.content.empty() || r.tool_calls.empty()) m["content"] = r.content;
  if (!r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.tool_calls.empty()) {
    json calls = json::array();
    for (auto& c : r.tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

json chat_tool_call_delta(const parsers::ToolCallDelta& t) {
  json d = {{"index", t.index}};
  json f = json::object();
  if (!t.id.empty()) {
    d["id"] = t.id;
    d["type"] = "function";
  }
  if (!t.name.empty()) f["name"] = t.name;
  f["arguments"] = t.arguments;
  d["function"] = std::move(f);
  return d;
}

json ChatChunker::chunk(int index, json delta, const json& finish_reason, const json& logprobs) const {
  json c = {{"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model},
            {"system_fingerprint", fingerprint},
            {"choices", json::array({{{"index", index},
                                      {"delta", std::move(delta)},
                                      {"logprobs", logprobs},
                                      {"finish_reason", finish_reason}}})}};
  if (include_usage) c["usage"] = nullptr;
  return c;
}

json ChatChunker::usage_chunk(const Usage& u) const {
  return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
          {"system_fingerprint", fingerprint}, {"choices", json::array()}, {"usage", openai_usage(u)}};
}

}  // namespace rapid::server
