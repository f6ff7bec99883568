#include "server/http_server.h"

#include <httplib.h>

#include "common/error.h"
#include "common/log.h"
#include "server/anthropic_handlers.h"
#include "server/cache_handlers.h"
#include "server/auth.h"
#include "server/openai_handlers.h"
#include "server/openapi.h"
#include "server/responses_handlers.h"
#include "server/sse.h"

namespace rapid::server {

using json = nlohmann::ordered_json;

static ApiFlavor flavor_of(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::Anthropic : ApiFlavor::OpenAI;
}

static void send_error(httplib::Response& res, ApiFlavor f, const ApiError& e) {
  send_json(res, e.status(), error_body(f, e));
}

HttpServer::HttpServer(Backend& backend, ServerOptions opts)
    : backend_(backend), opts_(std::move(opts)), ctx_{backend_, metrics_, opts_},
      http_(std::make_unique<httplib::Server>()) {
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::routes() {
  httplib::Server& s = *http_;
  size_t threads = size_t(std::max(4, opts_.http_threads));
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(opts_.max_body_bytes);
  s.set_keep_alive_max_count(100000);
  s.set_keep_alive_timeout(60);
  s.set_read_timeout(60, 0);
  s.set_write_timeout(60, 0);
  s.set_tcp_nodelay(true);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (authorized(opts_.api_key, req.get_header_value("Authorization"), req.get_header_value("x-api-key")))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, flavor_of(req.path), ApiError(401, "invalid or missing API key", "", "invalid_api_key"));
    metrics_.count_request(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib raises itself (unknown route, body over the limit, bad request line) get
  // the calling API's error body too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = res.status == 404   ? "no route for " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is larger than the server's limit"
                      : res.status == 405 ? "method not allowed"
                                          : "the request could not be processed (HTTP " + std::to_string(res.status) + ")";
    send_json(res, res.status, error_body(flavor_of(req.path), ApiError(res.status, msg)));
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    log::error("unhandled error on " + req.path + ": " + msg);
    send_json(res, 500, error_body(flavor_of(req.path), ApiError(500, msg)));
  });

  using Fn = void (*)(HandlerContext&, const httplib::Request&, httplib::Response&);
  auto wrap = [this](const char* endpoint, Fn fn) {
    return [this, endpoint, fn](const httplib::Request& req, httplib::Response& res) {
      ApiFlavor f = flavor_of(req.path);
      try {
        fn(ctx_, req, res);
      } catch (const ApiError& e) {
        send_error(res, f, e);
      } catch (const rapid::Error& e) {
        // Refusals from the tokenizer/template layers are about the input.
        send_error(res, f, ApiError(400, e.what()));
      } catch (const std::bad_alloc&) {
        send_error(res, f, ApiError(413, "the request needs more memory than the server can give it"));
      } catch (const std::exception& e) {
        log::error(std::string(endpoint) + ": " + e.what());
        send_error(res, f, ApiError(500, e.what()));
      }
      metrics_.count_request(endpoint, res.status);
    };
  };
  s.Post("/v1/chat/completions", wrap("/v1/chat/completions", handle_chat_completions));
  s.Post("/v1/completions", wrap("/v1/completions", handle_completions));
  s.Post("/v1/messages", wrap("/v1/messages", handle_messages));
  s.Post("/v1/messages/count_tokens", wrap("/v1/messages/count_tokens", handle_count_tokens));
  s.Post("/v1/responses", wrap("/v1/responses", handle_responses));
  s.Get("/v1/models", wrap("/v1/models", handle_list_models));
  s.Get(R"(/v1/models/(.+))", wrap("/v1/models/{id}", handle_get_model));
  s.Get("/v1/cache", wrap("/v1/cache", handle_cache_info));
  s.Delete("/v1/cache", wrap("/v1/cache", handle_cache_purge));
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}, {"model", backend_.model_id()}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(backend_.model_id(), backend_.engine_stats()), "text/plain; version=0.0.4");
  });
  s.Get("/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, openapi_spec(backend_.model_id()));
  });
}

int HttpServer::bind() {
  int port = opts_.port == 0 ? http_->bind_to_any_port(opts_.host) : (http_->bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
  if (port <= 0) throw Error("cannot listen on " + opts_.host + ":" + std::to_string(opts_.port));
  opts_.port = port;
  return port;
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::start() {
  thread_ = std::thread([this] { serve(); });
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace rapid::server
