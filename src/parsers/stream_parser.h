// The one streaming engine shared by all marker-delimited formats (everything but gpt-oss
// harmony): content / reasoning / call-block states, holding back only bytes that may still
// become a marker.
#pragma once
#include "parsers/json_scan.h"
#include "parsers/output_parser.h"
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
  void emit_content(std::string_view s, ParseDelta& out);
  void flush_ws(ParseDelta& out);
  void finish_call(const std::string& body, bool terminated, ParseDelta& out);
  void rebuild_markers();
  // Incremental tool-call arguments (formats with the name outside the JSON; see README).
  void args_advance(std::string_view body, bool final, ParseDelta& out);
  bool args_header(std::string_view body, bool final, ParseDelta& out);
  bool mistral_header(std::string_view body, bool final, ParseDelta& out);
  bool mistral_args(std::string_view body, bool final, ParseDelta& out);
  void args_release(std::string_view body, size_t lim, ParseDelta& out);
  void args_commit(const std::string& name, const std::string& id, size_t args_from, ParseDelta& out);
  void open_object_call(const std::string& name, size_t pos, ParseDelta& out);
  void args_close(const std::string& text, ParseDelta& out);
  void args_invalid(size_t at);
  // JSON-call bodies ({"name": .., "arguments": {..}}): see stream_parser.cpp.
  std::string_view json_view(std::string_view body, bool final);
  void json_advance(std::string_view body, bool final, ParseDelta& out);
  bool json_next(std::string_view body, bool final, ParseDelta& out);
  bool json_args(std::string_view body, bool final, ParseDelta& out);
  bool json_tail(std::string_view body, bool final, ParseDelta& out);
  size_t json_scan(std::string_view body);
  // Qwen3-Coder XML bodies (<function=name><parameter=k>v</parameter></function>).
  void xml_advance(std::string_view body, bool final, ParseDelta& out);
  bool xml_next(std::string_view body, bool final, ParseDelta& out);
  bool xml_params(std::string_view body, bool final, ParseDelta& out);
  bool xml_value(std::string_view body, bool final, ParseDelta& out);
  void args_append(std::string_view s, ParseDelta& out);
  // GLM arg_key/arg_value and invoke/parameter bodies (glm45, minimax_m2, deepseek_v32, step3).
  void tag_advance(std::string_view body, bool final, ParseDelta& out);
  bool glm_next(std::string_view body, bool final, ParseDelta& out);
  bool glm_params(std::string_view body, bool final, ParseDelta& out);
  bool inv_next(std::string_view body, bool final, ParseDelta& out);
  bool inv_params(std::string_view body, bool final, ParseDelta& out);
  bool tag_value(std::string_view body, bool final, ParseDelta& out);
  void tag_key(const std::string& key, int str_attr, size_t vbeg, ParseDelta& out);
  // Pythonic bodies ([f(a=1), g(b="x")], pythonic / llama4_pythonic / lfm2 / olmo3).
  void py_advance(std::string_view body, bool final, ParseDelta& out);
  bool py_step(std::string_view body, bool final, ParseDelta& out);
  bool py_string(std::string_view body, bool final, ParseDelta& out);
  void py_break(size_t at, ParseDelta& out);

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

  // State of the current call block for incremental arguments. Offsets are into the block body
  // (buf_ keeps the whole body until the block closes). Every decision depends only on the text
  // seen, never on how it was chunked, so streamed and whole results stay identical.
  bool stream_args_ = false;  // the format streams arguments
  struct ArgState {
    bool off = false;         // a non-call came first: the whole-block parse decides (old path)
    bool stop = false;        // a non-call after calls went out: body from stop_at on is content
    size_t stop_at = 0;
    size_t pos = 0;           // where the next call is looked for
    bool started = false;     // Mistral: the body is not the pre-v11 JSON list
    bool in_call = false;     // inside a committed call's argument text
    int index = 0;
    size_t args_from = 0;     // start of the call's argument region
    size_t begin = std::string::npos;  // first byte of the argument text; npos = not known yet
    bool streamable = false;  // the text starts with '{' or '[' (kept as written)
    size_t sent = 0;          // bytes of the argument text released
    size_t scan = 0;          // marker / bracket scan resumes here
    size_t tc_scan = 0;       // Mistral: search for the next [TOOL_CALLS] resumes here
    BracketScanner brackets;  // where the value being scanned ends
    int committed = 0;
    // JSON-call bodies.
    bool list = false;        // inside a top-level [...] of calls
    bool tail = false;        // after a call's arguments: the rest of its object
    bool tail_more = false;   // ... which has more keys (scanned to its closing brace)
    bool whole = false;       // scanning a non-streamable object to parse it whole
    size_t tail_at = 0;
    size_t gap = 0;           // end of the last call object: text after it starts here
    std::string jb;           // end-less formats: body with wrapper markers blanked (blank_markers)
    size_t jb_in = 0;         // bytes of the body already blanked into jb
    // XML bodies.
    std::string name;         // the open call's function name (schema lookups)
    bool x_value = false;     // inside a parameter value
    bool x_first = true;      // no parameter emitted yet in this call
    bool x_text = false;      // the value is a JSON string streamed as it arrives
    bool x_lead = false;      // the value's leading newline was looked at
    std::string x_key;
    int x_attr = 0;           // invoke formats: string="true" (1) / "false" (2) on the parameter
    size_t x_vbeg = 0, x_sent = 0;
    // Pythonic bodies.
    int py = 0;               // phase (stream_parser.cpp, py_step)
    bool py_bracket = false;  // the calls sit in [...]
    char py_q = 0;            // string value: its quote; value scan: the open string's quote
    bool py_triple = false;
    std::string py_dec;       // decoded string text not yet released (incomplete UTF-8)
  } as_;

  // Marker tables for the two text states.
  std::vector<std::string> content_markers_, reasoning_markers_;
  std::vector<Act> content_acts_, reasoning_acts_;
};

}  // namespace rapid::parsers
