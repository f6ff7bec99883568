#include "engine/batch_engine.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/error.h"
#include "common/log.h"
#include "engine/draft_model_proposer.h"
#include "engine/generator.h"
#include "engine/mtp_proposer.h"
#include "engine/prompt_lookup_proposer.h"
#include "engine/token_emitter.h"
#include "engine/verify.h"

namespace rapid::engine {

// A sequence is the scheduler's descriptor plus what executing it needs.
struct BatchEngine::Sequence : SchedSeq {
  EventCallback cb;
  std::unique_ptr<TokenEmitter> out;
  std::unique_ptr<model::PagedKvState> kv;  // null while waiting or preempted
  std::vector<float> step_hidden;    // this step's target hidden rows (for the MTP proposer)
  std::vector<int32_t> tokens;       // prompt + generated
  int64_t capacity = 0;
  bool admitted_once = false;
  bool prompt_done = false;
  std::vector<float> logits;
  // The descriptor's view of this sequence, before each schedule().
  void sync() {
    length = int64_t(tokens.size());
    computed = kv ? kv->length() : 0;
    draft_room = std::min<int64_t>(capacity - int64_t(tokens.size()) - 1,
                                   out->request().max_tokens - int64_t(out->generated().size()) - 1);
  }
};

// The engine's answers to the scheduler: its KV memory and its proposer.
class BatchEngine::Host : public SchedulerHost {
 public:
  explicit Host(BatchEngine& e) : e_(e) {}
  int64_t admit(SchedSeq& d) override {
    Sequence& s = seq(d);
    int64_t cached = 0;
    s.kv = e_.kv_->open(s.tokens, s.capacity, &cached);
    if (!s.admitted_once) {
      s.out->set_cached_tokens(cached);
      s.admitted_once = true;
    }
    return s.kv->length();
  }
  void unadmit(SchedSeq& d) override { seq(d).kv.reset(); }
  int64_t blocks_needed(const SchedSeq& d, int64_t n) override {
    return static_cast<const Sequence&>(d).kv->blocks_needed(n);
  }
  bool make_free(int64_t blocks) override { return e_.kv_->make_free(blocks); }
  int64_t free_blocks() const override { return e_.kv_->free_blocks(); }
  int64_t total_blocks() const override { return e_.kv_->total_blocks(); }
  void preempt(SchedSeq& d) override { e_.preempt(&seq(d)); }
  void reject(SchedSeq& d, const std::string& why) override {
    Sequence& s = seq(d);
    e_.finish(&s, s.out->finish_now(FinishReason::Error, why));
  }
  int drafts(SchedSeq& d, int k) override { return e_.proposer_->offer(d.id, seq(d).tokens, k); }
  void shadow(SchedSeq& d) override {
    Sequence& s = seq(d);
    if (!e_.spec_.wants_shadow(s.spec)) return;
    e_.spec_.start_shadow(s.spec, e_.proposer_->free_guess(d.id, s.tokens, e_.spec_.options().max_draft),
                          s.tokens.size());
  }

 private:
  static Sequence& seq(SchedSeq& d) { return static_cast<Sequence&>(d); }
  BatchEngine& e_;
};

// One sequence's share of a step.
struct BatchEngine::Work {
  Sequence* seq = nullptr;
  int64_t n = 0;                 // tokens from seq->tokens to compute
  std::vector<int32_t> draft;    // speculative guesses appended after them
  bool probe = false;            // the drafts are a speculation probe (SpeculationController)
  std::vector<int32_t> input;
};

BatchEngine::BatchEngine(std::shared_ptr<model::Model> model, std::shared_ptr<const tok::Tokenizer> tok, BatchEngineOptions opts)
    : model_(std::move(model)),
      tok_(std::move(tok)),
      opts_(std::move(opts)),
      spec_(opts_.spec),
      sched_({opts_.max_num_seqs, opts_.max_step_tokens, opts_.prefill_chunk_while_decoding}, spec_) {
  opts_.max_num_seqs = sched_.options().max_num_seqs;
  opts_.max_step_tokens = sched_.options().max_step_tokens;
  // A hybrid's recurrent state cannot be truncated like KV; both features work around that: the
  // prefix cache resumes from recurrent checkpoints (KvCacheManager), and speculation rolls the
  // state back inside its last verification window (model/qwen3_5.cpp, HybridState).
  vocab_ = model_->config().vocab_size;
  context_ = opts_.context_length;
  kv_ = std::make_unique<KvCacheManager>(*model_, opts_.kv);
  kv_->set_wakeup([this] {  // pinned snapshot pages were copied: publish() unpins them
    {
      std::lock_guard lk(mu_);
      tasks_.push_back([] {});
    }
    cv_.notify_one();
  });
  proposer_ = make_proposer();
  thread_ = std::thread([this] { worker(); });
}

BatchEngine::~BatchEngine() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  kv_.reset();  // its snapshot writer may still call the wakeup set above: while mu_ and cv_ exist
}

// The MTP heads when the model has them (and the mode allows), else a draft model if one is
// given, else prompt lookup. Refuses a draft model with another vocabulary whatever the mode.
std::unique_ptr<DraftProposer> BatchEngine::make_proposer() {
  if (opts_.proposer) return opts_.proposer();
  std::unique_ptr<DraftProposer> p;
  // A draft model steps one token at a time and rolls back several: only a KV-only model can.
  if (opts_.draft_model && opts_.draft_model->has_recurrent_state())
    throw Error("--draft-model: a hybrid (recurrent-state) model cannot be a draft model");
  if (opts_.draft_model)
    p = std::make_unique<DraftModelProposer>(opts_.draft_model, vocab_, opts_.kv.block_size, opts_.draft_pool_bytes,
                                             spec_);
  else if (opts_.spec.mode == SpecMode::Draft)
    throw Error("--speculative draft needs --draft-model");
  const bool has_mtp = model_->mtp_layers() > 0;
  if (opts_.spec.mode == SpecMode::Mtp && !has_mtp) throw Error("--speculative mtp: the model has no MTP heads");
  if (has_mtp && (opts_.spec.mode == SpecMode::Mtp || opts_.spec.mode == SpecMode::Auto))
    p = std::make_unique<MtpProposer>(*model_, opts_.kv.block_size, opts_.draft_pool_bytes, spec_);  // preferred
  if (!p) p = std::make_unique<PromptLookupProposer>();
  return p;
}

uint64_t BatchEngine::submit(GenerationRequest req, EventCallback on_event) {
  if (req.warm_only && !opts_.kv.prefix_cache) throw Error("no prefix cache to warm");
  std::lock_guard lk(mu_);
  uint64_t id = next_id_++;
  if (!req.warm_only) ++n_queued_;  // warming is not a client's request: not counted as queued
  inbox_.push_back({id, {std::move(req), std::move(on_event)}});
  cv_.notify_one();
  return id;
}

void BatchEngine::cancel(uint64_t id) {
  std::lock_guard lk(mu_);
  cancels_.push_back(id);
  cv_.notify_one();
}

void BatchEngine::run_on_worker(std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    tasks_.push_back([fn = std::move(fn), done] {
      try {
        fn();
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
  cv_.notify_one();
  f.get();
}

void BatchEngine::purge_cache() {
  run_on_worker([this] {
    ++cache_generation_;
    cancel_warming();  // what it computed goes to the prefix cache, which the purge then empties
    kv_->purge();
  });
}
void BatchEngine::flush_cache() { run_on_worker([this] { kv_->flush(); }); }

BatchEngineStats BatchEngine::stats() const {
  BatchEngineStats s;
  s.queued = n_queued_.load();
  s.running = n_running_.load();
  s.steps = steps_.load();
  s.preemptions = preemptions_.load();
  s.prefill_tokens = prefill_tokens_.load();
  s.decode_tokens = decode_tokens_.load();
  s.spec_steps = spec_steps_.load();
  s.spec_drafted = spec_drafted_.load();
  s.spec_accepted = spec_accepted_.load();
  s.warm_requests = warm_requests_.load();
  s.warm_tokens = warm_tokens_.load();
  s.kv = kv_->stats();
  return s;
}

void BatchEngine::worker() {
  for (;;) {
    std::deque<std::pair<uint64_t, std::pair<GenerationRequest, EventCallback>>> in;
    std::vector<uint64_t> cancels;
    std::vector<std::function<void()>> tasks;
    bool stopping;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] {
        return stopping_ || !inbox_.empty() || !cancels_.empty() || !tasks_.empty() || !sched_.idle();
      });
      in.swap(inbox_);
      cancels.swap(cancels_);
      tasks.swap(tasks_);
      stopping = stopping_;
    }
    admit_new(in);
    if (stopping) {
      // Every caller gets a final event; nothing waits forever.
      for (auto& s : all_) cancels.push_back(s->id);
    }
    apply_cancels(cancels);
    for (auto& t : tasks) t();
    if (stopping) {
      kv_->flush();  // snapshot writes reach the disk before the process ends
      return;
    }
    if (!sched_.idle()) {
      kv_->set_busy(true);
      step();
    }
    kv_->set_busy(!sched_.idle());
    kv_->publish();
    auto client = [](const SchedSeq* s) { return !s->warm; };
    n_running_ = std::count_if(sched_.running().begin(), sched_.running().end(), client);
    n_queued_ = std::count_if(sched_.waiting().begin(), sched_.waiting().end(), client);
  }
}

void BatchEngine::admit_new(std::deque<std::pair<uint64_t, std::pair<GenerationRequest, EventCallback>>>& in) {
  const bool client = std::any_of(in.begin(), in.end(), [](auto& r) { return !r.second.first.warm_only; });
  for (auto& [id, rc] : in) {
    auto& [req, cb] = rc;
    if (req.warm_only && req.cache_generation != cache_generation_) {  // predicted before a purge
      GenerationEvent ev;
      ev.finished = true;
      ev.finish_reason = FinishReason::Cancelled;
      cb(ev);
      continue;
    }
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->warm = req.warm_only;
    s->spec = spec_.new_state();
    s->cb = std::move(cb);
    try {
      s->capacity = sequence_capacity(model_->config(), req, context_);
      s->tokens = req.prompt;
      s->out = std::make_unique<TokenEmitter>(*tok_, model_->config(), std::move(req), s->capacity);
    } catch (const std::exception& e) {
      GenerationEvent ev;
      ev.finished = true;
      ev.finish_reason = FinishReason::Error;
      ev.error = e.what();
      ev.prompt_tokens = int64_t(req.prompt.size());
      s->cb(ev);
      continue;
    }
    if (s->out->request().max_tokens == 0) {
      // Nothing to generate (echo-style completions): no forward needed.
      s->cb(s->out->finish_now(FinishReason::Length));
      continue;
    }
    sched_.add(s.get());
    all_.push_back(std::move(s));
  }
  // A client's request takes the engine from background warming at once, including warming that
  // arrived in the same batch ahead of it (it would otherwise wait behind that warming forever);
  // what the warming already computed stays in the prefix cache (retire remembers it).
  if (client) cancel_warming();
}

void BatchEngine::cancel_warming() {
  std::vector<Sequence*> warm;
  for (auto& s : all_)
    if (s->out->request().warm_only) warm.push_back(s.get());
  for (Sequence* s : warm) finish(s, s->out->finish_now(FinishReason::Cancelled));
}

void BatchEngine::apply_cancels(std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) {
    auto it = std::find_if(all_.begin(), all_.end(), [&](auto& s) { return s->id == id; });
    if (it == all_.end()) continue;  // already finished
    finish(it->get(), (*it)->out->finish_now(FinishReason::Cancelled));
  }
}

// Delivers the final event and forgets the sequence (its KV stays in the prefix cache).
void BatchEngine::finish(Sequence* s, GenerationEvent ev) {
  ev.speculation = s->spec.summary;
  if (log::level() == log::Level::Debug && spec_.enabled()) log_speculation(*s);
  try {
    s->cb(ev);
  } catch (const std::exception& e) {
    log::warn(std::string("event callback failed: ") + e.what());
  }
  retire(s);
}

// `--log-level debug`: per request, whether speculation ran, its depth and acceptance — and when
// it never drafted, the estimates that kept it off.
void BatchEngine::log_speculation(const Sequence& s) const {
  const SpeculationSummary& m = s.spec.summary;
  std::string line = "request " + std::to_string(s.id) + ": " + std::to_string(s.out->generated().size()) +
                     " tokens in " + std::to_string(m.decode_steps) + " decode steps; speculation ";
  if (m.ran())
    line += "drafted in " + std::to_string(m.draft_steps) + " (" + std::to_string(m.probe_steps) +
            " probes), mean depth " + std::to_string(m.mean_depth()) + ", accepted " + std::to_string(m.accepted) +
            "/" + std::to_string(m.drafted) + " (" + std::to_string(m.acceptance()) + ")";
  else
    line += "never drafted (acceptance estimate " + std::to_string(s.spec.rate()) + ", c1/c0 " +
            std::to_string(spec_.cost_per_token_ratio()) + ")";
  log::debug(line);
}

void BatchEngine::retire(Sequence* s) {
  proposer_->forget(s->id);
  if (s->kv) {
    kv_->remember(s->tokens, *s->kv);
    s->kv.reset();
  }
  sched_.remove(s);
  std::erase_if(all_, [s](auto& p) { return p.get() == s; });
}

// Recompute-style preemption (the scheduler chose s): its KV goes to the prefix cache
// (evictable), so resuming usually re-adopts most of it instead of recomputing.
void BatchEngine::preempt(Sequence* s) {
  kv_->remember(s->tokens, *s->kv);
  s->kv.reset();
  proposer_->forget(s->id);
  ++preemptions_;
}

// Schedules, drafts, runs one batched forward, and samples / verifies each sequence's share.
void BatchEngine::step() {
  std::vector<Work> plan = plan_step();
  if (plan.empty()) return;
  std::vector<model::BatchEntry> entries;
  entries.reserve(plan.size());
  int64_t total = 0;
  for (Work& w : plan) {
    entries.push_back(entry(w));
    total += entries.back().n;
  }
  auto t0 = std::chrono::steady_clock::now();
  try {
    model_->forward_batch(entries.data(), entries.size());
  } catch (const std::exception& e) {
    log::error(std::string("batched forward failed: ") + e.what());
    for (Work& w : plan) {
      if (w.seq->kv) w.seq->kv.reset();
      finish(w.seq, w.seq->out->finish_now(FinishReason::Error, e.what()));
    }
    return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++steps_;
  // Only decode steps (every row sampled, drafts verified) inform the depth rule's cost fit: a
  // prompt chunk computes no logits for most of its tokens, so mixing them in made extra tokens
  // look ~5x cheaper than a verified draft row is (its LM head row, its sampling) and auto drafted
  // 8 streams of SmolLM2 down to half their aggregate decode rate.
  const bool decode_only = std::all_of(plan.begin(), plan.end(), [](const Work& w) { return w.n == 1 && w.seq->prompt_done; });
  int64_t drafted = 0, accepted = 0, probes = 0;
  rollback_s_ = 0;
  for (Work& w : plan) {
    drafted += int64_t(w.draft.size());
    probes += w.probe && !w.draft.empty() ? 1 : 0;
    accepted += process(w);
  }
  // The step's cost includes rolling back rejected drafts (a hybrid replays its recurrence), so
  // the depth rule weighs what speculation really costs on this model.
  if (decode_only) spec_.observe_step(total, opts_.step_cost ? opts_.step_cost(total, secs) : secs + rollback_s_);
  if (log::level() == log::Level::Debug) log_step(plan.size(), total, drafted, accepted, probes, t0, secs);
}

// The scheduler's plan for this step, with the proposer's drafts.
std::vector<BatchEngine::Work> BatchEngine::plan_step() {
  for (auto& s : all_) s->sync();
  Host host(*this);
  std::vector<Work> plan;
  std::vector<DraftJob> jobs;
  for (const ScheduledSeq& p : sched_.schedule(host)) {
    Work w;
    w.seq = static_cast<Sequence*>(p.seq);
    w.n = p.n;
    w.probe = p.probe;
    // A hybrid's prefill chunk ends at the message boundary, so its recurrent state is checkpointed there.
    const int64_t at = w.seq->out->request().checkpoint_at, from = w.seq->kv->length();
    if (model_->has_recurrent_state() && from < at && at < from + w.n) w.n = at - from;
    if (p.draft > 0) {
      const Sequence& s = *w.seq;
      jobs.push_back(DraftJob{s.id, &s.tokens, s.kv->length(), s.capacity, p.draft, {}});
    }
    plan.push_back(std::move(w));
  }
  if (!jobs.empty()) {
    proposer_->propose(jobs);
    size_t j = 0;
    for (Work& w : plan)
      if (j < jobs.size() && jobs[j].seq == w.seq->id) w.draft = std::move(jobs[j++].draft);
  }
  return plan;
}

// A sequence's share of the forward: its next n tokens and its drafts.
model::BatchEntry BatchEngine::entry(Work& w) {
  Sequence* s = w.seq;
  const int64_t from = s->kv->length();
  w.input.assign(s->tokens.begin() + from, s->tokens.begin() + from + w.n);
  w.input.insert(w.input.end(), w.draft.begin(), w.draft.end());
  const int64_t rows = w.draft.empty() ? 1 : int64_t(w.input.size());
  s->logits.resize(size_t(rows * vocab_));
  model::BatchEntry e;
  e.tokens = w.input.data();
  e.n = int64_t(w.input.size());
  e.state = s->kv.get();
  e.logits = s->logits.data();
  e.all_logits = !w.draft.empty();
  if (proposer_->wants_hidden()) {
    s->step_hidden.resize(w.input.size() * size_t(model_->config().hidden_size));
    e.hidden = s->step_hidden.data();
  }
  return e;
}

// `--log-level debug`: where a step's time goes.
void BatchEngine::log_step(size_t seqs, int64_t total, int64_t drafted, int64_t accepted, int64_t probes,
                           std::chrono::steady_clock::time_point t0, double secs) {
  const auto now = std::chrono::steady_clock::now();
  // gap: from the previous step's end to this forward (scheduling, drafts, the worker loop).
  const double gap = steps_ > 1 ? std::chrono::duration<double>(t0 - last_step_end_).count() * 1e3 : 0.0;
  std::string spec;
  if (spec_.enabled())  // what speculation did this step, and the step-cost estimate it used
    spec = ", drafted " + std::to_string(drafted) + " (accepted " + std::to_string(accepted) +
           (probes ? ", " + std::to_string(probes) + " probe" : std::string()) + "), c1/c0 " +
           std::to_string(spec_.cost_per_token_ratio());
  log::debug("step " + std::to_string(steps_) + ": " + std::to_string(seqs) + " seqs, " + std::to_string(total) +
             " tokens" + spec + ", forward " + std::to_string(secs * 1e3) + " ms, step " +
             std::to_string(std::chrono::duration<double>(now - t0).count() * 1e3) + " ms, gap " +
             std::to_string(gap) + " ms");
  last_step_end_ = now;
}

// Samples / verifies one sequence's share of the step; returns the drafts accepted.
int BatchEngine::process(Work& w) {
  Sequence* s = w.seq;
  const bool complete = s->kv->length() - int64_t(w.draft.size()) == int64_t(s->tokens.size());
  const int64_t p0 = s->kv->length() - int64_t(w.input.size());  // position of this step's first row
  const float* hidden = proposer_->wants_hidden() ? s->step_hidden.data() : nullptr;
  if (!complete) {  // a prefill chunk; more of the prompt next step
    prefill_tokens_ += uint64_t(w.n);
    proposer_->advance(s->id, p0, int64_t(w.input.size()), hidden, false);
    // A hybrid's resumable points: the message boundary, and now and then in a long prefill.
    kv_->checkpoint(s->tokens, *s->kv, s->kv->length() == s->out->request().checkpoint_at);
    return 0;
  }
  if (s->out->request().warm_only) {  // the whole prompt is in the cache: nothing to sample
    prefill_tokens_ += uint64_t(w.n);
    ++warm_requests_;
    warm_tokens_ += uint64_t(s->tokens.size());
    kv_->remember(s->tokens, *s->kv);
    kv_->persist(s->tokens, *s->kv);
    finish(s, s->out->finish_now(FinishReason::Stop));
    return 0;
  }
  const bool first_complete = !s->prompt_done;
  s->prompt_done = true;
  if (first_complete) prefill_tokens_ += uint64_t(w.n);
  else decode_tokens_ += 1;
  Verified v;
  try {
    v = verify_step(*s->out, s->logits.data(), vocab_, w.draft, s->tokens);
  } catch (const std::exception& e) {
    finish(s, s->out->finish_now(FinishReason::Error, e.what()));
    return 0;
  }
  const int d = int(w.draft.size());
  spec_.observe(s->spec, d, v.accepted, w.probe);
  spec_.settle_shadow(s->spec, s->tokens);
  if (d > 0) {
    ++spec_steps_;
    spec_drafted_ += uint64_t(d);
    spec_accepted_ += uint64_t(v.accepted);
    decode_tokens_ += uint64_t(v.accepted);
  }
  // KV of rejected drafts is dropped (a hybrid's recurrent state rolls back too); the newest token
  // is computed next step.
  const auto r0 = std::chrono::steady_clock::now();
  s->kv->truncate(std::min<int64_t>(s->kv->length(), int64_t(s->tokens.size()) - 1));
  rollback_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  proposer_->advance(s->id, p0, s->kv->length() - p0, hidden, true);
  // The client gets its token before the bookkeeping below (persisting copies the prompt's pages).
  if (!v.finished) {
    try {
      s->cb(v.event);
    } catch (const std::exception& e) {
      log::warn(std::string("event callback failed: ") + e.what());
    }
  }
  if (first_complete) {
    // The prompt's KV (plus any accepted drafts): shared with concurrent requests at once, and
    // persisted for restarts. After the rollback above, so only verified positions are kept.
    kv_->remember(s->tokens, *s->kv);
    kv_->persist(s->tokens, *s->kv);
  }
  if (v.finished) finish(s, std::move(v.event));
  return v.accepted;
}

}  // namespace rapid::engine
