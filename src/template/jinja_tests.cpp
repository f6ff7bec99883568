// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).
#include <cmath>
#include <unordered_map>

#include "template/builtins.h"
#include "template/utf8.h"

namespace rapid::jinja {

namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& arg0(CallArgs& a, const char* test) {
  if (a.pos.empty()) {
    if (!a.kw.empty()) return a.kw[0].second;
    throw_type(std::string("test '") + test + "' needs an argument");
  }
  return a.pos[0];
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool; }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && v.b; }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && !v.b; }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Int; }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Float; }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_seq() || v.is_dict() ||
         (v.is_object() && dynamic_cast<Generator*>(v.obj.get()));
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_seq() || v.is_dict();
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_object() && v.obj->callable(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py_lower(s) == s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py_upper(s) == s;
}
bool t_odd(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_int()) throw_type("odd test needs an integer");
  return v.as_int() % 2 != 0;
}
bool t_even(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_int()) throw_type("even test needs an integer");
  return v.as_int() % 2 == 0;
}
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value& n = arg0(a, "divisibleby");
  if (!v.is_number() || !n.is_number()) throw_type("divisibleby needs numbers");
  if (v.is_int() && n.is_int()) {
    if (n.as_int() == 0) throw TemplateError(TemplateError::Kind::Type, "integer division or modulo by zero");
    return v.as_int() % n.as_int() == 0;
  }
  if (n.as_float() == 0) throw TemplateError(TemplateError::Kind::Type, "float modulo");
  return std::fmod(v.as_float(), n.as_float()) == 0;
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, arg0(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "lt")) < 0; }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "le")) <= 0; }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "gt")) > 0; }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "ge")) >= 0; }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(arg0(a, "in"), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = arg0(a, "sameas");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::None:
    case Kind::Undefined: return true;
    case Kind::Bool: return v.b == o.b;
    case Kind::List:
    case Kind::Tuple: return v.list == o.list;
    case Kind::Dict: return v.dict == o.dict;
    case Kind::Object: return v.obj == o.obj;
    default: return equals(v, o);
  }
}
bool t_filter(Interpreter&, const Value& v, CallArgs&);
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.s); }

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> t = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
      {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float},
      {"number", t_number}, {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable}, {"escaped", t_escaped}, {"lower", t_lower},
      {"upper", t_upper}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt},
      {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le}, {"gt", t_gt},
      {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in},
      {"sameas", t_sameas}, {"filter", t_filter}, {"test", t_test},
  };
  return t;
}

bool t_filter(Interpreter&, const Value& v, CallArgs&) {
  static const char* names[] = {"length", "count", "string", "upper", "lower", "capitalize", "title", "trim",
                                "safe", "escape", "e", "default", "d", "first", "last", "join", "replace",
                                "list", "int", "float", "abs", "round", "items", "dictsort", "sort", "unique",
                                "reverse", "tojson", "indent", "wordcount", "center", "batch", "sum", "min",
                                "max", "select", "reject", "selectattr", "rejectattr", "map", "attr", "format",
                                "truncate", "striptags", "pprint", "groupby", "forceescape"};
  if (!v.is_string()) return false;
  for (auto* n : names)
    if (v.s == n) return true;
  return false;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  auto& t = tests();
  auto it = t.find(name);
  if (it == t.end()) throw TemplateError(TemplateError::Kind::Type, "No test named '" + name + "' found.");
  return it->second(in, v, args);
}

}  // namespace rapid::jinja
