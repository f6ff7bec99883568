#include "parsers/value_parsers.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include "common/utf8.h"
#include "parsers/text_util.h"

namespace rapid::parsers {

using nlohmann::json;

void skip_ws(std::string_view s, size_t& pos) {
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
}

bool nesting_ok(std::string_view s, int max_depth) {
  int depth = 0;
  for (char c : s) {
    if (c == '[' || c == '{' || c == '(') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}' || c == ')') && depth > 0) {
      --depth;
    }
  }
  return true;
}

static std::optional<std::string> python_string(std::string_view s, size_t& pos) {
  char quote = s[pos];
  bool triple = s.substr(pos, 3) == std::string(3, quote);
  pos += triple ? 3 : 1;
  std::string out;
  while (pos < s.size()) {
    char c = s[pos];
    if (triple ? s.substr(pos, 3) == std::string(3, quote) : c == quote) {
      pos += triple ? 3 : 1;
      return out;
    }
    if (c == '\\' && pos + 1 < s.size()) {
      char e = s[pos + 1];
      pos += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'u':
        case 'x': {
          size_t n = e == 'u' ? 4 : 2;
          if (pos + n > s.size()) return std::nullopt;
          uint32_t cp = std::strtoul(std::string(s.substr(pos, n)).c_str(), nullptr, 16);
          pos += n;
          append_utf8(out, cp);
          break;
        }
        default: out += e;  // \\ \' \" and unknown escapes keep the character
      }
      continue;
    }
    out += c;
    ++pos;
  }
  return std::nullopt;
}

static std::optional<json> number_at(std::string_view s, size_t& pos) {
  size_t start = pos;
  if (pos < s.size() && (s[pos] == '-' || s[pos] == '+')) ++pos;
  bool is_float = false;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.' ||
                            s[pos] == 'e' || s[pos] == 'E' ||
                            ((s[pos] == '-' || s[pos] == '+') && (s[pos - 1] == 'e' || s[pos - 1] == 'E')))) {
    if (!std::isdigit(static_cast<unsigned char>(s[pos]))) is_float = true;
    ++pos;
  }
  std::string t(s.substr(start, pos - start));
  if (t.empty() || t == "-" || t == "+") return std::nullopt;
  char* end = nullptr;
  if (!is_float) {
    errno = 0;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (*end == 0 && errno != ERANGE) return json(v);  // out of range: a double below
  }
  double d = std::strtod(t.c_str(), &end);
  if (*end != 0) return std::nullopt;
  return json(d);
}

static bool word_at(std::string_view s, size_t pos, std::string_view w) {
  if (s.substr(pos, w.size()) != w) return false;
  size_t e = pos + w.size();
  return e >= s.size() || !(std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_');
}

// Items separated by ',' up to `close` (pos is past the opener): `item` reads one item. False
// when an item does not parse or neither ',' nor `close` follows one.
template <class Item>
static bool parse_items(std::string_view s, size_t& pos, char close, Item item) {
  for (;;) {
    skip_ws(s, pos);
    if (pos < s.size() && s[pos] == close) { ++pos; return true; }
    if (!item()) return false;
    skip_ws(s, pos);
    if (pos < s.size() && s[pos] == ',') { ++pos; continue; }
    if (pos < s.size() && s[pos] == close) { ++pos; return true; }
    return false;
  }
}

std::optional<json> parse_python_literal(std::string_view s, size_t& pos) {
  skip_ws(s, pos);
  if (pos >= s.size()) return std::nullopt;
  char c = s[pos];
  if (c == '"' || c == '\'') {
    auto str = python_string(s, pos);
    if (!str) return std::nullopt;
    return json(*str);
  }
  if (c == '[' || c == '(') {
    char close = c == '[' ? ']' : ')';
    ++pos;
    json arr = json::array();
    bool ok = parse_items(s, pos, close, [&] {
      auto v = parse_python_literal(s, pos);
      if (v) arr.push_back(std::move(*v));
      return v.has_value();
    });
    return ok ? std::optional<json>(std::move(arr)) : std::nullopt;
  }
  if (c == '{') {
    ++pos;
    json obj = json::object();
    bool ok = parse_items(s, pos, '}', [&] {
      auto k = parse_python_literal(s, pos);
      if (!k) return false;
      skip_ws(s, pos);
      if (pos >= s.size() || s[pos] != ':') return false;
      ++pos;
      auto v = parse_python_literal(s, pos);
      if (!v) return false;
      obj[k->is_string() ? k->get<std::string>() : k->dump()] = std::move(*v);
      return true;
    });
    return ok ? std::optional<json>(std::move(obj)) : std::nullopt;
  }
  if (word_at(s, pos, "True") || word_at(s, pos, "true")) { pos += 4; return json(true); }
  if (word_at(s, pos, "False") || word_at(s, pos, "false")) { pos += 5; return json(false); }
  if (word_at(s, pos, "None") || word_at(s, pos, "null")) { pos += 4; return json(nullptr); }
  return number_at(s, pos);
}

std::optional<json> parse_gemma_value(std::string_view s, size_t& pos, std::string_view q) {
  skip_ws(s, pos);
  if (pos >= s.size()) return std::nullopt;
  if (s.substr(pos, q.size()) == q) {
    size_t end = s.find(q, pos + q.size());
    if (end == std::string_view::npos) return std::nullopt;
    json v = std::string(s.substr(pos + q.size(), end - pos - q.size()));
    pos = end + q.size();
    return v;
  }
  char c = s[pos];
  if (c == '{') {
    ++pos;
    json obj = json::object();
    bool ok = parse_items(s, pos, '}', [&] {
      std::string key;
      if (s.substr(pos, q.size()) == q) {
        auto k = parse_gemma_value(s, pos, q);
        if (!k) return false;
        key = k->get<std::string>();
      } else {
        size_t colon = s.find(':', pos);
        if (colon == std::string_view::npos) return false;
        key = std::string(s.substr(pos, colon - pos));
        pos = colon;
      }
      skip_ws(s, pos);
      if (pos >= s.size() || s[pos] != ':') return false;
      ++pos;
      auto v = parse_gemma_value(s, pos, q);
      if (!v) return false;
      obj[key] = std::move(*v);
      return true;
    });
    return ok ? std::optional<json>(std::move(obj)) : std::nullopt;
  }
  if (c == '[') {
    ++pos;
    json arr = json::array();
    bool ok = parse_items(s, pos, ']', [&] {
      auto v = parse_gemma_value(s, pos, q);
      if (v) arr.push_back(std::move(*v));
      return v.has_value();
    });
    return ok ? std::optional<json>(std::move(arr)) : std::nullopt;
  }
  if (word_at(s, pos, "true")) { pos += 4; return json(true); }
  if (word_at(s, pos, "false")) { pos += 5; return json(false); }
  if (word_at(s, pos, "null")) { pos += 4; return json(nullptr); }
  return number_at(s, pos);
}

const json* param_schema(const json& tools, const std::string& tool, const std::string& param) {
  if (!tools.is_array()) return nullptr;
  for (auto& t : tools) {
    const json* fn = t.contains("function") ? &t["function"] : &t;
    if (!fn->is_object() || fn->value("name", "") != tool) continue;
    auto p = fn->find("parameters");
    if (p == fn->end() || !p->is_object()) return nullptr;
    auto props = p->find("properties");
    if (props == p->end() || !props->is_object()) return nullptr;
    auto s = props->find(param);
    return s == props->end() ? nullptr : &*s;
  }
  return nullptr;
}

static std::string schema_type(const json& s) {
  if (!s.is_object()) return "";
  auto t = s.find("type");
  if (t != s.end()) {
    if (t->is_string()) return t->get<std::string>();
    if (t->is_array())
      for (auto& x : *t)
        if (x.is_string() && x != "null") return x.get<std::string>();
  }
  for (const char* k : {"anyOf", "oneOf"})
    if (s.contains(k) && s[k].is_array())
      for (auto& alt : s[k]) {
        std::string r = schema_type(alt);
        if (!r.empty() && r != "null") return r;
      }
  if (s.contains("properties")) return "object";
  return "";
}

static std::optional<json> json_or_literal(const std::string& raw) {
  json v = json::parse(raw, nullptr, false);
  if (!v.is_discarded()) return v;
  size_t pos = 0;
  auto lit = parse_python_literal(raw, pos);
  skip_ws(raw, pos);
  if (lit && pos == raw.size()) return lit;
  return std::nullopt;
}

bool value_is_text(const json* schema, ArgTyping mode) {
  std::string type = schema ? schema_type(*schema) : "";
  return type == "string" || (type.empty() && mode == ArgTyping::AlwaysString);
}

json coerce_value(const std::string& text, const json* schema, ArgTyping mode) {
  std::string type = schema ? schema_type(*schema) : "";
  if (type == "string") return text;
  // Whitespace around a number, boolean or JSON value is layout, not data.
  size_t b = text.find_first_not_of(" \t\r\n");
  std::string raw = b == std::string::npos ? "" : text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
  if (type.empty()) {
    if (mode == ArgTyping::AlwaysString) return text;
    auto v = json_or_literal(raw);
    return v ? *v : json(text);
  }
  if (raw == "null" || raw == "None") return nullptr;
  if (type == "integer" || type == "number") {
    size_t pos = 0;
    auto n = number_at(raw, pos);
    if (n && pos == raw.size()) {
      if (type == "integer" && n->is_number_float()) {
        double d = n->get<double>();
        if (std::fabs(d) < 9e18 && d == std::floor(d)) return json(static_cast<long long>(d));
      }
      return *n;
    }
    return text;
  }
  if (type == "boolean") {
    std::string l;
    for (char c : raw) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "true") return true;
    if (l == "false") return false;
    return text;
  }
  auto v = json_or_literal(raw);  // object, array and anything else structured
  return v ? *v : json(text);
}

std::string arguments_text(const json& args) {
  if (args.is_string()) {
    const std::string& s = args.get_ref<const std::string&>();
    // Already-serialised objects pass through once; any other string is itself the value.
    json inner = json::parse(s, nullptr, false);
    if (!inner.is_discarded() && inner.is_object()) return dump_json(inner);
    return dump_json(args);
  }
  if (args.is_null()) return "{}";
  return dump_json(args);
}

}  // namespace rapid::parsers
