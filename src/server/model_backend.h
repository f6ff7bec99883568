// The Backend for a real model: its tokenizer, its chat template (rendered as transformers does),
// the configured output parsers and an engine running the model.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "constrain/token_constraint.h"
#include "engine/batch_engine.h"
#include "server/backend.h"
#include "server/generic_tools.h"
#include "template/chat_template.h"

namespace rapid::server {

struct ModelBackendOptions {
  std::string served_name;        // model id in the APIs
  std::string model_type;         // HF model_type, for parser auto-detection
  std::string tool_parser;        // "" = auto-detect from the template; "none" = off
  std::string reasoning_parser;   // likewise
  int64_t context_length = 4096;
  int64_t model_vocab = 0;        // logits per step (may exceed the tokenizer's vocabulary)
  bool warm_turns = true;         // prefill each chat turn's predicted follow-up prompt when idle
  // A hybrid model's prefix cache: render_chat also says where the conversation's last message
  // ends (RenderedPrompt::history_end), the engine checkpoints the recurrent state there.
  bool message_checkpoints = false;
};

class ModelBackend : public Backend {
 public:
  // `engine` runs generations; the backend owns it.
  ModelBackend(std::shared_ptr<const tok::Tokenizer> tok, std::unique_ptr<engine::BatchEngine> engine, ModelBackendOptions opts);

  std::string model_id() const override { return opts_.served_name; }
  int64_t context_length() const override { return opts_.context_length; }
  const tok::Tokenizer& tokenizer() const override { return *tok_; }
  RenderedPrompt render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             const nlohmann::ordered_json& extra) const override;
  std::vector<int32_t> encode_prompt(const std::string& text) const override;
  std::unique_ptr<parsers::OutputParser> make_parser(const nlohmann::ordered_json& tools, bool starts_in_reasoning) const override;
  bool apply_constraint(engine::GenerationRequest& req, const ConstraintSpec& spec) const override;
  engine::Engine& engine() override { return *engine_; }
  bool warms_turns() const override { return opts_.warm_turns; }
  EngineStats engine_stats() const override;
  nlohmann::ordered_json cache_info() const override;
  nlohmann::ordered_json cached_contents() const override;
  nlohmann::ordered_json purge_cache() override;

  const std::string& tool_parser() const { return opts_.tool_parser; }
  const std::string& reasoning_parser() const { return opts_.reasoning_parser; }
  const TemplateToolSupport& tool_support() const { return tool_support_; }
  // The rendered prompt text (tests, debugging).
  std::string render_text(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                          const nlohmann::ordered_json& extra) const;

 private:
  std::string render_context(nlohmann::ordered_json ctx) const;  // adds bos/eos, renders
  int64_t history_end(const std::vector<int32_t>& tokens, const std::string& text,
                      const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                      const nlohmann::ordered_json& extra) const;

  std::shared_ptr<const tok::Tokenizer> tok_;
  std::unique_ptr<engine::BatchEngine> engine_;
  ModelBackendOptions opts_;
  std::unique_ptr<jinja::ChatTemplate> template_;
  TemplateToolSupport tool_support_;  // what the template renders itself (the rest: generic_tools.h)
  mutable std::once_flag vocab_once_;
  mutable std::shared_ptr<const constrain::VocabIndex> vocab_index_;  // built on first constrained request
};

// `rendered` cut right after the text of the final message (continue_final_message / prefill);
// 400 when the template does not render that text verbatim.
std::string cut_after_final_message(const std::string& rendered, const nlohmann::ordered_json& messages);

// Whether a rendered prompt leaves a reasoning block open (e.g. ends in "<think>\n").
bool prompt_opens_reasoning(const std::string& prompt);

}  // namespace rapid::server
