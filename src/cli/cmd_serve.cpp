// `rapid-mlx serve`: loads a model and serves the OpenAI- and Anthropic-compatible HTTP APIs.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/embedding_setup.h"
#include "cli/model_arg.h"
#include "cli/model_catalog.h"
#include "cli/server_registry.h"
#include "common/error.h"
#include "common/log.h"
#include "cache/pool_sizing.h"
#include "cache/snapshot_store.h"
#include "engine/batch_engine.h"
#include "engine/model_identity.h"
#include "model/arch.h"
#include "model/model.h"
#include "model/weights.h"
#include "server/http_server.h"
#include "server/kv_event_publisher.h"
#include "server/model_backend.h"
#include "server/model_registry.h"
#include "tokenizer/tokenizer.h"

namespace rapid::cli {
namespace {

// A --model and the --alias names that followed it.
struct ModelChoice {
  std::string spec;
  std::vector<std::string> aliases;
};

struct ServeArgs {
  server::ServerOptions so;
  server::ModelBackendOptions bo;  // every model's, but served_name (the first --model's)
  engine::BatchEngineOptions eo;           // likewise, each model planning its own context, pool, snapshots
  model::ModelOptions mo;
  std::vector<ModelChoice> models;
  std::string models_dir;
  bool hf_cache = false;
  std::optional<size_t> max_loaded;
  std::optional<uint64_t> max_loaded_memory;
  std::string cache_dir, draft_path;
  std::string embedding_path;
  std::optional<int64_t> ctx;
  std::optional<uint64_t> kv_memory;
  bool persist = true;
  log::Level log_level = log::level();
  std::vector<std::string> aliases;  // PATTERN=NAME
  server::KvEventOptions ko;          // KV-cache events: off unless --kv-events-endpoint
  uint64_t ram = cache::system_ram_bytes();
  ServeArgs() {
    if (const char* k = std::getenv("RAPID_API_KEY")) so.api_key = k;
  }
};

// The first line of `path` (trailing whitespace dropped) as the API key; what is wrong otherwise.
std::string read_key_file(const std::string& path, std::string& key) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "cannot read " + path + ": " + std::strerror(errno);
  char buf[4096];
  std::string k = std::fgets(buf, sizeof buf, f) ? buf : "";
  std::fclose(f);
  while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
  if (k.empty()) return path + " is empty";
  key = k;
  return "";
}

// The HTTP front end's and the API's flags.
std::vector<Flag> server_flags(ServeArgs& a) {
  server::ServerOptions& so = a.so;
  return {
      custom("--model", "PATH", "a model directory (config.json + safetensors, HF or MLX), a .gguf file, or a Hugging "
             "Face id org/name[@revision][:QUANT] (from its cache, pulled when missing); repeat to serve several",
             [&a](const std::string& v) {
               a.models.push_back({v, {}});
               return std::string();
             }).many().required_unless({"--models-dir", "--hf-cache"}),
      custom("--alias", "NAME", "another name for the --model before it (repeatable)",
             [&a](const std::string& v) {
               if (a.models.empty()) return std::string("must follow the --model it names");
               a.models.back().aliases.push_back(v);
               return std::string();
             }).many(),
      text("--models-dir", "DIR", "also serve every model in DIR (.gguf files, model folders), loaded on first use",
           &a.models_dir),
      flag("--hf-cache", "also serve every model in the Hugging Face cache, loaded on first use", &a.hf_cache),
      integer("--max-loaded-models", "N", "models kept loaded; the least recently used is unloaded beyond",
              &a.max_loaded, size_t(1), size_t(1) << 20)
          .default_is("unlimited; 1 with --models-dir or --hf-cache"),
      size("--max-loaded-memory", "SIZE", "memory (weights + KV pools) the loaded models may hold; the least "
           "recently used are unloaded beyond", &a.max_loaded_memory, a.ram)
          .default_is("unlimited"),
      text("--embedding-model", "PATH", "also serve /v1/embeddings from this embedding model (path or hub id)",
           &a.embedding_path).default_is("the first --model itself when it is a sentence-transformers model, else none"),
      text("--host", "HOST", "address to listen on", &so.host),
      integer("--port", "N", "TCP port (0: any free one)", &so.port, 0, 65535),
      custom("--api-key-file", "FILE", "require the key on the file's first line on every API request",
             [&so](const std::string& v) { return read_key_file(v, so.api_key); }),
      custom("--api-key", "KEY", "require KEY (readable by every local user in /proc/PID/cmdline: prefer "
             "--api-key-file or RAPID_API_KEY)",
             [&so](const std::string& v) {
               so.api_key = v;
               log::warn("--api-key is readable by every local user in /proc/" + std::to_string(::getpid()) +
                         "/cmdline; prefer --api-key-file or RAPID_API_KEY");
               return std::string();
             }),
      integer("--max-queued-requests", "N", "generation requests admitted beyond --max-num-seqs; then 429/529",
              &so.max_queued_requests, 0, 1 << 20),
      integer("--max-connections", "N", "open client connections (the longest-waiting idle one makes room)",
              &so.max_connections, 16, 1 << 20),
      word_list("--allowed-origins", "ORIGIN,...|*", "CORS origins allowed (default: none, CORS off)",
                &so.allowed_origins),
      text("--served-model-name", "NAME", "the model id clients send (for the first --model)", &a.bo.served_name)
          .default_is("the model's file or directory name"),
      text("--model-alias", "'PATTERN=NAME'", "other model names (shell glob) accepted for the served model NAME",
           &a.aliases),
      text("--tool-call-parser", "NAME|none", "tool-call output parser", &a.bo.tool_parser)
          .default_is("detected from the chat template and model type"),
      text("--reasoning-parser", "NAME|none", "reasoning output parser", &a.bo.reasoning_parser)
          .default_is("detected from the chat template and model type"),
      integer("--max-tokens", "N", "max_tokens of a request that sets none", &so.default_max_tokens, 1,
              int64_t(1) << 24).default_is("what the context leaves"),
      integer("--max-body-bytes", "N", "larger request bodies get 413", &so.max_body_bytes, 1024, size_t(1) << 34),
      integer("--http-threads", "N", "worker threads for generation requests (started on demand)",
              &so.http_threads, 4, 4096),
      choice("--log-level", "log verbosity (debug also logs every engine step)", &a.log_level,
             {{"debug", log::Level::Debug}, {"info", log::Level::Info}, {"warn", log::Level::Warn},
              {"error", log::Level::Error}}),
  };
}

// The model's, the engine's and the KV cache's flags.
std::vector<Flag> engine_flags(ServeArgs& a) {
  engine::BatchEngineOptions& eo = a.eo;
  return {
      integer("--threads", "N", "compute threads", &a.mo.num_threads, 0, 1024).default_is("all cores"),
      integer("--ctx", "N", "context length", &a.ctx, 16, int64_t(1) << 24).default_is("the model's, capped at 32768"),
      integer("--max-num-seqs", "N", "sequences decoded together in one batch", &eo.max_num_seqs, 1, 4096),
      integer("--max-batch-tokens", "N", "tokens per forward step", &eo.max_step_tokens, 16, 1 << 20),
      size("--kv-cache-memory", "SIZE", "the KV block pool", &a.kv_memory, a.ram)
          .default_is("--max-num-seqs full contexts, at most 25% of RAM"),
      size("--kv-checkpoint-memory", "SIZE", "hybrid models: recurrent-state checkpoints in the prefix cache, "
           "taken out of the KV pool (at most half of it)", &eo.kv.checkpoint_bytes, a.ram)
          .default_is("a quarter of the KV pool"),
      choice("--kv-dtype", "KV cache element type", &a.mo.kv_dtype,
             {{"f16", tensor::DType::F16}, {"bf16", tensor::DType::BF16}, {"f32", tensor::DType::F32}}),
      flag("--no-prefix-cache", "no radix prefix cache (nor snapshots)", &eo.kv.prefix_cache, false),
      flag("--no-persist-cache", "no KV snapshots on disk", &a.persist, false),
      text("--cache-dir", "DIR", "where KV snapshots live", &a.cache_dir).default_is("~/.cache/rapid-mlx/kv"),
      size("--cache-disk-limit", "SIZE", "disk the snapshots may use", &eo.kv.snapshot_max_disk_bytes, a.ram),
      text("--cache-key-file", "PATH", "the install's secret that authenticates snapshots", &eo.kv.snapshot_key_file)
          .default_is("$XDG_CONFIG_HOME/rapid-mlx/kv-cache.key, else ~/.config/rapid-mlx/kv-cache.key"),
      flag("--encrypt-cache", "snapshots hold tokens and KV as ciphertext", &eo.kv.snapshot_encrypt),
      flag("--no-warm-turns", "do not prefill each chat turn's predicted follow-up while idle", &a.bo.warm_turns,
           false),
      choice("--speculative", "speculative decoding proposer", &eo.spec.mode,
             {{"auto", engine::SpecMode::Auto}, {"off", engine::SpecMode::Off}, {"ngram", engine::SpecMode::Ngram},
              {"draft", engine::SpecMode::Draft}, {"mtp", engine::SpecMode::Mtp}}),
      integer("--num-speculative-tokens", "N", "draft depth of the named --speculative modes", &eo.spec.max_draft, 0,
              64),
      text("--draft-model", "PATH", "a smaller model with the same vocabulary, for --speculative draft",
           &a.draft_path),
  };
}

// KV-cache events for prefix-aware routers (vLLM's wire format over ZeroMQ).
std::vector<Flag> kv_event_flags(ServeArgs& a) {
  server::KvEventOptions& ko = a.ko;
  return {
      text("--kv-events-endpoint", "URL", "publish KV-cache events on this ZeroMQ endpoint (e.g. tcp://*:5557)",
           &ko.endpoint).default_is("off"),
      text("--kv-events-topic", "TOPIC", "the events' topic", &ko.topic).default_is("kv@HOST:PORT@MODEL"),
      text("--kv-events-replay-endpoint", "URL", "answer replay requests (by sequence number) on this endpoint",
           &ko.replay_endpoint).default_is("off"),
      choice("--kv-events-format", "each event as a tagged array (llm-d) or a tagged map (vLLM 0.33)",
             &ko.map_events, {{"array", false}, {"map", true}}),
  };
}

FlagTable table(ServeArgs& a) {
  std::vector<Flag> flags = server_flags(a);
  for (Flag& f : engine_flags(a)) flags.push_back(std::move(f));
  for (Flag& f : kv_event_flags(a)) flags.push_back(std::move(f));
  return FlagTable("serve", std::move(flags), "serve the OpenAI/Anthropic-compatible HTTP API", {},
                   "SIZE: bytes with an optional K/M/G/T(iB) suffix, or a fraction of RAM (0.25).\n"
                   "The API key: --api-key-file or --api-key, else the RAPID_API_KEY environment variable.\n"
                   "Every flag, with the API it serves: docs/api.md.");
}

server::HttpServer* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

// --model-alias PATTERN=NAME: NAME must be a served model's name.
std::vector<std::pair<std::string, std::string>> alias_patterns(const ServeArgs& a,
                                                                const std::vector<server::ServedModel>& served) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& al : a.aliases) {
    size_t eq = al.rfind('=');
    std::string name = eq == std::string::npos ? "" : al.substr(eq + 1);
    bool known = std::any_of(served.begin(), served.end(), [&](const server::ServedModel& m) { return m.name == name; });
    if (eq == std::string::npos || eq == 0 || !known)
      throw UsageError("--model-alias: expected PATTERN=NAME with NAME a served chat model ('" +
                       (served.empty() ? std::string() : served[0].name) + "'...), got '" + al + "'");
    out.emplace_back(al.substr(0, eq), name);
  }
  return out;
}

// Every model the server may serve, the --model ones first (resolved now: a typo fails at start).
std::vector<server::ServedModel> served_models(ServeArgs& a) {
  std::vector<server::ServedModel> out;
  auto add = [&out](server::ServedModel m) {
    for (const server::ServedModel& o : out)
      if (o.name == m.name) return false;
    out.push_back(std::move(m));
    return true;
  };
  for (size_t i = 0; i < a.models.size(); ++i) {
    const ModelArg target = resolve_model_arg(a.models[i].spec);
    std::string name = i == 0 && !a.bo.served_name.empty() ? a.bo.served_name : target.name;
    if (!add({name, a.models[i].aliases, target.path}))
      throw UsageError("--model: two models are served as '" + name + "': give one an --alias or rename it");
  }
  if (!a.models_dir.empty() && !std::filesystem::is_directory(a.models_dir))
    throw FileError(a.models_dir, "--models-dir: not a directory");
  if (!a.models_dir.empty())
    for (const CatalogEntry& e : scan_models_dir(a.models_dir)) add({e.name, {}, e.source});
  if (a.hf_cache)
    for (const CatalogEntry& e : scan_hf_cache()) add({e.name, {}, e.source});
  if (out.empty())
    throw UsageError(a.models_dir.empty() && !a.hf_cache ? "--model is required"
                                                         : "no model found in --models-dir / the Hugging Face cache");
  return out;
}

// One model's context, pools and snapshot directory from the flags and its checkpoint (policy:
// cache/pool_sizing.h). The snapshot folder is keyed by the model, so each has its own store.
void plan_engine(const ServeArgs& a, server::ModelBackendOptions& bo, engine::BatchEngineOptions& eo, const model::Checkpoint& ckpt,
                 const model::Model& model, bool with_draft) {
  bo.context_length = cache::serving_context(a.ctx.value_or(0), ckpt.config.max_position_embeddings);
  eo.context_length = bo.context_length;
  const cache::BlockShape shape = model.kv_block_shape(eo.kv.block_size);
  eo.kv.pool_bytes = cache::kv_pool_bytes(a.kv_memory, shape, eo.max_num_seqs, eo.context_length, a.ram);
  if (a.persist && eo.kv.prefix_cache) {
    std::string key = engine::kv_snapshot_key(ckpt, shape.dtype, shape.block_size);
    eo.kv.snapshot_dir = (a.cache_dir.empty() ? cache::default_cache_root() : a.cache_dir) + "/" + key;
    eo.kv.model_key = key;
    eo.kv.snapshot_max_tokens = eo.context_length;
  }
  if (with_draft && !a.draft_path.empty()) {
    eo.draft_model = model::create_model(model::load_checkpoint(resolve_model_arg(a.draft_path).path), a.mo);
    eo.draft_pool_bytes = cache::draft_pool_bytes(eo.draft_model->kv_block_shape(eo.kv.block_size), eo.max_num_seqs,
                                                  eo.context_length, a.ram);
  }
}

void log_engine(const engine::BatchEngine& engine, const engine::BatchEngineOptions& eo) {
  engine::BatchEngineStats st = engine.stats();
  log::info("kv cache: " + std::to_string(st.kv.pool.total_blocks) + " blocks of " + std::to_string(eo.kv.block_size) +
            " tokens (" + std::to_string(st.kv.pool.arena_bytes >> 20) + " MiB); snapshots " +
            (st.kv.persistent ? st.kv.snapshot_dir + (eo.kv.snapshot_encrypt ? " (encrypted)" : "")
                              : std::string("off")) +
            "; speculative " + engine::spec_mode_name(eo.spec.mode));
}

// Loads one served model with an engine, KV pool and snapshot store of its own. The first
// (default) model also gets the draft model and the KV-event publisher.
// `ckpt`, `tok`: its checkpoint and tokenizer when already loaded (the first --model, shared with
// its embeddings).
server::LoadedModel load_served(const ServeArgs& a, const server::ServedModel& m, bool primary,
                                const std::shared_ptr<server::KvEventPublisher>& kv_events,
                                std::shared_ptr<model::Checkpoint> ckpt, std::shared_ptr<const tok::Tokenizer> tok) {
  server::ModelBackendOptions bo = a.bo;
  engine::BatchEngineOptions eo = a.eo;
  const std::string path = resolve_model_arg(m.source).path;
  if (!ckpt) ckpt = model::load_checkpoint(path);
  std::shared_ptr<model::Model> model = model::create_model(ckpt, a.mo);
  if (!tok) tok = tok::load_tokenizer(ckpt->tokenizer_path);
  bo.served_name = m.name;
  bo.model_type = ckpt->config.architecture;
  bo.model_vocab = ckpt->config.vocab_size;
  bo.message_checkpoints = model->has_recurrent_state() && eo.kv.prefix_cache;
  plan_engine(a, bo, eo, *ckpt, *model, primary);
  if (primary && kv_events)
    eo.kv.on_events = [kv_events](std::vector<cache::KvEvent> ev) { kv_events->publish(std::move(ev)); };
  auto engine = std::make_unique<engine::BatchEngine>(model, tok, eo);
  log_engine(*engine, eo);
  bo.warm_turns = bo.warm_turns && eo.kv.prefix_cache;  // warming fills the prefix cache
  auto backend = std::make_shared<server::ModelBackend>(tok, std::move(engine), bo);
  log::info("loaded '" + m.name + "' (context " + std::to_string(bo.context_length) + ", tool parser '" +
            backend->tool_parser() + "', reasoning parser '" + backend->reasoning_parser() + "')");
  return {backend, weight_bytes(path) + eo.kv.pool_bytes + eo.draft_pool_bytes};
}

// /v1/embeddings: --embedding-model, else the first --model when it is a sentence-transformers
// model (`st`, its checkpoint, and `st_tok`, its tokenizer, already loaded; its own engine over
// the same mapped weights).
std::unique_ptr<server::EmbeddingService> embedding_service(const ServeArgs& a, const std::string& first,
                                                            std::shared_ptr<model::Checkpoint> st,
                                                            std::shared_ptr<const tok::Tokenizer> st_tok, bool encoder_only) {
  if (!a.embedding_path.empty()) {
    if (encoder_only)
      throw UsageError("--embedding-model: the first --model is an embedding model already; serve one of them");
    return load_embedding_model(a.embedding_path, a.mo);
  }
  if (!st) return nullptr;
  return embeddings_of_model(std::move(st), first, !encoder_only, a.mo, std::move(st_tok));
}

int run_serve(ServeArgs& a) {
  log::set_level(a.log_level);
  a.so.max_running = int(a.eo.max_num_seqs);
  std::vector<server::ServedModel> served = served_models(a);
  // The first --model when it is a sentence-transformers model: loaded once, for embeddings and
  // (a decoder) chat. An encoder leaves the chat models: it serves embeddings only.
  std::shared_ptr<model::Checkpoint> st =
      a.models.empty() ? nullptr : sentence_transformers_checkpoint(resolve_model_arg(a.models[0].spec).path);
  const bool encoder_only = st && is_encoder_only(*st);
  std::shared_ptr<const tok::Tokenizer> st_tok = st ? tok::load_tokenizer(st->tokenizer_path) : nullptr;
  const std::string embed_name = served[0].name;
  if (encoder_only) served.erase(served.begin());
  const bool on_demand = !a.models_dir.empty() || a.hf_cache;
  server::RegistryLimits limits{a.max_loaded.value_or(on_demand ? 1 : 0), a.max_loaded_memory.value_or(0)};
  auto patterns = alias_patterns(a, served);
  std::shared_ptr<server::KvEventPublisher> kv_events;
  if (!a.ko.endpoint.empty() && !a.eo.kv.prefix_cache)
    log::warn("--kv-events-endpoint ignored: --no-prefix-cache leaves no cached blocks to announce");
  if (!a.ko.endpoint.empty() && a.eo.kv.prefix_cache) {
    a.ko.block_size = a.eo.kv.block_size;
    kv_events = std::make_shared<server::KvEventPublisher>(a.ko);
  }
  const std::string first = served.empty() ? std::string() : served[0].name;
  std::shared_ptr<model::Checkpoint> chat_st = encoder_only ? nullptr : st;
  std::shared_ptr<const tok::Tokenizer> chat_tok = encoder_only ? nullptr : st_tok;
  auto loader = [&a, kv_events, first, chat_st, chat_tok](const server::ServedModel& m) {
    const bool shared = m.name == first;
    return load_served(a, m, shared, kv_events, shared ? chat_st : nullptr, shared ? chat_tok : nullptr);
  };
  auto registry = std::make_shared<server::ModelRegistry>(served, loader, limits, std::move(patterns));
  if (a.models.size() > (encoder_only ? 1u : 0u))
    registry->put_loaded(first, loader(served[0]));  // the first (chat) --model: at start

  server::HttpServer server(registry, a.so);
  std::unique_ptr<server::EmbeddingService> embeddings = embedding_service(a, embed_name, st, st_tok, encoder_only);
  server.set_embeddings(embeddings.get());
  int port = server.bind();
  if (kv_events)
    kv_events->start(a.ko.topic.empty() ? rapid::server::default_kv_events_topic(a.so.host, port, first) : a.ko.topic);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client must be a failed write, not a dead server
  g_server = &server;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::string names;
  for (const server::ServedModel& m : served) names += (names.empty() ? "" : ",") + m.name;
  log::info("serving " + std::to_string(served.size()) + " model(s) '" + names + "' on http://" + a.so.host + ":" +
            std::to_string(port));
  std::fprintf(stderr, "rapid-mlx serve: listening on http://%s:%d\n", a.so.host.c_str(), port);
  const std::string& host = a.so.host;
  const std::string local = host == "0.0.0.0" || host == "::" ? "127.0.0.1"
                            : host.find(':') != std::string::npos ? "[" + host + "]" : host;
  ServerAnnouncement announce("http://" + local + ":" + std::to_string(port), names);
  server.serve();
  g_server = nullptr;
  return 0;
}

Registrar reg("serve", table, run_serve);

}  // namespace
}  // namespace rapid::cli
