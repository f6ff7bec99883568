// `rapid-mlx serve`: loads a model and serves the OpenAI- and Anthropic-compatible HTTP APIs.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/error.h"
#include "common/log.h"
#include "cache/snapshot_store.h"
#include "engine/batch_engine.h"
#include "engine/model_identity.h"
#include "model/arch.h"
#include "model/model.h"
#include "model/weights.h"
#include "server/http_server.h"
#include "server/kv_event_publisher.h"
#include "server/model_backend.h"
#include "tokenizer/tokenizer.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: rapid-mlx serve --model PATH [--host 127.0.0.1] [--port 8000] [--api-key-file FILE]\n"
               "                       [--served-model-name NAME] [--tool-call-parser NAME|none]\n"
               "                       [--reasoning-parser NAME|none] [--max-body-bytes N] [--threads N]\n"
               "                       [--ctx N] [--http-threads N] [--log-level debug|info|warn|error]\n"
               "                       [--kv-cache-memory SIZE] [--kv-dtype f16|bf16|f32] [--max-num-seqs N]\n"
               "                       [--max-batch-tokens N] [--no-prefix-cache] [--no-persist-cache]\n"
               "                       [--cache-dir DIR] [--cache-disk-limit SIZE] [--cache-key-file PATH]\n"
               "                       [--encrypt-cache] [--no-warm-turns]\n"
               "                       [--speculative auto|off|ngram|draft|mtp] [--num-speculative-tokens N]\n"
               "                       [--draft-model PATH] [--max-queued-requests N] [--max-connections N]\n"
               "                       [--allowed-origins ORIGIN,...|*] [--api-key KEY]\n"
               "                       [--model-alias 'PATTERN=NAME']... [--kv-events-endpoint tcp://*:5557]\n"
               "                       [--kv-events-topic TOPIC] [--kv-events-replay-endpoint tcp://*:5558]\n"
               "                       [--kv-events-format array|map]\n"
               "SIZE: bytes with an optional K/M/G(iB) suffix, or a fraction of RAM (0.25). KV cache default:\n"
               "enough for --max-num-seqs full contexts, at most 25%% of RAM.\n"
               "PATH: a model directory (config.json + safetensors) or a .gguf file.\n"
               "The API key: --api-key-file (first line) or the RAPID_API_KEY environment variable; --api-key\n"
               "works too but any local user can read it in /proc/PID/cmdline.\n");
  return 2;
}

bool parse_int(const std::string& s, long long lo, long long hi, long long& out) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > hi) return false;
  out = v;
  return true;
}

// The first line of `path` (trailing whitespace dropped) as the API key; false (with a message)
// when unreadable or empty.
bool read_key_file(const std::string& path, std::string& key) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) {
    std::fprintf(stderr, "rapid-mlx serve: cannot read --api-key-file %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  char buf[4096];
  key = std::fgets(buf, sizeof buf, f) ? buf : "";
  std::fclose(f);
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.empty()) std::fprintf(stderr, "rapid-mlx serve: --api-key-file %s is empty\n", path.c_str());
  return !key.empty();
}

rapid::server::HttpServer* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

int run_serve(const std::vector<std::string>& args) {
  rapid::server::ServerOptions so;
  rapid::server::ModelBackendOptions bo;
  std::string model_path;
  long long threads = 0, ctx = 0;
  rapid::BatchEngineOptions eo;
  rapid::ModelOptions mo;
  rapid::server::KvEventOptions ko;  // KV-cache events: off unless --kv-events-endpoint
  std::string kv_memory, cache_dir, disk_limit = "8GiB", draft_path;
  bool persist = true;
  std::vector<std::string> aliases;  // PATTERN=NAME
  if (const char* k = std::getenv("RAPID_API_KEY")) so.api_key = k;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= args.size()) return false;
      dst = args[++i];
      return true;
    };
    auto number = [&](long long lo, long long hi, long long& dst) {
      std::string v;
      if (!value(v) || !parse_int(v, lo, hi, dst)) {
        std::fprintf(stderr, "rapid-mlx serve: %s needs an integer in [%lld, %lld]\n", a.c_str(), lo, hi);
        return false;
      }
      return true;
    };
    long long n = 0;
    bool ok = true;
    if (a == "--model") ok = value(model_path);
    else if (a == "--host") ok = value(so.host);
    else if (a == "--port") { ok = number(0, 65535, n); so.port = int(n); }
    else if (a == "--api-key") {
      ok = value(so.api_key);
      rapid::log::warn("--api-key is readable by every local user in /proc/" + std::to_string(::getpid()) +
                       "/cmdline; prefer --api-key-file or RAPID_API_KEY");
    } else if (a == "--api-key-file") {
      std::string path;
      ok = value(path);
      if (ok && !read_key_file(path, so.api_key)) return 2;
    }
    else if (a == "--max-queued-requests") { ok = number(0, 1 << 20, n); so.max_queued_requests = int(n); }
    else if (a == "--max-connections") { ok = number(16, 1 << 20, n); so.max_connections = size_t(n); }
    else if (a == "--allowed-origins") {
      std::string list;
      ok = value(list);
      for (size_t p = 0; ok && p <= list.size();) {
        size_t c = std::min(list.find(',', p), list.size());
        std::string o = list.substr(p, c - p);
        while (!o.empty() && o.front() == ' ') o.erase(0, 1);
        while (!o.empty() && o.back() == ' ') o.pop_back();
        if (!o.empty()) so.allowed_origins.push_back(o);
        p = c + 1;
      }
    }
    else if (a == "--served-model-name") ok = value(bo.served_name);
    else if (a == "--model-alias") ok = value(aliases.emplace_back());
    else if (a == "--tool-call-parser") ok = value(bo.tool_parser);
    else if (a == "--reasoning-parser") ok = value(bo.reasoning_parser);
    else if (a == "--max-body-bytes") { ok = number(1024, 1LL << 34, n); so.max_body_bytes = size_t(n); }
    else if (a == "--threads") ok = number(0, 1024, threads);
    else if (a == "--ctx") ok = number(16, 1LL << 24, ctx);
    else if (a == "--http-threads") { ok = number(4, 4096, n); so.http_threads = int(n); }
    else if (a == "--kv-cache-memory") ok = value(kv_memory);
    else if (a == "--kv-dtype") {
      std::string d;
      ok = value(d);
      if (d == "f16") mo.kv_dtype = rapid::DType::F16;
      else if (d == "bf16") mo.kv_dtype = rapid::DType::BF16;
      else if (d == "f32") mo.kv_dtype = rapid::DType::F32;
      else ok = false;
    }
    else if (a == "--max-num-seqs") { ok = number(1, 4096, n); eo.max_num_seqs = n; }
    else if (a == "--max-batch-tokens") { ok = number(16, 1 << 20, n); eo.max_step_tokens = n; }
    else if (a == "--no-prefix-cache") eo.kv.prefix_cache = false;
    else if (a == "--no-persist-cache") persist = false;
    else if (a == "--no-warm-turns") bo.warm_turns = false;
    else if (a == "--cache-dir") ok = value(cache_dir);
    else if (a == "--cache-disk-limit") ok = value(disk_limit);
    else if (a == "--cache-key-file") ok = value(eo.kv.snapshot_key_file);
    else if (a == "--encrypt-cache") eo.kv.snapshot_encrypt = true;
    else if (a == "--kv-events-endpoint") ok = value(ko.endpoint);
    else if (a == "--kv-events-replay-endpoint") ok = value(ko.replay_endpoint);
    else if (a == "--kv-events-topic") ok = value(ko.topic);
    else if (a == "--kv-events-format") {
      std::string f;
      ok = value(f) && (f == "array" || f == "map");
      ko.map_events = f == "map";
    }
    else if (a == "--speculative") {
      std::string m;
      ok = value(m);
      try {
        eo.spec.mode = rapid::parse_spec_mode(m);
      } catch (const rapid::Error& e) {
        std::fprintf(stderr, "rapid-mlx serve: %s\n", e.what());
        return 2;
      }
    }
    else if (a == "--draft-model") ok = value(draft_path);
    else if (a == "--num-speculative-tokens") { ok = number(0, 64, n); eo.spec.max_draft = int(n); }
    else if (a == "--log-level") {
      std::string l;
      ok = value(l);
      if (l == "debug") rapid::log::set_level(rapid::log::Level::Debug);
      else if (l == "info") rapid::log::set_level(rapid::log::Level::Info);
      else if (l == "warn") rapid::log::set_level(rapid::log::Level::Warn);
      else if (l == "error") rapid::log::set_level(rapid::log::Level::Error);
      else ok = false;
    } else if (a == "-h" || a == "--help") return usage();
    else {
      std::fprintf(stderr, "rapid-mlx serve: unknown option '%s'\n", a.c_str());
      return usage();
    }
    if (!ok) return usage();
  }
  if (model_path.empty()) return usage();
  so.max_running = int(eo.max_num_seqs);

  std::shared_ptr<rapid::Checkpoint> ckpt = rapid::load_checkpoint(model_path);
  mo.num_threads = int(threads);
  std::shared_ptr<rapid::Model> model = rapid::create_model(ckpt, mo);
  std::shared_ptr<const rapid::Tokenizer> tok = rapid::load_tokenizer(ckpt->tokenizer_path);
  int64_t max_pos = ckpt->config.max_position_embeddings;
  bo.context_length = ctx > 0 ? ctx : (max_pos > 0 ? std::min<int64_t>(max_pos, 32768) : 4096);
  if (bo.served_name.empty()) bo.served_name = std::filesystem::path(model_path).filename().string();
  for (const std::string& al : aliases) {
    size_t eq = al.rfind('=');
    if (eq == std::string::npos || eq == 0 || al.substr(eq + 1) != bo.served_name) {
      std::fprintf(stderr, "rapid-mlx serve: --model-alias needs PATTERN=NAME with NAME the served model '%s', got '%s'\n",
                   bo.served_name.c_str(), al.c_str());
      return 2;
    }
    so.model_aliases.push_back(al.substr(0, eq));
  }
  bo.model_type = ckpt->config.architecture;
  bo.model_vocab = ckpt->config.vocab_size;
  eo.context_length = bo.context_length;
  const uint64_t ram = rapid::cache::system_ram_bytes();
  const rapid::cache::BlockShape shape = model->kv_block_shape(eo.kv.block_size);
  if (kv_memory.empty()) {
    uint64_t want = uint64_t(eo.max_num_seqs) * uint64_t(bo.context_length) / uint64_t(shape.block_size) *
                    shape.block_bytes();
    eo.kv.pool_bytes = std::min<uint64_t>(want + shape.block_bytes() * 4, ram / 4);
  } else {
    eo.kv.pool_bytes = rapid::cache::parse_memory_size(kv_memory, ram);
  }
  if (persist && eo.kv.prefix_cache) {
    std::string key = rapid::kv_snapshot_key(*ckpt, shape.dtype, shape.block_size);
    eo.kv.snapshot_dir = (cache_dir.empty() ? rapid::cache::default_cache_root() : cache_dir) + "/" + key;
    eo.kv.model_key = key;
    eo.kv.snapshot_max_disk_bytes = rapid::cache::parse_memory_size(disk_limit, ram);
    eo.kv.snapshot_max_tokens = bo.context_length;
  }
  if (!draft_path.empty()) {
    std::shared_ptr<rapid::Checkpoint> dck = rapid::load_checkpoint(draft_path);
    eo.draft_model = rapid::create_model(dck, mo);
    const rapid::cache::BlockShape ds = eo.draft_model->kv_block_shape(eo.kv.block_size);
    eo.draft_pool_bytes = std::min<uint64_t>(
        uint64_t(eo.max_num_seqs) * uint64_t(bo.context_length) / uint64_t(ds.block_size) * ds.block_bytes() +
            4 * ds.block_bytes(),
        ram / 8);
  }
  std::shared_ptr<rapid::server::KvEventPublisher> kv_events;
  if (!ko.endpoint.empty() && !eo.kv.prefix_cache)
    rapid::log::warn("--kv-events-endpoint ignored: --no-prefix-cache leaves no cached blocks to announce");
  if (!ko.endpoint.empty() && eo.kv.prefix_cache) {
    ko.block_size = eo.kv.block_size;
    kv_events = std::make_shared<rapid::server::KvEventPublisher>(ko);
    eo.kv.on_events = [kv_events](std::vector<rapid::cache::KvEvent> ev) { kv_events->publish(std::move(ev)); };
  }
  auto engine = std::make_unique<rapid::BatchEngine>(model, tok, eo);
  {
    rapid::BatchEngineStats st = engine->stats();
    rapid::log::info("kv cache: " + std::to_string(st.kv.pool.total_blocks) + " blocks of " +
                     std::to_string(shape.block_size) + " tokens (" +
                     std::to_string(st.kv.pool.arena_bytes >> 20) + " MiB); snapshots " +
                     (st.kv.persistent ? st.kv.snapshot_dir + (eo.kv.snapshot_encrypt ? " (encrypted)" : "")
                                       : std::string("off")) + "; speculative " +
                     rapid::spec_mode_name(eo.spec.mode));
  }
  bo.warm_turns = bo.warm_turns && eo.kv.prefix_cache;  // warming fills the prefix cache
  rapid::server::ModelBackend backend(tok, std::move(engine), bo);

  rapid::server::HttpServer server(backend, so);
  int port = server.bind();
  if (kv_events) kv_events->start(ko.topic.empty() ? rapid::server::default_kv_events_topic(so.host, port, bo.served_name) : ko.topic);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client must be a failed write, not a dead server
  g_server = &server;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  rapid::log::info("serving '" + bo.served_name + "' (context " + std::to_string(bo.context_length) +
                   ", tool parser '" + backend.tool_parser() + "', reasoning parser '" + backend.reasoning_parser() +
                   "') on http://" + so.host + ":" + std::to_string(port));
  std::fprintf(stderr, "rapid-mlx serve: listening on http://%s:%d\n", so.host.c_str(), port);
  server.serve();
  g_server = nullptr;
  return 0;
}

rapid::cli::Registrar reg("serve", "serve the OpenAI/Anthropic-compatible HTTP API", run_serve);

}  // namespace
