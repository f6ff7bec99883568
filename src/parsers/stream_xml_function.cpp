// Streamed XML function bodies (qwen3_coder, seed_oss: <function=NAME><parameter=K>V</parameter>
// ...</function>). The call goes out at <function=NAME>; its arguments are a JSON object built in
// the model's parameter order (ObjectArgs). A value the schema types as text (type "string", or
// untyped under AlwaysString) streams JSON-escaped as it arrives; any other value is typed from
// the whole value and sent when it ends. Value text: one newline after the tag and one before
// </parameter> (or the next <parameter=) are layout; a value cut short by </function> or the
// block end also loses its trailing whitespace. Held back: a possible </parameter>, <parameter=
// or </function> prefix, trailing whitespace, an incomplete UTF-8 sequence.
#include "parsers/stream_body.h"
#include "parsers/value_parsers.h"

namespace rapid::parsers {

namespace {

const std::string kFnOpen = "<function=", kFnClose = "</function>", kParOpen = "<parameter=",
                  kParClose = "</parameter>";

class XmlFunctionStream : public BodyStream {
 public:
  XmlFunctionStream(const ToolFormat& f, const nlohmann::json& tools) : f_(f), tools_(tools) {}

  void advance(std::string_view body, bool final, CallSink& sink) override {
    while (!sink.done()) {
      bool progressed = !obj_.open ? next(body, final, sink)
                        : in_value_ ? value(body, final, sink)
                                    : params(body, final, sink);
      if (!progressed) return;
    }
  }

 private:
  bool next(std::string_view body, bool final, CallSink& sink);
  bool params(std::string_view body, bool final, CallSink& sink);
  bool value(std::string_view body, bool final, CallSink& sink);
  void end_value(std::string_view body, size_t stop, size_t fe, CallSink& sink);

  const ToolFormat& f_;
  const nlohmann::json& tools_;
  ObjectArgs obj_;
  size_t pos_ = 0;          // where the next function / parameter is looked for
  size_t scan_ = 0;         // marker searches resume here
  bool in_value_ = false;   // inside a parameter value
  bool text_ = false;       // the value is a JSON string streamed as it arrives
  bool lead_ = false;       // the value's leading newline was looked at
  std::string key_;
  size_t vbeg_ = 0, sent_ = 0;  // the value's first byte; bytes of it released
};

// The next <function=NAME>; text between functions is ignored (as xml_function does).
bool XmlFunctionStream::next(std::string_view body, bool final, CallSink& sink) {
  size_t q = body.find(kFnOpen, resume_at(scan_, kFnOpen.size(), pos_));
  if (q == npos) {
    scan_ = body.size();
    return false;
  }
  scan_ = q;
  size_t gt = body.find('>', q + kFnOpen.size());
  if (gt == npos) {
    if (final) sink.invalid(q);
    return false;
  }
  std::string name = trim(body.substr(q + kFnOpen.size(), gt - q - kFnOpen.size()));
  if (name.empty() || name.find('<') != npos) {
    sink.invalid(q);
    return false;
  }
  obj_.start(name, sink);
  pos_ = scan_ = gt + 1;
  in_value_ = false;
  return true;
}

// Inside a function: the next parameter, or the function's end.
bool XmlFunctionStream::params(std::string_view body, bool final, CallSink& sink) {
  size_t pp = body.find(kParOpen, pos_), fe = body.find(kFnClose, pos_);
  if ((fe != npos && (pp == npos || fe < pp)) || (pp == npos && final)) {
    obj_.end(sink);  // an unterminated function ends with the block
    pos_ = scan_ = fe != npos ? fe + kFnClose.size() : body.size();
    return true;
  }
  if (pp == npos) return false;
  size_t pg = body.find('>', pp + kParOpen.size());
  if (pg == npos || (fe != npos && pg > fe)) {
    if (!final && fe == npos) return false;
    // A parameter tag that never closes: the call ends here, the rest is content.
    obj_.end(sink);
    sink.invalid(pp);
    return false;
  }
  key_ = trim(body.substr(pp + kParOpen.size(), pg - pp - kParOpen.size()));
  text_ = value_is_text(param_schema(tools_, obj_.name, key_), f_.typing);
  obj_.key(key_, text_, sink);
  in_value_ = true;
  lead_ = false;
  vbeg_ = sent_ = scan_ = pg + 1;
  return true;
}

bool XmlFunctionStream::value(std::string_view body, bool final, CallSink& sink) {
  size_t from = resume_at(scan_, kParClose.size(), vbeg_);
  size_t ve = body.find(kParClose, from), np = body.find(kParOpen, from), fe = body.find(kFnClose, from);
  size_t stop = std::min({ve, np, fe});
  if (!lead_) {
    size_t lim = stop == npos ? body.size() : stop;
    if (lim > vbeg_) {
      if (body[vbeg_] == '\n') ++vbeg_;
      sent_ = vbeg_;
      lead_ = true;
    } else if (stop == npos && !final) {
      return false;
    }
  }
  if (stop != npos || final) {
    end_value(body, stop, fe, sink);
    pos_ = stop == npos ? body.size() : (stop == ve ? ve + kParClose.size() : stop);
    return true;
  }
  scan_ = body.size();
  if (!text_) return false;
  size_t r = body.size() - std::max({tail_prefix(body, sent_, kParClose), tail_prefix(body, sent_, kParOpen),
                                     tail_prefix(body, sent_, kFnClose)});
  while (r > sent_ && is_ws(body[r - 1])) --r;
  stream_text_value(body, sent_, r, sink);
  return false;
}

// The value ends at `stop` (npos: the block's end): its layout trimmed, the rest sent.
void XmlFunctionStream::end_value(std::string_view body, size_t stop, size_t fe, CallSink& sink) {
  const bool closed = stop != npos && stop != fe;  // by </parameter> or the next <parameter=
  size_t e = std::max(stop == npos ? body.size() : stop, vbeg_);
  if (closed) {
    if (e > vbeg_ && body[e - 1] == '\n') --e;
  } else {
    while (e > vbeg_ && is_ws(body[e - 1])) --e;
  }
  if (text_) close_text_value(body, sent_, e, sink);
  else sink.append(typed_value(std::string(body.substr(vbeg_, e - vbeg_)), param_schema(tools_, obj_.name, key_), f_.typing));
  in_value_ = false;
}

}  // namespace

std::unique_ptr<BodyStream> xml_function_stream(const ToolFormat& f, const nlohmann::json& tools) {
  return std::make_unique<XmlFunctionStream>(f, tools);
}

}  // namespace rapid::parsers
