// Streamed pythonic bodies ([f(a=1), g(b="x")]: pythonic, llama4_pythonic, lfm2; olmo3 lines).
// The call goes out at `NAME(`; its arguments are an ObjectArgs object in the model's keyword
// order. A string value streams JSON-escaped as it is decoded (its `"K":"` goes out at the
// opening quote); any other value (number, True/False/None, list, dict, tuple) is converted from
// its whole text when the `,` or `)` after it arrives; `}` at `)`. Held back: an incomplete
// escape, a possible closing triple quote, an incomplete UTF-8 sequence. Before any call, text
// that is not NAME( (after an optional `[`) means the whole-block rule; after one, a piece that
// does not parse ends the open call (`}`) and the block from there on is content.
#include <cctype>
#include <cstdlib>

#include "common/utf8.h"
#include "parsers/json_scan.h"
#include "parsers/stream_body.h"
#include "parsers/value_parsers.h"

namespace rapid::parsers {

namespace {

bool py_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }
bool py_key_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class PythonicStream : public BodyStream {
 public:
  void advance(std::string_view body, bool final, CallSink& sink) override {
    while (!sink.done() && phase_ != Phase::Done) {
      if (!step(body, final, sink)) return;
    }
  }

 private:
  enum class Phase { Start, Call, Key, Value, AfterCall, AfterList, String, Scalar, AfterValue, Done };
  bool step(std::string_view body, bool final, CallSink& sink);
  bool at_end(CallSink& sink);
  bool call(std::string_view body, size_t q, bool final, CallSink& sink);
  bool keyword(std::string_view body, size_t q, bool final, CallSink& sink);
  bool value(std::string_view body, size_t q, bool final, CallSink& sink);
  bool scalar(std::string_view body, bool final, CallSink& sink);
  bool string(std::string_view body, bool final, CallSink& sink);
  bool close_call(size_t at, CallSink& sink) {
    obj_.end(sink);
    pos_ = at;
    phase_ = Phase::AfterCall;
    return true;
  }
  bool fail(size_t at, CallSink& sink);

  Phase phase_ = Phase::Start;
  ObjectArgs obj_;
  size_t pos_ = 0;          // where the next piece starts
  bool bracket_ = false;    // the calls sit in [...]
  std::string key_;
  size_t key_at_ = 0;       // the keyword's start: where a value that does not parse sends content
  size_t vbeg_ = 0;         // a scalar value's first byte
  size_t scan_ = 0;         // the scalar's extent scan resumes here
  BracketScanner brackets_{true};
  char quote_ = 0;          // a string value's quote
  bool triple_ = false;
  size_t sent_ = 0;         // string value: bytes of the body decoded
  std::string dec_;         // decoded string text not yet released (incomplete UTF-8)
};

// A piece that does not parse: the open call ends; the block from `at` on is content (or, before
// any call, the whole-block parse decides).
bool PythonicStream::fail(size_t at, CallSink& sink) {
  if (obj_.open) obj_.end(sink);
  phase_ = Phase::Done;
  sink.invalid(at);
  return false;
}

// The block ended before the next piece: an open call closes with it (its value cut short is dropped).
bool PythonicStream::at_end(CallSink& sink) {
  if (obj_.open) {
    if (phase_ == Phase::Value) return fail(key_at_, sink);
    obj_.end(sink);
  }
  phase_ = Phase::Done;
  return false;
}

bool PythonicStream::step(std::string_view body, bool final, CallSink& sink) {
  if (phase_ == Phase::String) return string(body, final, sink);
  if (phase_ == Phase::Scalar) return scalar(body, final, sink);
  size_t q = pos_;
  while (q < body.size() && is_ws(body[q])) ++q;
  if (q >= body.size()) return final && at_end(sink);
  switch (phase_) {
    case Phase::Start:
      bracket_ = body[q] == '[';
      pos_ = bracket_ ? q + 1 : q;
      phase_ = Phase::Call;
      return true;
    case Phase::Call: return call(body, q, final, sink);
    case Phase::Key:
      if (body[q] == ')') return close_call(q + 1, sink);
      return keyword(body, q, final, sink);
    case Phase::Value: return value(body, q, final, sink);
    case Phase::AfterValue:
      if (body[q] == ',') {
        pos_ = q + 1;
        phase_ = Phase::Key;
        return true;
      }
      if (body[q] == ')') return close_call(q + 1, sink);
      return fail(q, sink);
    case Phase::AfterCall:
      pos_ = body[q] == ',' ? q + 1 : q;
      phase_ = Phase::Call;
      return true;
    case Phase::AfterList: return fail(q, sink);  // text after the list is content
    default: return false;
  }
}

// NAME( opens a call; `]` closes the list.
bool PythonicStream::call(std::string_view body, size_t q, bool final, CallSink& sink) {
  if (bracket_ && body[q] == ']') {
    if (sink.committed() == 0) return fail(q, sink);
    pos_ = q + 1;
    phase_ = Phase::AfterList;
    return true;
  }
  size_t i = q;
  while (i < body.size() && py_ident(body[i])) ++i;
  if (i >= body.size() && !final) return false;
  if (i == q || i >= body.size() || body[i] != '(') return fail(q, sink);
  obj_.start(std::string(body.substr(q, i - q)), sink);
  pos_ = i + 1;
  phase_ = Phase::Key;
  return true;
}

// KEY =
bool PythonicStream::keyword(std::string_view body, size_t q, bool final, CallSink& sink) {
  size_t i = q;
  while (i < body.size() && py_key_char(body[i])) ++i;
  size_t e = i;
  while (e < body.size() && is_ws(body[e])) ++e;
  if (e >= body.size() && !final) return false;
  if (i == q || e >= body.size() || body[e] != '=') return fail(q, sink);
  key_.assign(body.substr(q, i - q));
  key_at_ = q;
  pos_ = e + 1;
  phase_ = Phase::Value;
  return true;
}

// A value starts: a string streams, anything else is scanned to its end.
bool PythonicStream::value(std::string_view body, size_t q, bool final, CallSink& sink) {
  char c = body[q];
  if (c == '"' || c == '\'') {
    size_t k = 1;
    while (k < 3 && q + k < body.size() && body[q + k] == c) ++k;
    if (k < 3 && q + k >= body.size() && !final) return false;  // "" may still become """
    quote_ = c;
    triple_ = k == 3;
    dec_.clear();
    sent_ = q + (triple_ ? 3 : 1);
    obj_.key(key_, true, sink);
    phase_ = Phase::String;
    return true;
  }
  vbeg_ = scan_ = pos_ = q;
  brackets_ = BracketScanner(true);
  phase_ = Phase::Scalar;
  return true;
}

// A non-string value: it ends at a ',' or ')' outside brackets and strings; converted whole.
bool PythonicStream::scalar(std::string_view body, bool final, CallSink& sink) {
  size_t end = brackets_.to_delimiter(body, scan_);
  if (end == npos) {
    if (!final) return false;
    end = body.size();
  }
  std::string_view v = body.substr(vbeg_, end - vbeg_);
  while (!v.empty() && is_ws(v.back())) v.remove_suffix(1);
  // Nested deeper than any recursive reader may go: does not parse.
  size_t p = 0;
  auto lit = nesting_ok(v) ? parse_python_literal(v, p) : std::nullopt;
  if (!lit || p != v.size()) return fail(key_at_, sink);
  obj_.key(key_, false, sink);
  sink.append(dump_json(*lit));
  pos_ = end;
  phase_ = Phase::AfterValue;
  return true;
}

// A string value: decoded as Python reads it, released JSON-escaped up to an incomplete escape,
// a possible closing triple quote or an incomplete UTF-8 sequence.
bool PythonicStream::string(std::string_view body, bool final, CallSink& sink) {
  size_t p = sent_;
  bool closed = false;
  while (p < body.size()) {
    char c = body[p];
    if (c == quote_) {
      if (!triple_) {
        closed = true;
        ++p;
        break;
      }
      size_t k = 1;
      while (k < 3 && p + k < body.size() && body[p + k] == quote_) ++k;
      if (k == 3) {
        closed = true;
        p += 3;
        break;
      }
      if (p + k >= body.size() && !final) break;
      dec_ += c;
      ++p;
      continue;
    }
    if (c == '\\') {
      if (p + 1 >= body.size()) {
        if (!final) break;
        dec_ += c;
        ++p;
        continue;
      }
      char e = body[p + 1];
      if (e == 'u' || e == 'x') {
        size_t n = e == 'u' ? 4 : 2;
        if (p + 2 + n > body.size()) {
          if (!final) break;
          p = body.size();  // cut short by the block end
          break;
        }
        append_utf8(dec_, std::strtoul(std::string(body.substr(p + 2, n)).c_str(), nullptr, 16));
        p += 2 + n;
        continue;
      }
      switch (e) {
        case 'n': dec_ += '\n'; break;
        case 't': dec_ += '\t'; break;
        case 'r': dec_ += '\r'; break;
        case '0': dec_ += '\0'; break;
        default: dec_ += e;  // \\ \' \" and unknown escapes keep the character
      }
      p += 2;
      continue;
    }
    dec_ += c;
    ++p;
  }
  sent_ = p;
  const bool done = closed || final;
  size_t r = done ? dec_.size() : utf8_cut(dec_, 0, dec_.size());
  if (r > 0) {
    sink.append(json_escape(std::string_view(dec_).substr(0, r)));
    dec_.erase(0, r);
  }
  if (!done) return false;
  sink.append("\"");
  pos_ = p;
  phase_ = Phase::AfterValue;
  return true;  // cut short by the block end: AfterValue closes the call
}

}  // namespace

std::unique_ptr<BodyStream> pythonic_stream() { return std::make_unique<PythonicStream>(); }

}  // namespace rapid::parsers
