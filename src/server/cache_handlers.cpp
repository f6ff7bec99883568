#include "server/cache_handlers.h"

#include "server/api_error.h"

namespace rapid::server {

namespace {
void reply(httplib::Response& res, const nlohmann::ordered_json& j) {
  if (j.is_null()) throw ApiError(404, "this server has no KV cache");
  send_json(res, 200, j);
}
}  // namespace

void handle_cache_info(HandlerContext& ctx, const httplib::Request&, httplib::Response& res) {
  reply(res, ctx.backend.cache_info());
}

void handle_cache_purge(HandlerContext& ctx, const httplib::Request&, httplib::Response& res) {
  reply(res, ctx.backend.purge_cache());
}

}  // namespace rapid::server
