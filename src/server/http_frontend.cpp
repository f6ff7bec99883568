#include "server/http_frontend.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "server/client_liveness.h"

namespace rapid::server {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr uint64_t kListenId = 0, kWakeId = 1;
constexpr int kLingerMs = 2000;  // after a final response: drain what the client still sends, then close

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded";
    default: return "Unknown";
  }
}

bool ieq(const std::string& a, const char* b) { return strcasecmp(a.c_str(), b) == 0; }

// Status line and headers. Framing headers are ours alone; a value with CR/LF is dropped (no
// response splitting through an echoed header).
std::string head_of(const httplib::Response& res, bool keep_alive, bool chunked, bool with_length) {
  int status = res.status < 0 ? 200 : res.status;
  std::string s = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  for (auto& [k, v] : res.headers) {
    if (ieq(k, "Content-Length") || ieq(k, "Connection") || ieq(k, "Transfer-Encoding")) continue;
    if (v.find_first_of("\r\n") != std::string::npos || k.find_first_of("\r\n: ") != std::string::npos) continue;
    s += k + ": " + v + "\r\n";
  }
  if (with_length && status != 204) s += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  if (chunked) s += "Transfer-Encoding: chunked\r\n";
  s += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return s;
}

std::string serialize(const httplib::Response& res, bool keep_alive) {
  return head_of(res, keep_alive, false, true) + res.body;
}

// Blocking write on a non-blocking socket: gives up when a wait for room exceeds timeout_ms (a
// client that stopped reading) or the peer is gone.
bool write_all(int fd, const char* p, size_t n, int timeout_ms) {
  while (n) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= size_t(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pf{fd, POLLOUT, 0};
      int r = ::poll(&pf, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

// Runs a chunked content provider to its end (or the client's); true when it completed.
bool stream_body(int fd, httplib::Response& res, bool chunked, int timeout_ms) {
  bool ok = true, done = false;
  size_t offset = 0;
  httplib::DataSink sink;
  sink.write = [&](const char* d, size_t n) {
    if (!ok) return false;
    if (n == 0) return true;
    if (chunked) {
      char hdr[24];
      int k = std::snprintf(hdr, sizeof hdr, "%zx\r\n", n);
      std::string frame;
      frame.reserve(size_t(k) + n + 2);
      frame.append(hdr, size_t(k)).append(d, n).append("\r\n");
      ok = write_all(fd, frame.data(), frame.size(), timeout_ms);
    } else {
      ok = write_all(fd, d, n, timeout_ms);
    }
    offset += n;
    return ok;
  };
  sink.done = [&] { done = true; };
  sink.is_writable = [&] { return ok; };
  while (ok && !done)
    if (!res.content_provider_(offset, 0, sink)) ok = false;
  if (ok && chunked) ok = write_all(fd, "0\r\n\r\n", 5, timeout_ms);
  res.content_provider_success_ = ok;
  return ok;
}

}  // namespace

struct HttpFrontend::Conn {
  enum class Phase { Idle, Reading, Busy, Writing, Linger, Dead };
  Conn(uint64_t i, int f, const HttpLimits& l) : id(i), fd(f), parser(l) {}
  uint64_t id;
  int fd;
  RequestParser parser;
  Phase phase = Phase::Idle;
  Clock::time_point deadline, since;  // since: entered this phase (eviction picks the oldest)
  std::string pending;                 // bytes after a complete request: the next, pipelined one
  std::string out;
  size_t out_off = 0;
  bool keep_alive_after = true;
  bool in_body = false;
  size_t body_counted = 0;  // this connection's share of buffered_body_
  uint32_t watching = 0;    // epoll events registered (0: not in the epoll set)
  std::string remote;
};

HttpFrontend::HttpFrontend(FrontendOptions opts, Router route, ErrorBody error)
    : opts_(std::move(opts)), route_(std::move(route)), error_(std::move(error)) {}

HttpFrontend::~HttpFrontend() {
  for (auto& [id, c] : conns_)
    if (c->phase != Conn::Phase::Dead) ::close(c->fd);
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_})
    if (fd >= 0) ::close(fd);
}

int HttpFrontend::bind() {
  // Every connection is a descriptor: let the soft limit reach the hard one.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  std::string port = std::to_string(opts_.port);
  int rc = ::getaddrinfo(opts_.host.empty() ? nullptr : opts_.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) throw Error("cannot listen on " + opts_.host + ":" + port + ": " + ::gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* ai = res; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // SO_REUSEADDR (restart over TIME_WAIT) but not SO_REUSEPORT: a second server on the same
    // port must fail here instead of silently splitting the traffic.
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, opts_.backlog) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) throw Error("cannot listen on " + opts_.host + ":" + port + ": " + why);
  sockaddr_storage sa{};
  socklen_t sl = sizeof sa;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &sl);
  int bound = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw Error(std::string("cannot start the event loop: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return bound;
}

void HttpFrontend::stop() {
  stop_.store(true);
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpFrontend::run() {
  fast_ = std::make_unique<WorkerPool>(size_t(opts_.fast_workers));
  slow_ = std::make_unique<WorkerPool>(size_t(opts_.workers));
  running_.store(true);
  epoll_event evs[256];
  auto next_sweep = Clock::now();
  while (!stop_.load()) {
    int n = ::epoll_wait(epoll_fd_, evs, 256, 100);
    if (n < 0 && errno != EINTR) {
      log::error(std::string("epoll_wait: ") + std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = evs[i].data.u64;
      if (id == kListenId) {
        accept_all();
      } else if (id == kWakeId) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof v);
      } else if (auto it = conns_.find(id); it != conns_.end()) {
        on_event(*it->second, evs[i].events);
      }
    }
    drain_completions();
    serve_pipelined();
    if (Clock::now() >= next_sweep) {
      sweep();
      next_sweep = Clock::now() + milliseconds(100);
    }
    for (auto it = conns_.begin(); it != conns_.end();)
      it = it->second->phase == Conn::Phase::Dead ? conns_.erase(it) : std::next(it);
    stats_.open.store(conns_.size());
  }
  shutdown_all();
  running_.store(false);
}

void HttpFrontend::shutdown_all() {
  ::close(listen_fd_);
  listen_fd_ = -1;
  // Workers still writing streams see their writes fail and cancel their generations.
  for (auto& [id, c] : conns_)
    if (c->phase == Conn::Phase::Busy) ::shutdown(c->fd, SHUT_RDWR);
  fast_->join();
  slow_->join();
  for (auto& [id, c] : conns_)
    if (c->phase != Conn::Phase::Dead) ::close(c->fd);
  conns_.clear();
  stats_.open.store(0);
}

void HttpFrontend::accept_all() {
  for (;;) {
    sockaddr_storage sa{};
    socklen_t sl = sizeof sa;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) make_room();  // next round of the loop retries
      return;
    }
    if (conns_.size() >= opts_.max_connections) make_room();
    if (conns_.size() >= opts_.max_connections) {  // everyone is being served: refuse this one
      ::close(fd);
      stats_.evicted++;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>(next_id_++, fd, opts_.limits);
    char ip[INET6_ADDRSTRLEN] = "";
    if (sa.ss_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&sa)->sin_addr, ip, sizeof ip);
    else if (sa.ss_family == AF_INET6) ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&sa)->sin6_addr, ip, sizeof ip);
    c->remote = ip;
    c->since = Clock::now();
    c->deadline = c->since + milliseconds(opts_.header_timeout_ms);  // a new connection must speak soon
    Conn& ref = *c;
    conns_.emplace(ref.id, std::move(c));
    watch(ref, EPOLLIN | EPOLLRDHUP);
    stats_.accepted++;
  }
}

// At the connection bound: close the connection that has waited longest without being served
// (lingering first, then idle keep-alive, then half-sent requests), so a flood of connections
// displaces older idle or slow ones instead of locking out new clients.
void HttpFrontend::make_room() {
  Conn* victim = nullptr;
  auto rank = [](Conn::Phase p) {
    return p == Conn::Phase::Linger ? 0 : p == Conn::Phase::Idle ? 1 : p == Conn::Phase::Reading ? 2 : 3;
  };
  for (auto& [id, c] : conns_) {
    if (c->phase == Conn::Phase::Busy || c->phase == Conn::Phase::Dead || c->phase == Conn::Phase::Writing) continue;
    if (!victim || rank(c->phase) < rank(victim->phase) ||
        (rank(c->phase) == rank(victim->phase) && c->since < victim->since))
      victim = c.get();
  }
  if (!victim) return;
  stats_.evicted++;
  close_conn(victim->id);
}

void HttpFrontend::watch(Conn& c, uint32_t events) {
  if (events == c.watching || c.phase == Conn::Phase::Dead) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.id;
  int op = events == 0 ? EPOLL_CTL_DEL : c.watching == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  ::epoll_ctl(epoll_fd_, op, c.fd, &ev);
  c.watching = events;
}

void HttpFrontend::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second->phase == Conn::Phase::Dead) return;
  Conn& c = *it->second;
  buffered_body_ -= c.body_counted;
  c.body_counted = 0;
  ::close(c.fd);  // also leaves the epoll set
  c.watching = 0;
  c.phase = Conn::Phase::Dead;  // erased at the end of the loop iteration
}

void HttpFrontend::on_event(Conn& c, uint32_t events) {
  switch (c.phase) {
    case Conn::Phase::Writing:
      if (events & (EPOLLERR | EPOLLHUP)) close_conn(c.id);
      else flush(c);
      return;
    case Conn::Phase::Linger: {
      char buf[16384];
      for (int i = 0; i < 64; ++i) {
        ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
        if (r > 0) continue;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        close_conn(c.id);
        return;
      }
      return;
    }
    case Conn::Phase::Idle:
    case Conn::Phase::Reading:
      read_some(c);
      return;
    default:
      return;
  }
}

void HttpFrontend::read_some(Conn& c) {
  char buf[65536];
  // Bytes of a pipelined request already received go first; newer ones wait in the kernel.
  if (!c.pending.empty()) {
    ready_.push_back(c.id);
    return;
  }
  for (int round = 0; round < 16; ++round) {  // at most 1 MiB per wake-up: fairness between clients
    ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
    if (r > 0) {
      consume(c, buf, size_t(r));
      if ((c.phase != Conn::Phase::Idle && c.phase != Conn::Phase::Reading) || !c.pending.empty()) return;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_conn(c.id);  // the client closed (or reset) before completing a request
    return;
  }
}

void HttpFrontend::consume(Conn& c, const char* data, size_t n) {
  auto now = Clock::now();
  if (c.phase == Conn::Phase::Idle) {
    c.phase = Conn::Phase::Reading;
    c.since = now;
    c.deadline = now + milliseconds(opts_.header_timeout_ms);
  }
  size_t used = c.parser.feed(data, n);
  RequestParser::State st = c.parser.state();
  size_t body = c.parser.request().body.size();
  buffered_body_ += body - c.body_counted;
  c.body_counted = body;
  if (st == RequestParser::State::Error) {
    stats_.protocol_errors++;
    refuse(c, c.parser.error_status(), c.parser.error_message());
    return;
  }
  if (buffered_body_ > opts_.max_buffered_body) {
    refuse(c, 503, "the server is receiving too many request bodies at once; retry shortly");
    return;
  }
  if (st == RequestParser::State::Body && !c.in_body) {
    c.in_body = true;
    c.deadline = now + milliseconds(opts_.body_timeout_ms);
    if (c.parser.request().expect_continue) {
      static const char k100[] = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)!::send(c.fd, k100, sizeof k100 - 1, MSG_NOSIGNAL);  // tiny: fits any socket buffer
    }
  }
  if (st == RequestParser::State::Done) {
    c.pending.append(data + used, n - used);
    dispatch(c);
  }
}

void HttpFrontend::dispatch(Conn& c) {
  buffered_body_ -= c.body_counted;
  c.body_counted = 0;
  c.in_body = false;
  ParsedRequest pr = c.parser.take();
  auto req = std::make_shared<httplib::Request>();
  auto res = std::make_shared<httplib::Response>();
  req->method = std::move(pr.method);
  req->target = std::move(pr.target);
  req->path = std::move(pr.path);
  req->version = pr.minor_version ? "HTTP/1.1" : "HTTP/1.0";
  for (auto& [k, v] : pr.headers) req->headers.emplace(std::move(k), std::move(v));
  req->body = std::move(pr.body);
  req->remote_addr = c.remote;
  bool keep = pr.keep_alive && !stop_.load();
  c.phase = Conn::Phase::Busy;
  c.since = Clock::now();
  watch(c, 0);  // nothing is read while the request is served: pipelined bytes wait in the kernel
  Dispatch d;
  try {
    d = route_(*req, *res);
  } catch (const std::exception& e) {
    log::error(std::string("routing failed: ") + e.what());
    *res = httplib::Response();
    error_(500, e.what(), req->path, *res);
    d = Dispatch{};
  }
  if (d.lane == Lane::Inline) {
    send_now(c, serialize(*res, keep), keep);
    return;
  }
  WorkerPool& pool = d.lane == Lane::Fast ? *fast_ : *slow_;
  pool.post([this, id = c.id, fd = c.fd, req, res, work = std::move(d.work), keep] {
    bool keep_open = keep;
    if (stop_.load()) {
      error_(503, "the server is shutting down", req->path, *res);
    } else {
      ClientScope scope(fd);
      try {
        work(*req, *res);
      } catch (const ClientGone& e) {
        // Nobody is left to read an answer (the router counted it as 499): close.
        log::info(req->path + ": " + e.what() + "; its request was cancelled");
        *res = httplib::Response();
        res->status = 499;
        keep_open = false;
      } catch (const std::exception& e) {
        *res = httplib::Response();
        error_(500, e.what(), req->path, *res);
      }
    }
    finish_work(id, fd, *req, *res, keep_open);
  });
}

// On the worker: a buffered response goes back to the event loop to be written; a streamed one
// is written here, then the connection is handed back.
void HttpFrontend::finish_work(uint64_t id, int fd, const httplib::Request& req, httplib::Response& res,
                               bool keep_alive) {
  Completion done{id, "", keep_alive};
  if (res.is_chunked_content_provider_ && res.content_provider_) {
    bool http10 = req.version == "HTTP/1.0";  // no chunked coding: the body ends at the close
    if (http10) done.keep_alive = false;
    std::string head = head_of(res, done.keep_alive, !http10, false);
    bool ok = write_all(fd, head.data(), head.size(), opts_.write_timeout_ms) &&
              stream_body(fd, res, !http10, opts_.write_timeout_ms);
    done.keep_alive = done.keep_alive && ok;
  } else {
    done.bytes = serialize(res, keep_alive);
  }
  {
    std::lock_guard lk(done_mu_);
    done_.push_back(std::move(done));
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpFrontend::drain_completions() {
  std::vector<Completion> v;
  {
    std::lock_guard lk(done_mu_);
    v.swap(done_);
  }
  for (auto& d : v) {
    auto it = conns_.find(d.id);
    if (it == conns_.end() || it->second->phase != Conn::Phase::Busy) continue;
    Conn& c = *it->second;
    if (d.bytes.empty()) {
      c.keep_alive_after = d.keep_alive;
      after_response(c);
    } else {
      send_now(c, std::move(d.bytes), d.keep_alive);
    }
  }
}

// Answers a request that will not be served (malformed, too large, too slow) and closes.
void HttpFrontend::refuse(Conn& c, int status, const std::string& message) {
  httplib::Response res;
  error_(status, message, c.parser.request().path, res);
  if (status == 503) res.set_header("Retry-After", "1");
  buffered_body_ -= c.body_counted;
  c.body_counted = 0;
  c.parser = RequestParser(opts_.limits);
  c.pending.clear();
  c.in_body = false;
  send_now(c, serialize(res, false), false);
}

void HttpFrontend::send_now(Conn& c, std::string bytes, bool keep_alive) {
  c.out = std::move(bytes);
  c.out_off = 0;
  c.keep_alive_after = keep_alive;
  c.phase = Conn::Phase::Writing;
  c.since = Clock::now();
  c.deadline = c.since + milliseconds(opts_.write_timeout_ms);
  flush(c);
}

void HttpFrontend::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t w = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_off += size_t(w);
      c.deadline = Clock::now() + milliseconds(opts_.write_timeout_ms);  // progress
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(c, EPOLLOUT);
      return;
    }
    close_conn(c.id);
    return;
  }
  std::string().swap(c.out);
  after_response(c);
}

void HttpFrontend::after_response(Conn& c) {
  auto now = Clock::now();
  c.since = now;
  if (!c.keep_alive_after) {
    // Half-close and drain: closing with unread input would reset the connection and could
    // destroy the response before the client reads it.
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Conn::Phase::Linger;
    c.deadline = now + milliseconds(kLingerMs);
    c.pending.clear();
    watch(c, EPOLLIN | EPOLLRDHUP);
    return;
  }
  c.phase = Conn::Phase::Idle;
  c.deadline = now + milliseconds(opts_.idle_timeout_ms);
  watch(c, EPOLLIN | EPOLLRDHUP);
  // A pipelined request already here is parsed from the loop, not from this call: thousands of
  // tiny pipelined requests answered inline must not nest thousands of calls deep.
  if (!c.pending.empty()) ready_.push_back(c.id);
}

void HttpFrontend::serve_pipelined() {
  while (!ready_.empty()) {
    std::vector<uint64_t> ids;
    ids.swap(ready_);
    for (uint64_t id : ids) {
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second->phase != Conn::Phase::Idle || it->second->pending.empty()) continue;
      std::string p;
      p.swap(it->second->pending);
      consume(*it->second, p.data(), p.size());
    }
  }
}

void HttpFrontend::sweep() {
  auto now = Clock::now();
  for (auto& [id, cp] : conns_) {
    Conn& c = *cp;
    if (c.phase == Conn::Phase::Busy || c.phase == Conn::Phase::Dead || now < c.deadline) continue;
    if (c.phase == Conn::Phase::Reading) {
      stats_.timeouts++;
      refuse(c, 408, c.in_body ? "the request body was not received in time" : "the request headers were not received in time");
    } else {
      close_conn(c.id);  // idle keep-alive over, a stalled reader, or a finished linger
    }
  }
}

}  // namespace rapid::server
