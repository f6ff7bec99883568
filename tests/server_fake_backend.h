// A model-free Backend for server tests: a byte-level tokenizer (id = byte, 256 = EOS, 257 = BOS),
// a plain "role: content" prompt format, and a scripted runner that emits a fixed reply one byte
// per token through the real SerialEngine, honouring max_tokens, stop strings and cancellation.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "byte_tokenizer.h"
#include "engine/serial_engine.h"
#include "server/backend.h"

namespace rapid::testing {

struct Script {
  std::string reply = "Hello there!";
  std::chrono::milliseconds delay{0};  // per token
  bool endless = false;                // repeat the reply until cancelled or max_tokens
  int64_t cached_tokens = 0;           // reported as a prefix-cache hit (capped at the prompt)
  std::atomic<int> started{0}, finished{0}, cancelled{0};
};

class ScriptRunner : public engine::SequenceRunner {
 public:
  ScriptRunner(const engine::GenerationRequest& req, Script& s) : req_(req), s_(s) { s_.started++; }
  ~ScriptRunner() override {
    s_.finished++;
    if (!done_) s_.cancelled++;
  }
  engine::GenerationEvent step() override {
    if (s_.delay.count()) std::this_thread::sleep_for(s_.delay);
    engine::GenerationEvent ev;
    ev.prompt_tokens = int64_t(req_.prompt.size());
    ev.cached_tokens = std::min(s_.cached_tokens, ev.prompt_tokens);
    const std::string& r = s_.reply;
    bool out_of_text = !s_.endless && pos_ >= r.size();
    if (out_of_text || int64_t(n_) >= req_.max_tokens) {
      ev.finished = done_ = true;
      ev.finish_reason = out_of_text ? engine::FinishReason::Stop : engine::FinishReason::Length;
      ev.completion_tokens = n_;
      return ev;
    }
    char c = r[pos_++ % r.size()];
    ++n_;
    text_ += c;
    ev.tokens = {int32_t((unsigned char)c)};
    if (req_.sampling.logprobs) {
      engine::SampleResult sr{int32_t((unsigned char)c), -0.5f, {}};
      for (int k = 0; k < req_.sampling.top_logprobs; ++k) sr.top.push_back({int32_t('a' + k), -1.0f - k});
      ev.samples.push_back(sr);
    }
    for (auto& stop : req_.stop) {
      auto at = text_.find(stop);
      if (at != std::string::npos) {  // release only the text before the stop string
        ev.text = text_.substr(released_, at > released_ ? at - released_ : 0);
        released_ = text_.size();
        ev.finished = done_ = true;
        ev.finish_reason = engine::FinishReason::Stop;
        ev.completion_tokens = n_;
        return ev;
      }
    }
    ev.text = text_.substr(released_);
    released_ = text_.size();
    ev.completion_tokens = n_;
    return ev;
  }

 private:
  engine::GenerationRequest req_;
  Script& s_;
  size_t pos_ = 0, released_ = 0;
  int n_ = 0;
  std::string text_;
  bool done_ = false;
};

class FakeBackend : public server::Backend {
 public:
  explicit FakeBackend(int64_t ctx = 4096, std::string name = "fake-model")
      : ctx_(ctx), name_(std::move(name)), engine_([this](const engine::GenerationRequest& r) { return std::make_unique<ScriptRunner>(r, script); }) {}
  Script script;
  nlohmann::ordered_json last_messages, last_tools, last_extra;
  server::ConstraintSpec last_constraint;

  std::string model_id() const override { return name_; }
  int64_t context_length() const override { return ctx_; }
  const tok::Tokenizer& tokenizer() const override { return tok_; }
  server::RenderedPrompt render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     const nlohmann::ordered_json& extra) const override {
    auto* self = const_cast<FakeBackend*>(this);
    self->last_messages = messages;
    self->last_tools = tools;
    self->last_extra = extra;
    return {tok_.encode(render_text(messages), false, false), false};
  }
  static std::string render_text(const nlohmann::ordered_json& messages) {
    std::string text;
    for (auto& m : messages)
      text += m["role"].get<std::string>() + ": " + (m["content"].is_string() ? m["content"].get<std::string>() : "") + "\n";
    return text + "assistant: ";
  }
  std::vector<int32_t> encode_prompt(const std::string& text) const override { return tok_.encode(text, true, true); }
  std::unique_ptr<parsers::OutputParser> make_parser(const nlohmann::ordered_json&, bool) const override { return nullptr; }
  bool apply_constraint(engine::GenerationRequest&, const server::ConstraintSpec& spec) const override {
    const_cast<FakeBackend*>(this)->last_constraint = spec;
    return false;
  }
  engine::Engine& engine() override { return engine_; }
  server::EngineStats engine_stats() const override {
    return {engine_.queued(), engine_.running(), 0.0, 0.0, 0.0};
  }

 private:
  int64_t ctx_;
  std::string name_;
  ByteTokenizer tok_;
  engine::SerialEngine engine_;
};

}  // namespace rapid::testing
