#include "server/client_liveness.h"

#include <sys/socket.h>

#include <cerrno>

namespace rapid::server {

namespace {
thread_local int t_fd = -1;
}

ClientScope::ClientScope(int fd) : prev_(t_fd) { t_fd = fd; }
ClientScope::~ClientScope() { t_fd = prev_; }

bool client_gone() {
  if (t_fd < 0) return false;
  char b;
  for (;;) {
    // A peek consumes nothing: the front end still reads a pipelined request after this one.
    const ssize_t n = ::recv(t_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;  // orderly close
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;  // reset, or the socket is unusable
  }
}

}  // namespace rapid::server
