#include "server/auth.h"

#include <cctype>

namespace rapid::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Runs over the longer input whatever the contents; the length difference folds into the result.
  size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = unsigned(a.size() ^ b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= unsigned(x ^ y);
  }
  return diff == 0;
}

std::string presented_key(const std::string& authorization, const std::string& x_api_key) {
  std::string_view a = authorization;
  while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
  if (a.size() > 7) {
    std::string scheme(a.substr(0, 7));
    for (auto& c : scheme) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "bearer ") {
      a.remove_prefix(7);
      while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
      while (!a.empty() && a.back() == ' ') a.remove_suffix(1);
      return std::string(a);
    }
  }
  return x_api_key;
}

bool authorized(const std::string& configured, const std::string& authorization, const std::string& x_api_key) {
  if (configured.empty()) return true;
  std::string key = presented_key(authorization, x_api_key);
  // An Anthropic client may send both; either matching is enough.
  return constant_time_equal(key, configured) || (!x_api_key.empty() && constant_time_equal(x_api_key, configured));
}

}  // namespace rapid::server
