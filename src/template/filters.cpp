// jinja2's builtin filters (3.1 semantics) plus transformers' own `tojson`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "template/builtins.h"
#include "template/utf8.h"

namespace rapid::jinja {

namespace {

using FilterFn = Value (*)(Interpreter&, Value&, CallArgs&);

Value gen(List items, std::string name = "generator") {
  return Value::object(std::make_shared<Generator>(std::move(items), std::move(name)));
}

std::optional<Value> opt(CallArgs& a, size_t i, const char* n) { return a.take(i, n); }

bool opt_bool(CallArgs& a, size_t i, const char* n, bool def) {
  auto v = a.take(i, n);
  return v ? v->truthy() : def;
}

// jinja2's make_attrgetter: "a.b.0" walks items first, then attributes.
Value get_attribute(Interpreter& in, const Value& item, const std::string& path, const Value* def) {
  Value v = item;
  size_t p = 0;
  while (p <= path.size()) {
    size_t e = path.find('.', p);
    if (e == std::string::npos) e = path.size();
    std::string part = path.substr(p, e - p);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = in.getitem(v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    p = e + 1;
  }
  if (def && v.is_undefined()) return *def;
  return v;
}

Value attr_of(Interpreter& in, const Value& item, const Value& attr, const Value* def = nullptr) {
  if (attr.is_int()) return in.getitem(item, attr);
  return get_attribute(in, item, to_str(attr), def);
}

int64_t py_len(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return 0;
    case Kind::String: return static_cast<int64_t>(is_ascii(v.s) ? v.s.size() : utf8_length(v.s));
    case Kind::List:
    case Kind::Tuple: return static_cast<int64_t>(v.list->size());
    case Kind::Dict: return static_cast<int64_t>(v.dict->items.size());
    case Kind::Object:
      if (auto* ns = dynamic_cast<Namespace*>(v.obj.get()); ns && ns->type_name() == "Namespace")
        return static_cast<int64_t>(ns->attrs.items.size());
      [[fallthrough]];
    default: throw_type("object of type '" + v.type_name() + "' has no len()");
  }
}

// Key for case-insensitive sorting (jinja2's ignore_case: lower() strings only).
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.s));
  return v;
}

void stable_sort_by(std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> idx(items.size());
  for (size_t k = 0; k < idx.size(); ++k) idx[k] = k;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return reverse ? compare(keys[b], keys[a]) < 0 : compare(keys[a], keys[b]) < 0;
  });
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t k : idx) out.push_back(items[k]);
  items = std::move(out);
}

double py_round(double x, int64_t ndigits) {
  // Python rounds to the nearest representable decimal, ties to even on the exact binary value,
  // which is what printf's correctly rounded conversion does.
  if (!std::isfinite(x) || ndigits > 300) return x;
  if (ndigits < 0) {
    double p = std::pow(10.0, static_cast<double>(-ndigits));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(ndigits), x);
  return std::strtod(buf, nullptr);
}

std::optional<int64_t> parse_py_int(std::string s, int base) {
  s = py_strip(s, nullptr, true, true);
  std::string t;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[k - 1])) &&
        std::isalnum(static_cast<unsigned char>(s[k + 1])))
      continue;
    t.push_back(s[k]);
  }
  if (t.empty()) return std::nullopt;
  size_t p = 0;
  bool neg = false;
  if (t[0] == '+' || t[0] == '-') neg = t[p++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (t.size() > p + 1 && t[p] == '0') {
      char x = static_cast<char>(std::tolower(t[p + 1]));
      int b = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
      if (b && (base == 0 || base == b)) {
        base = b;
        p += 2;
      }
    }
    if (base == 0) base = 10;
  }
  if (p >= t.size() || t[p] == '+' || t[p] == '-') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str() + p, &end, base);
  if (errno || *end) return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> parse_py_float(const std::string& s) {
  std::string t = py_strip(s, nullptr, true, true);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (*end) return std::nullopt;
  return d;
}

// ---- the filters ---------------------------------------------------------------------------------

Value f_length(Interpreter&, Value& v, CallArgs&) { return Value::integer(py_len(v)); }

// soft_str-based filters keep a Markup a Markup.
Value keep_safe(const Value& in, std::string out) {
  Value r = Value::string(std::move(out));
  r.safe = in.is_string() && in.safe;
  return r;
}

Value f_string(Interpreter&, Value& v, CallArgs&) { return keep_safe(v, to_str(v)); }
Value f_upper(Interpreter&, Value& v, CallArgs&) { return keep_safe(v, py_upper(to_str(v))); }
Value f_lower(Interpreter&, Value& v, CallArgs&) { return keep_safe(v, py_lower(to_str(v))); }
Value f_capitalize(Interpreter&, Value& v, CallArgs&) { return keep_safe(v, py_capitalize(to_str(v))); }

Value f_title(Interpreter&, Value& v, CallArgs&) {
  // jinja2 capitalises each word split on whitespace, dashes and opening brackets.
  std::u32string u = utf8_decode(to_str(v));
  bool start = true;
  for (auto& c : u) {
    bool delim = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (delim) {
      start = true;
      continue;
    }
    c = start ? py_upper(c) : py_lower(c);
    start = false;
  }
  return keep_safe(v, utf8_encode(u));
}

Value f_trim(Interpreter&, Value& v, CallArgs& a) {
  auto c = opt(a, 0, "chars");
  return keep_safe(v, py_strip(to_str(v), c && !c->is_none() ? &*c : nullptr, true, true));
}

Value f_safe(Interpreter&, Value& v, CallArgs&) { return Value::markup(to_str(v)); }
Value f_escape(Interpreter&, Value& v, CallArgs&) {
  if (v.is_string() && v.safe) return v;
  return Value::markup(html_escape(to_str(v)));
}
Value f_forceescape(Interpreter&, Value& v, CallArgs&) { return Value::markup(html_escape(to_str(v))); }

Value f_default(Interpreter&, Value& v, CallArgs& a) {
  auto d = opt(a, 0, "default_value");
  bool boolean = opt_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value::string("");
  return v;
}

Value f_first(Interpreter& in, Value& v, CallArgs&) {
  auto items = in.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter& in, Value& v, CallArgs&) {
  if (v.is_object()) throw_type("'" + v.type_name() + "' object is not reversible");
  auto items = in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Interpreter& in, Value& v, CallArgs& a) {
  auto d = opt(a, 0, "d");
  auto attr = opt(a, 1, "attribute");
  std::string sep = d ? to_str(*d) : "";
  std::string out;
  bool first = true;
  for (auto& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr && !attr->is_none() ? attr_of(in, item, *attr) : item);
  }
  return Value::string(out);
}

Value f_replace(Interpreter&, Value& v, CallArgs& a) {
  auto o = opt(a, 0, "old");
  auto n = opt(a, 1, "new");
  auto c = opt(a, 2, "count");
  if (!o || !n) throw_type("replace() missing required arguments");
  return Value::string(py_replace(to_str(v), to_str(*o), to_str(*n), c && c->is_int() ? c->as_int() : -1));
}

Value f_list(Interpreter& in, Value& v, CallArgs&) { return Value::new_list(in.iterate(v)); }

Value f_int(Interpreter&, Value& v, CallArgs& a) {
  auto d = opt(a, 0, "default");
  auto b = opt(a, 1, "base");
  Value def = d ? *d : Value::integer(0);
  int base = b && b->is_int() ? static_cast<int>(b->as_int()) : 10;
  switch (v.kind) {
    case Kind::Bool:
    case Kind::Int: return Value::integer(v.as_int());
    case Kind::Float:
      if (!std::isfinite(v.f) || std::fabs(v.f) > 9.2e18) return def;
      return Value::integer(static_cast<int64_t>(std::trunc(v.f)));
    case Kind::String: {
      if (auto r = parse_py_int(v.s, base)) return Value::integer(*r);
      if (auto f = parse_py_float(v.s); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
        return Value::integer(static_cast<int64_t>(std::trunc(*f)));
      return def;
    }
    default: return def;
  }
}

Value f_float(Interpreter&, Value& v, CallArgs& a) {
  auto d = opt(a, 0, "default");
  Value def = d ? *d : Value::number(0.0);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string())
    if (auto f = parse_py_float(v.s)) return Value::number(*f);
  return def;
}

Value f_abs(Interpreter&, Value& v, CallArgs&) {
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) throw TemplateError(TemplateError::Kind::Limit, "integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  throw_type("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_round(Interpreter&, Value& v, CallArgs& a) {
  auto p = opt(a, 0, "precision");
  auto m = opt(a, 1, "method");
  int64_t prec = p && p->is_int() ? p->as_int() : 0;
  std::string method = m ? to_str(*m) : "common";
  if (!v.is_number()) throw_type("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_int()) return Value::integer(v.as_int());
    return Value::number(py_round(v.f, prec));
  }
  if (method != "ceil" && method != "floor") throw TemplateError(TemplateError::Kind::Type, "method must be common, ceil or floor");
  double mul = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_float() * mul;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / mul);
}

Value f_items(Interpreter&, Value& v, CallArgs&) {
  if (v.is_undefined()) return gen({});
  if (!v.is_dict()) throw_type("Can only get item pairs from a mapping.");
  List out;
  for (auto& [k, x] : v.dict->items) out.push_back(Value::new_list({k, x}, true));
  return gen(std::move(out));
}

Value f_dictsort(Interpreter&, Value& v, CallArgs& a) {
  bool cs = opt_bool(a, 0, "case_sensitive", false);
  auto by = opt(a, 1, "by");
  bool rev = opt_bool(a, 2, "reverse", false);
  if (!v.is_dict()) throw_type("'" + v.type_name() + "' object has no attribute 'items'");
  int pos = 0;
  if (by) {
    std::string b = to_str(*by);
    if (b == "value") pos = 1;
    else if (b != "key") throw TemplateError(TemplateError::Kind::Type, "You can only sort by either \"key\" or \"value\"");
  }
  List items, keys;
  for (auto& [k, x] : v.dict->items) {
    items.push_back(Value::new_list({k, x}, true));
    keys.push_back(sort_key(pos ? x : k, cs));
  }
  stable_sort_by(items, keys, rev);
  return Value::new_list(std::move(items));
}

Value f_sort(Interpreter& in, Value& v, CallArgs& a) {
  bool rev = opt_bool(a, 0, "reverse", false);
  bool cs = opt_bool(a, 1, "case_sensitive", false);
  auto attr = opt(a, 2, "attribute");
  List items = in.iterate(v), keys;
  for (auto& x : items) keys.push_back(sort_key(attr && !attr->is_none() ? attr_of(in, x, *attr) : x, cs));
  stable_sort_by(items, keys, rev);
  return Value::new_list(std::move(items));
}

Value f_unique(Interpreter& in, Value& v, CallArgs& a) {
  bool cs = opt_bool(a, 0, "case_sensitive", false);
  auto attr = opt(a, 1, "attribute");
  List out, seen;
  for (auto& x : in.iterate(v)) {
    Value k = sort_key(attr && !attr->is_none() ? attr_of(in, x, *attr) : x, cs);
    bool dup = false;
    for (auto& s : seen)
      if (equals(s, k)) dup = true;
    if (dup) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return gen(std::move(out));
}

Value f_reverse(Interpreter& in, Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.s);
    std::reverse(u.begin(), u.end());
    return Value::string(utf8_encode(u));
  }
  List items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.kind == Kind::List) return gen(std::move(items), "list_reverseiterator");
  if (v.kind == Kind::Tuple) return gen(std::move(items), "reversed");
  if (v.is_dict()) return gen(std::move(items), "dict_reversekeyiterator");
  return Value::new_list(std::move(items));
}

Value f_tojson(Interpreter&, Value& v, CallArgs& a) {
  JsonDumpOptions o;
  auto ea = opt(a, 0, "ensure_ascii");
  auto ind = opt(a, 1, "indent");
  auto sep = opt(a, 2, "separators");
  auto sk = opt(a, 3, "sort_keys");
  o.ensure_ascii = ea && ea->truthy();
  o.sort_keys = sk && sk->truthy();
  if (ind && !ind->is_none()) {
    if (ind->is_int()) o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 1024)), ' ');
    else if (ind->is_string()) o.indent = ind->s;
    else throw_type("indent must be an int or a string");
    o.item_sep = ",";
  }
  if (sep && !sep->is_none()) {
    if (!sep->is_seq() || sep->list->size() != 2) throw_type("separators must be a (item_separator, key_separator) pair");
    o.item_sep = to_str((*sep->list)[0]);
    o.key_sep = to_str((*sep->list)[1]);
  }
  return Value::string(json_dumps(v, o));
}

Value f_indent(Interpreter& in, Value& v, CallArgs& a) {
  auto w = opt(a, 0, "width");
  bool first = opt_bool(a, 1, "first", false);
  bool blank = opt_bool(a, 2, "blank", false);
  std::string ind;
  if (w && w->is_string()) ind = w->s;
  else ind = std::string(static_cast<size_t>(std::clamp<int64_t>(w && w->is_int() ? w->as_int() : 4, 0, 1 << 16)), ' ');
  std::string s = to_str(v) + "\n";
  CallArgs none;
  Value sv = Value::string(s);
  std::vector<std::string> lines;
  {
    // str.splitlines() via the str method implementation
    Value r = *call_method(in, sv, "splitlines", none);
    for (auto& l : *r.list) lines.push_back(l.s);
  }
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind) + lines[k];
  }
  if (first) rv = ind + rv;
  return keep_safe(v, rv);
}

Value f_wordcount(Interpreter&, Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(to_str(v))) {
    bool w = is_py_alpha(c) || is_py_digit(c) || c == '_' || c >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_center(Interpreter& in, Value& v, CallArgs& a) {
  auto w = opt(a, 0, "width");
  CallArgs m;
  m.pos.push_back(w ? *w : Value::integer(80));
  return *call_method(in, Value::string(to_str(v)), "center", m);
}

Value f_batch(Interpreter& in, Value& v, CallArgs& a) {
  auto n = opt(a, 0, "linecount");
  auto fill = opt(a, 1, "fill_with");
  if (!n || !n->is_int() || n->as_int() <= 0) throw_type("batch size must be a positive integer");
  size_t size = static_cast<size_t>(n->as_int());
  List out, cur;
  for (auto& x : in.iterate(v)) {
    cur.push_back(x);
    if (cur.size() == size) {
      out.push_back(Value::new_list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (cur.size() < size) cur.push_back(*fill);
    out.push_back(Value::new_list(std::move(cur)));
  }
  return gen(std::move(out));
}

Value f_sum(Interpreter& in, Value& v, CallArgs& a) {
  auto attr = opt(a, 0, "attribute");
  auto start = opt(a, 1, "start");
  Value acc = start ? *start : Value::integer(0);
  for (auto& x : in.iterate(v)) {
    Value y = attr && !attr->is_none() ? attr_of(in, x, *attr) : x;
    int64_t sum;
    if (acc.is_int() && y.is_int()) {
      if (__builtin_add_overflow(acc.as_int(), y.as_int(), &sum)) throw TemplateError(TemplateError::Kind::Limit, "integer overflow");
      acc = Value::integer(sum);
    }
    else if (acc.is_number() && y.is_number()) acc = Value::number(acc.as_float() + y.as_float());
    else throw_type("unsupported operand type(s) for +: '" + acc.type_name() + "' and '" + y.type_name() + "'");
  }
  return acc;
}

Value min_max(Interpreter& in, Value& v, CallArgs& a, bool want_max) {
  bool cs = opt_bool(a, 0, "case_sensitive", false);
  auto attr = opt(a, 1, "attribute");
  List items = in.iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value bk = sort_key(attr && !attr->is_none() ? attr_of(in, items[0], *attr) : items[0], cs);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = sort_key(attr && !attr->is_none() ? attr_of(in, items[k], *attr) : items[k], cs);
    int c = compare(key, bk);
    if (want_max ? c > 0 : c < 0) best = k, bk = key;
  }
  return items[best];
}
Value f_min(Interpreter& in, Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interpreter& in, Value& v, CallArgs& a) { return min_max(in, v, a, true); }

// select / reject / selectattr / rejectattr
Value select_impl(Interpreter& in, Value& v, CallArgs& a, bool by_attr, bool keep) {
  if (!v.truthy()) return gen({});  // jinja2 checks `if value:` before anything else
  std::optional<Value> attr;
  size_t next = 0;
  if (by_attr) {
    if (a.pos.empty()) throw_type("Missing parameter for attribute name");
    attr = a.pos[0];
    next = 1;
  }
  std::optional<std::string> test;
  CallArgs targs;
  if (a.pos.size() > next) {
    test = to_str(a.pos[next]);
    targs.pos.assign(a.pos.begin() + next + 1, a.pos.end());
    targs.kw = a.kw;
  }
  List out;
  for (auto& x : in.iterate(v)) {
    Value y = attr ? attr_of(in, x, *attr) : x;
    bool r;
    if (test) {
      CallArgs c = targs;
      r = apply_test(in, *test, y, c);
    } else {
      r = y.truthy();
    }
    if (r == keep) out.push_back(x);
  }
  return gen(std::move(out));
}
Value f_select(Interpreter& in, Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_map(Interpreter& in, Value& v, CallArgs& a) {
  List out;
  if (!v.truthy()) return gen({});  // jinja2 checks `if value:` before anything else
  if (a.pos.empty()) {
    const Value* attr = a.kwarg("attribute");
    if (!attr) throw_type("map requires a filter name or attribute=");
    const Value* def = a.kwarg("default");
    for (auto& x : in.iterate(v)) out.push_back(attr_of(in, x, *attr, def));
    return gen(std::move(out));
  }
  std::string fname = to_str(a.pos[0]);
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (auto& x : in.iterate(v)) {
    CallArgs c = fargs;
    out.push_back(apply_filter(in, fname, x, c));
  }
  return gen(std::move(out));
}

Value f_attr(Interpreter& in, Value& v, CallArgs& a) {
  auto n = opt(a, 0, "name");
  if (!n) throw_type("attr() missing name");
  return in.getattr(v, to_str(*n));
}

Value f_format(Interpreter&, Value& v, CallArgs& a) {
  if (!a.kw.empty()) {
    Value d = Value::new_dict();
    for (auto& [k, x] : a.kw) d.dict->set(k, x);
    return Value::string(percent_format(to_str(v), d));
  }
  return Value::string(percent_format(to_str(v), Value::new_list(a.pos, true)));
}

Value f_truncate(Interpreter&, Value& v, CallArgs& a) {
  auto l = opt(a, 0, "length");
  bool killwords = opt_bool(a, 1, "killwords", false);
  auto e = opt(a, 2, "end");
  auto lw = opt(a, 3, "leeway");
  int64_t length = l && l->is_int() ? l->as_int() : 255;
  std::string end = e ? to_str(*e) : "...";
  int64_t leeway = lw && lw->is_int() ? lw->as_int() : 5;
  std::u32string s = utf8_decode(to_str(v));
  int64_t n = static_cast<int64_t>(s.size());
  if (n <= length + leeway) return Value::string(utf8_encode(s));
  int64_t keep = std::max<int64_t>(0, length - static_cast<int64_t>(utf8_length(end)));
  std::u32string cut = s.substr(0, keep);
  if (!killwords) {
    size_t sp = cut.rfind(U' ');
    if (sp != std::u32string::npos) cut = cut.substr(0, sp);
  }
  return Value::string(utf8_encode(cut) + end);
}

Value f_striptags(Interpreter&, Value& v, CallArgs&) {
  std::string s = to_str(v), out;
  bool in_tag = false;
  for (char c : s) {
    if (c == '<') in_tag = true;
    else if (c == '>' && in_tag) in_tag = false;
    else if (!in_tag) out.push_back(c);
  }
  CallArgs none;
  std::string joined;
  for (auto& w : py_split(out, nullptr, -1, false)) joined += (joined.empty() ? "" : " ") + w;
  return Value::string(joined);
}

Value f_pprint(Interpreter&, Value& v, CallArgs&) { return Value::string(repr(v)); }

Value f_groupby(Interpreter& in, Value& v, CallArgs& a) {
  auto attr = opt(a, 0, "attribute");
  auto def = opt(a, 1, "default");
  bool cs = opt_bool(a, 2, "case_sensitive", false);
  if (!attr) throw_type("groupby() missing attribute");
  List items = in.iterate(v), keys;
  for (auto& x : items) keys.push_back(sort_key(attr_of(in, x, *attr, def ? &*def : nullptr), cs));
  stable_sort_by(items, keys, false);
  List out;
  for (auto& x : items) {
    Value k = attr_of(in, x, *attr, def ? &*def : nullptr);
    Value kk = sort_key(k, cs);
    if (!out.empty() && equals(sort_key((*out.back().list)[0], cs), kk)) {
      (*out.back().list)[1].list->push_back(x);
    } else {
      out.push_back(Value::new_list({k, Value::new_list({x})}, true));
    }
  }
  return Value::new_list(std::move(out));
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> f = {
      {"length", f_length}, {"count", f_length}, {"string", f_string}, {"upper", f_upper},
      {"lower", f_lower}, {"capitalize", f_capitalize}, {"title", f_title}, {"trim", f_trim},
      {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_forceescape},
      {"default", f_default}, {"d", f_default}, {"first", f_first}, {"last", f_last}, {"join", f_join},
      {"replace", f_replace}, {"list", f_list}, {"int", f_int}, {"float", f_float}, {"abs", f_abs},
      {"round", f_round}, {"items", f_items}, {"dictsort", f_dictsort}, {"sort", f_sort},
      {"unique", f_unique}, {"reverse", f_reverse}, {"tojson", f_tojson}, {"indent", f_indent},
      {"wordcount", f_wordcount}, {"center", f_center}, {"batch", f_batch}, {"sum", f_sum},
      {"min", f_min}, {"max", f_max}, {"select", f_select}, {"reject", f_reject},
      {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map}, {"attr", f_attr},
      {"format", f_format}, {"truncate", f_truncate}, {"striptags", f_striptags}, {"pprint", f_pprint},
      {"groupby", f_groupby},
  };
  return f;
}

}  // namespace

Value apply_filter(Interpreter& in, const std::string& name, Value v, CallArgs& args) {
  auto& f = filters();
  auto it = f.find(name);
  if (it == f.end()) throw TemplateError(TemplateError::Kind::Type, "No filter named '" + name + "' found.");
  return it->second(in, v, args);
}

}  // namespace rapid::jinja
