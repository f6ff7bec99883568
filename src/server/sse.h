// Server-sent-events framing and JSON serialization that never throws on odd bytes.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::server {

// Compact JSON; invalid UTF-8 (should a model emit it) becomes U+FFFD instead of an exception.
inline std::string to_json_text(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// "data: {...}\n\n" (OpenAI style).
inline std::string sse_data(const nlohmann::ordered_json& j) { return "data: " + to_json_text(j) + "\n\n"; }
// "event: name\ndata: {...}\n\n" (Anthropic and Responses style).
inline std::string sse_event(const std::string& event, const nlohmann::ordered_json& j) {
  return "event: " + event + "\ndata: " + to_json_text(j) + "\n\n";
}
inline const char* sse_done() { return "data: [DONE]\n\n"; }
// A comment line: ignored by SSE clients, used to notice a vanished client while the model is busy.
inline const char* sse_keepalive() { return ": keep-alive\n\n"; }

}  // namespace rapid::server
