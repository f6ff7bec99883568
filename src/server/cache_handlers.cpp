#include "server/cache_handlers.h"

#include <algorithm>

#include "server/api_error.h"

namespace rapid::server {

namespace {
void reply(httplib::Response& res, const nlohmann::ordered_json& j) {
  if (j.is_null()) throw ApiError(404, "this server has no KV cache");
  send_json(res, 200, j);
}

}  // namespace

void handle_cache_info(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  nlohmann::ordered_json info = ctx.backend.cache_info();
  // ?sequences=1 lists what the prefix cache holds (inspection; as large as the cached prompts).
  if (!info.is_null() && query_param(req.target, "sequences") == "1") {
    nlohmann::ordered_json c = ctx.backend.cached_contents();
    info["prefix_cache"]["sequences"] = std::move(c["sequences"]);
    info["prefix_cache"]["checkpoint_prefixes"] = std::move(c["checkpoints"]);
  }
  reply(res, info);
}

void handle_cache_purge(HandlerContext& ctx, const httplib::Request&, httplib::Response& res) {
  reply(res, ctx.backend.purge_cache());
}

}  // namespace rapid::server
