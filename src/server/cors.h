// CORS (off unless --allowed-origins is given): which browser origins may call the API, the
// headers that let them, and preflight (OPTIONS) answers, which never need the API key.
#pragma once
#include <string>
#include <vector>

#include <httplib.h>

namespace rapid::server {

// "*" in `allowed` admits any origin; otherwise an exact (case-insensitive) match.
bool origin_allowed(const std::vector<std::string>& allowed, const std::string& origin);
// Adds Access-Control-Allow-Origin etc. when `origin` is allowed (and non-empty).
void add_cors_headers(const std::vector<std::string>& allowed, const std::string& origin, httplib::Response& res);
// Answers an OPTIONS request: 204 with the allowed methods and headers for an allowed origin,
// else 403.
void answer_preflight(const std::vector<std::string>& allowed, const httplib::Request& req, httplib::Response& res);

}  // namespace rapid::server
