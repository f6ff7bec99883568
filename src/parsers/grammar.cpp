// GBNF-style description of each format's call syntax for constrained decoding
// (tool_choice "required" / a named function). Argument bodies stay open as rules
// `args-<tool>`, to be generated from each tool's parameters schema by the caller.
#include <cctype>

#include "common/error.h"
#include "parsers/output_parser.h"
#include "parsers/tool_format.h"

namespace rapid::parsers {

namespace {

std::string gbnf_literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

std::string rule_name(const std::string& tool) {
  std::string r;
  for (char c : tool) r += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  return r;
}

// Expands a call template: literal pieces quoted, {NAME} the tool name, {ARGS} the open rule.
// Pieces written as "[0-9]+" stay character classes (Kimi / Command R7B call indices).
std::string expand(const std::string& tmpl, const std::string& tool, const std::string& args_rule) {
  std::string out, lit;
  auto add = [&](const std::string& item) {
    if (!out.empty()) out += ' ';
    out += item;
  };
  auto flush = [&] {
    if (!lit.empty()) add(gbnf_literal(lit));
    lit.clear();
  };
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 6, "{NAME}") == 0) { lit += tool; i += 6; }
    else if (tmpl.compare(i, 6, "{ARGS}") == 0) { flush(); add(args_rule); i += 6; }
    else if (tmpl.compare(i, 6, "[0-9]+") == 0) { flush(); add("[0-9]+"); i += 6; }
    else lit += tmpl[i++];
  }
  flush();
  return out;
}

}  // namespace

ToolCallGrammar tool_call_grammar(const std::string& parser, const nlohmann::json& tools,
                                  const std::string& only_tool) {
  std::vector<std::string> names;
  if (tools.is_array())
    for (auto& t : tools) {
      const auto& fn = t.contains("function") ? t["function"] : t;
      if (fn.is_object() && fn.contains("name") && fn["name"].is_string()) {
        std::string n = fn["name"].get<std::string>();
        if (only_tool.empty() || n == only_tool) names.push_back(n);
      }
    }
  if (names.empty())
    throw Error(only_tool.empty() ? "tool_call_grammar: no tools offered" : "tool_call_grammar: no tool named '" + only_tool + "'");

  ToolCallGrammar g;
  std::string prefix, call, sep, suffix;
  if (parsers::is_harmony(parser)) {
    call = "<|channel|>commentary to=functions.{NAME} <|constrain|>json<|message|>{ARGS}<|call|>";
    g.args_encoding = "json";
  } else {
    const parsers::ToolFormat* f = parsers::find_tool_format(parser);
    if (!f) throw Error("unknown tool-call parser '" + parser + "'");
    prefix = f->grammar.prefix;
    call = f->grammar.call;
    sep = f->grammar.sep;
    suffix = f->grammar.suffix;
    g.args_encoding = f->grammar.args;
    g.param_syntax = f->grammar.param;
  }
  std::string root = "root ::= ";
  if (!prefix.empty()) root += gbnf_literal(prefix) + " ";
  root += "call";
  // Harmony ends the turn at <|call|>, so it emits one call per turn.
  if (!parsers::is_harmony(parser)) root += " ( " + (sep.empty() ? std::string() : gbnf_literal(sep) + " ") + "call )*";
  if (!suffix.empty()) root += " " + gbnf_literal(suffix);
  std::string rules = root + "\ncall ::= ";
  for (size_t i = 0; i < names.size(); ++i) rules += (i ? " | " : "") + std::string("call-") + rule_name(names[i]);
  rules += "\n";
  for (auto& n : names) {
    std::string args = "args-" + rule_name(n);
    g.arg_rules.push_back(args);
    g.tool_names.push_back(n);
    rules += "call-" + rule_name(n) + " ::= " + expand(call, n, args) + "\n";
  }
  g.gbnf = rules;
  return g;
}

}  // namespace rapid::parsers
