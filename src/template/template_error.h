// The one error type of the template module: parse errors, errors the template raises
// (raise_exception), runtime type errors, sandbox refusals and resource bounds. The message
// carries "line N: reason" once the interpreter knows where it happened.
#pragma once
#include <string>

#include "common/error.h"

namespace rapid::jinja {

class TemplateError : public Error {
 public:
  // The Python exception jinja2 would raise, so callers and tests can tell causes apart.
  enum class Kind { Syntax, Raised, Undefined, Type, Security, Limit };

  TemplateError(Kind kind, const std::string& msg, int line = 0)
      : Error(line > 0 ? "line " + std::to_string(line) + ": " + msg : msg),
        kind_(kind), reason_(msg), line_(line) {}
  Kind kind() const { return kind_; }
  const std::string& reason() const { return reason_; }
  int line() const { return line_; }

 private:
  Kind kind_;
  std::string reason_;
  int line_;
};

}  // namespace rapid::jinja
