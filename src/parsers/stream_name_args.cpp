// Streamed bodies with the name before the arguments: NameSepJson (Kimi K2, DeepSeek V3.1,
// Functionary v3.1 / v3.2: NAME SEP {args}) and DeepseekV3 (function SEP NAME\n```json\n{args}\n```).
// A call goes out as soon as its name is certain (its separator, or for DeepSeek V3 the end of
// the name line, has arrived); argument text that starts with '{' or '[' then follows as
// written (RawArgs), other values whole when the call closes. Section formats (DeepSeek, Kimi)
// hold several calls, each between inner_start and inner_end; text between them is ignored, as
// parse_body does. Other formats have one call per block.
#include "parsers/stream_body.h"

namespace rapid::parsers {

namespace {

class NameArgsStream : public BodyStream {
 public:
  explicit NameArgsStream(const ToolFormat& f) : f_(f), sections_(!f.inner_start.empty()) {}

  void advance(std::string_view body, bool final, CallSink& sink) override {
    while (!sink.done()) {
      if (!in_call_) {
        if (!header(body, final, sink)) return;
        continue;
      }
      if (!args(body, final, sink)) return;
    }
  }

 private:
  bool header(std::string_view body, bool final, CallSink& sink);
  int read_name(std::string_view piece, size_t ps, size_t sep, bool piece_done, std::string& name,
                std::string& id, size_t& args_from);
  bool args(std::string_view body, bool final, CallSink& sink);

  const ToolFormat& f_;
  const bool sections_;
  size_t pos_ = 0;        // where the next call is looked for
  size_t scan_ = 0;       // the search for the call's end resumes here
  bool in_call_ = false;
  RawArgs args_;
};

// Finds the next call's name. False = wait for more text (or nothing left).
bool NameArgsStream::header(std::string_view body, bool final, CallSink& sink) {
  size_t open = pos_, ps = pos_;
  if (sections_) {
    open = body.find(f_.inner_start, pos_);
    if (open == npos) return false;  // text between calls is ignored, as parse_body does
    ps = open + f_.inner_start.size();
  } else if (sink.committed() > 0) {
    return false;  // one call per block
  }
  size_t pend = npos;
  if (sections_) pend = std::min(body.find(f_.inner_end, ps), body.find(f_.inner_start, ps));
  const bool piece_done = pend != npos || final;
  std::string_view piece = body.substr(0, pend == npos ? body.size() : pend);
  size_t sep = piece.find(f_.sep, ps);
  if (sep == npos) {
    if (piece_done) sink.invalid(open);
    return false;
  }
  std::string name, id;
  size_t args_from = 0;
  int r = read_name(piece, ps, sep, piece_done, name, id, args_from);
  if (r <= 0) {
    if (r < 0) sink.invalid(open);
    return false;
  }
  sink.open(name, id);
  in_call_ = true;
  args_.start(args_from);
  scan_ = args_from;
  return true;
}

// The name of the call in `piece` (a section's call, or the block): 1 = read, 0 = wait for the
// rest of the name line, -1 = no valid name.
int NameArgsStream::read_name(std::string_view piece, size_t ps, size_t sep, bool piece_done,
                              std::string& name, std::string& id, size_t& args_from) {
  if (f_.body == Body::DeepseekV3) {
    size_t rs = sep + f_.sep.size();
    size_t nl = piece.find('\n', rs);
    if (nl == npos && !piece_done) return 0;
    name = trim(piece.substr(rs, (nl == npos ? piece.size() : nl) - rs));
    args_from = nl == npos ? piece.size() : nl + 1;
    return name.empty() ? -1 : 1;
  }
  args_from = sep + f_.sep.size();
  std::string raw = trim(piece.substr(ps, sep - ps));
  if (raw.empty() || raw.find_first_of("{}\n\"") != npos) return -1;
  name = raw;
  if (f_.ids == IdStyle::Kimi) {
    id = raw;
    name = kimi_name(raw);
  }
  return 1;
}

// The open call's arguments: up to the section's end (or the block's).
bool NameArgsStream::args(std::string_view body, bool final, CallSink& sink) {
  size_t pend = npos;
  bool at_end_marker = false;
  if (sections_) {
    size_t from = resume_at(scan_, std::max(f_.inner_end.size(), f_.inner_start.size()), args_.from);
    size_t e = body.find(f_.inner_end, from), n = body.find(f_.inner_start, from);
    pend = std::min(e, n);
    at_end_marker = pend != npos && pend == e;
    scan_ = std::max(scan_, body.size());
  }
  if (pend != npos || final) {
    size_t re = pend == npos ? body.size() : pend;
    args_.close(args_after_name(body.substr(args_.from, re - args_.from)), sink);
    in_call_ = false;
    pos_ = pend == npos ? body.size() : (at_end_marker ? pend + f_.inner_end.size() : pend);
    return true;
  }
  size_t lim = body.size();
  if (sections_)
    lim -= std::max(tail_prefix(body, args_.from, f_.inner_end), tail_prefix(body, args_.from, f_.inner_start));
  args_.release(body, lim, sink);
  return false;
}

}  // namespace

std::unique_ptr<BodyStream> name_args_stream(const ToolFormat& f) { return std::make_unique<NameArgsStream>(f); }

}  // namespace rapid::parsers
