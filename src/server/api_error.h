// A refusal the HTTP layer turns into a 4xx/5xx in the calling API's own error shape.
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, code_;
};

inline ApiError bad_request(const std::string& msg, const std::string& param = "",
                            const std::string& code = "") {
  return ApiError(400, msg, param, code);
}

enum class ApiFlavor { OpenAI, Anthropic };

// {"error":{"message","type","param","code"}}
nlohmann::ordered_json openai_error_body(int status, const std::string& message, const std::string& param = "",
                                  const std::string& code = "");
// {"type":"error","error":{"type","message"}}
nlohmann::ordered_json anthropic_error_body(int status, const std::string& message);
nlohmann::ordered_json error_body(ApiFlavor flavor, const ApiError& e);

}  // namespace rapid::server
