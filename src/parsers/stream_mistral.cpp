// Streamed Mistral bodies after [TOOL_CALLS]: v11+ `NAME[ARGS]{..}` or `NAME[CALL_ID]id[ARGS]{..}`,
// several, optionally each after a further [TOOL_CALLS]. The call goes out at [ARGS]; its
// arguments follow as written when they start with '{' or '[' (RawArgs) up to the bracket that
// balances them; otherwise (or unbalanced) the raw text up to the next [TOOL_CALLS] is the
// arguments, released whole. A pre-v11 `[{...}]` list keeps whole-call delivery (parse_body).
#include "parsers/json_scan.h"
#include "parsers/stream_body.h"

namespace rapid::parsers {

namespace {

const std::string kToolCalls = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

class MistralStream : public BodyStream {
 public:
  void advance(std::string_view body, bool final, CallSink& sink) override {
    while (!sink.done()) {
      if (!(in_call_ ? args(body, final, sink) : header(body, final, sink))) return;
    }
  }

 private:
  bool header(std::string_view body, bool final, CallSink& sink);
  bool args(std::string_view body, bool final, CallSink& sink);
  void close(const std::string& text, size_t next, CallSink& sink) {
    args_.close(text, sink);
    in_call_ = false;
    pos_ = scan_ = next;
  }

  bool started_ = false;  // the body is not the pre-v11 JSON list
  size_t pos_ = 0;        // where the next call is looked for
  size_t scan_ = 0;       // the [ARGS] / bracket scan resumes here
  size_t tc_scan_ = 0;    // the search for the next [TOOL_CALLS] resumes here
  bool in_call_ = false;
  RawArgs args_;
  BracketScanner brackets_;
};

// [TOOL_CALLS]* NAME [CALL_ID]id? [ARGS]
bool MistralStream::header(std::string_view body, bool final, CallSink& sink) {
  if (!started_) {
    size_t q = 0;
    while (q < body.size() && is_ws(body[q])) ++q;
    if (q >= body.size()) return false;
    started_ = true;
    if (body[q] == '[' || body[q] == '{') {
      sink.invalid(0);  // pre-v11 JSON list (or markup): whole-block parse
      return false;
    }
    pos_ = scan_ = q;
  }
  size_t p = pos_;
  for (;;) {
    while (p < body.size() && is_ws(body[p])) ++p;
    if (body.compare(p, kToolCalls.size(), kToolCalls) != 0 || p + kToolCalls.size() > body.size()) break;
    p += kToolCalls.size();
  }
  if (p >= body.size()) return false;
  size_t a = body.find(kArgs, resume_at(scan_, kArgs.size(), p));
  if (a == npos) {
    scan_ = std::max(scan_, body.size());
    if (final) sink.invalid(pos_);
    return false;
  }
  std::string_view head = body.substr(p, a - p);
  size_t c = head.find(kCallId);
  std::string name = trim(c == npos ? head : head.substr(0, c));
  if (name.empty() || name.find_first_of("{}[]\" \n") != npos) {
    sink.invalid(pos_);
    return false;
  }
  sink.open(name);
  in_call_ = true;
  args_.start(a + kArgs.size());
  scan_ = args_.from;
  tc_scan_ = 0;
  brackets_ = BracketScanner();
  return true;
}

bool MistralStream::args(std::string_view body, bool final, CallSink& sink) {
  if (args_.begin == npos) {
    size_t q = args_.from;
    while (q < body.size() && is_ws(body[q])) ++q;
    if (q >= body.size()) {
      if (final) close("", body.size(), sink);
      return final;
    }
    args_.begin = q;
    args_.streamable = body[q] == '{' || body[q] == '[';
    scan_ = q;
  }
  const size_t b = args_.begin;
  if (args_.streamable) {
    size_t end = brackets_.to_value_end(body, scan_);
    if (end != npos) {
      close(args_after_name(body.substr(b, end - b)), end, sink);
      return true;
    }
  }
  // Not (yet) balanced JSON: the raw text up to the next [TOOL_CALLS] is the arguments.
  size_t next = body.find(kToolCalls, resume_at(tc_scan_, kToolCalls.size(), b));
  if (next == npos) tc_scan_ = body.size();
  if (final || (!args_.streamable && next != npos)) {
    close(trim(body.substr(b, next == npos ? npos : next - b)), next == npos ? body.size() : next, sink);
    return true;
  }
  if (!args_.streamable) return false;
  args_.release(body, next != npos ? next : body.size() - tail_prefix(body, b, kToolCalls), sink);
  return false;
}

}  // namespace

std::unique_ptr<BodyStream> mistral_stream() { return std::make_unique<MistralStream>(); }

}  // namespace rapid::parsers
