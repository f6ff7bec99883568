// JSON schema → grammar, for response_format json_object / json_schema and tool arguments.
//
// The grammar accepts a canonical SUBSET of the documents the schema allows, chosen so that a
// small model cannot wander: properties appear in the order the schema lists them (pass
// ordered_json), whitespace between tokens is bounded (one space/tab, or a newline plus up to 20
// spaces/tabs; none before the value), numbers have at most 20 integer digits, 20 fraction digits
// and a 2-digit exponent (every number fits a double), enum/const values are scalars written
// compactly with raw UTF-8 (arrays/objects with the same bounded whitespace), extra keys under
// additionalProperties use no escapes and never repeat a declared name. Everything it accepts is
// valid under the schema, except for the keywords it ignores (below).
//
// Supported: type (incl. lists), object (properties, required, additionalProperties
// false/true/schema; absent means none when properties are declared, any object otherwise),
// array (items, prefixItems, minItems, maxItems; counts above 4096 are capped), string
// (minLength, maxLength, pattern [a regex subset: literals, classes, \d \w \s, ., groups, |,
// * + ? {m,n}, ^/$ anchors; with a pattern, min/maxLength are ignored], format date / time /
// date-time / uuid), integer (minimum+maximum spanning < 2000 values: exact; otherwise
// minimum >= 0 / >= 1 forbid the sign / zero, other bounds IGNORED), number (minimum >= 0
// forbids the sign, other bounds IGNORED), boolean, null, enum, const, anyOf, oneOf
// (exclusivity not enforced), allOf (merged: properties and required united, other keywords
// last-wins), $ref to #/$defs/…, #/definitions/… or any local JSON pointer (recursion allowed;
// sibling keywords of $ref ignored), OpenAPI's nullable: true, schema `true`.
// Ignored: number bounds, multipleOf, uniqueItems, patternProperties, propertyNames,
// min/maxProperties, if/then/else, not, contains, dependentRequired.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "constrain/grammar.h"

namespace rapid::constrain {

// GBNF text for `schema`, with the top rule named `root` and helper rules named `root.<hint>`.
// Pass an ordered_json to keep the property order (nlohmann::json sorts keys alphabetically).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& root = "root");

std::shared_ptr<const Grammar> grammar_from_json_schema(const nlohmann::ordered_json& schema);
std::shared_ptr<const Grammar> grammar_from_json_schema(const nlohmann::json& schema);
// The schema as JSON text (keeps property order); throws GrammarError if it does not parse.
std::shared_ptr<const Grammar> grammar_from_json_schema_text(std::string_view schema_text);
// Any JSON object (response_format {type: json_object}).
std::shared_ptr<const Grammar> grammar_for_json_object();

// Tool-call formats come as GBNF text (parsers/output_parser.h: tool_call_grammar) that
// references `args-<tool>` for each tool's arguments, the tool name with every character outside
// [A-Za-z0-9] turned into '-'. Appends the rule for every tool in `tools` whose rule is referenced
// but not defined, in the format's argument encoding:
//   "json"           the arguments object per the schema (as grammar_from_json_schema);
//   "xml"            one `param_syntax` per argument ({KEY} name, {VALUE} value; plain string
//                    values are raw text without "</", other values JSON), schema order,
//                    optional arguments may be omitted;
//   "python-kwargs"  key=value, ... (True/False/None for booleans and null, other values JSON).
// Other encodings (gemma) throw GrammarError: run such requests unconstrained.
// `tools`: OpenAI tools ({type, function: {name, parameters}}), bare functions ({name,
// parameters}) or Anthropic tools ({name, input_schema}).
std::string gbnf_with_tool_args(std::string_view gbnf, const nlohmann::ordered_json& tools,
                                const std::string& encoding = "json", const std::string& param_syntax = "");

}  // namespace rapid::constrain
