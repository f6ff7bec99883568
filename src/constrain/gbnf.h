// GBNF, llama.cpp's grammar text format, the de-facto standard for constrained decoding:
//
//   root  ::= "{" ws pair ("," ws pair)* "}"      # comments run to end of line
//   pair  ::= [a-z]+ ws ":" ws ("true" | "false")
//   ws    ::= [ \t\n]{0,4}
//
// Supported: string literals with escapes (\n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), character
// classes [a-z], [^"\\] (code points, lowered to UTF-8 bytes), '.', rule references, grouping,
// alternation, and the repetitions * + ? {m} {m,} {m,n}. Rule names use [A-Za-z0-9_.-]. A rule's
// body may span lines; it ends where the next `name ::=` begins. Not supported (clear error):
// llama.cpp's token references <...> and negated token sets.
#pragma once
#include <memory>
#include <string_view>

#include "constrain/grammar.h"

namespace rapid::constrain {

// Throws GrammarError with line:column on malformed text, undefined rules, left recursion.
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace rapid::constrain
