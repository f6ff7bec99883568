// Each tool-call format is data: the markers that open/close a call block, and how the block's
// body is read. One streaming engine (stream_parser.cpp) runs all of them.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rapid::parsers {

// How the text between a block's start and end markers becomes calls.
enum class Body {
  JsonCalls,      // one or more JSON objects/arrays of {"name", "arguments"|"parameters"}
  NameSepJson,    // name SEP {json args}: Mistral v11, DeepSeek V3.1, Functionary, Kimi K2
  DeepseekV3,     // function<sep>name\n```json\n{args}\n```
  XmlFunction,    // <function=name><parameter=k>v</parameter></function> (Qwen3-Coder, Seed-OSS)
  XmlInvoke,      // <invoke name="x"><parameter name="k">v</parameter></invoke> (MiniMax, DSML, Step3)
  GlmArgs,        // name<arg_key>k</arg_key><arg_value>v</arg_value>
  Pythonic,       // [f(a=1), g(b="x")]
  PythonicLines,  // f(a=1)\ng(b=2)   (OLMo 3)
  GemmaCall,      // call:name{key:<q>str<q>,n:1}
  MistralAny,     // [{json}...] (pre-v11) or name[ARGS]{json} (v11+), several after [TOOL_CALLS]
};

enum class IdStyle { OpenAI, Mistral9, Kimi };

enum class ArgTyping { AlwaysString, Infer };  // XML values with no schema: keep text or try JSON

// A format's call syntax for constrained decoding (grammar.cpp).
struct CallGrammar {
  std::string prefix{}, call{}, sep{}, suffix{};  // call uses {NAME} and {ARGS}
  std::string args = "json";                   // how {ARGS} is encoded
  std::string param{};                         // xml param syntax, {KEY} {VALUE}
};

// Every field has a default, so the table (format_registry.cpp) names only what a format sets.
struct ToolFormat {
  std::string name{};
  std::vector<std::string> aliases{};
  Body body = Body::JsonCalls;
  std::vector<std::string> starts{};           // open a call block anywhere in content
  std::string end{};                           // closes it; "" = the block runs to the end of the output
  bool end_is_lookahead = false;               // end marker also begins the next block (Functionary v3.2)
  bool require_end = false;                    // an unterminated block is text, not a call (GLM, sections)
  // A block that is a section of calls: each call sits between inner_start and inner_end
  // (DeepSeek, Kimi K2, Step3); the section is a call block only if some call parses.
  std::string inner_start{}, inner_end{};
  std::vector<std::string> leading{};          // open a block only as the first thing in content; kept in body
  std::vector<std::string> strip{};            // wrapper tokens dropped from content
  std::string implicit_prefix{};               // text the prompt already emitted (Functionary v3.2 ">>>")
  IdStyle ids = IdStyle::OpenAI;
  ArgTyping typing = ArgTyping::Infer;
  // Body details.
  std::string sep{};                           // NameSepJson / DeepseekV3 separator
  std::string q{};                             // GemmaCall string quote token
  // XmlInvoke tag names.
  std::string invoke_open{}, invoke_close{}, param_open{}, param_close{};
  CallGrammar grammar{};
};

struct ReasoningFormat {
  std::string name;
  std::vector<std::string> aliases;
  std::vector<std::string> starts, ends;
  std::vector<std::string> strip;  // e.g. <answer> wrappers
  bool starts_inside = false;      // the prompt normally opens the block (DeepSeek R1, MiniMax M2)
};

const std::vector<ToolFormat>& tool_formats();
const std::vector<ReasoningFormat>& reasoning_formats();
const ToolFormat* find_tool_format(const std::string& name);        // name or alias
const ReasoningFormat* find_reasoning_format(const std::string& name);
bool is_harmony(const std::string& name);                         // gpt-oss (own engine)

struct Call {
  std::string name;
  std::string arguments;  // JSON text, or raw text when the model wrote invalid JSON
  std::string id;         // when the format carries one (Kimi)
};

// Reads a complete block body. nullopt = not a call after all (the text goes back to content).
// For blocks that run to the end of the reply, text after the last call that is not part of
// the call syntax is handed back in `trailing` (it is content).
// Arguments text that follows a known name (NameSepJson, DeepseekV3, Mistral v11): an object or
// array as written (fence and surrounding whitespace removed), other values normalised.
std::string args_after_name(std::string_view raw);

std::optional<std::vector<Call>> parse_body(const ToolFormat& f, const std::string& body,
                                            const nlohmann::json& tools, std::string* trailing = nullptr);

}  // namespace rapid::parsers
