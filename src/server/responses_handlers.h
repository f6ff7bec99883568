// Endpoint of the OpenAI Responses API (used by Codex CLI).
#pragma once
#include "server/handler_context.h"
#include "server/responses_request.h"
#include "server/turn.h"

namespace rapid::server {

void handle_responses(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
// A Responses body as the turn it asks for (see chat_turn).
TurnSpec responses_turn(HandlerContext& ctx, const nlohmann::ordered_json& body, ResponsesRequest& rr);

}  // namespace rapid::server
