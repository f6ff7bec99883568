// Whether the client of the request a worker thread serves is still connected. A buffered
// (non-streaming) handler writes nothing until its whole answer is ready, so unlike a stream it
// never sees a failed write: it polls this while it waits, and stops (freeing its engine slot)
// once the client has gone.
#pragma once
#include <stdexcept>

namespace rapid::server {

// Thrown by a handler that stopped because its client closed the connection; the front end logs
// it and answers nobody (status 499 in the metrics, as nginx names it).
struct ClientGone : std::runtime_error {
  ClientGone() : std::runtime_error("the client closed the connection") {}
};

// While alive, client_gone() on this thread looks at socket `fd` (the front end's worker sets it
// around each request).
class ClientScope {
 public:
  explicit ClientScope(int fd);
  ~ClientScope();
  ClientScope(const ClientScope&) = delete;
  ClientScope& operator=(const ClientScope&) = delete;

 private:
  int prev_;
};

// True when this thread's request came on a connection the peer has closed or reset. Bytes
// waiting to be read (a pipelined next request) mean connected. False outside a ClientScope.
bool client_gone();

}  // namespace rapid::server
