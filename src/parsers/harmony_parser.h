// gpt-oss "harmony" output: messages with a header (channel, recipient) and a body.
// analysis -> reasoning, final (and commentary without recipient) -> content,
// a recipient "to=functions.NAME" -> a tool call whose body is the JSON arguments.
#pragma once
#include "parsers/output_parser.h"
#include "parsers/tool_ids.h"

namespace rapid::parsers {

class HarmonyParser : public OutputParser {
 public:
  explicit HarmonyParser(const ParserOptions& opts);
  ParseDelta feed(std::string_view text) override;
  ParseDelta finish() override;

 private:
  enum class State { Start, Text, Header, Message };
  enum class Sink { Content, Reasoning, Call };
  void run(bool final, ParseDelta& out);
  bool step(bool final, ParseDelta& out);
  void open_message();
  void close_message(ParseDelta& out);

  ToolIdMaker ids_;
  State state_ = State::Start;
  std::string buf_;
  std::string header_;
  Sink sink_ = Sink::Content;
  std::string recipient_;
  std::string call_body_;
  int calls_ = 0;
};

}  // namespace rapid::parsers
