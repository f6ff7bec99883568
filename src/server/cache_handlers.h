// GET /v1/cache (KV pool, prefix cache, disk snapshots, speculation figures) and
// DELETE /v1/cache (drop every unused cached prefix and every disk snapshot).
#pragma once
#include "server/handler_context.h"

namespace rapid::server {

void handle_cache_info(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_cache_purge(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace rapid::server
