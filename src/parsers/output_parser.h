// Turns raw model output text into content, reasoning and tool calls, streaming-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rapid::parsers {

// One OpenAI-style streamed tool-call fragment. The first fragment of a call carries its id and
// name; later ones append to `arguments` (a JSON text when joined).
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ParseDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text (or the raw text when the model produced invalid JSON)
};

// Whole-output result; equals the merge of all streamed deltas.
struct ParseResult {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;
};

struct ParserOptions {
  std::string tool_parser;       // format name or alias; "" = none
  std::string reasoning_parser;  // "" = none
  nlohmann::json tools = nlohmann::json::array();  // OpenAI function tools offered (for typing)
  bool starts_in_reasoning = false;  // the prompt already opened the reasoning block
  uint64_t id_seed = 0;              // 0 = random tool-call ids; else reproducible (tests)
};

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual ParseDelta feed(std::string_view text) = 0;  // next chunk of model output
  virtual ParseDelta finish() = 0;                      // end of output: release what is held
};

// Throws rapid::Error for an unknown parser name.
std::unique_ptr<OutputParser> make_output_parser(const ParserOptions& opts);
ParseResult parse_output(const ParserOptions& opts, std::string_view text);

// Picks the tool-call and reasoning parser from a model's chat template and model type
// ("" when none fits).
std::string detect_tool_parser(const std::string& chat_template, const std::string& model_type);
std::string detect_reasoning_parser(const std::string& chat_template, const std::string& model_type);

std::vector<std::string> tool_parser_names();
std::vector<std::string> reasoning_parser_names();

// Constrained-decoding description of a format's call syntax: a GBNF grammar whose rule
// `args-<tool>` (one per tool) is left for the caller to fill from the tool's parameters schema,
// encoded as `args_encoding` says ("json", "xml" with `param_syntax`, "python-kwargs", "gemma:<q>").
struct ToolCallGrammar {
  std::string gbnf;
  std::string args_encoding;
  std::string param_syntax;  // for "xml": one parameter, with {KEY} and {VALUE}
  // Rules left open, one per tool, e.g. "args-get-weather" for tool "get_weather" (GBNF rule
  // names allow only [a-zA-Z0-9-]); tool_names[i] is the tool of arg_rules[i].
  std::vector<std::string> arg_rules;
  std::vector<std::string> tool_names;
};
// `only_tool` restricts to one named function (tool_choice naming a function); throws rapid::Error
// for an unknown parser or when no tool is offered.
ToolCallGrammar tool_call_grammar(const std::string& tool_parser, const nlohmann::json& tools,
                                  const std::string& only_tool = "");

}  // namespace rapid::parsers
