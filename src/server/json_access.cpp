#include "server/json_access.h"

#include <cmath>

#include "server/api_error.h"

namespace rapid::server {

static std::string path_of(const std::string& prefix, const char* name) {
  return prefix.empty() ? std::string(name) : prefix + "." + name;
}

static const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_float: return "number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    default: return "value";
  }
}

static ApiError wrong_type(const std::string& path, const char* want, const json& got) {
  return bad_request("'" + path + "' must be " + want + ", got " + type_name(got), path);
}

const json* field(const json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

void require_object(const json& v, const std::string& what) {
  if (!v.is_object()) throw bad_request(what + " must be a JSON object, got " + type_name(v));
}

std::string req_string(const json& obj, const char* name, const std::string& prefix) {
  auto v = opt_string(obj, name, prefix);
  if (!v) throw bad_request("'" + path_of(prefix, name) + "' is required", path_of(prefix, name));
  return *v;
}

std::optional<std::string> opt_string(const json& obj, const char* name, const std::string& prefix) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw wrong_type(path_of(prefix, name), "a string", *v);
  return v->get<std::string>();
}

std::optional<bool> opt_bool(const json& obj, const char* name, const std::string& prefix) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(path_of(prefix, name), "a boolean", *v);
  return v->get<bool>();
}

std::optional<double> opt_number(const json& obj, const char* name, double lo, double hi,
                                 const std::string& prefix) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(path_of(prefix, name), "a number", *v);
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    throw bad_request("'" + path_of(prefix, name) + "' must be between " + json(lo).dump() + " and " +
                          json(hi).dump() + ", got " + v->dump(),
                      path_of(prefix, name));
  return d;
}

std::optional<int64_t> opt_int(const json& obj, const char* name, int64_t lo, int64_t hi,
                               const std::string& prefix) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_integer()) {
    i = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    i = u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u);
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             std::floor(v->get<double>()) == v->get<double>() && std::fabs(v->get<double>()) < 9e15) {
    i = int64_t(v->get<double>());  // 5.0 is accepted as 5, like Python clients send it
  } else {
    throw wrong_type(path_of(prefix, name), "an integer", *v);
  }
  if (i < lo || i > hi)
    throw bad_request("'" + path_of(prefix, name) + "' must be between " + std::to_string(lo) +
                          " and " + std::to_string(hi) + ", got " + std::to_string(i),
                      path_of(prefix, name));
  return i;
}

const json* opt_array(const json& obj, const char* name, const std::string& prefix) {
  const json* v = field(obj, name);
  if (v && !v->is_array()) throw wrong_type(path_of(prefix, name), "an array", *v);
  return v;
}

const json* opt_object(const json& obj, const char* name, const std::string& prefix) {
  const json* v = field(obj, name);
  if (v && !v->is_object()) throw wrong_type(path_of(prefix, name), "an object", *v);
  return v;
}

}  // namespace rapid::server
