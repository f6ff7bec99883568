// Factory and whole-output entry points for the output parsers.
#include "parsers/output_parser.h"

#include "common/error.h"
#include "parsers/harmony_parser.h"
#include "parsers/stream_parser.h"

namespace rapid::parsers {

using parsers::find_reasoning_format;
using parsers::find_tool_format;
using parsers::is_harmony;

std::unique_ptr<OutputParser> make_output_parser(const ParserOptions& opts) {
  if (is_harmony(opts.tool_parser) || is_harmony(opts.reasoning_parser))
    return std::make_unique<parsers::HarmonyParser>(opts);
  const parsers::ToolFormat* tool = nullptr;
  const parsers::ReasoningFormat* reasoning = nullptr;
  if (!opts.tool_parser.empty() && opts.tool_parser != "none") {
    tool = find_tool_format(opts.tool_parser);
    if (!tool) {
      std::string known;
      for (auto& n : tool_parser_names()) known += (known.empty() ? "" : ", ") + n;
      throw Error("unknown tool-call parser '" + opts.tool_parser + "'; known: " + known);
    }
  }
  if (!opts.reasoning_parser.empty() && opts.reasoning_parser != "none") {
    reasoning = find_reasoning_format(opts.reasoning_parser);
    if (!reasoning) {
      std::string known;
      for (auto& n : reasoning_parser_names()) known += (known.empty() ? "" : ", ") + n;
      throw Error("unknown reasoning parser '" + opts.reasoning_parser + "'; known: " + known);
    }
  }
  return std::make_unique<parsers::StreamParser>(tool, reasoning, opts);
}

ParseResult parse_output(const ParserOptions& opts, std::string_view text) {
  auto p = make_output_parser(opts);
  ParseResult r;
  auto merge = [&](const ParseDelta& d) {
    r.content += d.content;
    r.reasoning += d.reasoning;
    for (auto& t : d.tool_calls) {
      if (t.index >= static_cast<int>(r.tool_calls.size())) r.tool_calls.resize(t.index + 1);
      auto& c = r.tool_calls[t.index];
      if (!t.id.empty()) c.id = t.id;
      if (!t.name.empty()) c.name = t.name;
      c.arguments += t.arguments;
    }
  };
  merge(p->feed(text));
  merge(p->finish());
  return r;
}

std::vector<std::string> tool_parser_names() {
  std::vector<std::string> v;
  for (auto& f : parsers::tool_formats()) v.push_back(f.name);
  v.push_back("gpt_oss");
  return v;
}

std::vector<std::string> reasoning_parser_names() {
  std::vector<std::string> v;
  for (auto& f : parsers::reasoning_formats()) v.push_back(f.name);
  v.push_back("gpt_oss");
  return v;
}

}  // namespace rapid::parsers
