#include "server/api_error.h"

namespace rapid::server {

static const char* openai_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// Anthropic's documented error types, keyed by HTTP status.
static const char* anthropic_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json openai_error_body(int status, const std::string& message, const std::string& param,
                                  const std::string& code) {
  nlohmann::ordered_json err = {{"message", message}, {"type", openai_type(status)}, {"param", nullptr},
                        {"code", nullptr}};
  if (!param.empty()) err["param"] = param;
  if (!code.empty()) err["code"] = code;
  return {{"error", err}};
}

nlohmann::ordered_json anthropic_error_body(int status, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", anthropic_type(status)}, {"message", message}}}};
}

nlohmann::ordered_json error_body(ApiFlavor flavor, const ApiError& e) {
  return flavor == ApiFlavor::Anthropic ? anthropic_error_body(e.status(), e.what())
                                        : openai_error_body(e.status(), e.what(), e.param(), e.code());
}

}  // namespace rapid::server
