// The value model of the Jinja interpreter: Python's data types as jinja2 sees them (undefined,
// None, bool, int, float, str, list, tuple, dict with insertion order, and opaque objects such as
// namespaces, loops and callables), with Python's truthiness, equality, str() and repr().
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/template_error.h"

namespace rapid::jinja {

struct Value;
struct Dict;
struct Object;
using List = std::vector<Value>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Object };

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // String payload; for Undefined, the reason it is undefined (for errors)
  bool safe = false;  // String: a markupsafe.Markup (from |safe or |escape), whose `+` escapes the other side
  std::shared_ptr<List> list;  // List and Tuple
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Object> obj;

  Value() = default;
  static Value undefined(std::string why = {}) {
    Value v;
    v.s = std::move(why);
    return v;
  }
  static Value none() { return make(Kind::None); }
  static Value boolean(bool x) {
    Value v = make(Kind::Bool);
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v = make(Kind::Int);
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v = make(Kind::Float);
    v.f = x;
    return v;
  }
  static Value string(std::string x) {
    Value v = make(Kind::String);
    v.s = std::move(x);
    return v;
  }
  static Value markup(std::string x) {
    Value v = string(std::move(x));
    v.safe = true;
    return v;
  }
  static Value new_list(List items = {}, bool tuple = false) {
    Value v = make(tuple ? Kind::Tuple : Kind::List);
    v.list = std::make_shared<List>(std::move(items));
    return v;
  }
  static Value new_dict();
  static Value object(std::shared_ptr<Object> o) {
    Value v = make(Kind::Object);
    v.obj = std::move(o);
    return v;
  }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_int() const { return kind == Kind::Int || kind == Kind::Bool; }  // Python: bool is an int
  bool is_number() const { return is_int() || kind == Kind::Float; }
  bool is_seq() const { return kind == Kind::List || kind == Kind::Tuple; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_object() const { return kind == Kind::Object; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_float() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }

  bool truthy() const;
  std::string type_name() const;  // Python's type name: 'str', 'list', 'dict', 'NoneType', ...

 private:
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

// A dict that keeps insertion order like Python's; lookups are linear because template dicts
// (messages, tool schemas) are small.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value v);
  void set(std::string key, Value v) { set(Value::string(std::move(key)), std::move(v)); }
};

inline Value Value::new_dict() {
  Value v = make(Kind::Dict);
  v.dict = std::make_shared<Dict>();
  return v;
}

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Removes and returns keyword `name`, else positional `index`, else nullopt.
  std::optional<Value> take(size_t index, std::string_view name);
  const Value* kwarg(std::string_view name) const;
};

class Interpreter;

// Namespaces, loop objects, macros and builtin functions: anything with attributes or a call.
struct Object {
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual std::optional<Value> get_attr(const std::string& name) { return std::nullopt; }
  // Returns false when the object does not accept attribute assignment.
  virtual bool set_attr(const std::string& name, Value v) { return false; }
  virtual bool callable() const { return false; }
  virtual Value call(Interpreter& in, CallArgs& args);
  virtual std::string repr() const { return "<" + type_name() + " object>"; }
};

// What jinja2's generator-returning filters (map, select, items, ...) yield: iterable once, not
// JSON serialisable, no len(), always truthy, exactly like the Python generator.
struct Generator : Object {
  List items;
  bool consumed = false;
  std::string tname;
  explicit Generator(List it, std::string name = "generator") : items(std::move(it)), tname(std::move(name)) {}
  std::string type_name() const override { return tname; }
  std::string repr() const override { return "<" + tname + " object>"; }
};

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct Function : Object {
  std::string name;
  NativeFn fn;
  Function(std::string n, NativeFn f) : name(std::move(n)), fn(std::move(f)) {}
  std::string type_name() const override { return "function"; }
  bool callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override { return fn(in, args); }
  std::string repr() const override { return "<function " + name + ">"; }
};

Value make_function(std::string name, NativeFn fn);

// jinja2's Namespace: a mutable attribute bag, the only thing `set x.attr = ...` may change.
struct Namespace : Object {
  Dict attrs;
  std::string type_name() const override { return "Namespace"; }
  std::optional<Value> get_attr(const std::string& name) override;
  bool set_attr(const std::string& name, Value v) override;
  std::string repr() const override;
};

// Python equality (1 == 1.0 == True), ordering (raises TypeError on mixed types), str and repr.
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws on unorderable types
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);
std::string string_repr(const std::string& s);

// Throws TemplateError (Limit) on JSON nested more than 512 levels deep instead of recursing on.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) as transformers' tojson filter does.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // None = single line
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& o);
std::string html_escape(const std::string& s);  // markupsafe.escape

}  // namespace rapid::jinja
