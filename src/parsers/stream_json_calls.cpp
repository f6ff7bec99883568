// Streamed JSON-call bodies (hermes and every other Body::JsonCalls format). The name sits inside
// the JSON, so a call goes out once the text has shown {"name": "NAME", "arguments": {  (or
// "parameters" / "args"); its arguments are then the model's object as written, up to the brace
// that balances it (RawArgs). The call object's own closing brace is never part of them. Other
// shapes (key order, "function" wrapper) keep whole delivery: the first one in a block sends the
// block down the whole-block parse; after a streamed call, each such object is parsed whole on
// its own. Separators, a ```json fence line and one level of [...] are layout, as json_calls
// (body_parsers.cpp) reads them.
#include "parsers/json_scan.h"
#include "parsers/stream_body.h"

namespace rapid::parsers {

namespace {

// Matches the head of a JSON call object at s[p] == '{' up to its arguments object:
// {"name": "NAME", "arguments"|"parameters"|"args": {
// 1 = matched (name, args_at = the arguments' '{'), 0 = the text so far fits but is incomplete,
// -1 = another shape (key order, "function" wrapper, escaped name...): not streamed.
int json_call_head(std::string_view s, size_t p, std::string& name, size_t& args_at) {
  size_t i = p + 1;
  auto ws = [&] {
    while (i < s.size() && is_ws(s[i])) ++i;
    return i < s.size();
  };
  auto lit = [&](std::string_view l) {
    size_t n = std::min(l.size(), s.size() - i);
    if (s.substr(i, n) != l.substr(0, n)) return -1;
    if (n < l.size()) return 0;
    i += n;
    return 1;
  };
  int r;
  if (!ws()) return 0;
  if ((r = lit("\"name\"")) <= 0) return r;
  if (!ws()) return 0;
  if ((r = lit(":")) <= 0) return r;
  if (!ws()) return 0;
  if ((r = lit("\"")) <= 0) return r;
  size_t ns = i;
  for (; i < s.size() && s[i] != '"'; ++i)
    if (s[i] == '\\' || static_cast<unsigned char>(s[i]) < 0x20 || i - ns > 256) return -1;
  if (i >= s.size()) return 0;
  if (i == ns) return -1;
  name.assign(s.substr(ns, i - ns));
  ++i;
  if (!ws()) return 0;
  if ((r = lit(",")) <= 0) return r;
  if (!ws()) return 0;
  size_t k = i;
  for (std::string_view key : {"\"arguments\"", "\"parameters\"", "\"args\""}) {
    i = k;
    if ((r = lit(key)) >= 0) break;
  }
  if (r <= 0) return r;
  if (!ws()) return 0;
  if ((r = lit(":")) <= 0) return r;
  if (!ws()) return 0;
  if (s[i] != '{') return -1;
  args_at = i;
  return 1;
}

class JsonCallsStream : public BodyStream {
 public:
  JsonCallsStream(const ToolFormat& f, const nlohmann::json& tools) : f_(f), tools_(tools), blank_(f.starts, f.strip) {}

  void advance(std::string_view body, bool final, CallSink& sink) override {
    // Formats without an end marker read the block with their wrapper markers blanked (as
    // parse_body does), here incrementally.
    if (f_.end.empty()) body = blank_.feed(body, final);
    while (!sink.done()) {
      bool progressed = in_call_ ? args(body, final, sink) : tail_ ? tail(body, final, sink) : next(body, final, sink);
      if (!progressed) return;
    }
  }

  std::string_view read_text(std::string_view body) const override {
    return f_.end.empty() ? std::string_view(blank_.text()) : body;
  }

 private:
  bool next(std::string_view body, bool final, CallSink& sink);
  bool skip_layout(std::string_view body, bool final);
  bool whole_call(std::string_view body, bool final, CallSink& sink);
  bool args(std::string_view body, bool final, CallSink& sink);
  bool tail(std::string_view body, bool final, CallSink& sink);
  // Restarts the bracket scan at `at` (`depth` brackets already open there).
  void scan_from(size_t at, int depth) {
    scan_ = at;
    brackets_ = BracketScanner(false, depth);
  }

  const ToolFormat& f_;
  const nlohmann::json& tools_;
  MarkerBlanker blank_;
  size_t pos_ = 0;         // where the next call object is looked for
  bool in_call_ = false;   // inside a streamed call's arguments
  bool list_ = false;      // inside a top-level [...] of calls
  bool tail_ = false;      // after a call's arguments: the rest of its object
  bool tail_more_ = false; // ... which has more keys (scanned to its closing brace)
  bool whole_ = false;     // scanning a non-streamable object to parse it whole
  size_t tail_at_ = 0;
  size_t gap_ = 0;         // end of the last call object: text after it starts here
  size_t scan_ = 0;        // the bracket scan resumes here
  BracketScanner brackets_;
  RawArgs args_;
};

// Separators, a ```json fence line and one level of [...] before the next object. False = wait.
bool JsonCallsStream::skip_layout(std::string_view body, bool final) {
  size_t p = pos_;
  for (;;) {
    while (p < body.size() && (is_ws(body[p]) || body[p] == ',' || body[p] == ';')) ++p;
    pos_ = p;
    if (p >= body.size()) return false;
    if (body[p] == '`') {
      if (body.size() - p < 3 && !final) return false;
      if (body.compare(p, 3, "```") != 0) return true;
      size_t nl = body.find('\n', p);
      if (nl == npos && !final) return false;
      p = nl == npos ? body.size() : nl + 1;
      continue;
    }
    if (body[p] == '[' && !list_) {
      list_ = true;
      ++p;
      continue;
    }
    if (body[p] == ']' && list_) {
      list_ = false;
      gap_ = ++p;  // the list's bracket is markup
      continue;
    }
    return true;
  }
}

// Looks for the next call object.
bool JsonCallsStream::next(std::string_view body, bool final, CallSink& sink) {
  if (whole_) return whole_call(body, final, sink);
  if (!skip_layout(body, final)) return false;
  const size_t p = pos_;
  if (body[p] == '{') {
    std::string name;
    size_t args_at = 0;
    int m = json_call_head(body, p, name, args_at);
    if (m == 0 && !final) return false;
    if (m == 1) {
      sink.open(name);
      in_call_ = true;
      args_.start(args_at);
      args_.begin = args_at;
      args_.streamable = true;
      scan_from(args_at, 0);
      return true;
    }
  }
  // Not the streamable shape: before any call went out the whole-block parse decides. After
  // one, text that is no call comes back as content from the end of that call on (separators
  // included, as json_calls hands back its trailing text).
  if (sink.committed() == 0 || (body[p] != '{' && body[p] != '[')) {
    sink.invalid(sink.committed() ? gap_ : p);
    return false;
  }
  whole_ = true;
  scan_from(p, 0);
  return whole_call(body, final, sink);
}

// An object (or list) of another shape after a streamed call: parsed whole once it balances.
bool JsonCallsStream::whole_call(std::string_view body, bool final, CallSink& sink) {
  const size_t p = pos_;
  size_t end = brackets_.to_value_end(body, scan_);
  if (end == npos) {
    if (final) sink.invalid(p);
    return false;
  }
  whole_ = false;
  auto calls = parse_body(f_, std::string(body.substr(p, end - p)), tools_);
  if (!calls) {
    sink.invalid(p);
    return false;
  }
  for (auto& c : *calls) sink.whole(c);
  pos_ = gap_ = end;
  return true;
}

bool JsonCallsStream::args(std::string_view body, bool final, CallSink& sink) {
  size_t end = brackets_.to_value_end(body, scan_);
  if (end != npos) {
    args_.close(std::string(body.substr(args_.begin, end - args_.begin)), sink);
    in_call_ = false;
    tail_ = true;
    pos_ = end;
    return true;
  }
  if (final) {  // never balanced: the raw text stands (the call already went out)
    args_.close(args_after_name(body.substr(args_.begin)), sink);
    in_call_ = false;
    pos_ = gap_ = body.size();
    return true;
  }
  args_.release(body, body.size(), sink);
  return false;
}

// After the arguments: the call object's closing brace, or more keys up to it.
bool JsonCallsStream::tail(std::string_view body, bool final, CallSink& sink) {
  if (!tail_more_) {
    size_t p = pos_;
    while (p < body.size() && is_ws(body[p])) ++p;
    pos_ = p;
    if (p >= body.size()) {
      if (final) {
        tail_ = false;
        gap_ = p;
      }
      return final;
    }
    if (body[p] == '}') {
      tail_ = false;
      pos_ = gap_ = p + 1;
      return true;
    }
    if (body[p] != ',') {
      tail_ = false;
      sink.invalid(p);
      return false;
    }
    tail_more_ = true;
    tail_at_ = p;
    scan_from(p, 1);
  }
  size_t end = brackets_.to_value_end(body, scan_);
  if (end == npos) {
    if (final) {
      tail_ = tail_more_ = false;
      sink.invalid(tail_at_);
    }
    return false;
  }
  tail_ = tail_more_ = false;
  pos_ = gap_ = end;
  return true;
}

}  // namespace

std::unique_ptr<BodyStream> json_calls_stream(const ToolFormat& f, const nlohmann::json& tools) {
  return std::make_unique<JsonCallsStream>(f, tools);
}

}  // namespace rapid::parsers
