#include "server/render_handlers.h"

#include "server/anthropic_handlers.h"
#include "server/openai_handlers.h"
#include "server/responses_handlers.h"

namespace rapid::server {

using json = nlohmann::ordered_json;

namespace {

// vLLM's SamplingParams names; top_k 0 (off here) is -1 there.
json sampling_params(const engine::GenerationRequest& g) {
  const engine::SamplingParams& s = g.sampling;
  return {{"max_tokens", g.max_tokens},
          {"min_tokens", g.min_tokens},
          {"temperature", s.temperature},
          {"top_p", s.top_p},
          {"top_k", s.top_k > 0 ? s.top_k : -1},
          {"min_p", s.min_p},
          {"repetition_penalty", s.repetition_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"seed", s.seed ? json(*s.seed) : json(nullptr)},
          {"stop", g.stop},
          {"stop_token_ids", g.stop_token_ids},
          {"ignore_eos", g.ignore_eos}};
}

json generate_request(const HandlerContext& ctx, const TurnSpec& spec, bool stream) {
  return {{"request_id", random_id("render-")},
          {"token_ids", spec.gen.prompt},
          {"sampling_params", sampling_params(spec.gen)},
          {"model", ctx.backend.model_id()},
          {"stream", stream}};
}

// What `to_turn` (the generation handler's own body-to-turn step) makes of the request.
template <class Body>
json render(HandlerContext& ctx, const httplib::Request& req, TurnSpec (*to_turn)(HandlerContext&, const json&, Body&)) {
  Body body;
  TurnSpec spec = to_turn(ctx, ctx.body(req), body);
  return generate_request(ctx, spec, body.stream);
}

}  // namespace

void handle_chat_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  send_json(res, 200, render(ctx, req, chat_turn));
}

// vLLM answers a list (one entry per prompt of a batched body); a body here holds one prompt.
void handle_completions_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  send_json(res, 200, json::array({render(ctx, req, completion_turn)}));
}

void handle_messages_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  send_json(res, 200, render(ctx, req, messages_turn));
}

void handle_responses_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  send_json(res, 200, render(ctx, req, responses_turn));
}

}  // namespace rapid::server
