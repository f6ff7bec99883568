// Streamed argument-tag bodies: GLM (NAME<arg_key>K</arg_key><arg_value>V</arg_value>...,
// glm45 / glm47) and invoke/parameter XML (<invoke name="NAME"><parameter name="K">V</parameter>
// </invoke>: minimax_m2, deepseek_v32, step3). Same output as the XML functions
// (stream_xml_function.cpp): the call goes out once its name is certain (GLM: the name line ended
// with a newline or <arg_key>; invoke: the <invoke ...> tag closed), then an ObjectArgs object.
// Values are verbatim (these templates write them inline): no layout trimming, so only a possible
// closing-tag prefix and an incomplete UTF-8 sequence are held back. Text between pairs /
// invokes is ignored; step3 invokes are read across its section markers.
#include <array>
#include <utility>

#include "parsers/stream_body.h"
#include "parsers/value_parsers.h"

namespace rapid::parsers {

namespace {

const std::string kKeyOpen = "<arg_key>", kKeyClose = "</arg_key>", kValOpen = "<arg_value>",
                  kValClose = "</arg_value>";

// First occurrence at or after `from` of any non-empty marker: (position, index) or (npos, -1).
template <size_t N>
std::pair<size_t, int> first_hit(std::string_view s, size_t from, const std::array<const std::string*, N>& ms) {
  std::pair<size_t, int> best{npos, -1};
  for (size_t i = 0; i < N; ++i) {
    if (ms[i]->empty()) continue;
    size_t p = s.find(*ms[i], from);
    if (p < best.first) best = {p, static_cast<int>(i)};
  }
  return best;
}

class ArgTagsStream : public BodyStream {
 public:
  ArgTagsStream(const ToolFormat& f, const nlohmann::json& tools)
      : f_(f), tools_(tools), glm_(f.body == Body::GlmArgs),
        // What ends a value: GLM </arg_value>; invoke </parameter>, the invoke's end, a section marker.
        closers_{glm_ ? &kValClose : &f.param_close, glm_ ? &kNone : &f.invoke_close,
                 glm_ ? &kNone : &f.inner_end, glm_ ? &kNone : &f.inner_start} {}

  void advance(std::string_view body, bool final, CallSink& sink) override {
    while (!sink.done()) {
      bool progressed = !obj_.open ? (glm_ ? glm_next(body, final, sink) : inv_next(body, final, sink))
                        : in_value_ ? value(body, final, sink)
                        : glm_      ? glm_params(body, final, sink)
                                    : inv_params(body, final, sink);
      if (!progressed) return;
    }
  }

 private:
  bool glm_next(std::string_view body, bool final, CallSink& sink);
  bool glm_params(std::string_view body, bool final, CallSink& sink);
  bool inv_next(std::string_view body, bool final, CallSink& sink);
  bool inv_params(std::string_view body, bool final, CallSink& sink);
  bool value(std::string_view body, bool final, CallSink& sink);
  void open_call(const std::string& name, size_t at, CallSink& sink) {
    obj_.start(name, sink);
    in_value_ = false;
    pos_ = scan_ = at;
  }
  // The call ends (`}`); the next one is looked for from `at`.
  bool end_call(size_t at, CallSink& sink) {
    obj_.end(sink);
    pos_ = scan_ = at;
    return true;
  }
  // A broken pair / tag at `at`: the call ends, the block from `at` on is content.
  bool broken(size_t at, CallSink& sink) {
    obj_.end(sink);
    sink.invalid(at);
    return false;
  }
  void key(const std::string& key, int str_attr, size_t vbeg, CallSink& sink);

  static inline const std::string kNone;
  const ToolFormat& f_;
  const nlohmann::json& tools_;
  const bool glm_;
  const std::array<const std::string*, 4> closers_;
  ObjectArgs obj_;
  size_t pos_ = 0;          // where the next call / pair is looked for
  size_t scan_ = 0;         // marker searches resume here
  bool in_value_ = false;   // inside a value
  bool text_ = false;       // the value is a JSON string streamed as it arrives
  int str_attr_ = 0;        // invoke formats: string="true" (1) / "false" (2) on the parameter
  std::string key_;
  size_t vbeg_ = 0, sent_ = 0;  // the value's first byte; bytes of it released
};

// `"key":` (and the opening quote of a text value) for the value starting at vbeg.
void ArgTagsStream::key(const std::string& key, int str_attr, size_t vbeg, CallSink& sink) {
  key_ = key;
  str_attr_ = str_attr;
  text_ = str_attr == 1 || (str_attr == 0 && value_is_text(param_schema(tools_, obj_.name, key), f_.typing));
  obj_.key(key, text_, sink);
  in_value_ = true;
  vbeg_ = sent_ = scan_ = vbeg;
}

// GLM: one call per block; its name is the first line (up to a newline or <arg_key>).
bool ArgTagsStream::glm_next(std::string_view body, bool final, CallSink& sink) {
  if (sink.committed() > 0) return false;
  size_t b = 0;
  while (b < body.size() && is_ws(body[b])) ++b;
  if (b >= body.size()) {
    if (final) sink.invalid(0);
    return false;
  }
  size_t e = body.find_first_of("\n<", std::max(b, scan_));
  if (e != npos && body[e] == '<') {
    size_t n = std::min(kKeyOpen.size(), body.size() - e);
    if (body.compare(e, n, kKeyOpen, 0, n) != 0) {
      sink.invalid(0);  // markup in the name: the whole-block rule decides
      return false;
    }
    scan_ = e;
    if (n < kKeyOpen.size() && !final) return false;
    if (n < kKeyOpen.size()) e = body.size();
  }
  if (e == npos) {
    scan_ = body.size();
    if (!final) return false;
    e = body.size();
  }
  std::string name = trim(body.substr(b, e - b));
  if (name.empty() || name.find_first_of("<>{}\"") != npos) {
    sink.invalid(0);
    return false;
  }
  open_call(name, e, sink);
  return true;
}

// GLM: the next <arg_key>K</arg_key> <arg_value>; text between pairs is ignored (as glm_args
// does). A pair that never completes ends the call; the rest of the block is content.
bool ArgTagsStream::glm_params(std::string_view body, bool final, CallSink& sink) {
  size_t p = body.find(kKeyOpen, resume_at(scan_, kKeyOpen.size(), pos_));
  if (p == npos) {
    scan_ = body.size();
    return final && end_call(body.size(), sink);
  }
  scan_ = p;
  size_t ks = p + kKeyOpen.size();
  size_t ke = body.find(kKeyClose, ks);
  if (ke == npos) return final && broken(p, sink);
  std::string k = trim(body.substr(ks, ke - ks));
  if (k.find('<') != npos) return broken(p, sink);
  size_t vs = ke + kKeyClose.size();
  while (vs < body.size() && is_ws(body[vs])) ++vs;
  size_t n = std::min(kValOpen.size(), body.size() - vs);
  if (body.compare(vs, n, kValOpen, 0, n) != 0) return broken(p, sink);
  if (n < kValOpen.size()) return final && broken(p, sink);
  key(k, 0, vs + kValOpen.size(), sink);
  return true;
}

// Invoke formats: the next <invoke name="NAME">; text between invokes is ignored.
bool ArgTagsStream::inv_next(std::string_view body, bool final, CallSink& sink) {
  const std::string& io = f_.invoke_open;
  size_t q = body.find(io, resume_at(scan_, io.size(), pos_));
  if (q == npos) {
    scan_ = body.size();
    return false;
  }
  scan_ = q;
  size_t gt = body.find('>', q + io.size());
  if (gt == npos) {
    if (final) sink.invalid(q);
    return false;
  }
  std::string name = attr_of(body.substr(q, gt - q), "name");
  if (name.empty()) {
    sink.invalid(q);
    return false;
  }
  open_call(name, gt + 1, sink);
  return true;
}

// Inside an invoke: the next parameter, or the invoke's end (</invoke>, or a section marker).
bool ArgTagsStream::inv_params(std::string_view body, bool final, CallSink& sink) {
  size_t l = std::max({f_.param_open.size(), f_.invoke_close.size(), f_.inner_end.size(), f_.inner_start.size()});
  size_t from = resume_at(scan_, l, pos_);
  size_t pp = body.find(f_.param_open, from);
  auto [ie, which] = first_hit<3>(body, from, {&f_.invoke_close, &f_.inner_end, &f_.inner_start});
  scan_ = std::min({pp, ie, body.size()});
  if (ie != npos && (pp == npos || ie < pp)) return end_call(which == 0 ? ie + f_.invoke_close.size() : ie, sink);
  if (pp == npos) return final && end_call(body.size(), sink);
  size_t pg = body.find('>', pp + f_.param_open.size());
  if (pg == npos || (ie != npos && pg > ie)) {
    if (!final && ie == npos) return false;
    return broken(pp, sink);  // a parameter tag that never closes
  }
  std::string_view tag = body.substr(pp, pg - pp);
  std::string s = attr_of(tag, "string");
  key(attr_of(tag, "name"), s == "true" ? 1 : s == "false" ? 2 : 0, pg + 1, sink);
  return true;
}

// A value: up to its closing tag (GLM </arg_value>; invoke </parameter>, or the invoke's end).
bool ArgTagsStream::value(std::string_view body, bool final, CallSink& sink) {
  size_t l = 0;
  for (auto* m : closers_) l = std::max(l, m->size());
  auto [stop, which] = first_hit(body, resume_at(scan_, l, vbeg_), closers_);
  if (stop != npos || final) {
    size_t e = stop == npos ? body.size() : stop;
    if (text_) {
      close_text_value(body, sent_, e, sink);
    } else {
      // string="false": inferred without the schema.
      const nlohmann::json* schema = str_attr_ == 2 ? nullptr : param_schema(tools_, obj_.name, key_);
      sink.append(typed_value(std::string(body.substr(vbeg_, e - vbeg_)), schema,
                              str_attr_ == 2 ? ArgTyping::Infer : f_.typing));
    }
    in_value_ = false;
    pos_ = scan_ = stop == npos ? body.size() : (which == 0 ? stop + closers_[0]->size() : stop);
    return true;
  }
  scan_ = body.size();
  if (!text_) return false;
  size_t hold = 0;
  for (auto* m : closers_) hold = std::max(hold, tail_prefix(body, sent_, *m));
  stream_text_value(body, sent_, body.size() - hold, sink);
  return false;
}

}  // namespace

std::unique_ptr<BodyStream> arg_tags_stream(const ToolFormat& f, const nlohmann::json& tools) {
  return std::make_unique<ArgTagsStream>(f, tools);
}

}  // namespace rapid::parsers
