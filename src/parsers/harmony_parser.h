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
  void open_call(ParseDelta& out);
  void close_message(ParseDelta& out);
  void call_release(ParseDelta& out);

  ToolIdMaker ids_;
  State state_ = State::Start;
  std::string buf_;
  std::string header_;
  Sink sink_ = Sink::Content;
  std::string recipient_;
  std::string call_body_;
  int calls_ = 0;
  // The open call (sink Call): it went out at <|message|>; its arguments stream as written.
  size_t args_begin_ = std::string::npos;  // first non-space byte of call_body_; npos = not seen
  bool args_stream_ = false;               // the arguments start with '{' or '['
  size_t args_sent_ = 0;                   // bytes of call_body_ from args_begin_ released
};

}  // namespace rapid::parsers
