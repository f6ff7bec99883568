// Python methods of str, list, tuple and dict as jinja2's ImmutableSandboxedEnvironment exposes
// them: read-only methods work, mutating ones raise SecurityError.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "template/builtins.h"
#include "template/utf8.h"

namespace rapid::jinja {

namespace {

[[noreturn]] void value_error(const std::string& msg) { throw TemplateError(TemplateError::Kind::Type, msg); }

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) throw_type(std::string(what) + " must be str, not " + v.type_name());
  return v.s;
}

bool is_unsafe_method(const Value& obj, const std::string& name) {
  static const std::set<std::string> list_mut = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", "__setitem__", "__delitem__"};
  static const std::set<std::string> dict_mut = {"pop", "popitem", "setdefault", "update", "clear"};
  if (obj.kind == Kind::List) return list_mut.count(name) > 0;
  if (obj.is_dict()) return dict_mut.count(name) > 0;
  return false;
}

const std::set<std::string>& str_methods() {
  static const std::set<std::string> m = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper", "lower",
      "title", "capitalize", "swapcase", "casefold", "find", "rfind", "index", "rindex", "count", "format",
      "join", "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric",
      "isdecimal", "istitle", "zfill", "center", "ljust", "rjust", "partition", "rpartition", "removeprefix",
      "removesuffix", "expandtabs"};
  return m;
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte_pos)));
}

// Byte offset of code point index `cp` (clamped), Python-style negative indexes.
size_t byte_offset(const std::string& s, int64_t cp) {
  int64_t n = static_cast<int64_t>(utf8_length(s));
  if (cp < 0) cp = std::max<int64_t>(0, cp + n);
  if (cp >= n) return s.size();
  size_t b = 0;
  int64_t seen = 0;
  for (; b < s.size(); ++b) {
    if ((static_cast<unsigned char>(s[b]) & 0xc0) != 0x80) {
      if (seen == cp) return b;
      ++seen;
    }
  }
  return s.size();
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int align /*-1 left, 0 center, 1 right*/) {
  int64_t n = static_cast<int64_t>(utf8_length(s));
  if (width <= n) return s;
  int64_t total = width - n, left = 0;
  if (align == 1) left = total;
  else if (align == 0) left = total / 2 + (total & width & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < total - left; ++k) out += fill;
  return out;
}

bool affix_match(const std::string& s, const Value& what, bool prefix, const Value* start, const Value* end) {
  std::string sub = s;
  if (start || end) {
    size_t b = start && start->is_int() ? byte_offset(s, start->as_int()) : 0;
    size_t e = end && end->is_int() ? byte_offset(s, end->as_int()) : s.size();
    sub = b < e ? s.substr(b, e - b) : std::string();
  }
  auto one = [&](const Value& p) {
    const std::string& x = need_str(p, prefix ? "startswith first arg" : "endswith first arg");
    if (x.size() > sub.size()) return false;
    return prefix ? sub.compare(0, x.size(), x) == 0 : sub.compare(sub.size() - x.size(), x.size(), x) == 0;
  };
  if (what.kind == Kind::Tuple) {
    for (auto& p : *what.list)
      if (one(p)) return true;
    return false;
  }
  return one(what);
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  std::u32string u = utf8_decode(s);
  std::u32string cur;
  for (size_t k = 0; k < u.size(); ++k) {
    char32_t c = u[k];
    bool br = c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
              c == 0x2028 || c == 0x2029;
    if (!br) {
      cur.push_back(c);
      continue;
    }
    std::u32string end(1, c);
    if (c == '\r' && k + 1 < u.size() && u[k + 1] == '\n') {
      end.push_back('\n');
      ++k;
    }
    if (keepends) cur += end;
    out.push_back(utf8_encode(cur));
    cur.clear();
  }
  if (!cur.empty()) out.push_back(utf8_encode(cur));
  return out;
}

template <class Pred>
bool all_chars(const std::string& s, Pred p) {
  if (s.empty()) return false;
  for (char32_t c : utf8_decode(s))
    if (!p(c)) return false;
  return true;
}

// Methods that cut or rewrite the string: strip, split, replace, partition, affix removal.
std::optional<Value> cut_method(const std::string& s, const std::string& name, CallArgs& a) {
  auto arg = [&](size_t i, const char* n) -> std::optional<Value> { return a.take(i, n); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto c = arg(0, "chars");
    const Value* cp = c && !c->is_none() ? &*c : nullptr;
    return Value::string(py_strip(s, cp, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto sep = arg(0, "sep");
    auto mx = arg(1, "maxsplit");
    const Value* sp = sep && !sep->is_none() ? &*sep : nullptr;
    List parts;
    for (auto& p : py_split(s, sp, mx && mx->is_int() ? mx->as_int() : -1, name == "rsplit"))
      parts.push_back(Value::string(std::move(p)));
    return Value::new_list(std::move(parts));
  }
  if (name == "replace") {
    auto o = arg(0, "old");
    auto n = arg(1, "new");
    auto c = arg(2, "count");
    if (!o || !n) throw_type("replace expected at least 2 arguments");
    return Value::string(py_replace(s, need_str(*o, "replace() argument 1"), need_str(*n, "replace() argument 2"),
                                    c && c->is_int() ? c->as_int() : -1));
  }
  if (name == "splitlines") {
    auto k = arg(0, "keepends");
    List parts;
    for (auto& p : splitlines(s, k && k->truthy())) parts.push_back(Value::string(std::move(p)));
    return Value::new_list(std::move(parts));
  }
  if (name == "partition" || name == "rpartition") {
    auto sv = arg(0, "sep");
    if (!sv) throw_type(name + "() takes exactly one argument");
    const std::string& sep = need_str(*sv, "sep");
    if (sep.empty()) value_error("empty separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return name == "partition"
                 ? Value::new_list({Value::string(s), Value::string(""), Value::string("")}, true)
                 : Value::new_list({Value::string(""), Value::string(""), Value::string(s)}, true);
    return Value::new_list({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))}, true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto av = arg(0, "affix");
    if (!av) throw_type(name + "() takes exactly one argument");
    const std::string& x = need_str(*av, name.c_str());
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && x.size() <= s.size() && !x.empty() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  return std::nullopt;
}

// Methods that look for a substring: startswith/endswith, find/index/count and their r-forms.
std::optional<Value> search_method(const std::string& s, const std::string& name, CallArgs& a) {
  auto arg = [&](size_t i, const char* n) -> std::optional<Value> { return a.take(i, n); };
  if (name == "startswith" || name == "endswith") {
    auto w = arg(0, "prefix");
    if (!w) throw_type(name + "() takes at least 1 argument (0 given)");
    auto st = arg(1, "start");
    auto en = arg(2, "end");
    return Value::boolean(affix_match(s, *w, name == "startswith", st ? &*st : nullptr, en ? &*en : nullptr));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto subv = arg(0, "sub");
    if (!subv) throw_type(name + "() takes at least 1 argument (0 given)");
    const std::string& sub = need_str(*subv, "must be str");
    auto st = arg(1, "start");
    auto en = arg(2, "end");
    size_t b = st && st->is_int() ? byte_offset(s, st->as_int()) : 0;
    size_t e = en && en->is_int() ? byte_offset(s, en->as_int()) : s.size();
    std::string hay = b < e ? s.substr(b, e - b) : std::string();
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(hay)) + 1);
      int64_t n = 0;
      for (size_t p = hay.find(sub); p != std::string::npos; p = hay.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t p = (name == "find" || name == "index") ? hay.find(sub) : hay.rfind(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") value_error("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, b + p));
  }
  return std::nullopt;
}

// The is*() predicates.
std::optional<Value> predicate_method(const std::string& s, const std::string& name) {
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return Value::boolean(all_chars(s, [](char32_t c) { return is_py_digit(c); }));
  if (name == "isalpha") return Value::boolean(all_chars(s, [](char32_t c) { return is_py_alpha(c); }));
  if (name == "isalnum")
    return Value::boolean(all_chars(s, [](char32_t c) { return is_py_alpha(c) || is_py_digit(c); }));
  if (name == "isspace") return Value::boolean(all_chars(s, [](char32_t c) { return is_py_space(c); }));
  if (name == "isupper" || name == "islower") {
    bool cased = false, ok = true;
    for (char32_t c : utf8_decode(s)) {
      bool up = jinja::py_lower(c) != c, low = jinja::py_upper(c) != c;
      if (up || low) cased = true;
      if (name == "isupper" ? low : up) ok = false;
    }
    return Value::boolean(cased && ok);
  }
  if (name == "istitle") return Value::boolean(!s.empty() && py_title(s) == s && py_lower(s) != py_upper(s));
  return std::nullopt;
}

// Methods that pad or re-space: zfill, center/ljust/rjust, expandtabs.
std::optional<Value> layout_method(const std::string& s, const std::string& name, CallArgs& a) {
  auto arg = [&](size_t i, const char* n) -> std::optional<Value> { return a.take(i, n); };
  if (name == "zfill") {
    auto w = arg(0, "width");
    int64_t width = w && w->is_int() ? w->as_int() : 0;
    int64_t n = static_cast<int64_t>(utf8_length(s));
    if (width <= n) return Value::string(s);
    size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    return Value::string(s.substr(0, sign) + std::string(width - n, '0') + s.substr(sign));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto w = arg(0, "width");
    auto f = arg(1, "fillchar");
    if (!w || !w->is_int()) throw_type(name + "() needs an integer width");
    if (w->as_int() > (1 << 24)) throw TemplateError(TemplateError::Kind::Limit, "width too large");
    std::string fill = f ? need_str(*f, "fill character") : " ";
    return Value::string(pad(s, w->as_int(), fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "expandtabs") {
    auto t = arg(0, "tabsize");
    int64_t ts = t && t->is_int() ? t->as_int() : 8;
    std::string out;
    int64_t col = 0;
    for (char32_t c : utf8_decode(s)) {
      if (c == '\t') {
        int64_t n = ts > 0 ? ts - col % ts : 0;
        out.append(n, ' ');
        col += n;
      } else {
        utf8_append(out, c);
        col = (c == '\n' || c == '\r') ? 0 : col + 1;
      }
    }
    return Value::string(out);
  }
  return std::nullopt;
}

Value str_method(Interpreter& in, const std::string& s, const std::string& name, CallArgs& a) {
  auto arg = [&](size_t i, const char* n) -> std::optional<Value> { return a.take(i, n); };
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (char32_t c : utf8_decode(s)) utf8_append(out, jinja::py_lower(c) != c ? jinja::py_lower(c) : jinja::py_upper(c));
    return Value::string(out);
  }
  if (name == "format") return Value::string(py_format(in, s, a));
  if (name == "join") {
    auto it = arg(0, "iterable");
    if (!it) throw_type("join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (auto& v : in.iterate(*it)) {
      if (!v.is_string()) throw_type("sequence item: expected str instance, " + v.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += v.s;
    }
    return Value::string(out);
  }
  if (auto v = cut_method(s, name, a)) return *v;
  if (auto v = search_method(s, name, a)) return *v;
  if (auto v = predicate_method(s, name)) return *v;
  if (auto v = layout_method(s, name, a)) return *v;
  throw_type("'str' object has no attribute '" + name + "'");
}

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  if (chars && !chars->is_string()) throw_type("strip arg must be None or str");
  if (is_ascii(s) && (!chars || is_ascii(chars->s))) {
    auto strip_it = [&](char c) {
      return chars ? chars->s.find(c) != std::string::npos : is_py_space(static_cast<unsigned char>(c));
    };
    size_t b = 0, e = s.size();
    if (left)
      while (b < e && strip_it(s[b])) ++b;
    if (right)
      while (e > b && strip_it(s[e - 1])) --e;
    return s.substr(b, e - b);
  }
  std::u32string u = utf8_decode(s), set = chars ? utf8_decode(chars->s) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_py_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (!sep->is_string()) throw_type("must be str or None, not " + sep->type_name());
    const std::string& d = sep->s;
    if (d.empty()) value_error("empty separator");
    if (!from_right) {
      size_t p = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t q = s.find(d, p);
        if (q == std::string::npos) break;
        out.push_back(s.substr(p, q - p));
        p = q + d.size();
      }
      out.push_back(s.substr(p));
    } else {
      size_t e = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (e < d.size()) break;
        size_t q = s.rfind(d, e - d.size());
        if (q == std::string::npos) break;
        rev.push_back(s.substr(q + d.size(), e - q - d.size()));
        e = q;
      }
      rev.push_back(s.substr(0, e));
      out.assign(rev.rbegin(), rev.rend());
    }
    return out;
  }
  // Whitespace split: runs of whitespace separate, leading/trailing whitespace ignored.
  std::u32string u = utf8_decode(s);
  if (!from_right) {
    size_t k = 0, n = u.size();
    while (true) {
      while (k < n && is_py_space(u[k])) ++k;
      if (k >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(utf8_encode(u.substr(k)));  // the remainder keeps its trailing whitespace
        break;
      }
      size_t b = k;
      while (k < n && !is_py_space(u[k])) ++k;
      out.push_back(utf8_encode(u.substr(b, k - b)));
    }
  } else {
    std::vector<std::string> rev;
    size_t e = u.size();
    while (true) {
      while (e > 0 && is_py_space(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) >= maxsplit) {
        rev.push_back(utf8_encode(u.substr(0, e)));  // the remainder keeps its leading whitespace
        break;
      }
      size_t b = e;
      while (b > 0 && !is_py_space(u[b - 1])) --b;
      rev.push_back(utf8_encode(u.substr(b, e - b)));
      e = b;
    }
    out.assign(rev.rbegin(), rev.rend());
  }
  return out;
}

std::string py_lower(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c);
    return out;
  }
  for (char32_t c : utf8_decode(s)) utf8_append(out, jinja::py_lower(c));
  return out;
}

std::string py_upper(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t c : utf8_decode(s)) utf8_append(out, jinja::py_upper(c));
  return out;
}

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    bool cased = jinja::py_lower(c) != c || jinja::py_upper(c) != c;
    utf8_append(out, cased ? (prev_cased ? jinja::py_lower(c) : jinja::py_upper(c)) : c);
    prev_cased = cased;
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::u32string u = utf8_decode(s);
  for (size_t k = 0; k < u.size(); ++k) u[k] = k == 0 ? jinja::py_upper(u[k]) : jinja::py_lower(u[k]);
  return utf8_encode(u);
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `rep` between every character (and at both ends).
    std::u32string u = utf8_decode(s);
    int64_t done = 0;
    for (size_t k = 0; k <= u.size(); ++k) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (k < u.size()) utf8_append(out, u[k]);
    }
    return out;
  }
  size_t p = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t q = s.find(old, p);
    if (q == std::string::npos) break;
    out.append(s, p, q - p);
    out += rep;
    p = q + old.size();
    ++done;
  }
  out.append(s, p, std::string::npos);
  return out;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (!item.is_string())
        throw_type("'in <string>' requires string as left operand, not " + item.type_name());
      return container.s.find(item.s) != std::string::npos;
    case Kind::List:
    case Kind::Tuple:
      for (auto& v : *container.list)
        if (equals(v, item)) return true;
      return false;
    case Kind::Dict: return container.dict->find(item) != nullptr;
    default: throw_type("argument of type '" + container.type_name() + "' is not iterable");
  }
}

std::optional<Value> call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& a) {
  if (is_unsafe_method(obj, name))
    throw TemplateError(TemplateError::Kind::Security,
                        "access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
  if (obj.is_string()) {
    if (!str_methods().count(name)) return std::nullopt;
    Value r = str_method(in, obj.s, name, a);
    // Markup's wrapped methods return Markup.
    static const std::set<std::string> keeps = {"capitalize", "title", "lower", "upper", "replace", "ljust", "rjust",
                                                "lstrip", "rstrip", "center", "strip", "expandtabs", "swapcase", "zfill"};
    if (obj.safe && r.is_string() && keeps.count(name)) r.safe = true;
    return r;
  }
  if (obj.is_seq()) {
    if (name == "index" || name == "count") {
      auto x = a.take(0, "value");
      if (!x) throw_type(name + "() takes exactly one argument");
      int64_t n = 0;
      for (size_t k = 0; k < obj.list->size(); ++k)
        if (equals((*obj.list)[k], *x)) {
          if (name == "index") return Value::integer(static_cast<int64_t>(k));
          ++n;
        }
      if (name == "index") value_error(repr(*x) + " is not in list");
      return Value::integer(n);
    }
    if (name == "copy" && obj.kind == Kind::List) return Value::new_list(*obj.list);
    return std::nullopt;
  }
  if (obj.is_dict()) {
    const Dict& d = *obj.dict;
    if (name == "get") {
      auto k = a.take(0, "key");
      if (!k) throw_type("get expected at least 1 argument, got 0");
      if (const Value* v = d.find(*k)) return *v;
      auto def = a.take(1, "default");
      return def ? *def : Value::none();
    }
    if (name == "keys" || name == "values" || name == "items") {
      List out;
      out.reserve(d.items.size());
      for (auto& [k, v] : d.items) {
        if (name == "keys") out.push_back(k);
        else if (name == "values") out.push_back(v);
        else out.push_back(Value::new_list({k, v}, true));
      }
      return Value::new_list(std::move(out));
    }
    if (name == "copy") {
      Value c = Value::new_dict();
      c.dict->items = d.items;
      return c;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Value> bound_method(const Value& obj, const std::string& name) {
  bool known = false;
  if (is_unsafe_method(obj, name)) known = true;
  else if (obj.is_string()) known = str_methods().count(name) > 0;
  else if (obj.is_seq()) known = name == "index" || name == "count" || (name == "copy" && obj.kind == Kind::List);
  else if (obj.is_dict()) known = name == "get" || name == "keys" || name == "values" || name == "items" || name == "copy";
  if (!known) return std::nullopt;
  Value self = obj;
  return make_function(name, [self, name](Interpreter& in, CallArgs& a) -> Value {
    if (auto r = call_method(in, self, name, a)) return *r;
    throw_type("'" + self.type_name() + "' object has no attribute '" + name + "'");
  });
}

// Python's printf-style `%` formatting: %s %r %d %i %f %e %g %x %o %c %% with flags, width,
// precision, and %(name)s with a dict argument.
std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  const Dict* named = nullptr;
  if (args.kind == Kind::Tuple) pos = *args.list;
  else if (args.is_dict()) named = args.dict.get(), pos.push_back(args);
  else pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) value_error("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t e = fmt.find(')', i);
      if (e == std::string::npos || !named) value_error("format requires a mapping");
      arg = named->find(std::string_view(fmt).substr(i + 1, e - i - 1));
      if (!arg) value_error("KeyError: " + fmt.substr(i + 1, e - i - 1));
      i = e + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) spec.push_back(fmt[i++]);
    while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.')) spec.push_back(fmt[i++]);
    if (i >= fmt.size()) value_error("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!arg) {
      if (next >= pos.size()) value_error("not enough arguments for format string");
      arg = &pos[next++];
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        std::string s = conv == 's' ? to_str(*arg) : repr(*arg);
        std::string w = spec.substr(1);
        if (w.empty()) out += s;
        else {
          bool left = w[0] == '-';
          size_t width = std::strtoul(w.c_str() + (left ? 1 : 0), nullptr, 10);
          size_t n = utf8_length(s);
          if (n < width && width < (1u << 20)) s = left ? s + std::string(width - n, ' ') : std::string(width - n, ' ') + s;
          out += s;
        }
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
        if (!arg->is_number()) throw_type("%" + std::string(1, conv) + " format: a real number is required, not " + arg->type_name());
        if (arg->kind == Kind::Float && !(std::fabs(arg->f) < 9.2e18))
          throw TemplateError(TemplateError::Kind::Limit, "number too large for %d");
        std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                      static_cast<long long>(arg->kind == Kind::Float ? std::trunc(arg->f) : arg->as_int()));
        out += buf;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!arg->is_number()) throw_type("must be real number, not " + arg->type_name());
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_float());
        out += buf;
        break;
      case 'c':
        if (arg->is_int()) utf8_append(out, static_cast<char32_t>(arg->as_int()));
        else out += to_str(*arg);
        break;
      default: value_error(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (!named && next < pos.size() && args.kind == Kind::Tuple) throw_type("not all arguments converted during string formatting");
  return out;
}

namespace {
// One replacement field's value: {} / {0} / {name}, then .attr and [key] lookups, then !r / !s.
Value format_field_value(Interpreter& in, std::string field, CallArgs& a, size_t& auto_idx) {
  std::string conv;
  if (size_t p = field.find('!'); p != std::string::npos) conv = field.substr(p + 1), field.resize(p);
  size_t k = 0;
  while (k < field.size() && field[k] != '.' && field[k] != '[') ++k;
  std::string head = field.substr(0, k);
  Value v;
  if (head.empty()) {
    if (auto_idx >= a.pos.size()) value_error("Replacement index " + std::to_string(auto_idx) + " out of range");
    v = a.pos[auto_idx++];
  } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
    size_t idx = std::strtoul(head.c_str(), nullptr, 10);
    if (idx >= a.pos.size()) value_error("Replacement index " + head + " out of range");
    v = a.pos[idx];
  } else {
    const Value* kv = a.kwarg(head);
    if (!kv) value_error("KeyError: '" + head + "'");
    v = *kv;
  }
  while (k < field.size()) {
    if (field[k] == '.') {
      size_t b = ++k;
      while (k < field.size() && field[k] != '.' && field[k] != '[') ++k;
      v = in.getattr(v, field.substr(b, k - b));
    } else {
      size_t b = ++k;
      while (k < field.size() && field[k] != ']') ++k;
      std::string key = field.substr(b, k - b);
      ++k;
      bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
      v = in.getitem(v, digits ? Value::integer(std::stoll(key)) : Value::string(key));
    }
  }
  if (conv == "r") v = Value::string(repr(v));
  else if (conv == "s") v = Value::string(to_str(v));
  return v;
}

// A format spec: [[fill]align][sign][0][width][,][.precision][type].
struct FormatSpec {
  std::string fill = " ";
  int align = -2;  // -2 default, -1 left, 0 centre, 1 right, 2 sign-aware zero padding
  char sign = 0;
  int64_t width = 0;
  bool thousands = false;
  int prec = -1;
  char type = 0;
};

FormatSpec parse_format_spec(const std::string& spec) {
  FormatSpec f;
  size_t p = 0;
  std::u32string us = utf8_decode(spec);
  auto is_align = [](char32_t ch) { return ch == '<' || ch == '>' || ch == '^' || ch == '='; };
  if (us.size() >= 2 && is_align(us[1])) {
    f.fill = utf8_encode(us.substr(0, 1));
    f.align = us[1] == '<' ? -1 : us[1] == '^' ? 0 : 1;
    p = 2;
  } else if (!us.empty() && is_align(us[0])) {
    f.align = us[0] == '<' ? -1 : us[0] == '^' ? 0 : 1;
    p = 1;
  }
  std::string rest = utf8_encode(us.substr(std::min(p, us.size())));
  size_t r = 0;
  if (r < rest.size() && (rest[r] == '+' || rest[r] == '-' || rest[r] == ' ')) f.sign = rest[r++];
  if (r < rest.size() && rest[r] == '0' && f.align == -2) {
    f.fill = "0";
    f.align = 2;
    ++r;
  }
  while (r < rest.size() && std::isdigit(static_cast<unsigned char>(rest[r]))) f.width = f.width * 10 + (rest[r++] - '0');
  if (f.width > (1 << 20)) throw TemplateError(TemplateError::Kind::Limit, "format width too large");
  if (r < rest.size() && (rest[r] == ',' || rest[r] == '_')) f.thousands = rest[r++] == ',';
  if (r < rest.size() && rest[r] == '.') {
    f.prec = 0;
    ++r;
    while (r < rest.size() && std::isdigit(static_cast<unsigned char>(rest[r]))) f.prec = std::min(f.prec * 10 + (rest[r++] - '0'), 100);
  }
  f.type = r < rest.size() ? rest[r] : 0;
  return f;
}

// The value's text under the spec's type and precision, before grouping, sign and padding.
std::string format_body(const Value& v, const FormatSpec& f) {
  const char type = f.type;
  const int prec = f.prec;
  if (v.is_number() && (type == 'f' || type == 'F' || type == 'e' || type == 'g' || type == '%' ||
                        (prec >= 0 && type == 0 && v.kind == Kind::Float))) {
    char buf[512];
    double x = v.as_float() * (type == '%' ? 100 : 1);
    char t = type == 0 ? 'g' : type == '%' ? 'f' : type;
    std::snprintf(buf, sizeof buf, "%.*f", prec < 0 ? 6 : prec, x);
    if (t != 'f' && t != 'F') std::snprintf(buf, sizeof buf, (std::string("%.*") + t).c_str(), prec < 0 ? 6 : prec, x);
    return std::string(buf) + (type == '%' ? "%" : "");
  }
  if (v.is_number() && (type == 'd' || type == 'x' || type == 'o' || type == 'b')) {
    if (!v.is_int()) value_error("Unknown format code '" + std::string(1, type) + "' for object of type 'float'");
    if (type == 'b') {
      uint64_t u = static_cast<uint64_t>(std::llabs(v.as_int()));
      std::string bits;
      do bits.insert(bits.begin(), static_cast<char>('0' + (u & 1)));
      while (u >>= 1);
      return (v.as_int() < 0 ? "-" : "") + bits;
    }
    char buf[128];
    std::snprintf(buf, sizeof buf, type == 'd' ? "%lld" : type == 'x' ? "%llx" : "%llo", static_cast<long long>(v.as_int()));
    return buf;
  }
  std::string body = to_str(v);
  if (prec >= 0 && !v.is_number()) body = utf8_encode(utf8_decode(body).substr(0, prec));
  return body;
}

std::string format_value(const Value& v, FormatSpec f) {
  std::string body = format_body(v, f);
  const bool numeric = v.is_number() && f.type != 's';
  if (f.thousands && numeric) {
    // group the integer digits in threes
    size_t b = (!body.empty() && body[0] == '-') ? 1 : 0, e = b;
    while (e < body.size() && std::isdigit(static_cast<unsigned char>(body[e]))) ++e;
    for (int64_t k = static_cast<int64_t>(e) - 3; k > static_cast<int64_t>(b); k -= 3) body.insert(k, ",");
  }
  if (numeric && f.sign && body[0] != '-') body.insert(body.begin(), f.sign == ' ' ? ' ' : '+');
  if (f.align == -2) f.align = numeric ? 1 : -1;
  if (f.align != 2) return pad(body, f.width, f.fill, f.align);
  size_t sp = (!body.empty() && (body[0] == '-' || body[0] == '+')) ? 1 : 0;
  int64_t n = static_cast<int64_t>(utf8_length(body));
  if (n < f.width) body.insert(sp, std::string(f.width - n, '0'));
  return body;
}
}  // namespace

// str.format: {} / {0} / {name} fields with .attr / [key] lookups, !r/!s conversion and the common
// format specs (fill, align, sign, width, precision, type).
std::string py_format(Interpreter& in, const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else value_error("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t e = fmt.find('}', i);
    if (e == std::string::npos) value_error("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, e - i - 1);
    i = e;
    std::string spec;
    if (size_t p = field.find(':'); p != std::string::npos) spec = field.substr(p + 1), field.resize(p);
    out += format_value(format_field_value(in, field, a, auto_idx), parse_format_spec(spec));
  }
  return out;
}

}  // namespace rapid::jinja
