// `rapid-mlx bench --model PATH`: starts `rapid-mlx serve` on a free port (or uses --url) and runs
// the harness's workloads 1-2 through the OpenAI streaming API, timing each SSE chunk:
//   1. single stream: prefill tok/s (prompt tokens / TTFT), decode tok/s, TTFT;
//   2. concurrency 1,4,8,16: aggregate tok/s, p50/p99 TTFT and inter-token latency.
// A C++ client rather than the Python harness so it works wherever the binary does; the
// comparison with other servers is bench/run.sh.
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"

extern char** environ;

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string model, url, json_out;
  int prompt_words = 400, gen_tokens = 128, repeats = 3, conc_gen_tokens = 48;
  std::vector<int> levels{1, 4, 8, 16};
};

rapid::cli::FlagTable table(Options& o) {
  using namespace rapid::cli;
  return FlagTable(
      "bench",
      {text("--model", "PATH", "the model to serve (a model directory or a .gguf file)", &o.model),
       text("--url", "http://HOST:PORT", "measure this running OpenAI-compatible server instead of starting one",
            &o.url),
       integer("--prompt-words", "N", "words of the single-stream prompt", &o.prompt_words, 1, 100000),
       integer("--gen-tokens", "N", "tokens generated per single-stream request", &o.gen_tokens, 2, 100000),
       integer("--repeats", "N", "single-stream requests (the median is reported)", &o.repeats, 1, 1000),
       integer_list("--concurrency", "N,N,...", "concurrency levels", &o.levels, 1, 256),
       integer("--conc-gen-tokens", "N", "tokens generated per concurrent request", &o.conc_gen_tokens, 2, 100000),
       text("--json", "FILE", "also write the results as JSON", &o.json_out)},
      "single-stream and concurrent throughput/latency of a model",
      {"--model PATH [options]", "--url http://HOST:PORT [options]"},
      "Starts `rapid-mlx serve` (unless --url names a running OpenAI-compatible server) and\n"
      "measures single-stream prefill/decode tok/s and TTFT, then aggregate tok/s and p50/p99\n"
      "TTFT / inter-token latency at each concurrency. Progress on stderr, table on stdout.");
}

// Deterministic filler text (same word list idea as bench/harness/prompts.py).
std::string filler(int n_words, unsigned seed) {
  static const char* words[] = {"the", "value", "file", "module", "request", "server", "token",
                                "cache", "memory", "thread", "buffer", "parser", "error", "test",
                                "build", "model", "layer", "weight", "matrix", "kernel", "stream",
                                "batch", "queue", "index", "string", "number", "list", "map",
                                "read", "write", "start", "stop", "fast", "small", "agent", "path"};
  std::string s;
  unsigned x = seed * 2654435761u + 1;
  for (int i = 0; i < n_words; ++i) {
    x = x * 1664525u + 1013904223u;
    s += words[(x >> 8) % (sizeof(words) / sizeof(*words))];
    s += (i % 12 == 11) ? ". " : " ";
  }
  return s;
}

struct Timing {
  double ttft = 0, total = 0;
  std::vector<double> token_times;  // arrival of each chunk carrying generated text
  long prompt_tokens = -1, completion_tokens = 0;
};

struct Endpoint {
  std::string host;
  int port = 0;
};

Endpoint parse_url(const std::string& url) {
  std::string u = url;
  if (u.rfind("http://", 0) == 0) u = u.substr(7);
  else if (u.find("://") != std::string::npos) throw std::runtime_error("--url: only http:// is supported");
  if (auto slash = u.find('/'); slash != std::string::npos) u = u.substr(0, slash);
  auto colon = u.rfind(':');
  if (colon == std::string::npos) return {u, 80};
  std::optional<int> port = rapid::cli::parse_number<int>(u.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) throw std::runtime_error("--url: bad port in '" + url + "'");
  return {u.substr(0, colon), *port};
}

// One streaming chat completion; every SSE `data:` line is parsed as it arrives.
Timing stream_chat(const Endpoint& ep, const std::string& model, const std::string& content,
                   int max_tokens) {
  json body = {{"model", model},
               {"messages", json::array({{{"role", "user"}, {"content", content}}})},
               {"max_tokens", max_tokens},
               {"temperature", 0.0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  httplib::Client cli(ep.host, ep.port);
  cli.set_read_timeout(600, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  req.body = body.dump();
  Timing t;
  std::string buf;
  std::string error;
  bool finished = false;
  auto t0 = Clock::now();
  auto on_line = [&](const std::string& line) {
    if (line.rfind("data:", 0) != 0) return;
    std::string payload = line.substr(5);
    payload.erase(0, payload.find_first_not_of(' '));
    if (payload.empty() || payload == "[DONE]") return;
    double now = std::chrono::duration<double>(Clock::now() - t0).count();
    json j = json::parse(payload, nullptr, false);
    if (j.is_discarded()) return;
    if (j.contains("error")) error = j["error"].dump();
    if (j.contains("usage") && j["usage"].is_object()) {
      t.prompt_tokens = j["usage"].value("prompt_tokens", -1L);
      t.completion_tokens = j["usage"].value("completion_tokens", 0L);
    }
    if (!j.contains("choices") || !j["choices"].is_array()) return;
    for (auto& ch : j["choices"]) {
      if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) finished = true;
      if (!ch.contains("delta") || !ch["delta"].is_object()) continue;
      auto& d = ch["delta"];
      bool text = false;
      for (const char* k : {"content", "reasoning_content"})
        if (d.contains(k) && d[k].is_string() && !d[k].get<std::string>().empty()) text = true;
      if (text || d.contains("tool_calls")) t.token_times.push_back(now);
    }
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      std::string line = buf.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      buf.erase(0, nl + 1);
      on_line(line);
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  if (!cli.send(req, res, err))
    throw std::runtime_error("request failed: " + httplib::to_string(err));
  if (res.status != 200) throw std::runtime_error("HTTP " + std::to_string(res.status) + ": " + res.body);
  if (!error.empty()) throw std::runtime_error("server error in stream: " + error);
  // A stream cut short (e.g. a server cancelling it for a newer request) must not pass as short.
  if (!finished) throw std::runtime_error("stream ended without a finish_reason");
  t.total = std::chrono::duration<double>(Clock::now() - t0).count();
  t.ttft = t.token_times.empty() ? t.total : t.token_times.front();
  if (t.completion_tokens == 0) t.completion_tokens = long(t.token_times.size());
  return t;
}

double decode_rate(const Timing& t) {
  if (t.token_times.size() < 2 || t.completion_tokens < 2) return 0;
  double span = t.token_times.back() - t.token_times.front();
  return span > 0 ? double(t.completion_tokens - 1) / span : 0;
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  double k = (xs.size() - 1) * p / 100.0;
  size_t lo = size_t(k), hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (xs[hi] - xs[lo]) * (k - lo);
}

class ProgressBar {
 public:
  explicit ProgressBar(int total) : total_(total), t0_(Clock::now()) {}
  void label(const std::string& s) {
    std::lock_guard<std::mutex> g(mu_);
    label_ = s;
    draw();
  }
  void tick() {
    std::lock_guard<std::mutex> g(mu_);
    ++done_;
    draw();
  }
  void finish() {
    if (!finished_) std::fputc('\n', stderr);
    finished_ = true;
  }
  ~ProgressBar() { finish(); }  // an error message then starts on its own line

 private:
  void draw() {
    const int w = 30;
    int fill = total_ ? w * done_ / total_ : w;
    double s = std::chrono::duration<double>(Clock::now() - t0_).count();
    std::fprintf(stderr, "\r[%s%s] %d/%d %5.0fs %-40s", std::string(fill, '#').c_str(),
                 std::string(w - fill, '.').c_str(), done_, total_, s, label_.c_str());
    std::fflush(stderr);
  }
  std::mutex mu_;
  int total_, done_ = 0;
  bool finished_ = false;
  std::string label_;
  Clock::time_point t0_;
};

// The server under test as a child process, killed on every exit path.
class ServerProcess {
 public:
  ServerProcess(const std::string& model, int port) {
    log_ = "/tmp/rapid-mlx-bench-" + std::to_string(getpid()) + ".log";
    std::string exe = "/proc/self/exe", p = std::to_string(port);
    std::vector<std::string> argv_s = {"rapid-mlx", "serve", "--model", model, "--host", "127.0.0.1",
                                       "--port", p};
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start rapid-mlx serve");
  }
  ~ServerProcess() { stop(); }
  bool exited() {
    int st;
    return pid_ > 0 && waitpid(pid_, &st, WNOHANG) == pid_ ? (pid_ = -1, true) : pid_ < 0;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) { pid_ = -1; return; }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string log_tail() const {
    std::ifstream f(log_);
    std::string all((std::istreambuf_iterator<char>(f)), {});
    return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  }
  const std::string& log_path() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Waits for /v1/models to answer; returns start-up seconds and the model id the server announces
// (rapid-mlx rejects requests naming another model).
double wait_ready(const Endpoint& ep, ServerProcess* proc, double timeout_s, std::string& model_id) {
  auto t0 = Clock::now();
  for (;;) {
    if (proc && proc->exited())
      throw std::runtime_error("rapid-mlx serve exited during start-up:\n" + proc->log_tail());
    httplib::Client cli(ep.host, ep.port);
    cli.set_connection_timeout(1, 0);
    if (auto r = cli.Get("/v1/models"); r && r->status == 200) {
      json j = json::parse(r->body, nullptr, false);
      if (!j.is_discarded() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
          j["data"][0].contains("id") && j["data"][0]["id"].is_string())
        model_id = j["data"][0]["id"].get<std::string>();
      return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s)
      throw std::runtime_error("server not ready after " + std::to_string(int(timeout_s)) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int run(Options& o) {
  if (o.model.empty() && o.url.empty()) throw rapid::cli::UsageError("--model or --url is required");
  std::unique_ptr<ServerProcess> proc;
  Endpoint ep;
  if (o.url.empty()) {
    int port = free_port();
    proc = std::make_unique<ServerProcess>(o.model, port);
    ep = {"127.0.0.1", port};
  } else {
    ep = parse_url(o.url);
  }
  int total = o.repeats;
  for (int c : o.levels) total += c;
  ProgressBar bar(total + 1);
  bar.label("starting server");
  std::string model_id = o.model.empty() ? "default" : o.model;
  // Loading a large model may take minutes; a server given by --url is either up or not.
  double startup = wait_ready(ep, proc.get(), proc ? 300 : 10, model_id);
  stream_chat(ep, model_id, "Hello", 4);  // warm-up: first-touch of weights and caches
  bar.tick();

  json out = {{"model", o.model}, {"startup_s", startup}};
  std::vector<double> ttft, prefill, decode;
  bar.label("single stream");
  for (int i = 0; i < o.repeats; ++i) {
    // A unique head defeats prefix caching, so prefill is really measured.
    std::string prompt = "Request " + std::to_string(i) + "-" +
                         std::to_string(Clock::now().time_since_epoch().count()) + ". " +
                         filler(o.prompt_words, 10 + i) + "\n\nWrite a long story about the text above.";
    Timing t = stream_chat(ep, model_id, prompt, o.gen_tokens);
    ttft.push_back(t.ttft);
    if (t.prompt_tokens > 0) prefill.push_back(double(t.prompt_tokens) / t.ttft);
    if (double d = decode_rate(t); d > 0) decode.push_back(d);
    bar.tick();
  }
  out["single"] = {{"ttft_s", percentile(ttft, 50)},
                   {"prefill_tok_s", prefill.empty() ? json(nullptr) : json(percentile(prefill, 50))},
                   {"decode_tok_s", percentile(decode, 50)}};

  for (int c : o.levels) {
    bar.label("concurrency " + std::to_string(c));
    std::vector<Timing> res(c);
    std::vector<std::string> errors;
    std::mutex mu;
    std::atomic<int> ready{0};
    std::vector<std::thread> th;
    auto t0 = Clock::now();
    for (int i = 0; i < c; ++i)
      th.emplace_back([&, i] {
        std::string prompt = "Stream " + std::to_string(c) + "-" + std::to_string(i) + ". " +
                             filler(48, 100 + i) + "\n\nContinue this text for a long time.";
        ++ready;
        while (ready.load() < c) std::this_thread::yield();  // start together
        try {
          res[i] = stream_chat(ep, model_id, prompt, o.conc_gen_tokens);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> g(mu);
          errors.push_back(e.what());
        }
        bar.tick();
      });
    for (auto& t : th) t.join();
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!errors.empty()) throw std::runtime_error("concurrency " + std::to_string(c) + ": " + errors[0]);
    long toks = 0;
    std::vector<double> tt, itl;
    for (auto& r : res) {
      toks += r.completion_tokens;
      tt.push_back(r.ttft);
      for (size_t k = 1; k < r.token_times.size(); ++k) itl.push_back(r.token_times[k] - r.token_times[k - 1]);
    }
    out["concurrency"][std::to_string(c)] = {
        {"aggregate_tok_s", toks / wall}, {"ttft_p50_s", percentile(tt, 50)},
        {"ttft_p99_s", percentile(tt, 99)}, {"itl_p50_s", percentile(itl, 50)},
        {"itl_p99_s", percentile(itl, 99)}, {"completion_tokens", toks}};
  }
  bar.finish();
  if (proc) proc->stop();

  std::printf("model: %s   (server start-up %.2f s)\n\n", o.model.c_str(), startup);
  std::printf("single stream (%d runs, median): prefill %s tok/s, decode %.1f tok/s, TTFT %.0f ms\n\n",
              o.repeats,
              prefill.empty() ? "n/a" : std::to_string(int(percentile(prefill, 50))).c_str(),
              percentile(decode, 50), 1000 * percentile(ttft, 50));
  std::printf("| concurrency | aggregate tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int c : o.levels) {
    auto& r = out["concurrency"][std::to_string(c)];
    std::printf("| %d | %.1f | %.0f | %.0f | %.1f | %.1f |\n", c, r["aggregate_tok_s"].get<double>(),
                1000 * r["ttft_p50_s"].get<double>(), 1000 * r["ttft_p99_s"].get<double>(),
                1000 * r["itl_p50_s"].get<double>(), 1000 * r["itl_p99_s"].get<double>());
  }
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    if (!f) throw std::runtime_error("cannot write " + o.json_out);
    f << out.dump(1) << "\n";
  }
  return 0;
}

rapid::cli::Registrar reg("bench", table, run);

}  // namespace
