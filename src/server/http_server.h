// The HTTP API around a Backend: routes (with and without the /v1 prefix), API key, CORS,
// request ids, admission control and error shapes, over the epoll front end (http_frontend.h).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "server/backend.h"
#include "server/handler_context.h"
#include "server/http_frontend.h"
#include "server/metrics.h"
#include "server/model_registry.h"

namespace rapid::server {

struct Route;

class HttpServer {
 public:
  // One model, owned by the caller (--model-alias patterns from opts.model_aliases).
  HttpServer(Backend& backend, ServerOptions opts);
  // Every model `models` can serve, chosen per request by its `model` field.
  HttpServer(std::shared_ptr<ModelRegistry> models, ServerOptions opts);
  ~HttpServer();
  // Binds host:port (port 0 picks a free one); returns the bound port. Throws rapid::Error,
  // also when another process already listens there.
  int bind();
  void serve();   // blocks until stop()
  void start();   // serve() on a background thread
  void stop();    // async-signal-safe when serve() runs on another thread than the caller's
  Metrics& metrics() { return metrics_; }
  // Serves /v1/embeddings from `svc` (set before serve(); it must outlive the server).
  void set_embeddings(EmbeddingService* svc) { embeddings_ = svc; }

 private:
  Dispatch route(const httplib::Request& req, httplib::Response& res);
  Dispatch open_route(const std::string& path, httplib::Response& res);
  bool admit(const Route& r, const std::string& path, httplib::Response& res);
  void protocol_error(int status, const std::string& message, const std::string& path, httplib::Response& res);
  HandlerContext context_for(const Route& r, httplib::Request& req);
  std::shared_ptr<ModelRegistry> models_;
  EmbeddingService* embeddings_ = nullptr;  // POST /v1/embeddings (set_embeddings)
  ServerOptions opts_;
  Metrics metrics_;
  std::unique_ptr<HttpFrontend> front_;
  std::atomic<int64_t> admitted_{0};  // generation requests between admission and their last byte
  std::thread thread_;
};

}  // namespace rapid::server
