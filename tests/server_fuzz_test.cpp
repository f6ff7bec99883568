// Robustness under ASan/UBSan: mutated request bodies through every API's parser and handler,
// and raw-socket garbage at the HTTP server (model-free backend). Every response must be a
// well-formed 2xx/4xx with a JSON body; nothing may crash, hang or leak. Seeded and bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "server/http_server.h"
#include "server_fake_backend.h"

using json = nlohmann::json;

namespace {

json random_value(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 2 ? 7 : 9)) {
    case 0: return nullptr;
    case 1: return bool(rng() % 2);
    case 2: return int64_t(rng()) - int64_t(1u << 31);
    case 3: return double(rng()) / 7.0 * ((rng() % 2) ? 1e300 : 1e-3);
    case 4: return "";
    case 5: {
      std::string s;
      for (int i = 0, n = int(rng() % 12); i < n; ++i) s += char(rng() % 128);
      return s;
    }
    case 6: return rng() % 2 ? "user" : "function";
    case 7: {
      json a = json::array();
      for (int i = 0, n = int(rng() % 4); i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      static const char* keys[] = {"role", "content", "type", "text", "name", "function", "arguments", "id",
                                   "tool_calls", "input", "tool_use_id", "schema", "json_schema", "parameters"};
      json o = json::object();
      for (int i = 0, n = int(rng() % 4); i < n; ++i) o[keys[rng() % 14]] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// Replaces one node somewhere inside `j` by a random value.
void mutate(json& j, std::mt19937& rng) {
  json* node = &j;
  for (int d = 0; d < 4; ++d) {
    if (node->is_object() && !node->empty() && rng() % 3) {
      auto it = node->begin();
      std::advance(it, rng() % node->size());
      node = &*it;
    } else if (node->is_array() && !node->empty() && rng() % 3) {
      node = &(*node)[rng() % node->size()];
    } else {
      break;
    }
  }
  *node = random_value(rng, 1);
}

class ServerFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_.script.reply = "{\"a\":1} hi";
    rapid::server::ServerOptions o;
    o.port = 0;
    o.http_threads = 8;
    o.max_body_bytes = 1 << 16;
    server_ = std::make_unique<rapid::server::HttpServer>(backend_, o);
    port_ = server_->bind();
    server_->start();
  }
  rapid::testing::FakeBackend backend_;
  std::unique_ptr<rapid::server::HttpServer> server_;
  int port_ = 0;
};

TEST_F(ServerFuzz, MutatedBodiesGet2xxOr4xxWithJson) {
  json tools = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}};
  std::vector<std::pair<std::string, json>> seeds = {
      {"/v1/chat/completions",
       {{"model", "fake-model"}, {"max_tokens", 4}, {"tools", tools}, {"tool_choice", "auto"}, {"logprobs", true},
        {"messages", {{{"role", "system"}, {"content", "s"}},
                      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "x"}}}}},
                      {{"role", "assistant"}, {"content", nullptr},
                       {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}},
                      {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "r"}}}}}},
      {"/v1/completions", {{"model", "fake-model"}, {"max_tokens", 4}, {"prompt", "x"}, {"logprobs", 2}, {"echo", true}}},
      {"/v1/messages",
       {{"model", "fake-model"}, {"max_tokens", 4}, {"system", "s"},
        {"tools", {{{"name", "t"}, {"input_schema", {{"type", "object"}}}}}},
        {"messages", {{{"role", "user"}, {"content", "q"}},
                      {{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", "u"}, {"name", "t"}, {"input", json::object()}}}}},
                      {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "u"}, {"content", "r"}}}}}}}}},
      {"/v1/messages/count_tokens", {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "q"}}}}}},
      {"/v1/responses",
       {{"model", "fake-model"}, {"max_output_tokens", 4}, {"tools", {{{"type", "function"}, {"name", "f"}}}},
        {"input", {{{"role", "user"}, {"content", "q"}},
                   {{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}},
                   {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "o"}}}}}},
  };
  // RAPID_FUZZ_ITERS / RAPID_FUZZ_SEED widen a local run; CI keeps the bounded default.
  const char* it_env = std::getenv("RAPID_FUZZ_ITERS");
  const char* seed_env = std::getenv("RAPID_FUZZ_SEED");
  int iters = it_env ? std::atoi(it_env) : 600;
  std::mt19937 rng(seed_env ? unsigned(std::atoi(seed_env)) : 42u);
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(10, 0);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < iters; ++iter) {
    auto& [path, seed] = seeds[iter % seeds.size()];
    json body = seed;
    for (int k = 0, n = 1 + int(rng() % 3); k < n; ++k) mutate(body, rng);
    if (body.is_object() && rng() % 4 == 0) body["stream"] = true;
    // Keep generation short whatever the mutation did to max_tokens.
    if (body.is_object()) {
      for (const char* k : {"max_tokens", "max_output_tokens"})
        if (body.contains(k) && body[k].is_number_integer() && body[k].get<int64_t>() > 8) body[k] = 8;
      if (!body.contains("max_tokens") && path != "/v1/responses") body["max_tokens"] = 8;
    }
    auto r = c.Post(path.c_str(), body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    ASSERT_TRUE(r) << path << " " << body.dump();
    ASSERT_LT(r->status, 500) << path << " " << body.dump() << " -> " << r->body;
    if (r->status >= 400) {
      ++rejected;
      json e = json::parse(r->body, nullptr, false);
      ASSERT_FALSE(e.is_discarded()) << r->body;
      ASSERT_TRUE(e.contains("error")) << r->body;
    } else {
      ++ok;
    }
  }
  EXPECT_GT(ok, 20);
  EXPECT_GT(rejected, 100);
}

std::string raw_exchange(int port, const std::string& payload) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    (void)!send(fd, payload.data(), payload.size(), MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0 && out.size() < (1 << 20)) out.append(buf, size_t(n));
  }
  close(fd);
  return out;
}

TEST_F(ServerFuzz, RawSocketGarbage) {
  std::mt19937 rng(7);
  std::vector<std::string> payloads = {
      std::string("\x00\xff garbage\r\n\r\n", 14),
      "GET / HTTP/9.9\r\n\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"model\":",
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
      "POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nab\r\n0\r\n\r\n",
      "POST /v1/messages HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nX: " + std::string(70000, 'a') + "\r\n\r\n",
  };
  for (int i = 0; i < 60; ++i) {
    std::string p;
    if (i % 2) p = std::string(i % 3 ? "POST" : "GET") + " /v1/chat/completions HTTP/1.1\r\n";
    for (int k = 0, n = int(rng() % 400); k < n; ++k) p += char(rng() % 256);
    payloads.push_back(p);
  }
  for (auto& p : payloads) {
    std::string r = raw_exchange(port_, p);
    if (r.rfind("HTTP/1.", 0) == 0) {
      int status = std::atoi(r.c_str() + 9);
      EXPECT_LT(status, 500) << p.substr(0, 60);
    }
  }
  httplib::Client c("127.0.0.1", port_);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

}  // namespace
