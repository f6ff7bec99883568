// The continuous-batching engine. One worker thread runs steps; each step
//   1. takes new requests and cancellations,
//   2. asks the Scheduler (engine/scheduler.h) for the plan: who runs, how many tokens each,
//      drafts per decoding sequence; it answers the scheduler's KV questions (prefix adoption,
//      free blocks, eviction, preemption: the KV goes to the prefix cache) as its SchedulerHost,
//   3. has the DraftProposer (engine/draft_proposer.h) guess the planned drafts,
//   4. runs one batched forward over all of them (Model::forward_batch),
//   5. samples / verifies drafts per sequence (engine/verify.h), streams events, retires finished
//      sequences (their KV stays in the prefix cache for the next turn).
// Requests join and leave the batch at every step. Outputs do not depend on the batch: the
// forward is batch-invariant and every sequence has its own sampler.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/draft_proposer.h"
#include "engine/engine.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "engine/speculation.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapid::engine {

struct BatchEngineOptions {
  int64_t max_num_seqs = 16;      // sequences in the running batch
  int64_t max_step_tokens = 512;  // tokens per forward step (decode + drafts + prefill chunks)
  // While sequences are decoding, prefill chunks are capped at this many tokens per step, so a new
  // long prompt delays running streams by one short step, not one long one (inter-token latency).
  int64_t prefill_chunk_while_decoding = 128;
  int64_t context_length = 0;     // per-sequence limit; 0 = the model's
  KvCacheOptions kv;
  SpeculationOptions spec;
  // Draft-model speculation (--draft-model): a smaller model with the same vocabulary, batched
  // like the target, with its own KV pool (no prefix cache: drafts are cheap to recompute).
  std::shared_ptr<model::Model> draft_model;
  uint64_t draft_pool_bytes = 256ull << 20;  // also the MTP heads' KV pool
  // Tests: the cost (seconds) the speculation controller learns for a forward of `tokens` whose
  // wall time was `measured` — replaying recorded step costs makes its choices deterministic.
  // Empty: the measured time.
  std::function<double(int64_t tokens, double measured)> step_cost;
  // Tests: the proposer to draft with instead of the one the mode chooses (e.g. one that knows
  // the right continuation, to force accepted and rejected drafts).
  std::function<std::unique_ptr<DraftProposer>()> proposer;
};

struct BatchEngineStats {
  int64_t queued = 0, running = 0;
  uint64_t steps = 0, preemptions = 0, prefill_tokens = 0, decode_tokens = 0;
  uint64_t spec_steps = 0, spec_drafted = 0, spec_accepted = 0;
  uint64_t warm_requests = 0, warm_tokens = 0;  // background warming (GenerationRequest::warm_only)
  KvCacheStats kv;
};

class BatchEngine : public Engine {
 public:
  BatchEngine(std::shared_ptr<model::Model> model, std::shared_ptr<const tok::Tokenizer> tok, BatchEngineOptions opts);
  ~BatchEngine() override;  // cancels everything still queued or running, joins the worker

  uint64_t submit(GenerationRequest req, EventCallback on_event) override;
  void cancel(uint64_t id) override;
  uint64_t cache_generation() const override { return cache_generation_.load(); }

  BatchEngineStats stats() const;
  // Drops every cached prefix no sequence uses, and every disk snapshot; cancels background warming
  // (queued, running, or still to come from turns that began before). Blocks until done.
  void purge_cache();
  // Waits until queued snapshot writes are on disk (tests, shutdown).
  void flush_cache();
  // Every token sequence the prefix cache holds (root to leaf), and the tokens before each of its
  // recurrent checkpoints (hybrids), read between steps.
  struct CachedContents {
    std::vector<std::vector<int32_t>> sequences, checkpoints;
  };
  CachedContents cached_contents() {
    CachedContents out;
    run_on_worker([&] {
      out.sequences = kv_->sequences();
      out.checkpoints = kv_->checkpoint_prefixes();
    });
    return out;
  }
  const BatchEngineOptions& options() const { return opts_; }

 private:
  struct Sequence;
  struct Work;
  class Host;
  void worker();
  void run_on_worker(std::function<void()> fn);  // executes fn between steps, waits for it
  void admit_new(std::deque<std::pair<uint64_t, std::pair<GenerationRequest, EventCallback>>>& in);
  void apply_cancels(std::vector<uint64_t>& ids);
  void cancel_warming();
  std::unique_ptr<DraftProposer> make_proposer();
  void step();
  std::vector<Work> plan_step();
  model::BatchEntry entry(Work& w);
  void log_step(size_t seqs, int64_t total, int64_t drafted, int64_t accepted, int64_t probes,
                std::chrono::steady_clock::time_point t0, double secs);
  void preempt(Sequence* s);
  void finish(Sequence* s, GenerationEvent ev);
  void retire(Sequence* s);
  int process(Work& w);  // samples / verifies one sequence's share; returns drafts accepted
  void log_speculation(const Sequence& s) const;

  std::shared_ptr<model::Model> model_;
  std::shared_ptr<const tok::Tokenizer> tok_;
  BatchEngineOptions opts_;
  std::unique_ptr<KvCacheManager> kv_;
  SpeculationController spec_;
  Scheduler sched_;  // after spec_, which it reads
  std::unique_ptr<DraftProposer> proposer_;  // prompt lookup, a draft model or the MTP heads
  int64_t vocab_ = 0, context_ = 0;

  // Inbox, shared with the HTTP threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, std::pair<GenerationRequest, EventCallback>>> inbox_;
  std::vector<uint64_t> cancels_;
  std::vector<std::function<void()>> tasks_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;

  // Engine-thread state.
  std::vector<std::unique_ptr<Sequence>> all_;  // every live sequence (the scheduler queues them)
  std::chrono::steady_clock::time_point last_step_end_;  // debug log only
  double rollback_s_ = 0;  // this step's time in truncate() (speculation rollback)

  std::atomic<int64_t> n_queued_{0}, n_running_{0};
  std::atomic<uint64_t> steps_{0}, preemptions_{0}, prefill_tokens_{0}, decode_tokens_{0};
  std::atomic<uint64_t> spec_steps_{0}, spec_drafted_{0}, spec_accepted_{0};
  std::atomic<uint64_t> warm_requests_{0}, warm_tokens_{0};
  std::atomic<uint64_t> cache_generation_{0};  // written on the engine thread only
  std::thread thread_;
};

}  // namespace rapid::engine
