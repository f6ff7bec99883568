// Reading a complete call block into calls, one function per body kind (see tool_format.h).
#include <algorithm>
#include <cctype>

#include "parsers/json_scan.h"
#include "parsers/text_util.h"
#include "parsers/tool_format.h"
#include "parsers/value_parsers.h"

namespace rapid::parsers {

using nlohmann::json;
using Calls = std::vector<Call>;

namespace {

// Removes a ```json ... ``` fence (or what is left of one) around a body.
std::string unfence(std::string_view s) {
  std::string t = trim(s);
  if (t.rfind("```", 0) == 0) {
    size_t nl = t.find('\n');
    if (nl == std::string::npos) return t;
    t = trim(std::string_view(t).substr(nl + 1));
  }
  if (t.size() >= 3 && t.compare(t.size() - 3, 3, "```") == 0) t = trim(std::string_view(t).substr(0, t.size() - 3));
  return t;
}

std::optional<Call> call_from_object(const json& o) {
  if (!o.is_object()) return std::nullopt;
  const json* src = &o;
  if (o.contains("function") && o["function"].is_object()) src = &o["function"];
  std::string name;
  for (const char* k : {"name", "tool_name"}) {
    auto it = src->find(k);
    if (it != src->end() && it->is_string()) { name = it->get<std::string>(); break; }
  }
  if (name.empty()) return std::nullopt;
  // Both keys are required: {"name": ...} alone is ordinary JSON, not a call.
  for (const char* k : {"arguments", "parameters", "args"}) {
    auto it = src->find(k);
    if (it != src->end()) return Call{name, arguments_text(*it), ""};
  }
  return std::nullopt;
}

// A sequence of JSON objects / arrays of objects, separated by whitespace, ',' or ';'. With
// `trailing`, prose after at least one call ends the sequence and is returned there.
std::optional<Calls> json_calls(std::string_view body, std::string* trailing = nullptr) {
  std::string s = unfence(body);
  Calls calls;
  size_t pos = 0;
  for (;;) {
    size_t before_sep = pos;
    while (pos < s.size() && (std::isspace(static_cast<unsigned char>(s[pos])) || s[pos] == ';' || s[pos] == ','))
      ++pos;
    if (pos >= s.size()) break;
    size_t end = (s[pos] == '{' || s[pos] == '[') ? json_extent(s, pos) : std::string_view::npos;
    json v = end == std::string_view::npos ? json() : json::parse(s.substr(pos, end - pos), nullptr, false);
    if (end == std::string_view::npos || v.is_discarded()) {
      if (trailing && !calls.empty()) {
        *trailing = s.substr(before_sep);
        return calls;
      }
      return std::nullopt;
    }
    pos = end;
    if (v.is_array()) {
      for (auto& e : v) {
        auto c = call_from_object(e);
        if (!c) return std::nullopt;
        calls.push_back(std::move(*c));
      }
    } else {
      auto c = call_from_object(v);
      if (!c) return std::nullopt;
      calls.push_back(std::move(*c));
    }
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace

// Arguments text after a known name. An object or array is kept as the model wrote it (fence and
// surrounding whitespace removed), valid or not: that is what lets these formats stream their
// arguments byte for byte (stream_body.h: RawArgs). Other JSON (a string holding JSON, null) is
// normalised; anything else is kept raw (the call itself is unambiguous, so the client sees it).
std::string args_after_name(std::string_view raw) {
  std::string t = unfence(raw);
  if (t.empty()) return "{}";
  if (t[0] == '{' || t[0] == '[') return t;
  json v = json::parse(t, nullptr, false);
  if (v.is_discarded()) return t;
  return arguments_text(v);
}

namespace {

std::optional<Calls> name_sep_json(const ToolFormat& f, std::string_view body) {
  size_t sep = body.find(f.sep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string name = trim(body.substr(0, sep));
  if (name.empty() || name.find_first_of("{}\n\"") != std::string::npos) return std::nullopt;
  Call c;
  c.arguments = args_after_name(body.substr(sep + f.sep.size()));
  if (f.ids == IdStyle::Kimi) {
    // "functions.get_weather:0": the id is the whole token, the name sits between.
    c.id = name;
    c.name = kimi_name(name);
  } else {
    c.name = name;
  }
  return Calls{c};
}

std::optional<Calls> deepseek_v3(const ToolFormat& f, std::string_view body) {
  size_t sep = body.find(f.sep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view rest = body.substr(sep + f.sep.size());
  size_t nl = rest.find('\n');
  std::string name = trim(rest.substr(0, nl));
  if (name.empty()) return std::nullopt;
  std::string_view args = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  return Calls{Call{name, args_after_name(args), ""}};
}

// Strips one newline on each side: templates put values on their own line.
std::string xml_value(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return std::string(v);
}

// <function=NAME> <parameter=KEY>VALUE</parameter> ... </function>
std::optional<Calls> xml_function(const ToolFormat& f, std::string_view body, const json& tools) {
  Calls calls;
  size_t pos = 0;
  const std::string fo = "<function=", fc = "</function>", po = "<parameter=", pc = "</parameter>";
  while ((pos = body.find(fo, pos)) != std::string_view::npos) {
    size_t gt = body.find('>', pos);
    if (gt == std::string_view::npos) return std::nullopt;
    std::string name = trim(body.substr(pos + fo.size(), gt - pos - fo.size()));
    if (name.empty()) return std::nullopt;
    size_t fend = body.find(fc, gt);
    std::string_view inner = body.substr(gt + 1, fend == std::string_view::npos ? std::string_view::npos : fend - gt - 1);
    // The model's parameter order, as the streaming engine sends them (stream_xml_function.cpp).
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    size_t p = 0;
    while ((p = inner.find(po, p)) != std::string_view::npos) {
      size_t pg = inner.find('>', p);
      if (pg == std::string_view::npos) return std::nullopt;
      std::string key = trim(inner.substr(p + po.size(), pg - p - po.size()));
      size_t ve = inner.find(pc, pg);
      size_t next = inner.find(po, pg);
      size_t stop = std::min(ve, next);  // a missing </parameter> ends at the next parameter
      std::string value = xml_value(inner.substr(pg + 1, stop == std::string_view::npos ? std::string_view::npos : stop - pg - 1));
      if (stop == std::string_view::npos) value = trim(value);
      args[key] = coerce_value(value, param_schema(tools, name, key), f.typing);
      p = stop == std::string_view::npos ? inner.size() : (stop == ve ? ve + pc.size() : next);
    }
    calls.push_back(Call{name, dump_json(args), ""});
    pos = fend == std::string_view::npos ? body.size() : fend + fc.size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// <invoke name="NAME"> <parameter name="KEY" [string="true"]>VALUE</parameter> </invoke>
std::optional<Calls> xml_invoke(const ToolFormat& f, std::string_view body, const json& tools) {
  Calls calls;
  size_t pos = 0;
  while ((pos = body.find(f.invoke_open, pos)) != std::string_view::npos) {
    size_t gt = body.find('>', pos);
    if (gt == std::string_view::npos) return std::nullopt;
    std::string name = attr_of(body.substr(pos, gt - pos), "name");
    if (name.empty()) return std::nullopt;
    size_t iend = body.find(f.invoke_close, gt);
    std::string_view inner = body.substr(gt + 1, iend == std::string_view::npos ? std::string_view::npos : iend - gt - 1);
    // The model's parameter order, as the streaming engine sends them (stream_arg_tags.cpp).
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    size_t p = 0;
    while ((p = inner.find(f.param_open, p)) != std::string_view::npos) {
      size_t pg = inner.find('>', p);
      if (pg == std::string_view::npos) return std::nullopt;
      std::string_view tag = inner.substr(p, pg - p);
      std::string key = attr_of(tag, "name");
      size_t ve = inner.find(f.param_close, pg);
      // Inline values (MiniMax, DSML, Step3): surrounding whitespace is data for strings.
      std::string value(inner.substr(pg + 1, ve == std::string_view::npos ? std::string_view::npos : ve - pg - 1));
      std::string is_string = attr_of(tag, "string");
      if (is_string == "true") args[key] = value;
      else if (is_string == "false") args[key] = coerce_value(value, nullptr, ArgTyping::Infer);
      else args[key] = coerce_value(value, param_schema(tools, name, key), f.typing);
      p = ve == std::string_view::npos ? inner.size() : ve + f.param_close.size();
    }
    calls.push_back(Call{name, dump_json(args), ""});
    pos = iend == std::string_view::npos ? body.size() : iend + f.invoke_close.size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// NAME <arg_key>K</arg_key> <arg_value>V</arg_value> ...
std::optional<Calls> glm_args(const ToolFormat& f, std::string_view body, const json& tools) {
  const std::string ko = "<arg_key>", kc = "</arg_key>", vo = "<arg_value>", vc = "</arg_value>";
  size_t first = body.find(ko);
  std::string name = trim(body.substr(0, first));
  if (name.empty() || name.find_first_of("<>{}\"") != std::string::npos) return std::nullopt;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();  // model order, as streamed
  size_t p = first;
  while (p != std::string_view::npos && (p = body.find(ko, p)) != std::string_view::npos) {
    size_t ke = body.find(kc, p);
    if (ke == std::string_view::npos) return std::nullopt;
    std::string key = trim(body.substr(p + ko.size(), ke - p - ko.size()));
    size_t vs = body.find(vo, ke);
    if (vs == std::string_view::npos) return std::nullopt;
    size_t ve = body.find(vc, vs);
    if (ve == std::string_view::npos) return std::nullopt;
    std::string value(body.substr(vs + vo.size(), ve - vs - vo.size()));
    args[key] = coerce_value(value, param_schema(tools, name, key), f.typing);
    p = ve + vc.size();
  }
  return Calls{Call{name, dump_json(args), ""}};
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

// NAME(key=value, ...)
std::optional<Call> python_call(std::string_view s, size_t& pos) {
  skip_ws(s, pos);
  size_t start = pos;
  while (pos < s.size() && ident_char(s[pos])) ++pos;
  std::string name(s.substr(start, pos - start));
  if (name.empty() || pos >= s.size() || s[pos] != '(') return std::nullopt;
  ++pos;
  // Compact JSON in the model's keyword order, a repeated keyword sent again: exactly what the
  // streaming engine sends (stream_pythonic.cpp).
  std::string args = "{";
  for (;;) {
    skip_ws(s, pos);
    if (pos < s.size() && s[pos] == ')') { ++pos; break; }
    size_t ks = pos;
    while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
    std::string key(s.substr(ks, pos - ks));
    skip_ws(s, pos);
    if (key.empty() || pos >= s.size() || s[pos] != '=') return std::nullopt;
    ++pos;
    auto v = parse_python_literal(s, pos);
    if (!v) return std::nullopt;
    if (args.size() > 1) args += ',';
    args += json(key).dump() + ":" + dump_json(*v);
    skip_ws(s, pos);
    if (pos < s.size() && s[pos] == ',') { ++pos; continue; }
    if (pos < s.size() && s[pos] == ')') { ++pos; break; }
    return std::nullopt;
  }
  return Call{name, args + "}", ""};
}

std::optional<Calls> pythonic(std::string_view body, bool lines) {
  std::string s = trim(body);
  size_t pos = 0;
  bool bracket = !s.empty() && s[0] == '[';
  if (bracket) ++pos;
  else if (!lines && s.empty()) return std::nullopt;
  Calls calls;
  for (;;) {
    skip_ws(s, pos);
    if (bracket && pos < s.size() && s[pos] == ']') { ++pos; break; }
    if (pos >= s.size()) {
      if (bracket) return std::nullopt;
      break;
    }
    auto c = python_call(s, pos);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    skip_ws(s, pos);
    if (pos < s.size() && s[pos] == ',') ++pos;
  }
  skip_ws(s, pos);
  if (pos != s.size() || calls.empty()) return std::nullopt;
  return calls;
}

// call:NAME{key:value,...}, possibly several.
std::optional<Calls> gemma_calls(const ToolFormat& f, std::string_view body) {
  std::string s = trim(body);
  size_t pos = 0;
  Calls calls;
  while (pos < s.size()) {
    skip_ws(s, pos);
    if (pos >= s.size()) break;
    if (s.compare(pos, 5, "call:") != 0) return std::nullopt;
    pos += 5;
    size_t brace = s.find('{', pos);
    if (brace == std::string::npos) return std::nullopt;
    std::string name = trim(std::string_view(s).substr(pos, brace - pos));
    if (name.empty()) return std::nullopt;
    pos = brace;
    auto args = parse_gemma_value(s, pos, f.q);
    if (!args || !args->is_object()) return std::nullopt;
    calls.push_back(Call{name, dump_json(*args), ""});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Mistral: "[{...}]" (pre-v11) or "name[ARGS]{...}" / "name[CALL_ID]id[ARGS]{...}" repeated,
// optionally separated by further [TOOL_CALLS].
std::optional<Calls> mistral_any(std::string_view body) {
  std::string s = trim(body);
  if (!s.empty() && (s[0] == '[' || s[0] == '{')) return json_calls(s);
  Calls calls;
  size_t pos = 0;
  const std::string tc = "[TOOL_CALLS]", ar = "[ARGS]", ci = "[CALL_ID]";
  while (pos < s.size()) {
    skip_ws(s, pos);
    while (s.compare(pos, tc.size(), tc) == 0) { pos += tc.size(); skip_ws(s, pos); }
    if (pos >= s.size()) break;
    size_t a = s.find(ar, pos);
    if (a == std::string::npos) return std::nullopt;
    std::string head = s.substr(pos, a - pos);
    size_t c = head.find(ci);
    std::string name = trim(c == std::string::npos ? head : head.substr(0, c));
    if (name.empty() || name.find_first_of("{}[]\" \n") != std::string::npos) return std::nullopt;
    pos = a + ar.size();
    skip_ws(s, pos);
    size_t end = json_extent(s, pos);
    if (end == std::string_view::npos || (s[pos] != '{' && s[pos] != '[')) {
      // Unbalanced arguments: the name is unambiguous, keep the raw text as arguments.
      size_t next = s.find(tc, pos);
      calls.push_back(Call{name, trim(std::string_view(s).substr(pos, next == std::string::npos ? std::string::npos : next - pos)), ""});
      if (next == std::string::npos) break;
      pos = next;
      continue;
    }
    calls.push_back(Call{name, args_after_name(std::string_view(s).substr(pos, end - pos)), ""});
    pos = end;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Openers/wrappers repeated inside a block that runs to the end of the reply separate calls
// ("<function_call> {...}\n<function_call> {...}"): they become spaces.
std::string blank_markers(const ToolFormat& f, const std::string& body) {
  MarkerBlanker b(f.starts, f.strip);
  return std::string(b.feed(body, true));
}

}  // namespace

static std::optional<Calls> parse_one(const ToolFormat& f, const std::string& body, const json& tools);

std::optional<Calls> parse_body(const ToolFormat& f, const std::string& body, const json& tools,
                                std::string* trailing) {
  if (!nesting_ok(body)) return std::nullopt;
  if (f.inner_start.empty()) {
    if (f.body == Body::JsonCalls && f.end.empty() && trailing) {
      std::string b = blank_markers(f, body);
      return json_calls(b, trailing);
    }
    return parse_one(f, body, tools);
  }
  Calls calls;
  size_t pos = 0;
  while ((pos = body.find(f.inner_start, pos)) != std::string::npos) {
    pos += f.inner_start.size();
    size_t end = body.find(f.inner_end, pos);
    size_t next = body.find(f.inner_start, pos);
    size_t stop = std::min(end, next);
    auto one = parse_one(f, body.substr(pos, stop == std::string::npos ? std::string::npos : stop - pos), tools);
    if (!one) return std::nullopt;
    calls.insert(calls.end(), one->begin(), one->end());
    if (stop == std::string::npos) break;
    pos = stop == end ? end + f.inner_end.size() : next;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

static std::optional<Calls> parse_one(const ToolFormat& f, const std::string& body, const json& tools) {
  switch (f.body) {
    case Body::JsonCalls: {
      if (!f.end.empty()) return json_calls(body);
      std::string b = blank_markers(f, body);
      return json_calls(b);
    }
    case Body::NameSepJson: return name_sep_json(f, body);
    case Body::DeepseekV3: return deepseek_v3(f, body);
    case Body::XmlFunction: return xml_function(f, body, tools);
    case Body::XmlInvoke: return xml_invoke(f, body, tools);
    case Body::GlmArgs: return glm_args(f, body, tools);
    case Body::Pythonic: return pythonic(body, false);
    case Body::PythonicLines: return pythonic(body, true);
    case Body::GemmaCall: return gemma_calls(f, body);
    case Body::MistralAny: return mistral_any(body);
  }
  return std::nullopt;
}

}  // namespace rapid::parsers
