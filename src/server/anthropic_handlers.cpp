#include "server/anthropic_handlers.h"

#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/openai_handlers.h"
#include "server/sse.h"

namespace rapid::server {

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

class MessagesStream : public SsePump {
 public:
  MessagesStream(HandlerContext& ctx, TurnSpec spec, std::string id)
      : ctx_(ctx), spec_(std::move(spec)), id_(std::move(id)) {
    turn_ = std::make_unique<Turn>(ctx_.backend, &ctx_.metrics, spec_);
  }

  bool pump(std::string& out) override {
    if (done_) return false;
    auto d = turn_->next(100ms);
    if (!d) return true;
    // message_start waits for the engine's first event: only then is the prefix-cache hit known,
    // and its usage is the real one (keep-alive comments cover the wait).
    if (!opened_ && d->reason != engine::FinishReason::Error) {
      opened_ = true;
      json msg = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", ctx_.backend.model_id()},
                  {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                  {"usage", anthropic_usage(d->prompt_tokens, d->cached_tokens, 0)}};
      out += sse_event("message_start", {{"type", "message_start"}, {"message", msg}});
      out += sse_event("ping", {{"type", "ping"}});
    }
    blocks_.write(*d, out);
    if (!d->finished) return true;
    done_ = true;
    if (d->reason == engine::FinishReason::Error) {
      fail(out, d->error.empty() ? "generation failed" : d->error);
      return false;
    }
    blocks_.close(out);
    out += sse_event("message_delta",
                     {{"type", "message_delta"},
                      {"delta", {{"stop_reason", anthropic_stop_reason(d->reason, d->has_tool_calls, d->stop_sequence)}, {"stop_sequence", anthropic_stop_sequence(d->stop_sequence)}}},
                      {"usage", anthropic_usage(d->prompt_tokens, d->cached_tokens, d->completion_tokens)}});
    out += sse_event("message_stop", {{"type", "message_stop"}});
    return false;
  }
  void fail(std::string& out, const std::string& msg) override {
    out += sse_event("error", anthropic_error_body(500, msg));
  }
  void cancel() override {
    if (turn_) turn_->cancel();
  }

 private:
  HandlerContext ctx_;  // a copy: it holds the model until the stream ends
  TurnSpec spec_;
  std::string id_;
  std::unique_ptr<Turn> turn_;
  AnthropicBlockWriter blocks_;
  bool opened_ = false;
  bool done_ = false;
};

}  // namespace

// The parts of a Messages body beyond the conversation itself: structured output and prefill.
static void read_messages_extras(const json& body, MessagesRequest& mr) {
  mr.constraint = parse_output_config(body, mr.template_extra);
  if (take_assistant_prefill(mr.messages)) mr.template_extra["continue_final_message"] = true;
}

// Anthropic words an over-long prompt its own way ("prompt is too long: N tokens > M maximum");
// clients such as Claude Code match that text to trigger compaction.
static TurnSpec make_messages_turn(HandlerContext& ctx, const MessagesRequest& mr) {
  try {
    return make_chat_turn(ctx, mr.messages, mr.tools, mr.tool_mode, mr.forced_name, mr.constraint, mr.gen,
                          mr.template_extra);
  } catch (const ApiError& e) {
    if (e.code() != "context_length_exceeded") throw;
    RenderedPrompt p = ctx.backend.render_chat(mr.messages, mr.tool_mode == ToolMode::None ? json::array() : mr.tools,
                                               mr.template_extra);
    throw ApiError(400, "prompt is too long: " + std::to_string(p.tokens.size()) + " tokens > " +
                            std::to_string(ctx.backend.context_length() - 1) + " maximum",
                   e.param(), e.code());
  }
}

TurnSpec messages_turn(HandlerContext& ctx, const json& body, MessagesRequest& mr) {
  mr = parse_messages_request(body, ctx.limits());
  ctx.check_model(mr.model);
  read_messages_extras(body, mr);
  TurnSpec spec = make_messages_turn(ctx, mr);
  spec.id_prefix = "toolu_";
  spec.parallel_tool_calls = mr.parallel_tool_calls;
  return spec;
}

void handle_messages(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  json body = ctx.body(req);
  MessagesRequest mr;
  TurnSpec spec = messages_turn(ctx, body, mr);
  std::string id = random_id("msg_");
  if (mr.stream) {
    start_sse(res, std::make_shared<MessagesStream>(ctx, std::move(spec), id));
    return;
  }
  Turn turn(ctx.backend, &ctx.metrics, spec);
  TurnResult r = turn.collect();
  if (r.reason == engine::FinishReason::Error) throw ApiError(500, r.error.empty() ? "generation failed" : r.error);
  send_json(res, 200, anthropic_message(id, ctx.backend.model_id(), r));
}

void handle_count_tokens(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  json body = ctx.body(req);
  MessagesRequest mr = parse_messages_request(body, ctx.limits(), /*for_count=*/true);
  ctx.check_model(mr.model);
  read_messages_extras(body, mr);
  RenderedPrompt p = ctx.backend.render_chat(mr.messages, mr.tool_mode == ToolMode::None ? json::array() : mr.tools,
                                             mr.template_extra);
  send_json(res, 200, {{"input_tokens", int64_t(p.tokens.size())}});
}

}  // namespace rapid::server
