// client_gone() against a real socket pair: the peer's close or reset is seen, pending bytes (a
// pipelined request) are not taken for a close and are left unread, and outside a ClientScope it
// never reports a departure.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/client_liveness.h"

using namespace rapid::server;

namespace {

struct Pair {
  int ours = -1, peer = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ours = fds[0];
    peer = fds[1];
  }
  ~Pair() {
    if (ours >= 0) ::close(ours);
    if (peer >= 0) ::close(peer);
  }
  void close_peer() {
    ::close(peer);
    peer = -1;
  }
};

TEST(ClientLiveness, ConnectedUntilThePeerCloses) {
  Pair p;
  ClientScope scope(p.ours);
  EXPECT_FALSE(client_gone());
  p.close_peer();
  EXPECT_TRUE(client_gone());
}

TEST(ClientLiveness, PendingBytesMeanConnectedAndStayUnread) {
  Pair p;
  ClientScope scope(p.ours);
  ASSERT_EQ(::write(p.peer, "GET /", 5), 5);
  EXPECT_FALSE(client_gone());
  EXPECT_FALSE(client_gone());
  char buf[8];
  ASSERT_EQ(::read(p.ours, buf, sizeof buf), 5);  // the peek consumed nothing
  EXPECT_EQ(std::string(buf, 5), "GET /");
}

TEST(ClientLiveness, OutsideAScopeNobodyIsGone) {
  Pair p;
  p.close_peer();
  EXPECT_FALSE(client_gone());
  {
    ClientScope scope(p.ours);
    EXPECT_TRUE(client_gone());
  }
  EXPECT_FALSE(client_gone());  // the scope restored "no request"
}

}  // namespace
