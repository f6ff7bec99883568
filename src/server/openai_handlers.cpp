#include "server/openai_handlers.h"

#include "common/log.h"
#include "server/embeddings.h"
#include "server/openai_format.h"
#include "server/openai_request.h"
#include "server/sse.h"
#include "server/turn_warmer.h"

namespace rapid::server {

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

// Forced tool calls are decoded against a schema: the named function's parameters, or for
// "required" any one of the tools as {"name","arguments"}.
static ConstraintSpec tool_constraint(const json& tools, ToolMode mode, const std::string& forced) {
  ConstraintSpec c;
  if (mode == ToolMode::Named) {
    for (auto& t : tools)
      if (t["function"]["name"] == forced) {
        c.kind = ConstraintSpec::Kind::JsonSchema;
        c.schema = t["function"]["parameters"];
      }
  } else if (mode == ToolMode::Required) {
    json any = json::array();
    for (auto& t : tools)
      any.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", t["function"]["name"]}}}, {"arguments", t["function"]["parameters"]}}},
                     {"required", {"name", "arguments"}}});
    c.kind = ConstraintSpec::Kind::JsonSchema;
    c.schema = {{"anyOf", any}};
  }
  return c;
}

TurnSpec make_chat_turn(HandlerContext& ctx, const json& messages, const json& tools, ToolMode mode,
                        const std::string& forced, const ConstraintSpec& constraint, engine::GenerationRequest gen,
                        const json& template_extra) {
  TurnSpec spec;
  spec.tools = tools;
  spec.tool_mode = mode;
  spec.forced_name = forced;
  // tool_choice "none": the template still sees no tools, so the model is not invited to call.
  RenderedPrompt p = ctx.backend.render_chat(messages, mode == ToolMode::None ? json::array() : tools, template_extra);
  spec.starts_in_reasoning = p.starts_in_reasoning;
  gen.checkpoint_at = p.history_end;
  ctx.fit_context(gen, std::move(p.tokens));
  spec.constraint = (mode == ToolMode::Named || mode == ToolMode::Required) ? tool_constraint(tools, mode, forced)
                                                                             : constraint;
  spec.gen = std::move(gen);
  if (ctx.backend.warms_turns()) {
    Backend& backend = ctx.backend;
    TurnInputs in{messages, mode == ToolMode::None ? json::array() : tools, template_extra};
    spec.after = [&backend, in = std::move(in)](const TurnResult& r) { warm_next_turn(backend, in, r); };
  }
  return spec;
}

static std::string fingerprint(const HandlerContext& ctx) {
  return system_fingerprint(ctx.backend.model_id(), ctx.backend.context_length());
}

// When this server started: the `created` time of the model it serves.
static const int64_t kStartedAt = unix_now();

namespace {

// Streams n choices one after another (the serial engine runs them in turn anyway): one Turn per
// choice, usage summed over them, errors in OpenAI's shape. Chat and completions differ only in
// the frames they write, supplied by the hooks below.
class ChoicesStream : public SsePump {
 public:
  ChoicesStream(HandlerContext& ctx, std::vector<TurnSpec> specs) : ctx_(ctx), specs_(std::move(specs)) {
    // The first generation starts here, in the handler, so a refused setup is still an HTTP error.
    turn_ = std::make_unique<Turn>(ctx_.backend, &ctx_.metrics, specs_[0]);
  }

  bool pump(std::string& out) override {
    if (done_) return false;
    if (!turn_) turn_ = std::make_unique<Turn>(ctx_.backend, &ctx_.metrics, specs_[index_]);
    if (!opened_) {
      opened_ = true;
      open_choice(out);
    }
    auto d = turn_->next(100ms);
    if (!d) return true;
    write_delta(*d, out);
    if (!d->finished) return true;
    if (d->reason == engine::FinishReason::Error) {
      fail(out, d->error.empty() ? "generation failed" : d->error);
      done_ = true;
      return false;
    }
    usage_.prompt_tokens = d->prompt_tokens;
    usage_.cached_tokens = d->cached_tokens;
    usage_.completion_tokens += d->completion_tokens;
    close_choice(*d, out);
    turn_.reset();
    opened_ = false;
    if (++index_ < int(specs_.size())) return true;
    close_stream(usage_, out);
    out += sse_done();
    done_ = true;
    return false;
  }
  void fail(std::string& out, const std::string& msg) override {
    out += sse_data(openai_error_body(500, msg));
    out += sse_done();
  }
  void cancel() override {
    if (turn_) turn_->cancel();
  }

 protected:
  virtual void open_choice(std::string& out) = 0;
  virtual void write_delta(const TurnDelta& d, std::string& out) = 0;
  virtual void close_choice(const TurnDelta& last, std::string& out) = 0;
  virtual void close_stream(const Usage& usage, std::string& out) = 0;

  HandlerContext ctx_;  // a copy: it holds the model until the stream ends
  int index_ = 0;  // the choice being streamed

 private:
  std::vector<TurnSpec> specs_;
  std::unique_ptr<Turn> turn_;
  bool opened_ = false;
  bool done_ = false;
  Usage usage_;
};

class ChatStream : public ChoicesStream {
 public:
  ChatStream(HandlerContext& ctx, std::vector<TurnSpec> specs, ChatChunker chunker, bool logprobs)
      : ChoicesStream(ctx, std::move(specs)), ch_(std::move(chunker)), logprobs_(logprobs) {}

 protected:
  void open_choice(std::string& out) override {
    out += sse_data(ch_.chunk(index_, {{"role", "assistant"}, {"content", ""}}));
  }
  void write_delta(const TurnDelta& d, std::string& out) override {
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.tool_calls.empty()) {
      json calls = json::array();
      for (auto& t : d.tool_calls) calls.push_back(chat_tool_call_delta(t));
      delta["tool_calls"] = std::move(calls);
    }
    json lp = logprobs_ && !d.samples.empty() ? chat_logprobs(ctx_.backend.tokenizer(), d.samples) : json(nullptr);
    if (!delta.empty() || !lp.is_null()) out += sse_data(ch_.chunk(index_, delta, nullptr, lp));
  }
  void close_choice(const TurnDelta& last, std::string& out) override {
    out += sse_data(ch_.chunk(index_, json::object(), openai_finish_reason(last.reason, last.has_tool_calls)));
  }
  void close_stream(const Usage& usage, std::string& out) override {
    if (ch_.include_usage) out += sse_data(ch_.usage_chunk(usage));
  }

 private:
  ChatChunker ch_;
  bool logprobs_;
};

class CompletionStream : public ChoicesStream {
 public:
  CompletionStream(HandlerContext& ctx, std::vector<TurnSpec> specs, std::string id, std::string model,
                   int64_t created, bool include_usage, bool logprobs, std::string echo)
      : ChoicesStream(ctx, std::move(specs)), id_(std::move(id)), model_(std::move(model)), created_(created),
        include_usage_(include_usage), logprobs_(logprobs), echo_(std::move(echo)) {}

 protected:
  json chunk(const json& text, const json& finish, const json& lp) const {
    json c = {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_},
              {"system_fingerprint", fingerprint(ctx_)}, {"choices", json::array({{{"index", index_}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}}})}};
    if (include_usage_) c["usage"] = nullptr;
    return c;
  }
  void open_choice(std::string& out) override {
    offset_ = 0;
    if (!echo_.empty()) {
      out += sse_data(chunk(echo_, nullptr, nullptr));
      offset_ = echo_.size();
    }
  }
  void write_delta(const TurnDelta& d, std::string& out) override {
    json lp = logprobs_ && !d.samples.empty() ? completion_logprobs(ctx_.backend.tokenizer(), d.samples, offset_)
                                              : json(nullptr);
    offset_ += d.content.size();
    if (!d.content.empty() || !lp.is_null()) out += sse_data(chunk(d.content, nullptr, lp));
  }
  void close_choice(const TurnDelta& last, std::string& out) override {
    out += sse_data(chunk("", openai_finish_reason(last.reason, false), nullptr));
  }
  void close_stream(const Usage& usage, std::string& out) override {
    if (include_usage_)
      out += sse_data({{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_},
                       {"system_fingerprint", fingerprint(ctx_)}, {"choices", json::array()},
                       {"usage", openai_usage(usage)}});
  }

 private:
  std::string id_, model_;
  int64_t created_;
  bool include_usage_, logprobs_;
  std::string echo_;
  size_t offset_ = 0;  // byte offset of the next text in this choice (echo included), for logprobs
};

std::vector<TurnSpec> replicate(TurnSpec spec, int n) {
  std::vector<TurnSpec> v;
  if (n > 1) spec.after = nullptr;  // the client continues from one of n answers: nothing to predict
  for (int i = 0; i < n; ++i) {
    v.push_back(spec);
    // Distinct choices from one seed: offset it per choice.
    if (spec.gen.sampling.seed) v.back().gen.sampling.seed = *spec.gen.sampling.seed + uint64_t(i);
  }
  return v;
}

void check_generation_error(const TurnResult& r) {
  if (r.reason == engine::FinishReason::Error) throw ApiError(500, r.error.empty() ? "generation failed" : r.error);
}

}  // namespace

TurnSpec chat_turn(HandlerContext& ctx, const json& body, ChatRequest& cr) {
  cr = parse_chat_request(body, ctx.limits());
  ctx.check_model(cr.model);
  parse_generation_prompt_flags(body, cr.template_extra);
  TurnSpec spec = make_chat_turn(ctx, cr.messages, cr.tools, cr.tool_choice.mode, cr.tool_choice.name, cr.constraint,
                                 cr.gen, cr.template_extra);
  spec.parallel_tool_calls = cr.parallel_tool_calls;
  return spec;
}

TurnSpec completion_turn(HandlerContext& ctx, const json& body, CompletionRequest& cr) {
  cr = parse_completion_request(body, ctx.limits());
  ctx.check_model(cr.model);
  TurnSpec spec;
  spec.tool_mode = ToolMode::None;
  spec.gen = cr.gen;
  ctx.fit_context(spec.gen, cr.prompt_is_ids ? cr.prompt_ids : ctx.backend.encode_prompt(cr.prompt_text));
  return spec;
}

void handle_chat_completions(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  json body = ctx.body(req);
  ChatRequest cr;
  TurnSpec spec = chat_turn(ctx, body, cr);
  std::vector<TurnSpec> specs = replicate(std::move(spec), cr.n);
  ChatChunker chunker{random_id("chatcmpl-"), ctx.backend.model_id(), fingerprint(ctx), unix_now(), cr.include_usage};
  if (cr.stream) {
    start_sse(res, std::make_shared<ChatStream>(ctx, std::move(specs), std::move(chunker), cr.logprobs));
    return;
  }
  json choices = json::array();
  Usage usage;
  for (int i = 0; i < cr.n; ++i) {
    Turn turn(ctx.backend, &ctx.metrics, specs[i]);
    TurnResult r = turn.collect();
    check_generation_error(r);
    usage.prompt_tokens = r.prompt_tokens;
    usage.cached_tokens = r.cached_tokens;
    usage.completion_tokens += r.completion_tokens;
    choices.push_back({{"index", i},
                       {"message", chat_message(r)},
                       {"logprobs", cr.logprobs ? chat_logprobs(ctx.backend.tokenizer(), r.samples) : json(nullptr)},
                       {"finish_reason", openai_finish_reason(r.reason, !r.tool_calls.empty())}});
  }
  send_json(res, 200,
            {{"id", chunker.id}, {"object", "chat.completion"}, {"created", chunker.created},
             {"model", chunker.model}, {"system_fingerprint", chunker.fingerprint}, {"choices", choices},
             {"usage", openai_usage(usage)}});
}

void handle_completions(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  json body = ctx.body(req);
  CompletionRequest cr;
  TurnSpec spec = completion_turn(ctx, body, cr);
  std::string echo = cr.echo ? (cr.prompt_is_ids ? ctx.backend.tokenizer().decode(cr.prompt_ids) : cr.prompt_text) : "";
  std::vector<TurnSpec> specs = replicate(std::move(spec), cr.n);
  std::string id = random_id("cmpl-");
  int64_t created = unix_now();
  if (cr.stream) {
    start_sse(res, std::make_shared<CompletionStream>(ctx, std::move(specs), id, ctx.backend.model_id(), created,
                                                      cr.include_usage, cr.logprobs >= 0, echo));
    return;
  }
  json choices = json::array();
  Usage usage;
  for (int i = 0; i < cr.n; ++i) {
    Turn turn(ctx.backend, &ctx.metrics, specs[i]);
    TurnResult r = turn.collect();
    check_generation_error(r);
    usage.prompt_tokens = r.prompt_tokens;
    usage.cached_tokens = r.cached_tokens;
    usage.completion_tokens += r.completion_tokens;
    choices.push_back({{"index", i},
                       {"text", echo + r.content},
                       {"logprobs", cr.logprobs >= 0 ? completion_logprobs(ctx.backend.tokenizer(), r.samples, echo.size())
                                                     : json(nullptr)},
                       {"finish_reason", openai_finish_reason(r.reason, false)}});
  }
  send_json(res, 200,
            {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", ctx.backend.model_id()},
             {"system_fingerprint", fingerprint(ctx)}, {"choices", choices}, {"usage", openai_usage(usage)}});
}

// OpenAI's model object, plus vLLM's max_model_len and LM Studio's state (loaded or not: a
// model not loaded is loaded by its first request).
static json model_card(const ModelStatus& m) {
  json card = {{"id", m.name}, {"object", "model"}, {"created", kStartedAt}, {"owned_by", "rapid-mlx"}};
  if (m.loaded) card["max_model_len"] = m.context_length;
  card["state"] = m.loaded ? "loaded" : "not-loaded";
  if (!m.aliases.empty()) card["aliases"] = m.aliases;
  return card;
}

void handle_list_models(const ModelRegistry& models, const EmbeddingService* embeddings, const httplib::Request&,
                        httplib::Response& res) {
  json data = json::array();
  for (const ModelStatus& m : models.status()) data.push_back(model_card(m));
  // A separate --embedding-model is listed too, so clients can discover its id.
  if (embeddings && !embeddings->shared_with_chat())
    data.push_back({{"id", embeddings->id()}, {"object", "model"}, {"created", kStartedAt},
                    {"owned_by", "rapid-mlx"}, {"max_model_len", embeddings->engine().options().max_input_tokens}});
  send_json(res, 200, {{"object", "list"}, {"data", std::move(data)}});
}

void handle_get_model(const ModelRegistry& models, const EmbeddingService*, const httplib::Request& req,
                      httplib::Response& res) {
  std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
  if (id.empty() || !models.knows(id)) throw models.not_found(id);
  std::string name = models.canonical(id);
  for (const ModelStatus& m : models.status())
    if (m.name == name) return send_json(res, 200, model_card(m));
  throw models.not_found(id);
}

}  // namespace rapid::server
