// Endpoints of the Anthropic API: messages and count_tokens.
#pragma once
#include "server/handler_context.h"

namespace rapid::server {

void handle_messages(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace rapid::server
