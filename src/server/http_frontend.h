// The HTTP/1.1 front end (docs/architecture.md "The HTTP front end"). One epoll thread owns every
// socket while it is idle, being read or being answered from memory: it parses requests with hard
// limits (http_parser.h), enforces a total deadline per phase (headers, body, keep-alive idle,
// write progress) and hands only complete, size-checked requests to worker threads. An idle or
// slow client therefore costs a file descriptor and a small buffer, never a thread. Requests on
// one connection are answered in order (pipelining); a protocol error is answered, then the
// connection is closed. Streaming responses (chunked content providers) are written by their
// worker, which notices a vanished client through a failed or stalled write.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <httplib.h>

#include "server/http_parser.h"
#include "server/worker_pool.h"

namespace rapid::server {

struct FrontendOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  HttpLimits limits;
  int header_timeout_ms = 10000;  // first byte of a request (or the connection) -> end of its headers
  int body_timeout_ms = 60000;    // end of the headers -> end of the body
  int idle_timeout_ms = 60000;    // keep-alive: end of a response -> next request's first byte
  int write_timeout_ms = 30000;   // a response write that makes no progress
  size_t max_connections = 1024;  // beyond: the oldest connection not being served is closed
  size_t max_buffered_body = 256u << 20;  // request bodies being received, all connections (503)
  int workers = 192;              // the slow lane (generation requests)
  int fast_workers = 2;           // every other route, so /health never queues behind a model
  int backlog = 4096;
};

enum class Lane { Inline, Fast, Slow };

// The application's decision for one complete request, taken on the event thread (so it must be
// cheap): answer now from `res` (Inline), or run `work` on a worker lane.
struct Dispatch {
  Lane lane = Lane::Inline;
  std::function<void(httplib::Request&, httplib::Response&)> work;
};

struct FrontendStats {
  std::atomic<uint64_t> open{0}, accepted{0}, evicted{0}, timeouts{0}, protocol_errors{0};
};

class HttpFrontend {
 public:
  // route: decides per request; may pre-set response headers. error: fills the body of a
  // protocol-level refusal (status, message, request path if known).
  using Router = std::function<Dispatch(const httplib::Request&, httplib::Response&)>;
  using ErrorBody = std::function<void(int status, const std::string& message, const std::string& path,
                                       httplib::Response& res)>;
  HttpFrontend(FrontendOptions opts, Router route, ErrorBody error);
  ~HttpFrontend();
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  // Binds and listens (refuses a port another socket listens on; allows TIME_WAIT). Returns the
  // port. Throws rapid::Error.
  int bind();
  void run();   // the event loop, until stop()
  void stop();  // async-signal-safe: sets a flag and wakes the loop
  bool running() const { return running_.load(); }
  const FrontendStats& stats() const { return stats_; }

 private:
  struct Conn;
  struct Completion {
    uint64_t id;
    std::string bytes;  // a response to write from the loop; empty after a streamed one
    bool keep_alive;
  };
  void accept_all();
  void make_room();
  void on_event(Conn& c, uint32_t events);
  void read_some(Conn& c);
  void consume(Conn& c, const char* data, size_t n);
  void dispatch(Conn& c);
  void refuse(Conn& c, int status, const std::string& message);
  void send_now(Conn& c, std::string bytes, bool keep_alive);
  void flush(Conn& c);
  void after_response(Conn& c);
  void serve_pipelined();
  void watch(Conn& c, uint32_t events);
  void close_conn(uint64_t id);
  void drain_completions();
  void sweep();
  void finish_work(uint64_t id, int fd, const httplib::Request& req, httplib::Response& res, bool keep_alive);
  void shutdown_all();

  FrontendOptions opts_;
  Router route_;
  ErrorBody error_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stop_{false}, running_{false};
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;  // 0: the listener, 1: the wake-up eventfd
  size_t buffered_body_ = 0;
  std::vector<uint64_t> ready_;  // idle connections holding a pipelined request
  std::mutex done_mu_;
  std::vector<Completion> done_;
  FrontendStats stats_;
  std::unique_ptr<WorkerPool> fast_, slow_;
};

}  // namespace rapid::server
