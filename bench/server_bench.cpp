// Server overhead per streamed token: a model-free backend produces tokens instantly, so the time
// per token is what the server adds (engine queue hand-off, output parsing, chunk JSON, SSE write,
// HTTP chunking) plus the client's read. Target: < 50 µs per token.
//   build-*/server_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <httplib.h>

#include "../tests/server_fake_backend.h"
#include "server/http_server.h"

namespace {

struct Fixture {
  rapid::testing::FakeBackend backend;
  std::unique_ptr<rapid::server::HttpServer> server;
  int port = 0;
  Fixture() {
    backend.script.reply = "token ";
    backend.script.endless = true;
    rapid::server::ServerOptions o;
    o.port = 0;
    o.http_threads = 8;
    server = std::make_unique<rapid::server::HttpServer>(backend, o);
    port = server->bind();
    server->start();
  }
};

void stream_tokens(benchmark::State& state, const std::string& path, const std::string& body) {
  static Fixture f;
  const int64_t n = state.range(0);
  httplib::Client c("127.0.0.1", f.port);
  c.set_read_timeout(60, 0);
  std::string b = body;
  b.replace(b.find("NTOK"), 4, std::to_string(n));
  for (auto _ : state) {
    size_t bytes = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = b;
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t len, uint64_t, uint64_t) {
      bytes += len;
      return true;
    };
    auto r = c.send(req);
    if (!r || r->status != 200) state.SkipWithError("request failed");
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * n);  // µs per token = 1e6 / items_per_second
}

void BM_ChatStreamPerToken(benchmark::State& state) {
  stream_tokens(state, "/v1/chat/completions",
                R"({"model":"fake-model","stream":true,"max_tokens":NTOK,"messages":[{"role":"user","content":"hi"}]})");
}
void BM_AnthropicStreamPerToken(benchmark::State& state) {
  stream_tokens(state, "/v1/messages",
                R"({"model":"fake-model","stream":true,"max_tokens":NTOK,"messages":[{"role":"user","content":"hi"}]})");
}
void BM_ResponsesStreamPerToken(benchmark::State& state) {
  stream_tokens(state, "/v1/responses", R"({"model":"fake-model","stream":true,"max_output_tokens":NTOK,"input":"hi"})");
}

BENCHMARK(BM_ChatStreamPerToken)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AnthropicStreamPerToken)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ResponsesStreamPerToken)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
