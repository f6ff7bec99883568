// The HTTP front: routes, auth, error shapes, limits, around a Backend.
#pragma once
#include <memory>
#include <string>
#include <thread>

#include "server/backend.h"
#include "server/handler_context.h"
#include "server/metrics.h"

namespace httplib {
class Server;
}

namespace rapid::server {

class HttpServer {
 public:
  HttpServer(Backend& backend, ServerOptions opts);
  ~HttpServer();
  // Binds host:port (port 0 picks a free one); returns the bound port. Throws rapid::Error.
  int bind();
  void serve();   // blocks until stop()
  void start();   // serve() on a background thread
  void stop();
  Metrics& metrics() { return metrics_; }

 private:
  void routes();
  Backend& backend_;
  ServerOptions opts_;
  Metrics metrics_;
  HandlerContext ctx_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
};

}  // namespace rapid::server
