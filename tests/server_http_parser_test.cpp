// The HTTP/1.1 request parser against RFC 9112: message framing (section 6), chunked coding
// (section 7.1, its example), the request-smuggling refusals (6.3: both framings, conflicting
// Content-Length), obs-fold and whitespace before the colon (5.1, 5.2), and our size limits.
// End-to-end behaviour over sockets is in server_http_test.cpp and tests/python/test_hardening.py.
#include <gtest/gtest.h>

#include <string>

#include "server/http_parser.h"

using rapid::server::HttpLimits;
using rapid::server::ParsedRequest;
using rapid::server::RequestParser;
using State = RequestParser::State;

namespace {

struct Outcome {
  State state;
  int status = 0;
  size_t used = 0;
  ParsedRequest req;
};

Outcome parse(const std::string& text, HttpLimits lim = {}, bool byte_at_a_time = false) {
  RequestParser p(lim);
  size_t used = 0;
  if (byte_at_a_time) {
    while (used < text.size() && (p.state() == State::Head || p.state() == State::Body))
      used += p.feed(text.data() + used, 1);
  } else {
    used = p.feed(text.data(), text.size());
  }
  Outcome o{p.state(), p.error_status(), used, {}};
  if (p.state() == State::Done) o.req = p.take();
  return o;
}

TEST(HttpParser, RequestLineHeadersAndBody) {
  std::string text =
      "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\nX-Spaced:   padded value  \r\n\r\n{\"a\":1}";
  for (bool slow : {false, true}) {
    Outcome o = parse(text, {}, slow);
    ASSERT_EQ(o.state, State::Done);
    EXPECT_EQ(o.used, text.size());
    EXPECT_EQ(o.req.method, "POST");
    EXPECT_EQ(o.req.path, "/v1/chat/completions");
    EXPECT_EQ(o.req.query, "x=1");
    EXPECT_EQ(o.req.body, "{\"a\":1}");
    EXPECT_EQ(o.req.header("content-type"), "application/json");
    EXPECT_EQ(o.req.header("x-spaced"), "padded value");  // OWS trimmed (5.5)
    EXPECT_TRUE(o.req.keep_alive);
  }
}

TEST(HttpParser, PersistenceFollowsVersionAndConnection) {
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").req.keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").req.keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n").req.keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").req.expect_continue);
  // Empty lines before the request line are tolerated (2.2); bare LF line ends too.
  EXPECT_EQ(parse("\r\n\r\nGET /health HTTP/1.1\n\n").req.path, "/health");
}

TEST(HttpParser, PipelinedRequestsStopAtTheFirstEnd) {
  std::string a = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  std::string b = "GET /b HTTP/1.1\r\n\r\n";
  RequestParser p({});
  std::string both = a + b;
  size_t used = p.feed(both.data(), both.size());
  ASSERT_EQ(p.state(), State::Done);
  EXPECT_EQ(used, a.size());
  EXPECT_EQ(p.take().body, "abc");
  used += p.feed(both.data() + used, both.size() - used);
  ASSERT_EQ(p.state(), State::Done);
  EXPECT_EQ(p.take().path, "/b");
  EXPECT_EQ(used, both.size());
}

TEST(HttpParser, ChunkedBodyAsInRfc9112Example) {
  // Chunk extensions are ignored, trailer fields read and dropped (7.1.1, 7.1.2).
  std::string text =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nWiki\r\n5;name=value\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n";
  for (bool slow : {false, true}) {
    Outcome o = parse(text, {}, slow);
    ASSERT_EQ(o.state, State::Done);
    EXPECT_EQ(o.req.body, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(o.used, text.size());
  }
}

TEST(HttpParser, FramingAmbiguitiesAre400) {
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\nabcd").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").status, 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n").status, 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nContent-Length : 0\r\n\r\n").status, 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n").status, 400);
  EXPECT_EQ(parse("GET  / HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(parse("GET http://x/ HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(parse("GET / HTTP/2.0\r\n\r\n").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").status, 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n").status, 400);
  // The same length twice is one length (6.3 allows folding identical values).
  Outcome same = parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(same.state, State::Done);
  EXPECT_EQ(same.req.body, "abc");
}

TEST(HttpParser, HeadLimitsAre431And414) {
  HttpLimits lim;
  std::string many = "GET / HTTP/1.1\r\n";
  for (size_t i = 0; i <= lim.max_headers; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse(many + "\r\n").status, 431);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nBig: " + std::string(lim.max_line, 'x') + "\r\n\r\n").status, 431);
  EXPECT_EQ(parse("GET /" + std::string(lim.max_line, 'x') + " HTTP/1.1\r\n\r\n").status, 414);
  std::string big = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 20; ++i) big += "H" + std::to_string(i) + ": " + std::string(4000, 'v') + "\r\n";
  EXPECT_EQ(parse(big + "\r\n").status, 431);  // 80 KB of headers, each line within its limit
  // An unterminated line is refused as soon as it passes the limit, not when it ends.
  Outcome o = parse("GET / HTTP/1.1\r\nBig: " + std::string(100000, 'x'));
  EXPECT_EQ(o.state, State::Error);
  EXPECT_LT(o.used, 10000u);
}

TEST(HttpParser, BodyLimitOnEveryFraming) {
  HttpLimits lim;
  lim.max_body = 10;
  // Content-Length over the limit: refused from the headers alone.
  Outcome o = parse("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", lim);
  EXPECT_EQ(o.status, 413);
  // Chunked: refused at the chunk that would cross the limit, before its data arrives.
  o = parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n3\r\n", lim);
  EXPECT_EQ(o.status, 413);
  o = parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n2\r\nab\r\n0\r\n\r\n", lim);
  EXPECT_EQ(o.state, State::Done);
  EXPECT_EQ(o.req.body, "12345678ab");
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n", lim).status, 400);
}

}  // namespace
