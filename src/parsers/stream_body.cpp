#include "parsers/stream_body.h"

#include "parsers/value_parsers.h"

namespace rapid::parsers {

void append_call_args(ParseDelta& out, int index, std::string_view s) {
  if (s.empty()) return;
  if (!out.tool_calls.empty() && out.tool_calls.back().index == index) {
    out.tool_calls.back().arguments.append(s);
  } else {
    ToolCallDelta d;
    d.index = index;
    d.arguments = std::string(s);
    out.tool_calls.push_back(std::move(d));
  }
}

void CallSink::reset() {
  committed_ = 0;
  off_ = stop_ = false;
  stop_at_ = 0;
}

void CallSink::open(const std::string& name, const std::string& id_text) {
  index_ = calls_++;
  ToolCallDelta d;
  d.index = index_;
  d.id = ids_.next(f_->ids, name, index_, id_text);
  d.name = name;
  out_->tool_calls.push_back(std::move(d));
  ++committed_;
}

void CallSink::whole(const Call& c) {
  open(c.name, c.id);
  append(c.arguments);
}

void CallSink::invalid(size_t at) {
  if (committed_ == 0) {
    off_ = true;
  } else {
    stop_ = true;
    stop_at_ = at;
  }
}

void RawArgs::release(std::string_view body, size_t lim, CallSink& sink) {
  if (begin == npos) {
    size_t q = from;
    while (q < lim && is_ws(body[q])) ++q;
    if (q >= lim) return;
    if (body[q] == '`') {
      // A ```json fence line is dropped (args_after_name): wait for its end.
      if (lim - q < 3) return;
      if (body.compare(q, 3, "```") == 0) {
        size_t nl = body.find('\n', q);
        if (nl == npos || nl >= lim) return;
        q = nl + 1;
        while (q < lim && is_ws(body[q])) ++q;
        if (q >= lim) return;
      }
    }
    begin = q;
    streamable = body[q] == '{' || body[q] == '[';
  }
  if (!streamable) return;
  size_t r = lim;
  while (r > begin && (is_ws(body[r - 1]) || body[r - 1] == '`')) --r;
  r = utf8_cut(body, begin, r);
  size_t done = begin + sent;
  if (r <= done) return;
  sink.append(body.substr(done, r - done));
  sent = r - begin;
}

void RawArgs::close(const std::string& text, CallSink& sink) {
  if (sent < text.size()) sink.append(std::string_view(text).substr(sent));
}

void ObjectArgs::start(const std::string& fn, CallSink& sink) {
  sink.open(fn);
  name = fn;
  open = true;
  first = true;
  sink.append("{");
}

void ObjectArgs::key(const std::string& k, bool text, CallSink& sink) {
  std::string head = first ? "" : ",";
  head += dump_json(nlohmann::json(k));
  head += text ? ":\"" : ":";
  sink.append(head);
  first = false;
}

void ObjectArgs::end(CallSink& sink) {
  sink.append("}");
  open = false;
}

void stream_text_value(std::string_view body, size_t& sent, size_t lim, CallSink& sink) {
  size_t r = utf8_cut(body, sent, lim);
  if (r > sent) {
    sink.append(json_escape(body.substr(sent, r - sent)));
    sent = r;
  }
}

void close_text_value(std::string_view body, size_t sent, size_t end, CallSink& sink) {
  sink.append(json_escape(body.substr(sent, end - std::min(end, sent))) + "\"");
}

std::string typed_value(const std::string& v, const nlohmann::json* schema, ArgTyping mode) {
  return dump_json(nesting_ok(v) ? coerce_value(v, schema, mode) : nlohmann::json(v));
}

std::unique_ptr<BodyStream> make_body_stream(const ToolFormat& f, const nlohmann::json& tools) {
  switch (f.body) {
    case Body::JsonCalls: return json_calls_stream(f, tools);
    case Body::NameSepJson:
    case Body::DeepseekV3: return name_args_stream(f);
    case Body::MistralAny: return mistral_stream();
    case Body::XmlFunction: return xml_function_stream(f, tools);
    case Body::GlmArgs:
    case Body::XmlInvoke: return arg_tags_stream(f, tools);
    case Body::Pythonic:
    case Body::PythonicLines: return pythonic_stream();
    case Body::GemmaCall: return nullptr;
  }
  return nullptr;
}

}  // namespace rapid::parsers
