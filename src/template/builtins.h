// jinja2's builtin filters and tests, the Python methods of str/list/dict the sandbox allows, and
// the globals of transformers' chat-template environment (raise_exception, strftime_now,
// namespace, dict, range, ...).
#pragma once
#include <optional>
#include <string>

#include "template/interpreter.h"
#include "template/value.h"

namespace rapid::jinja {

void install_globals(Frame& globals);

Value apply_filter(Interpreter& in, const std::string& name, Value v, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);
bool has_test(const std::string& name);

// `obj.name(args)` for str/list/tuple/dict; nullopt when the type has no such method.
std::optional<Value> call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args);
// `obj.name` as a callable value (bound method), nullopt when there is no such method.
std::optional<Value> bound_method(const Value& obj, const std::string& name);

bool contains(const Value& container, const Value& item);  // Python `item in container`
std::string percent_format(const std::string& fmt, const Value& args);  // Python `fmt % args`
std::string py_format(Interpreter& in, const std::string& fmt, CallArgs& args);  // str.format

// Python str helpers shared by filters and methods.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count);

}  // namespace rapid::jinja
