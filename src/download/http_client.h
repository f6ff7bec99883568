// A small blocking HTTP(S) client over libcurl: the hub's API is a handful of GETs and HEADs, and
// libcurl brings what downloads from a company network need (proxies from the environment, TLS
// with the system's CAs, HTTP/2, redirects across hosts without leaking credentials).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"

namespace rapid::download {

// No answer at all: DNS, connection refused, TLS, a connection cut mid-body, a dead link.
class NetworkError : public Error {
 public:
  using Error::Error;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the final response's
  std::string body;                            // unless a sink took it
  std::string effective_url;
};

struct HttpRequest {
  std::string method = "GET";   // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = true;
  long connect_timeout_s = 20;
  long low_speed_timeout_s = 60;     // abort when under 1 byte/s for this long (a dead link)
  // Receives a 2xx answer's body as it arrives (instead of HttpResponse::body); false aborts the
  // transfer. An error answer's body (an HTML page, a JSON message) stays in HttpResponse::body.
  std::function<bool(const char* data, size_t n)> sink;
  // Called once with the status before the first byte goes to `sink`.
  std::function<void(long status)> on_start;
};

// Throws NetworkError when no response came (DNS, refused, TLS, cut mid-body); an HTTP error
// status is a response, returned as such.
HttpResponse http_request(const HttpRequest& req);

// Percent-encodes one path segment (a revision such as "refs/pr/1" becomes "refs%2Fpr%2F1").
std::string url_escape(const std::string& s);

}  // namespace rapid::download
