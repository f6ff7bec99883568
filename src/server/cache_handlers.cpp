#include "server/cache_handlers.h"

#include <algorithm>

#include "server/api_error.h"

namespace rapid::server {

namespace {
void reply(httplib::Response& res, const nlohmann::ordered_json& j) {
  if (j.is_null()) throw ApiError(404, "this server has no KV cache");
  send_json(res, 200, j);
}

// Whether the query string holds `name=1` (the front end does not split query parameters).
bool query_flag(const std::string& target, const std::string& name) {
  size_t q = target.find('?');
  for (size_t p = q; p != std::string::npos && p < target.size();) {
    size_t end = std::min(target.find('&', p + 1), target.size());
    if (target.compare(p + 1, end - p - 1, name + "=1") == 0) return true;
    p = end;
  }
  return false;
}
}  // namespace

void handle_cache_info(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  nlohmann::ordered_json info = ctx.backend.cache_info();
  // ?sequences=1 lists what the prefix cache holds (inspection; as large as the cached prompts).
  if (!info.is_null() && query_flag(req.target, "sequences")) {
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
