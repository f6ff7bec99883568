// Depth bounds on client-supplied JSON, checked on the raw text before anything recursive
// (nlohmann's copy/dump/compare, the JSON -> template value conversion, the schema -> grammar
// compiler) walks it: 30k nested brackets in one field used to overflow the stack of an HTTP
// thread and kill the server. nlohmann's parser and destructor are iterative; nothing else is.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rapid::server {

// Deepest nesting of arrays/objects accepted anywhere in a request body (the body object itself
// is level 1), and inside a JSON text carried in a string field (tool-call arguments).
inline constexpr int kMaxJsonDepth = 128;

// Where `text` first nests more than `max_depth` arrays/objects, as a field path such as
// "tools[0].function.parameters.properties.a" (after `root`, cut after a few levels); nullopt
// when it does not. Iterative and string-aware; invalid JSON only needs to not crash it.
std::optional<std::string> json_too_deep(std::string_view text, int max_depth, const std::string& root = "");

// The request body as a JSON object: 400 when it is empty, not JSON, not an object or nested
// deeper than kMaxJsonDepth (naming the field and the limit).
nlohmann::ordered_json parse_request_json(const std::string& body);

// A JSON text found in the string field `field` (e.g. a tool call's arguments): the parsed value,
// nullopt when it is not JSON, a 400 naming `field` when it nests deeper than kMaxJsonDepth.
std::optional<nlohmann::ordered_json> parse_nested_json(const std::string& text, const std::string& field);

// Model output that should be JSON: discarded (is_discarded()) when it is not, or when it nests
// deeper than kMaxJsonDepth (a client can steer a model into 30k '[' as well).
nlohmann::ordered_json parse_output_json(const std::string& text);

}  // namespace rapid::server
