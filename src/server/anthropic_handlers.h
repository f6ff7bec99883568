// Endpoints of the Anthropic API: messages and count_tokens.
#pragma once
#include "server/anthropic_request.h"
#include "server/handler_context.h"
#include "server/turn.h"

namespace rapid::server {

void handle_messages(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
// A Messages body as the turn it asks for (see chat_turn).
TurnSpec messages_turn(HandlerContext& ctx, const nlohmann::ordered_json& body, MessagesRequest& mr);

}  // namespace rapid::server
