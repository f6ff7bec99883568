// What every endpoint handler shares: the backend, metrics, options, and the helpers that read a
// body, check the model name, fit a prompt into the context and stream SSE.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/backend.h"
#include "server/metrics.h"
#include "server/model_registry.h"
#include "server/sampling_options.h"

namespace rapid::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;                    // empty: no auth
  size_t max_body_bytes = 16u << 20;
  int http_threads = 192;                 // worker threads for generation requests
  size_t max_connections = 1024;          // open sockets; idle and slow ones make room for new ones
  int max_running = 16;                   // the engine's --max-num-seqs
  int max_queued_requests = 128;          // generation requests waiting beyond max_running: then 429/529
  std::vector<std::string> allowed_origins;  // CORS; empty: off, "*": any origin
  int header_timeout_ms = 10000;          // a request's headers must arrive within this
  int body_timeout_ms = 60000;            // and its body within this after them
  int idle_timeout_ms = 60000;            // keep-alive connections idle longer are closed
  int64_t default_max_tokens = 0;         // 0: whatever the context leaves
  // --model-alias PATTERN=NAME: other model names (glob, `*` and `?`) accepted for the served one,
  // e.g. the small-model requests an agent sends for background work.
  std::vector<std::string> model_aliases;  // the patterns
};

class EmbeddingService;

// One request's view of the server: the model it named (held, so unloading it waits for this
// request's last byte), the registry of every model, metrics and options. Streams keep a copy.
struct HandlerContext {
  Backend& backend;
  Metrics& metrics;
  const ServerOptions& opts;
  const ModelRegistry& models;
  std::shared_ptr<Backend> hold;                 // owns `backend` while this request runs
  std::optional<nlohmann::ordered_json> parsed;  // the body, when routing parsed it to find `model`
  EmbeddingService* embeddings = nullptr;         // POST /v1/embeddings; null: no embedding model

  SamplingLimits limits() const;
  // 404 (model_not_found, listing the served models) unless `model` names one of them (by name,
  // alias or --model-alias pattern).
  void check_model(const std::string& model) const;
  // The request body as JSON (what routing parsed already, else parsed now; taken once).
  nlohmann::ordered_json body(const httplib::Request& req);
  // Fills gen.prompt; 400 when the prompt does not fit the context; clamps max_tokens to what is left.
  void fit_context(engine::GenerationRequest& gen, std::vector<int32_t> prompt) const;
};

nlohmann::ordered_json parse_json_body(const httplib::Request& req);
// A query parameter of a request target, URL-decoded ("" when absent): the front end does not
// split query strings.
std::string query_param(const std::string& target, const std::string& name);
void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& body);

// A source of SSE frames driven from the HTTP worker thread.
class SsePump {
 public:
  virtual ~SsePump() = default;
  // Appends whatever frames are ready (waiting briefly for more); returns false once the stream
  // is complete (after appending its closing frames).
  virtual bool pump(std::string& out) = 0;
  // Appends a frame reporting a failure in this API's own shape (the stream then ends).
  virtual void fail(std::string& out, const std::string& message) = 0;
  // The client went away: stop generating.
  virtual void cancel() = 0;
};

void start_sse(httplib::Response& res, std::shared_ptr<SsePump> pump);

}  // namespace rapid::server
