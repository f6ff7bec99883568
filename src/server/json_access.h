// Typed, validated access to request-body fields: every wrong type or out-of-range value becomes a
// 400 naming the field, so handlers never touch nlohmann's throwing accessors directly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::server {

using json = nlohmann::ordered_json;

// The value of `name` in `obj`, or nullptr when absent or JSON null (both mean "not given").
const json* field(const json& obj, const char* name);

void require_object(const json& v, const std::string& what);
std::string req_string(const json& obj, const char* name, const std::string& prefix = "");
std::optional<std::string> opt_string(const json& obj, const char* name, const std::string& prefix = "");
std::optional<bool> opt_bool(const json& obj, const char* name, const std::string& prefix = "");
std::optional<double> opt_number(const json& obj, const char* name, double lo, double hi,
                                  const std::string& prefix = "");
std::optional<int64_t> opt_int(const json& obj, const char* name, int64_t lo, int64_t hi,
                               const std::string& prefix = "");
const json* opt_array(const json& obj, const char* name, const std::string& prefix = "");
const json* opt_object(const json& obj, const char* name, const std::string& prefix = "");

}  // namespace rapid::server
