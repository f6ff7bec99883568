#include "template/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/utf8.h"

namespace rapid::jinja {

static TemplateError type_error(const std::string& msg) {
  return TemplateError(TemplateError::Kind::Type, msg);
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0.0;
    case Kind::String: return !s.empty();
    case Kind::List:
    case Kind::Tuple: return !list->empty();
    case Kind::Dict: return !dict->items.empty();
    case Kind::Object: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Object: return obj->type_name();
  }
  return "object";
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.s));
  for (auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (auto& [k, v] : items)
    if (k.kind == Kind::String && k.s == key) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value v) {
  if (auto* p = find(key)) {
    *const_cast<Value*>(p) = std::move(v);
    return;
  }
  items.emplace_back(key, std::move(v));
}

std::optional<Value> CallArgs::take(size_t index, std::string_view name) {
  for (auto it = kw.begin(); it != kw.end(); ++it) {
    if (it->first == name) {
      Value v = std::move(it->second);
      kw.erase(it);
      return v;
    }
  }
  if (index < pos.size()) return pos[index];
  return std::nullopt;
}

const Value* CallArgs::kwarg(std::string_view name) const {
  for (auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Value Object::call(Interpreter&, CallArgs&) { throw type_error("'" + type_name() + "' object is not callable"); }

Value make_function(std::string name, NativeFn fn) {
  return Value::object(std::make_shared<Function>(std::move(name), std::move(fn)));
}

std::optional<Value> Namespace::get_attr(const std::string& name) {
  if (auto* v = attrs.find(std::string_view(name))) return *v;
  return std::nullopt;
}

bool Namespace::set_attr(const std::string& name, Value v) {
  if (!name.empty() && name[0] == '_')
    throw TemplateError(TemplateError::Kind::Security,
                        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                            name + "'. Please rename the attribute.");
  attrs.set(name, std::move(v));
  return true;
}

std::string Namespace::repr() const {
  Value d = Value::new_dict();
  d.dict->items = attrs.items;
  return "<Namespace " + jinja::repr(d) + ">";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.s == b.s;
    case Kind::List:
    case Kind::Tuple: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case Kind::Object: return a.obj == b.obj;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) {
      double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.is_seq() && a.kind == b.kind) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (equals((*a.list)[k], (*b.list)[k])) continue;
      return compare((*a.list)[k], (*b.list)[k]);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  throw type_error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci = [-]D[.DDD]e[+-]XX : split into sign, digits and decimal exponent
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t k = 0; k < e; ++k)
    if (sci[k] != '.') digits.push_back(sci[k]);
  int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= static_cast<int>(digits.size())) {
    out += digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_py_printable(c)) {
      char b[16];
      if (c < 0x100) std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(b, sizeof b, "\\U%08x", static_cast<unsigned>(c));
      out += b;
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(q);
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::String: return string_repr(v.s);
    case Kind::List:
    case Kind::Tuple: {
      bool tuple = v.kind == Kind::Tuple;
      std::string out = tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr((*v.list)[k]);
      }
      if (tuple && v.list->size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(x);
      }
      return out + "}";
    }
    case Kind::Object: return v.obj->repr();
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.b ? "True" : "False";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return float_repr(v.f);
    case Kind::String: return v.s;
    default: return repr(v);
  }
}

// Deeper JSON is refused rather than recursed into: values nest as shared_ptr chains whose
// conversion, printing and destruction all recurse (a 30k-deep request killed the server).
constexpr int kMaxJsonDepth = 512;

template <class J>
static Value from_json_impl(const J& j, int depth) {
  if (depth > kMaxJsonDepth)
    throw TemplateError(TemplateError::Kind::Limit,
                        "JSON value nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value::number(static_cast<double>(u))
                                                   : Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (auto& e : j) items.push_back(from_json_impl(e, depth + 1));
      return Value::new_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::new_dict();
      d.dict->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict->items.emplace_back(Value::string(it.key()), from_json_impl(it.value(), depth + 1));
      return d;
    }
    default: return Value::none();
  }
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 1); }
Value from_json(const nlohmann::json& j) { return from_json_impl(j, 1); }

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  auto hex4 = [&](unsigned c) {
    char b[16];
    std::snprintf(b, sizeof b, "\\u%04x", c);
    out += b;
  };
  if (!ensure_ascii || is_ascii(s)) {
    for (char ch : s) {
      unsigned char c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) hex4(c);
          else out.push_back(ch);
      }
    }
  } else {
    for (char32_t c : utf8_decode(s)) {
      if (c < 0x80) {
        std::string one(1, static_cast<char>(c));
        std::string tmp;
        json_string(tmp, one, false);
        out += tmp.substr(1, tmp.size() - 2);
      } else if (c < 0x10000) {
        hex4(c);
      } else {
        char32_t v = c - 0x10000;
        hex4(0xd800 + (v >> 10));
        hex4(0xdc00 + (v & 0x3ff));
      }
    }
  }
  out.push_back('"');
}

static void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int depth) {
  if (depth > 200) throw TemplateError(TemplateError::Kind::Limit, "tojson: nesting too deep");
  auto newline = [&](int d) {
    if (!o.indent) return;
    out.push_back('\n');
    for (int k = 0; k < d; ++k) out += *o.indent;
  };
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
      else out += float_repr(v.f);
      return;
    case Kind::String: json_string(out, v.s, o.ensure_ascii); return;
    case Kind::List:
    case Kind::Tuple: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += o.item_sep;
        newline(depth + 1);
        dump(out, (*v.list)[k], o, depth + 1);
      }
      newline(depth);
      out.push_back(']');
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (auto& kv : v.dict->items) items.push_back(&kv);
      auto key_str = [](const Value& k) -> std::string {
        switch (k.kind) {
          case Kind::String: return k.s;
          case Kind::None: return "null";
          case Kind::Bool: return k.b ? "true" : "false";
          case Kind::Int: return std::to_string(k.i);
          case Kind::Float: return float_repr(k.f);
          default:
            throw type_error("keys must be str, int, float, bool or None, not " + k.type_name());
        }
      };
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
      out.push_back('{');
      bool first = true;
      for (auto* kv : items) {
        if (!first) out += o.item_sep;
        first = false;
        newline(depth + 1);
        json_string(out, key_str(kv->first), o.ensure_ascii);
        out += o.key_sep;
        dump(out, kv->second, o, depth + 1);
      }
      newline(depth);
      out.push_back('}');
      return;
    }
    default: throw type_error("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string json_dumps(const Value& v, const JsonDumpOptions& o) {
  std::string out;
  dump(out, v, o, 0);
  return out;
}

}  // namespace rapid::jinja
