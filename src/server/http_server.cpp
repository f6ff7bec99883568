#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <regex>

#include "common/error.h"
#include "common/log.h"
#include "server/anthropic_handlers.h"
#include "server/auth.h"
#include "server/client_liveness.h"
#include "server/cache_handlers.h"
#include "server/cors.h"
#include "server/embeddings.h"
#include "server/openai_handlers.h"
#include "server/openapi.h"
#include "server/render_handlers.h"
#include "server/responses_handlers.h"
#include "server/sse.h"
#include "server/turn.h"

namespace rapid::server {

using Fn = void (*)(HandlerContext&, const httplib::Request&, httplib::Response&);
using ListFn = void (*)(const ModelRegistry&, const EmbeddingService*, const httplib::Request&, httplib::Response&);
using EmbedFn = void (*)(const ModelRegistry&, EmbeddingService*, const httplib::Request&, httplib::Response&);

struct Route {
  const char* method;
  const char* path;   // without the /v1 prefix; "/models/" matches "/models/{id}"
  const char* label;  // the metrics label (a template, never the client's path)
  Fn fn;
  Lane lane;
  bool generation;    // goes through admission control
  ListFn listing = nullptr;  // instead of fn: answered from the registry, loading no model
  EmbedFn embed = nullptr;   // instead of fn: answered by the embedding service, acquiring no chat model
};

static const Route kRoutes[] = {
    {"POST", "/chat/completions", "/v1/chat/completions", handle_chat_completions, Lane::Slow, true},
    {"POST", "/completions", "/v1/completions", handle_completions, Lane::Slow, true},
    {"POST", "/messages", "/v1/messages", handle_messages, Lane::Slow, true},
    {"POST", "/messages/count_tokens", "/v1/messages/count_tokens", handle_count_tokens, Lane::Slow, false},
    {"POST", "/responses", "/v1/responses", handle_responses, Lane::Slow, true},
    {"POST", "/embeddings", "/v1/embeddings", nullptr, Lane::Slow, false, nullptr, handle_embeddings},
    {"POST", "/chat/completions/render", "/v1/chat/completions/render", handle_chat_render, Lane::Slow, false},
    {"POST", "/completions/render", "/v1/completions/render", handle_completions_render, Lane::Slow, false},
    {"POST", "/messages/render", "/v1/messages/render", handle_messages_render, Lane::Slow, false},
    {"POST", "/responses/render", "/v1/responses/render", handle_responses_render, Lane::Slow, false},
    {"GET", "/models", "/v1/models", nullptr, Lane::Fast, false, handle_list_models},
    {"GET", "/models/", "/v1/models/{id}", nullptr, Lane::Fast, false, handle_get_model},
    {"GET", "/cache", "/v1/cache", handle_cache_info, Lane::Fast, false},
    {"DELETE", "/cache", "/v1/cache", handle_cache_purge, Lane::Slow, false},
};

// The route path of a request path: "/v1/x" and "/x" are the same route (clients differ on
// whether a base URL includes /v1).
static std::string api_path(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 ? path.substr(3) : path;
}

static bool path_matches(const Route& r, const std::string& p) {
  std::string_view rp = r.path;
  if (rp.back() == '/') return p.size() > rp.size() && p.rfind(rp, 0) == 0;
  return p == rp;
}

static ApiFlavor flavor_of(const std::string& path) {
  return api_path(path).rfind("/messages", 0) == 0 ? ApiFlavor::Anthropic : ApiFlavor::OpenAI;
}

static const char* label_of(const std::string& path) {
  std::string p = api_path(path);
  for (const Route& r : kRoutes)
    if (path_matches(r, p)) return r.label;
  for (const char* open : {"/health", "/metrics", "/openapi.json"})
    if (path == open) return open;
  return "other";
}

static void send_error(httplib::Response& res, ApiFlavor f, const ApiError& e) {
  send_json(res, e.status(), error_body(f, e));
}

// Echoes a client's x-request-id when it is a plain token (it goes back into a header), else
// makes one up.
static std::string request_id(const httplib::Request& req) {
  std::string id = req.get_header_value("x-request-id");
  bool ok = !id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_.:/+=@").find(c) != std::string_view::npos;
  });
  return ok ? id : random_id("req_", 24);
}

static std::vector<std::pair<std::string, std::string>> patterns_for(const ServerOptions& o, const std::string& name) {
  std::vector<std::pair<std::string, std::string>> p;
  for (const std::string& pattern : o.model_aliases) p.emplace_back(pattern, name);
  return p;
}

HttpServer::HttpServer(Backend& backend, ServerOptions opts)
    // `opts` copied, not moved: the order the two arguments are evaluated in is unspecified.
    : HttpServer(ModelRegistry::single(backend, patterns_for(opts, backend.model_id())), opts) {}

HttpServer::HttpServer(std::shared_ptr<ModelRegistry> models, ServerOptions opts)
    : models_(std::move(models)), opts_(std::move(opts)) {
  FrontendOptions fo;
  fo.host = opts_.host;
  fo.port = opts_.port;
  fo.limits.max_body = opts_.max_body_bytes;
  fo.header_timeout_ms = opts_.header_timeout_ms;
  fo.body_timeout_ms = opts_.body_timeout_ms;
  fo.idle_timeout_ms = opts_.idle_timeout_ms;
  fo.workers = std::max(4, opts_.http_threads);
  fo.max_connections = std::max<size_t>(16, opts_.max_connections);
  fo.max_buffered_body = std::max<size_t>(256u << 20, 2 * opts_.max_body_bytes);
  front_ = std::make_unique<HttpFrontend>(
      fo, [this](const httplib::Request& req, httplib::Response& res) { return route(req, res); },
      [this](int status, const std::string& msg, const std::string& path, httplib::Response& res) {
        protocol_error(status, msg, path, res);
      });
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::protocol_error(int status, const std::string& msg, const std::string& path, httplib::Response& res) {
  send_error(res, flavor_of(path), ApiError(status, msg));
  std::string rid = random_id("req_", 24);
  res.set_header("x-request-id", rid);
  res.set_header("request-id", rid);
  metrics_.count_request(label_of(path), status);
}

Dispatch HttpServer::open_route(const std::string& path, httplib::Response& res) {
  if (path == "/health") {  // answered on the event thread itself: nothing can queue in front of it
    send_json(res, 200, {{"status", "ok"}, {"model", models_->default_name()}});
    return {};
  }
  Dispatch d;
  d.lane = Lane::Fast;
  if (path == "/metrics") {
    d.work = [this](httplib::Request&, httplib::Response& res) {
      HttpGauges h;
      const FrontendStats& f = front_->stats();
      h.connections_open = f.open.load();
      h.connections_accepted = f.accepted.load();
      h.connections_evicted = f.evicted.load();
      h.timeouts = f.timeouts.load();
      h.protocol_errors = f.protocol_errors.load();
      // Engine figures: the default model's, else the last used loaded one's (docs/api.md).
      std::shared_ptr<Backend> b = models_->any_loaded();
      EngineStats es = b ? b->engine_stats() : EngineStats{};
      h.admitted = admitted_.load();
      h.queued = std::max<int64_t>(0, h.admitted - es.running);
      res.status = 200;
      std::string text = metrics_.render(b ? b->model_id() : models_->default_name(), es, h);
      render_model_gauges(text, models_->status(), models_->loads(), models_->unloads());
      res.set_content(text, "text/plain; version=0.0.4");
    };
  } else {
    d.work = [this](httplib::Request&, httplib::Response& res) {
      send_json(res, 200, openapi_spec(models_->default_name()));
    };
  }
  return d;
}

// Admission control: generation requests beyond the running batch wait in a bounded queue; past
// it the client is told to come back (429, or Anthropic's 529 overloaded) instead of waiting
// behind hundreds of others.
bool HttpServer::admit(const Route& r, const std::string& path, httplib::Response& res) {
  int64_t limit = int64_t(opts_.max_running) + int64_t(opts_.max_queued_requests);
  int64_t n = admitted_.fetch_add(1) + 1;
  if (n <= limit) return true;
  admitted_.fetch_sub(1);
  metrics_.count_rejected();
  ApiFlavor f = flavor_of(path);
  send_error(res, f, ApiError(f == ApiFlavor::Anthropic ? 529 : 429,
                              "the server is at capacity (" + std::to_string(limit) +
                                  " generation requests in progress or queued); retry shortly",
                              "", "server_overloaded"));
  res.set_header("Retry-After", "1");
  metrics_.count_request(r.label, res.status);
  return false;
}

Dispatch HttpServer::route(const httplib::Request& req, httplib::Response& res) {
  std::string rid = request_id(req);
  res.set_header("x-request-id", rid);
  res.set_header("request-id", rid);
  std::string origin = req.get_header_value("Origin");
  add_cors_headers(opts_.allowed_origins, origin, res);
  const std::string& path = req.path;
  if (req.method == "OPTIONS") {  // CORS preflight: browsers send it without credentials
    answer_preflight(opts_.allowed_origins, req, res);
    metrics_.count_request(label_of(path), res.status);
    return {};
  }
  if (req.method == "GET" && (path == "/health" || path == "/metrics" || path == "/openapi.json"))
    return open_route(path, res);

  ApiFlavor flavor = flavor_of(path);
  if (!authorized(opts_.api_key, req.get_header_value("Authorization"), req.get_header_value("x-api-key"))) {
    send_error(res, flavor, ApiError(401, "invalid or missing API key", "", "invalid_api_key"));
    res.set_header("WWW-Authenticate", "Bearer realm=\"rapid-mlx\"");
    metrics_.count_request(label_of(path), 401);
    return {};
  }
  std::string p = api_path(path);
  const Route* route = nullptr;
  bool other_method = false;
  for (const Route& r : kRoutes) {
    if (!path_matches(r, p)) continue;
    if (req.method == r.method) route = &r;
    else other_method = true;
  }
  if (!route) {
    int status = other_method ? 405 : 404;
    send_error(res, flavor, ApiError(status, other_method ? "method " + req.method + " is not allowed on " + path
                                                          : "no route for " + req.method + " " + path));
    metrics_.count_request(label_of(path), status);
    return {};
  }
  if (route->generation && !admit(*route, path, res)) return {};

  Dispatch d;
  d.lane = route->lane;
  d.work = [this, route, flavor](httplib::Request& rq, httplib::Response& rs) {
    // Releases the admission slot when the response is over: for a stream that is when its
    // content provider is destroyed, after the last frame (or the client's departure).
    std::shared_ptr<void> slot;
    if (route->generation) slot = std::shared_ptr<void>(nullptr, [this](void*) { admitted_.fetch_sub(1); });
    if (std::string_view(route->path) == "/models/") {
      static const std::regex re(R"((?:/v1)?/models/(.+))");
      std::regex_match(rq.path, rq.matches, re);
    }
    try {
      if (route->listing) {
        route->listing(*models_, embeddings_, rq, rs);
      } else if (route->embed) {
        route->embed(*models_, embeddings_, rq, rs);
      } else {
        HandlerContext ctx = context_for(*route, rq);
        route->fn(ctx, rq, rs);
      }
    } catch (const ClientGone&) {
      metrics_.count_request(route->label, 499);
      throw;  // the front end closes the connection
    } catch (const ApiError& e) {
      send_error(rs, flavor, e);
    } catch (const rapid::Error& e) {
      // Refusals from the tokenizer/template layers are about the input.
      send_error(rs, flavor, ApiError(400, e.what()));
    } catch (const std::bad_alloc&) {
      send_error(rs, flavor, ApiError(413, "the request needs more memory than the server can give it"));
    } catch (const std::exception& e) {
      log::error(std::string(route->label) + ": " + e.what());
      send_error(rs, flavor, ApiError(500, e.what()));
    }
    metrics_.count_request(route->label, rs.status);
    if (route->generation && rs.is_chunked_content_provider_) {
      auto inner = rs.content_provider_resource_releaser_;
      rs.content_provider_resource_releaser_ = [inner, slot](bool ok) {
        if (inner) inner(ok);
      };
    }
  };
  return d;
}

// The request's model: a body's `model` (the body is parsed here once and handed on), or
// ?model= on /v1/cache; none means the default one. Loaded now if it is not, except for
// /v1/cache: inspecting or purging a model's cache is no reason to load it.
HandlerContext HttpServer::context_for(const Route& r, httplib::Request& req) {
  std::optional<nlohmann::ordered_json> body;
  std::string model;
  if (std::string_view(r.method) == "POST") {
    body = parse_json_body(req);
    auto it = body->is_object() ? body->find("model") : body->end();
    if (it != body->end() && it->is_string()) model = it->get<std::string>();
  } else {
    model = query_param(req.target, "model");
  }
  std::shared_ptr<Backend> b = models_->acquire(model, body.has_value());
  return HandlerContext{*b, metrics_, opts_, *models_, b, std::move(body), embeddings_};
}

int HttpServer::bind() {
  int port = front_->bind();
  opts_.port = port;
  return port;
}

void HttpServer::serve() { front_->run(); }

void HttpServer::start() {
  thread_ = std::thread([this] { serve(); });
  while (!front_->running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
  if (front_) front_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace rapid::server
