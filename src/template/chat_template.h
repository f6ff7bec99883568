// Chat rendering: a Jinja chat template (untrusted input) applied to a conversation exactly as
// transformers' apply_chat_template does with Python jinja2.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace rapid {

class TemplateError;  // derives from rapid::Error; message carries "line N: reason"

class ChatTemplate {
 public:
  // Parses once; throws TemplateError (with line and reason) when the source does not parse.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // `context` holds messages, optional tools, add_generation_prompt, bos_token, eos_token and any
  // extra variables (enable_thinking, reasoning_effort, ...). Throws TemplateError when the
  // template raises (raise_exception) or hits a resource bound.
  std::string render(const nlohmann::json& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapid
