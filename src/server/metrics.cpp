#include "server/metrics.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace rapid::server {

// Shortest text that reads back as the same double ("0.005", not "0.0050000000000000001"); a
// whole number as an integer: the shortest %g form of 40 is "4e+01", valid to Prometheus but not
// what a reader (or a scrape compared as text) expects of a count.
static std::string num(double v) {
  char buf[64];
  if (v > -1e15 && v < 1e15 && v == static_cast<double>(static_cast<int64_t>(v))) {  // range first: the cast is UB outside
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

static std::string escape_label(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') { o += "\\n"; continue; }
    o += c;
  }
  return o;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard lk(mu_);
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  std::lock_guard lk(mu_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_sum{" + labels + "} " + num(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

Metrics::Metrics() = default;

static const char* const kEndpoints[] = {
    "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses",
    "/v1/models", "/v1/models/{id}", "/v1/cache", "/health", "/metrics", "/openapi.json",
    "/v1/chat/completions/render", "/v1/completions/render", "/v1/messages/render", "/v1/responses/render", "other"};

void Metrics::count_request(const std::string& endpoint, int status) {
  const char* label = "other";
  for (const char* e : kEndpoints)
    if (endpoint == e) label = e;
  std::string cls = status >= 100 && status <= 599 ? std::to_string(status / 100) + "xx" : "5xx";
  std::string key = std::string(label) + "\t" + cls;
  std::lock_guard lk(mu_);
  for (auto& [k, n] : requests_)
    if (k == key) { ++n; return; }
  requests_.emplace_back(key, 1);
}

void Metrics::add_tokens(int64_t prompt, int64_t cached, int64_t generated) {
  prompt_tokens_ += uint64_t(prompt);
  cached_tokens_ += uint64_t(cached);
  generated_tokens_ += uint64_t(generated);
}

std::string Metrics::render(const std::string& model, const EngineStats& s, const HttpGauges& h) const {
  std::string m = "model_name=\"" + escape_label(model) + "\"";
  std::string out;
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name +
           "{" + m + "} " + std::to_string(v) + "\n";
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + "{" +
           m + "} " + num(v) + "\n";
  };
  out += "# HELP rapid_requests_total HTTP API requests by endpoint (route template) and status class.\n"
         "# TYPE rapid_requests_total counter\n";
  {
    std::lock_guard lk(mu_);
    for (auto& [k, n] : requests_) {
      auto tab = k.find('\t');
      out += "rapid_requests_total{" + m + ",endpoint=\"" + escape_label(k.substr(0, tab)) +
             "\",status=\"" + k.substr(tab + 1) + "\"} " + std::to_string(n) + "\n";
    }
  }
  counter("rapid_requests_rejected_total", "Generation requests refused because the queue was full (429/529).",
          rejected_.load());
  gauge("rapid_http_requests_admitted", "Generation requests admitted and not finished.", double(h.admitted));
  gauge("rapid_http_queue_depth", "Admitted generation requests beyond the running batch.", double(h.queued));
  gauge("rapid_http_connections_open", "Open client connections.", double(h.connections_open));
  counter("rapid_http_connections_total", "Client connections accepted.", h.connections_accepted);
  counter("rapid_http_connections_evicted_total", "Connections closed to make room at --max-connections.",
          h.connections_evicted);
  counter("rapid_http_timeouts_total", "Requests whose headers or body did not arrive in time (408).", h.timeouts);
  counter("rapid_http_protocol_errors_total", "Malformed or oversized requests refused by the HTTP parser.",
          h.protocol_errors);
  counter("rapid_prompt_tokens_total", "Prompt tokens processed.", prompt_tokens_.load());
  counter("rapid_prompt_cached_tokens_total", "Prompt tokens served from the prefix cache.",
          cached_tokens_.load());
  counter("rapid_generation_tokens_total", "Tokens generated.", generated_tokens_.load());
  gauge("rapid_num_requests_waiting", "Requests queued in the engine.", double(s.queued));
  gauge("rapid_num_requests_running", "Requests being generated.", double(s.running));
  gauge("rapid_kv_cache_usage_perc", "Fraction of KV-cache capacity in use.", s.kv_usage);
  gauge("rapid_prefix_cache_hit_rate", "Fraction of prompt tokens served from the prefix cache.",
        s.prefix_cache_hit_rate);
  gauge("rapid_spec_decode_acceptance_rate", "Speculative-decoding draft acceptance rate.",
        s.spec_acceptance);
  gauge("rapid_kv_cache_blocks_total", "KV-cache blocks in the pool.", double(s.kv_blocks_total));
  gauge("rapid_kv_cache_blocks_free", "KV-cache blocks free.", double(s.kv_blocks_free));
  gauge("rapid_prefix_cache_blocks", "KV-cache blocks held by the prefix cache.", double(s.prefix_cache_blocks));
  if (s.state_bytes_per_seq) {  // hybrid models only
    gauge("rapid_recurrent_state_bytes_per_seq", "Recurrent (DeltaNet conv + SSM) state of one sequence.",
          double(s.state_bytes_per_seq));
    gauge("rapid_recurrent_state_bytes", "Recurrent state of the running sequences.",
          double(s.state_bytes_per_seq * uint64_t(s.running)));
    gauge("rapid_prefix_cache_checkpoints", "Recurrent-state checkpoints held by the prefix cache.",
          double(s.checkpoints));
    gauge("rapid_prefix_cache_checkpoint_bytes", "Bytes of recurrent-state checkpoints in the prefix cache.",
          double(s.checkpoint_bytes));
  }
  counter("rapid_num_preemptions_total", "Sequences preempted for lack of KV memory.", s.preemptions);
  counter("rapid_engine_steps_total", "Batched forward steps.", s.steps);
  counter("rapid_spec_decode_num_draft_tokens_total", "Drafted tokens verified.", s.spec_drafted);
  counter("rapid_spec_decode_num_accepted_tokens_total", "Drafted tokens accepted.", s.spec_accepted);
  gauge("rapid_kv_snapshot_entries", "Prefix snapshots on disk.", double(s.disk_entries));
  gauge("rapid_kv_snapshot_bytes", "Bytes of prefix snapshots on disk.", double(s.disk_bytes));
  counter("rapid_kv_snapshot_hits_total", "Prefixes restored from disk snapshots.", s.disk_hits);
  counter("rapid_kv_snapshot_writes_total", "Prefix snapshots written to disk.", s.disk_writes);
  counter("rapid_warm_turns_total", "Follow-up prompts prefilled in idle time after a chat turn.", s.warm_requests);
  counter("rapid_warm_turn_tokens_total", "Tokens of those follow-up prompts (mostly cache hits).", s.warm_tokens);
  render_vllm(out, model, s);
  ttft.render(out, "rapid_time_to_first_token_seconds", "Time to first generated token.", m);
  itl.render(out, "rapid_inter_token_latency_seconds", "Time between generated tokens.", m);
  e2e.render(out, "rapid_e2e_request_latency_seconds", "Time from submission to the last token.", m);
  render_speculation(out, m);
  return out;
}

// The series Gateway API Inference Extension endpoint pickers (llm-d, GIE's reference EPP) scrape,
// under vLLM's names and with vLLM's semantics and labels (model_name, engine), so a replica plugs
// into them unchanged. Values are the same figures as the rapid_* series above.
void Metrics::render_vllm(std::string& out, const std::string& model, const EngineStats& s) const {
  std::string m = "model_name=\"" + escape_label(model) + "\",engine=\"0\"";
  auto series = [&](const char* type, const char* name, const char* help, const std::string& labels,
                    const std::string& v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + "{" +
           labels + "} " + v + "\n";
  };
  auto gauge = [&](const char* name, const char* help, double v) { series("gauge", name, help, m, num(v)); };
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    series("counter", name, help, m, std::to_string(v));
  };
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", double(s.queued));
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.", double(s.running));
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kv_usage);
  // The name older EPP releases scrape (vLLM renamed it to kv_cache_usage_perc in V1).
  gauge("vllm:gpu_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage (deprecated name).",
        s.kv_usage);
  series("gauge", "vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
         m + ",block_size=\"" + std::to_string(s.kv_block_size) + "\",num_gpu_blocks=\"" +
             std::to_string(s.kv_blocks_total) + "\",num_cpu_blocks=\"0\",enable_prefix_caching=\"" +
             (s.prefix_cache_enabled ? "True" : "False") + "\",cache_dtype=\"auto\"",
         "1");
  counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", s.preemptions);
  counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", prompt_tokens_.load());
  counter("vllm:generation_tokens_total", "Number of generation tokens processed.", generated_tokens_.load());
  counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
          s.prefix_cache_queried_tokens);
  counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
          s.prefix_cache_hit_tokens);
}

void Metrics::add_speculation(const engine::SpeculationSummary& s) {
  ++spec_requests_;
  if (!s.ran()) return;
  ++spec_requests_drafted_;
  spec_depth_.observe(s.mean_depth());
  spec_acceptance_.observe(s.acceptance());
}

void Metrics::render_speculation(std::string& out, const std::string& labels) const {
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + "{" +
           labels + "} " + std::to_string(v) + "\n";
  };
  counter("rapid_spec_decode_requests_total", "Finished generation requests.", spec_requests_.load());
  counter("rapid_spec_decode_requests_drafted_total", "Finished requests in which speculative drafts were verified.",
          spec_requests_drafted_.load());
  spec_depth_.render(out, "rapid_spec_decode_request_depth",
                     "Per drafted request: mean draft tokens per drafted step.", labels);
  spec_acceptance_.render(out, "rapid_spec_decode_request_acceptance",
                          "Per drafted request: fraction of its drafted tokens accepted.", labels);
}

void render_model_gauges(std::string& out, const std::vector<ModelStatus>& models, uint64_t loads, uint64_t unloads) {
  out += "# HELP rapid_model_loaded Whether a served model is loaded (1) or loads on its next request (0).\n"
         "# TYPE rapid_model_loaded gauge\n";
  for (const ModelStatus& m : models)
    out += "rapid_model_loaded{model_name=\"" + escape_label(m.name) + "\"} " + (m.loaded ? "1" : "0") + "\n";
  out += "# HELP rapid_model_memory_bytes Memory a loaded model holds (weights and KV pool).\n"
         "# TYPE rapid_model_memory_bytes gauge\n";
  for (const ModelStatus& m : models)
    out += "rapid_model_memory_bytes{model_name=\"" + escape_label(m.name) + "\"} " + std::to_string(m.bytes) + "\n";
  out += "# HELP rapid_model_loads_total Models loaded (at start and on demand).\n"
         "# TYPE rapid_model_loads_total counter\nrapid_model_loads_total " + std::to_string(loads) + "\n";
  out += "# HELP rapid_model_unloads_total Models unloaded to stay within --max-loaded-models / --max-loaded-memory.\n"
         "# TYPE rapid_model_unloads_total counter\nrapid_model_unloads_total " + std::to_string(unloads) + "\n";
}

}  // namespace rapid::server
