#include "server/render_handlers.h"

#include "server/anthropic_handlers.h"
#include "server/openai_handlers.h"
#include "server/responses_handlers.h"

namespace rapid::server {

using json = nlohmann::ordered_json;

namespace {

// vLLM's SamplingParams names; top_k 0 (off here) is -1 there.
json sampling_params(const GenerationRequest& g) {
  const SamplingParams& s = g.sampling;
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

}  // namespace

void handle_chat_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ChatRequest cr;
  TurnSpec spec = chat_turn(ctx, parse_json_body(req), cr);
  send_json(res, 200, generate_request(ctx, spec, cr.stream));
}

// vLLM answers a list (one entry per prompt of a batched body); a body here holds one prompt.
void handle_completions_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  CompletionRequest cr;
  TurnSpec spec = completion_turn(ctx, parse_json_body(req), cr);
  send_json(res, 200, json::array({generate_request(ctx, spec, cr.stream)}));
}

void handle_messages_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  MessagesRequest mr;
  TurnSpec spec = messages_turn(ctx, parse_json_body(req), mr);
  send_json(res, 200, generate_request(ctx, spec, mr.stream));
}

void handle_responses_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ResponsesRequest rr;
  TurnSpec spec = responses_turn(ctx, parse_json_body(req), rr);
  send_json(res, 200, generate_request(ctx, spec, rr.stream));
}

}  // namespace rapid::server
