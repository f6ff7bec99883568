// Readers for the non-JSON value syntaxes models write arguments in (Python literals, Gemma's
// call syntax, untyped XML text), all producing JSON.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "parsers/tool_format.h"

namespace rapid::parsers {

void skip_ws(std::string_view s, size_t& pos);

// False when brackets nest deeper than `max_depth`: such text is refused before any recursive
// JSON / literal parser sees it (a model can emit "[[[[..." until the stack runs out).
bool nesting_ok(std::string_view s, int max_depth = 128);

// Python literal: str, int, float, True/False/None, list, tuple, dict.
std::optional<nlohmann::json> parse_python_literal(std::string_view s, size_t& pos);

// Gemma call syntax value: <q>text<q>, number, true/false/null, {key:value,...}, [v,...].
std::optional<nlohmann::json> parse_gemma_value(std::string_view s, size_t& pos, std::string_view q);

// Schema of parameter `param` of tool `tool` in OpenAI `tools`, or nullptr.
const nlohmann::json* param_schema(const nlohmann::json& tools, const std::string& tool,
                                   const std::string& param);

// True when coerce_value keeps the text as a JSON string whatever it is (schema type "string", or
// no type and AlwaysString): such values can stream as they arrive.
bool value_is_text(const nlohmann::json* schema, ArgTyping mode);

// Turns the text of an XML-style parameter into the JSON value its schema asks for.
nlohmann::json coerce_value(const std::string& raw, const nlohmann::json* schema, ArgTyping mode);

// Arguments value -> OpenAI arguments text (a JSON string holding JSON is unwrapped).
std::string arguments_text(const nlohmann::json& args);

}  // namespace rapid::parsers
