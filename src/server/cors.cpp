#include "server/cors.h"

#include <strings.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/sse.h"

namespace rapid::server {

bool origin_allowed(const std::vector<std::string>& allowed, const std::string& origin) {
  if (origin.empty()) return false;
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    return a == "*" || strcasecmp(a.c_str(), origin.c_str()) == 0;
  });
}

void add_cors_headers(const std::vector<std::string>& allowed, const std::string& origin, httplib::Response& res) {
  if (!origin_allowed(allowed, origin)) return;
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "x-request-id, request-id, retry-after");
}

void answer_preflight(const std::vector<std::string>& allowed, const httplib::Request& req, httplib::Response& res) {
  std::string origin = req.get_header_value("Origin");
  if (!origin_allowed(allowed, origin)) {
    res.status = 403;
    res.set_content(to_json_text(openai_error_body(
                        403, allowed.empty() ? "CORS is off on this server (see --allowed-origins)"
                                             : "this origin is not in the server's --allowed-origins")),
                    "application/json");
    return;
  }
  add_cors_headers(allowed, origin, res);
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  // Echo what the browser asks for when it is a plain token list; header values never carry CR/LF
  // here (the parser refuses control characters).
  std::string want = req.get_header_value("Access-Control-Request-Headers");
  bool plain = want.size() <= 1024 && std::all_of(want.begin(), want.end(), [](char c) {
                 return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ';
               });
  res.set_header("Access-Control-Allow-Headers",
                 plain && !want.empty() ? want
                                        : "authorization, content-type, x-api-key, anthropic-version, anthropic-beta, "
                                          "x-request-id, openai-organization, openai-project");
  res.set_header("Access-Control-Max-Age", "600");
}

}  // namespace rapid::server
