#include "server/responses_handlers.h"

#include "server/openai_format.h"
#include "server/openai_handlers.h"
#include "server/responses_format.h"
#include "server/sse.h"

namespace rapid::server {

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

class ResponsesStream : public SsePump {
 public:
  ResponsesStream(HandlerContext& ctx, std::shared_ptr<ResponsesRequest> req, TurnSpec spec, ResponseShell shell)
      : ctx_(ctx), req_(std::move(req)), spec_(std::move(spec)), shell_(std::move(shell)), writer_(&seq_) {
    shell_.req = req_.get();
    turn_ = std::make_unique<Turn>(ctx_.backend, &ctx_.metrics, spec_);
  }

  bool pump(std::string& out) override {
    if (done_) return false;
    if (!opened_) {
      opened_ = true;
      json r = response_object(shell_, "in_progress", json::array(), nullptr);
      out += writer_.event("response.created", {{"response", r}});
      out += writer_.event("response.in_progress", {{"response", r}});
    }
    auto d = turn_->next(100ms);
    if (!d) return true;
    writer_.write(*d, out);
    if (!d->finished) return true;
    done_ = true;
    if (d->reason == engine::FinishReason::Error) {
      fail(out, d->error.empty() ? "generation failed" : d->error);
      return false;
    }
    bool truncated = d->reason == engine::FinishReason::Length;
    writer_.close(out, truncated);
    json usage = responses_usage(d->prompt_tokens, d->cached_tokens, d->completion_tokens);
    json output = writer_.output();
    if (output.empty()) output.push_back(empty_message_item(truncated ? "incomplete" : "completed"));
    if (truncated) {
      out += writer_.event("response.incomplete",
                           {{"response", response_object(shell_, "incomplete", output, usage,
                                                         {{"reason", "max_output_tokens"}})}});
    } else {
      out += writer_.event("response.completed", {{"response", response_object(shell_, "completed", output, usage)}});
    }
    return false;
  }
  void fail(std::string& out, const std::string& msg) override {
    json r = response_object(shell_, "failed", writer_.output(), nullptr);
    r["error"] = {{"code", "server_error"}, {"message", msg}};
    out += writer_.event("response.failed", {{"response", r}});
  }
  void cancel() override {
    if (turn_) turn_->cancel();
  }

 private:
  HandlerContext ctx_;  // a copy: it holds the model until the stream ends
  std::shared_ptr<ResponsesRequest> req_;
  TurnSpec spec_;
  ResponseShell shell_;
  int seq_ = 0;
  ResponsesEventWriter writer_;
  std::unique_ptr<Turn> turn_;
  bool opened_ = false;
  bool done_ = false;
};

}  // namespace

TurnSpec responses_turn(HandlerContext& ctx, const json& body, ResponsesRequest& rr) {
  rr = parse_responses_request(body, ctx.limits());
  ctx.check_model(rr.model);
  TurnSpec spec = make_chat_turn(ctx, rr.messages, rr.tools, rr.tool_choice.mode, rr.tool_choice.name, rr.constraint,
                                 rr.gen, rr.template_extra);
  rr.gen.max_tokens = spec.gen.max_tokens;
  spec.parallel_tool_calls = rr.parallel_tool_calls;
  return spec;
}

void handle_responses(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  json body = ctx.body(req);
  auto rr = std::make_shared<ResponsesRequest>();
  TurnSpec spec = responses_turn(ctx, body, *rr);
  ResponseShell shell{random_id("resp_"), ctx.backend.model_id(), unix_now(), rr.get()};
  if (rr->stream) {
    start_sse(res, std::make_shared<ResponsesStream>(ctx, rr, std::move(spec), shell));
    return;
  }
  Turn turn(ctx.backend, &ctx.metrics, spec);
  TurnResult r = turn.collect();
  if (r.reason == engine::FinishReason::Error) throw ApiError(500, r.error.empty() ? "generation failed" : r.error);
  json usage = responses_usage(r.prompt_tokens, r.cached_tokens, r.completion_tokens);
  bool incomplete = r.reason == engine::FinishReason::Length;
  send_json(res, 200,
            response_object(shell, incomplete ? "incomplete" : "completed", responses_output(r), usage,
                            incomplete ? json{{"reason", "max_output_tokens"}} : json(nullptr)));
}

}  // namespace rapid::server
