#include "server/http_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace rapid::server {

namespace {

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn on each comma-separated, trimmed element of a list-valued header.
template <typename Fn>
void each_element(std::string_view v, Fn fn) {
  while (true) {
    size_t c = v.find(',');
    fn(trim(v.substr(0, c)));
    if (c == std::string_view::npos) break;
    v.remove_prefix(c + 1);
  }
}

}  // namespace

std::string ParsedRequest::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return "";
}

size_t RequestParser::fail(int status, std::string msg, size_t used) {
  state_ = State::Error;
  err_status_ = status;
  err_msg_ = std::move(msg);
  return used;
}

ParsedRequest RequestParser::take() {
  ParsedRequest r = std::move(req_);
  *this = RequestParser(lim_);
  return r;
}

// Takes one LF-terminated line (CR stripped) into `out`, or keeps the partial line for later.
// `out` stays valid until the next call.
bool RequestParser::line(const char* data, size_t n, size_t& used, std::string_view& out, size_t limit,
                         int too_long_status) {
  const char* p = data + used;
  const char* nl = static_cast<const char*>(std::memchr(p, '\n', n - used));
  size_t take = nl ? size_t(nl - p) + 1 : n - used;
  if (partial_.size() + take > limit + 2) {
    fail(too_long_status, too_long_status == 414 ? "the request target is too long"
                          : too_long_status == 431 ? "a request header line is too long"
                                                   : "a chunk-size line is too long",
         used);
    return false;
  }
  partial_.append(p, take);
  used += take;
  if (!nl) return false;
  partial_.pop_back();
  if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
  line_.swap(partial_);
  partial_.clear();
  out = line_;
  return true;
}

size_t RequestParser::feed(const char* data, size_t n) {
  size_t used = 0;
  while (used < n && (state_ == State::Head || state_ == State::Body)) {
    size_t before = used;
    std::string_view l;
    switch (step_) {
      case Step::RequestLine:
      case Step::Header: {
        bool first = step_ == Step::RequestLine;
        bool got = line(data, n, used, l, lim_.max_line, first ? 414 : 431);
        head_bytes_ += used - before;
        if (state_ == State::Error) break;
        if (head_bytes_ > lim_.max_head) return fail(431, "the request headers are too large", used);
        if (!got) break;
        if (first) {
          if (l.empty()) break;  // RFC 9112 2.2: tolerate empty lines before the request line
          if (!on_request_line(l)) return used;
          step_ = Step::Header;
        } else if (l.empty()) {
          if (!on_head_end()) return used;
        } else if (!on_header(l)) {
          return used;
        }
        break;
      }
      case Step::FixedBody: {
        size_t k = size_t(std::min<uint64_t>(n - used, content_length_ - req_.body.size()));
        req_.body.append(data + used, k);
        used += k;
        if (req_.body.size() == content_length_) state_ = State::Done;
        break;
      }
      case Step::ChunkSize:
        if (line(data, n, used, l, 1024, 400) && !on_chunk_size(l)) return used;
        break;
      case Step::ChunkData: {
        size_t k = size_t(std::min<uint64_t>(n - used, chunk_left_));
        req_.body.append(data + used, k);
        used += k;
        chunk_left_ -= k;
        if (chunk_left_ == 0) step_ = Step::ChunkDataEnd;
        break;
      }
      case Step::ChunkDataEnd:
        if (line(data, n, used, l, 0, 400)) {
          if (!l.empty()) return fail(400, "chunk data is not followed by CRLF", used);
          step_ = Step::ChunkSize;
        }
        break;
      case Step::Trailer:
      {
        bool got = line(data, n, used, l, lim_.max_line, 431);
        trailer_bytes_ += used - before;
        if (state_ == State::Error) break;
        if (trailer_bytes_ > lim_.max_head) return fail(431, "the chunked trailer is too large", used);
        if (!got) break;
        if (l.empty()) state_ = State::Done;  // trailer fields are read and ignored
        break;
      }
    }
    seen_ += used - before;
  }
  return used;
}

bool RequestParser::on_request_line(std::string_view l) {
  size_t a = l.find(' '), b = a == std::string_view::npos ? a : l.find(' ', a + 1);
  if (b == std::string_view::npos || l.find(' ', b + 1) != std::string_view::npos)
    return fail(400, "malformed request line", 0), false;
  std::string_view method = l.substr(0, a), target = l.substr(a + 1, b - a - 1), version = l.substr(b + 1);
  if (!is_token(method)) return fail(400, "malformed request method", 0), false;
  if (target.empty() || !(target.front() == '/' || (target == "*" && method == "OPTIONS")))
    return fail(400, "the request target must be an absolute path", 0), false;
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "malformed request target", 0), false;
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.')
    return fail(400, "malformed HTTP version", 0), false;
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
    return fail(400, "only HTTP/1.0 and HTTP/1.1 are supported", 0), false;  // a 4xx: the client's doing
  req_.method = method;
  req_.target = target;
  req_.minor_version = version[7] - '0';
  size_t q = target.find('?');
  req_.path = target.substr(0, q);
  if (q != std::string_view::npos) req_.query = target.substr(q + 1);
  return true;
}

bool RequestParser::on_header(std::string_view l) {
  if (l.front() == ' ' || l.front() == '\t') return fail(400, "obsolete header line folding", 0), false;
  size_t colon = l.find(':');
  if (colon == std::string_view::npos || !is_token(l.substr(0, colon)))
    return fail(400, "malformed header field name", 0), false;
  std::string_view value = trim(l.substr(colon + 1));
  for (char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
      return fail(400, "control character in a header value", 0), false;
  if (req_.headers.size() >= lim_.max_headers) return fail(431, "too many request headers", 0), false;
  req_.headers.emplace_back(std::string(l.substr(0, colon)), std::string(value));
  return true;
}

bool RequestParser::on_head_end() {
  bool has_cl = false, has_te = false, keep_alive = req_.minor_version >= 1;
  std::vector<std::string> codings;
  for (auto& [k, v] : req_.headers) {
    if (iequals(k, "Content-Length")) {
      bool bad = false;
      each_element(v, [&](std::string_view e) {
        if (e.empty() || e.size() > 18 || !std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          bad = true;
          return;
        }
        uint64_t n = std::stoull(std::string(e));
        if (has_cl && n != content_length_) bad = true;
        has_cl = true;
        content_length_ = n;
      });
      if (bad) return fail(400, "invalid or conflicting Content-Length", 0), false;
    } else if (iequals(k, "Transfer-Encoding")) {
      has_te = true;
      each_element(v, [&](std::string_view e) {
        if (!e.empty()) codings.emplace_back(e);
      });
    } else if (iequals(k, "Connection")) {
      each_element(v, [&](std::string_view e) {
        if (iequals(e, "close")) keep_alive = false;
        else if (iequals(e, "keep-alive") && req_.minor_version == 0) keep_alive = true;
      });
    } else if (iequals(k, "Expect")) {
      req_.expect_continue = iequals(trim(v), "100-continue");
    }
  }
  req_.keep_alive = keep_alive;
  if (has_te) {
    // Both framings at once is the classic request-smuggling vector: refuse rather than pick one.
    if (has_cl) return fail(400, "both Transfer-Encoding and Content-Length", 0), false;
    if (req_.minor_version == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request", 0), false;
    // RFC 9112 6.3: without chunked last the length is unknowable; other codings we do not decode.
    if (codings.empty() || !iequals(codings.back(), "chunked"))
      return fail(400, "the request body's final transfer coding must be chunked", 0), false;
    if (codings.size() > 1) return fail(400, "only the chunked transfer coding is supported", 0), false;
    state_ = State::Body;
    step_ = Step::ChunkSize;
    return true;
  }
  if (content_length_ > lim_.max_body)
    return fail(413, "the request body is larger than the server's limit", 0), false;
  if (content_length_ == 0) {
    state_ = State::Done;
    return true;
  }
  state_ = State::Body;
  step_ = Step::FixedBody;
  return true;
}

bool RequestParser::on_chunk_size(std::string_view l) {
  size_t end = 0;
  while (end < l.size() && std::isxdigit(static_cast<unsigned char>(l[end]))) ++end;
  std::string_view rest = trim(l.substr(end));
  if (end == 0 || end > 15 || !(rest.empty() || rest.front() == ';'))
    return fail(400, "malformed chunk size", 0), false;
  uint64_t size = std::stoull(std::string(l.substr(0, end)), nullptr, 16);
  if (size == 0) {
    step_ = Step::Trailer;
    return true;
  }
  if (req_.body.size() + size > lim_.max_body)
    return fail(413, "the request body is larger than the server's limit", 0), false;
  chunk_left_ = size;
  step_ = Step::ChunkData;
  return true;
}

}  // namespace rapid::server
