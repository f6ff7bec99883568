// Server metrics in Prometheus text format. Counters are atomics; histograms take a short lock.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/model_registry.h"

namespace rapid::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  void render(std::string& out, const std::string& name, const std::string& help,
              const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative), plus +Inf at the end
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// The HTTP front end's figures, rendered with the rest.
struct HttpGauges {
  uint64_t connections_open = 0, connections_accepted = 0, connections_evicted = 0;
  uint64_t timeouts = 0, protocol_errors = 0;
  int64_t admitted = 0;  // generation requests admitted and not finished
  int64_t queued = 0;    // of those, beyond the engine's running batch
};

class Metrics {
 public:
  Metrics();
  // Labels come from a fixed set whatever the client sends: `endpoint` must be a route template
  // (anything else counts as "other"), and the status is kept as its class ("2xx" ... "5xx").
  void count_request(const std::string& endpoint, int status);
  void count_rejected() { rejected_++; }
  void add_tokens(int64_t prompt, int64_t cached, int64_t generated);
  Histogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram itl{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
  Histogram e2e{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}};
  std::string render(const std::string& model, const EngineStats& s, const HttpGauges& h = {}) const;

  // Per finished request: whether speculative decoding drafted, its mean depth and acceptance.
  void add_speculation(const engine::SpeculationSummary& s);

 private:
  void render_speculation(std::string& out, const std::string& labels) const;
  void render_vllm(std::string& out, const std::string& model, const EngineStats& s) const;
  std::atomic<uint64_t> spec_requests_{0}, spec_requests_drafted_{0};
  Histogram spec_depth_{{0, 1, 2, 3, 4, 6, 8, 12, 16}};
  Histogram spec_acceptance_{{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}};

  mutable std::mutex mu_;
  std::vector<std::pair<std::string, uint64_t>> requests_;  // "endpoint\tstatus class" → count
  std::atomic<uint64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0}, rejected_{0};
};

// Which served models are loaded (rapid_model_loaded{model_name}, one per model, 1 or 0), their
// memory, and how many loads and unloads the registry has done.
void render_model_gauges(std::string& out, const std::vector<ModelStatus>& models, uint64_t loads, uint64_t unloads);

}  // namespace rapid::server
