// The one streaming engine shared by all marker-delimited formats (everything but gpt-oss
// harmony): content / reasoning / call-block states, holding back only bytes that may still
// become a marker. While a call block is open its body goes to the format's body parser
// (stream_body.h), which sends calls as soon as they are certain; a block no body parser
// claimed is read whole when it closes (parse_body).
#pragma once
#include <memory>

#include "parsers/output_parser.h"
#include "parsers/stream_body.h"
#include "parsers/tool_format.h"
#include "parsers/tool_ids.h"

namespace rapid::parsers {

class StreamParser : public OutputParser {
 public:
  StreamParser(const ToolFormat* tool, const ReasoningFormat* reasoning, const ParserOptions& opts);
  ParseDelta feed(std::string_view text) override;
  ParseDelta finish() override;

 private:
  enum class State { Content, Reasoning, Call };
  enum class Act { Reason, EndReason, Call, Strip };

  void run(bool final, ParseDelta& out);
  bool step_text(bool final, ParseDelta& out);
  bool step_call(bool final, ParseDelta& out);
  void open_block(const std::string& start);
  void finish_call(const std::string& body, bool terminated, ParseDelta& out);
  void emit_content(std::string_view s, ParseDelta& out);
  void flush_ws(ParseDelta& out);
  void rebuild_markers();

  const ToolFormat* tool_;
  const ReasoningFormat* reasoning_;
  nlohmann::json tools_;
  ToolIdMaker ids_;

  State state_ = State::Content;
  std::string buf_;              // unconsumed input
  size_t scanned_ = 0;           // Call state: bytes of buf_ already searched for the end marker
  std::string block_start_;      // marker text that opened the current call block
  bool implicit_start_ = false;  // current block was opened by the prompt, not the model
  std::string pending_ws_;       // trailing whitespace not yet known to be content
  bool content_emitted_ = false;
  bool after_call_ = false;      // nothing but whitespace since the last call
  int calls_ = 0;

  // The open call block's body parser (null when the format has none, or the block has not
  // reached it yet) and what it sent. buf_ keeps the whole body until the block closes.
  std::unique_ptr<BodyStream> body_;
  CallSink sink_;

  // Marker tables for the two text states.
  std::vector<std::string> content_markers_, reasoning_markers_;
  std::vector<Act> content_acts_, reasoning_acts_;
};

}  // namespace rapid::parsers
