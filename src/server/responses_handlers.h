// Endpoint of the OpenAI Responses API (used by Codex CLI).
#pragma once
#include "server/handler_context.h"

namespace rapid::server {

void handle_responses(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace rapid::server
