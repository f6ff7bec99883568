// Incremental HTTP/1.1 request parser with hard limits (RFC 9112). It is fed whatever bytes have
// arrived and only ever holds one request: the request line and headers are bounded in line
// length, total size and count (431/414), the body in size on every transfer coding (413), and
// the framing ambiguities request smuggling relies on (two different Content-Lengths,
// Content-Length with Transfer-Encoding, obs-fold, space before the colon) are 400s.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rapid::server {

struct HttpLimits {
  size_t max_line = 8192;       // the request line, each header line, each chunk-size line
  size_t max_head = 64 << 10;   // request line + headers (and, separately, chunked trailers)
  size_t max_headers = 100;
  size_t max_body = 16u << 20;  // decoded body bytes, whatever the transfer coding
};

struct ParsedRequest {
  std::string method, target, path, query;  // target = path [ "?" query ]
  int minor_version = 1;                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // in arrival order, names as sent
  std::string body;
  bool keep_alive = true;
  bool expect_continue = false;
  // First value of a header (case-insensitive name), "" when absent.
  std::string header(std::string_view name) const;
};

class RequestParser {
 public:
  enum class State { Head, Body, Done, Error };
  explicit RequestParser(HttpLimits limits) : lim_(limits) {}

  // Consumes bytes from `data` and returns how many it used; stops at the end of one request
  // (the rest belongs to the next, pipelined one) or at the first error.
  size_t feed(const char* data, size_t n);
  State state() const { return state_; }
  // Body bytes still expected by Content-Length (0 when chunked or none).
  uint64_t content_length() const { return content_length_; }
  // Error: the status to answer (400, 413, 414, 431) and why. Never a 5xx: the fault is the client's.
  int error_status() const { return err_status_; }
  const std::string& error_message() const { return err_msg_; }
  // The request being parsed (complete in state Done); take() moves it out and resets.
  const ParsedRequest& request() const { return req_; }
  ParsedRequest take();
  // Bytes received for the current request so far (head + body as sent).
  size_t bytes_seen() const { return seen_; }

 private:
  enum class Step { RequestLine, Header, FixedBody, ChunkSize, ChunkData, ChunkDataEnd, Trailer };
  size_t fail(int status, std::string msg, size_t used);
  bool line(const char* data, size_t n, size_t& used, std::string_view& out, size_t limit, int too_long_status);
  bool on_request_line(std::string_view l);
  bool on_header(std::string_view l);
  bool on_head_end();
  bool on_chunk_size(std::string_view l);

  HttpLimits lim_;
  State state_ = State::Head;
  Step step_ = Step::RequestLine;
  ParsedRequest req_;
  std::string partial_;     // an incomplete line carried between feeds
  std::string line_;        // the last complete line
  size_t head_bytes_ = 0, trailer_bytes_ = 0, seen_ = 0;
  uint64_t content_length_ = 0, chunk_left_ = 0;
  int err_status_ = 0;
  std::string err_msg_;
};

}  // namespace rapid::server
