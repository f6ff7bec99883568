// vLLM's render endpoints (`POST /v1/chat/completions/render`, `/v1/completions/render`,
// `/v1/messages/render`, `/v1/responses/render`): the request a body would become, without running
// it — the prompt's token ids exactly as this server would prefill them (template, tool rewriting,
// context fit) and the sampling parameters, in the shape of vLLM's GenerateRequest. Prefix-aware
// routers (llm-d's precise prefix scorer) call them to hash a request's blocks the way the replica's
// KV events do.
#pragma once
#include "server/handler_context.h"

namespace rapid::server {

void handle_chat_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_messages_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses_render(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace rapid::server
