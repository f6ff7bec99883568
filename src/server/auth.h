// API-key check: "Authorization: Bearer KEY" (OpenAI) or "x-api-key: KEY" (Anthropic), compared
// in constant time so response timing does not leak the key.
#pragma once
#include <string>
#include <string_view>

namespace rapid::server {

bool constant_time_equal(std::string_view a, std::string_view b);
// The key a request presents ("" if none): the Bearer token, else x-api-key.
std::string presented_key(const std::string& authorization, const std::string& x_api_key);
// True when no key is configured, or the presented one matches.
bool authorized(const std::string& configured, const std::string& authorization, const std::string& x_api_key);

}  // namespace rapid::server
