// JSON-schema `pattern` (an ECMA-262 regex, a practical subset) → a GBNF expression matching the
// JSON-encoded string content (between the quotes) whose decoded value matches the pattern.
#pragma once
#include <string>
#include <string_view>

namespace rapid::constrain {

// `json_char_rule` names a GBNF rule matching one JSON string character (raw or escaped); it
// pads unanchored ends. Throws GrammarError for unsupported constructs (backreferences,
// lookaround, \b) and malformed patterns.
std::string regex_to_gbnf(std::string_view pattern, const std::string& json_char_rule);

// GBNF literal text ("...") matching exactly `bytes`.
std::string gbnf_literal(std::string_view bytes);

}  // namespace rapid::constrain
