// Chat rendering: a Jinja chat template (untrusted input) applied to a conversation exactly as
// transformers' apply_chat_template does with Python jinja2.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "template/template_error.h"

namespace rapid::jinja {

struct RenderOptions {
  std::optional<std::tm> now;          // what strftime_now sees; default: the local time
  size_t max_output = 64u << 20;       // bytes of rendered text
  uint64_t max_iterations = 1'000'000;  // loop iterations + macro calls
};

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
  // As transformers' render_jinja_template does: a null value is Python None (distinct from a
  // missing key: `is none` is true, it prints "None", `tojson` gives null), reasoning given as
  // `reasoning_content`, `thinking` or `reasoning` (the first non-null) is visible under `thinking`
  // and `reasoning_content`, and `tools`/`documents` are none and add_generation_prompt false when
  // absent. (apply_chat_template also drops null keys first; the server normalizes null content
  // to "" itself, as vLLM does.)
  // Note: nlohmann::json sorts object keys; use the ordered_json overload when key order matters
  // (tojson output follows it, as Python dicts keep insertion order).
  std::string render(const nlohmann::json& context) const;
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& opts = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The template a model uses, from its tokenizer_config.json: `chat_template` is a string, or a
// list of {name, template}; with a list, `name` picks one, else "tool_use" when tools are
// offered and it exists, else "default" (transformers' get_chat_template). Throws TemplateError
// when there is none.
std::string select_chat_template(const nlohmann::ordered_json& tokenizer_config, bool has_tools,
                                 const std::string& name = "");

}  // namespace rapid::jinja
