#include "engine/batch_engine.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/error.h"
#include "common/log.h"
#include "engine/generator.h"
#include "engine/token_emitter.h"

namespace rapid {

struct BatchEngine::Sequence {
  uint64_t id = 0;
  uint64_t arrival = 0;
  EventCallback cb;
  std::unique_ptr<TokenEmitter> out;
  std::unique_ptr<PagedKvState> kv;  // null while waiting or preempted
  std::unique_ptr<PagedKvState> draft_kv;  // the draft model's KV (draft-model speculation)
  std::unique_ptr<SequenceState> mtp_kv;   // the MTP heads' KV (MTP speculation)
  std::vector<float> mtp_hidden;           // target hidden rows the heads have not seen yet,
  int64_t mtp_hidden_pos = 0;              //   for positions mtp_hidden_pos, +1, ...
  std::vector<float> step_hidden;          // this step's target hidden rows
  std::vector<int32_t> tokens;       // prompt + generated
  int64_t capacity = 0;
  bool admitted_once = false;
  bool prompt_done = false;
  SpecState spec;
  std::vector<float> logits;
  int64_t pending() const { return int64_t(tokens.size()) - (kv ? kv->length() : 0); }
};

// One sequence's share of a step.
struct BatchEngine::Work {
  Sequence* seq;
  int64_t n = 0;                 // tokens from seq->tokens to compute
  std::vector<int32_t> draft;    // speculative guesses appended after them
  int draft_k = 0;               // draft-model guesses to make (filled in by run_drafts)
  bool probe = false;            // the drafts are a speculation probe (SpeculationController)
  std::vector<int32_t> input;
};

BatchEngine::BatchEngine(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tok, BatchEngineOptions opts)
    : model_(std::move(model)), tok_(std::move(tok)), opts_(std::move(opts)), spec_(opts_.spec) {
  // A hybrid's recurrent state cannot be rolled back to an earlier token: no speculation (its
  // rejected drafts are rolled back) and no prefix cache (KvCacheManager; nothing to warm).
  if (model_->has_recurrent_state()) {
    if (opts_.spec.mode != SpecMode::Off || opts_.draft_model)
      log::info("speculative decoding is off: " + model_->config().architecture + " keeps a recurrent state");
    opts_.spec.mode = SpecMode::Off;
    opts_.draft_model.reset();
    spec_ = SpeculationController(opts_.spec);
    opts_.kv.prefix_cache = false;
  }
  opts_.max_num_seqs = std::max<int64_t>(1, opts_.max_num_seqs);
  // Every running sequence must be able to take at least one token per step.
  opts_.max_step_tokens = std::max(opts_.max_step_tokens, opts_.max_num_seqs);
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
  if (opts_.draft_model) {
    if (opts_.draft_model->config().vocab_size != vocab_)
      throw Error("the draft model's vocabulary (" + std::to_string(opts_.draft_model->config().vocab_size) +
                  ") differs from the model's (" + std::to_string(vocab_) + ")");
    draft_pool_ = std::make_shared<cache::BlockPool>(opts_.draft_model->kv_block_shape(opts_.kv.block_size),
                                                     opts_.draft_pool_bytes);
  } else if (opts_.spec.mode == SpecMode::Draft) {
    throw Error("--speculative draft needs --draft-model");
  }
  const bool has_mtp = model_->mtp_layers() > 0;
  if (opts_.spec.mode == SpecMode::Mtp && !has_mtp) throw Error("--speculative mtp: the model has no MTP heads");
  if (has_mtp && (opts_.spec.mode == SpecMode::Mtp || opts_.spec.mode == SpecMode::Auto)) {
    mtp_pool_ = std::make_shared<cache::BlockPool>(model_->mtp_block_shape(opts_.kv.block_size), opts_.draft_pool_bytes);
    draft_pool_.reset();  // the heads come with the model: prefer them to a separate draft model
  }
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

void BatchEngine::purge_cache() { run_on_worker([this] { kv_->purge(); }); }
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
        return stopping_ || !inbox_.empty() || !cancels_.empty() || !tasks_.empty() || !running_.empty() ||
               !waiting_.empty();
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
    if (!running_.empty() || !waiting_.empty()) {
      kv_->set_busy(true);
      step();
    }
    kv_->set_busy(!running_.empty() || !waiting_.empty());
    kv_->publish();
    auto client = [](const Sequence* s) { return !s->out->request().warm_only; };
    n_running_ = std::count_if(running_.begin(), running_.end(), client);
    n_queued_ = std::count_if(waiting_.begin(), waiting_.end(), client);
  }
}

void BatchEngine::admit_new(std::deque<std::pair<uint64_t, std::pair<GenerationRequest, EventCallback>>>& in) {
  const bool client = std::any_of(in.begin(), in.end(), [](auto& r) { return !r.second.first.warm_only; });
  for (auto& [id, rc] : in) {
    auto& [req, cb] = rc;
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->arrival = arrivals_++;
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
    waiting_.push_back(s.get());
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

bool BatchEngine::has_client_work() const {
  auto client = [](const Sequence* s) { return !s->out->request().warm_only; };
  return std::any_of(running_.begin(), running_.end(), client) || std::any_of(waiting_.begin(), waiting_.end(), client);
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
  s->draft_kv.reset();
  s->mtp_kv.reset();
  if (s->kv) {
    kv_->remember(s->tokens, *s->kv);
    s->kv.reset();
  }
  std::erase(running_, s);
  std::erase(waiting_, s);
  std::erase_if(all_, [s](auto& p) { return p.get() == s; });
}

void BatchEngine::preempt(Sequence* s) {
  // Recompute-style preemption: the KV goes to the prefix cache (evictable), so resuming
  // usually re-adopts most of it instead of recomputing.
  kv_->remember(s->tokens, *s->kv);
  s->kv.reset();
  s->draft_kv.reset();
  s->mtp_kv.reset();
  s->mtp_hidden.clear();
  std::erase(running_, s);
  // Back to the front, ahead of later arrivals (no starvation).
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](Sequence* w) { return w->arrival > s->arrival; });
  waiting_.insert(pos, s);
  ++preemptions_;
}

int64_t BatchEngine::prefill_cap(int64_t budget) const {
  return decoding_ ? std::min(budget, std::max<int64_t>(1, opts_.prefill_chunk_while_decoding)) : budget;
}

bool BatchEngine::plan_running(std::vector<Work>& plan, int64_t& budget, int64_t& reserved) {
  bool preempted = false;
  // Decoding sequences first (one token each, plus drafts), then unfinished prefills with what
  // is left of the budget: a long prompt never stalls the streams already running.
  std::vector<Sequence*> order;
  for (Sequence* s : running_)
    if (s->pending() == 1) order.push_back(s);
  const int64_t decoding = int64_t(order.size());
  for (Sequence* s : running_)
    if (s->pending() > 1) order.push_back(s);
  std::vector<Sequence*> planned;
  decoding_ = decoding > 0;
  for (Sequence* s : order) {
    if (std::find(running_.begin(), running_.end(), s) == running_.end()) continue;  // preempted
    Work w{s};
    w.n = std::min(s->pending(), prefill_cap(budget));
    if (w.n <= 0) continue;
    if (w.n == 1 && s->pending() == 1 && spec_.enabled()) {
      if (!draft_pool_ && !mtp_pool_) s->spec.proposer.update(s->tokens);
      const SpecChoice c = spec_.choose(s->spec, decoding, std::max<int64_t>(last_step_tokens_, decoding));
      int k = c.k;
      w.probe = c.probe;
      // Never draft past the sequence's end or the step budget.
      const int64_t room = std::min<int64_t>(s->capacity - int64_t(s->tokens.size()) - 1,
                                             s->out->request().max_tokens - int64_t(s->out->generated().size()) - 1);
      k = int(std::clamp<int64_t>(std::min<int64_t>(k, room), 0, budget - w.n));
      if (k > 0 && (draft_pool_ || mtp_pool_)) w.draft_k = k;
      else if (k > 0) w.draft = s->spec.proposer.propose(s->tokens, k);
    }
    for (;;) {
      int64_t need = s->kv->blocks_needed(w.n + int64_t(w.draft.size()) + w.draft_k);
      if (kv_->make_free(reserved + need)) {
        reserved += need;
        break;
      }
      if (!w.draft.empty() || w.draft_k) { w.draft.clear(); w.draft_k = 0; w.probe = false; continue; }
      // Preempt the newest running sequence not yet planned (it may be this one).
      Sequence* victim = nullptr;
      for (auto it = running_.rbegin(); it != running_.rend() && !victim; ++it)
        if (std::find(planned.begin(), planned.end(), *it) == planned.end()) victim = *it;
      preempt(victim);
      preempted = true;
      if (victim == s) { w.n = 0; break; }
    }
    if (w.n == 0) continue;
    budget -= w.n + int64_t(w.draft.size()) + w.draft_k;
    planned.push_back(s);
    plan.push_back(std::move(w));
  }
  return preempted;
}

void BatchEngine::plan_waiting(std::vector<Work>& plan, int64_t& budget, int64_t& reserved, bool preempted) {
  while (!waiting_.empty() && int64_t(running_.size()) < opts_.max_num_seqs && budget > 0 && !preempted) {
    Sequence* s = waiting_.front();
    if (s->out->request().warm_only && has_client_work()) return;  // warming waits for an idle engine
    if (!s->kv) {
      int64_t cached = 0;
      s->kv = kv_->open(s->tokens, s->capacity, &cached);
      if (!s->admitted_once) {
        s->out->set_cached_tokens(cached);
        s->admitted_once = true;
      }
    }
    Work w{s};
    w.n = std::min(s->pending(), prefill_cap(budget));
    int64_t need = s->kv->blocks_needed(w.n);
    if (!kv_->make_free(reserved + need)) {
      if (plan.empty() && running_.empty() && need > kv_->total_blocks()) {
        // Even an empty pool could not hold this chunk: the pool is too small for it.
        waiting_.pop_front();
        finish(s, s->out->finish_now(FinishReason::Error,
                                     "the KV cache pool (" + std::to_string(kv_->total_blocks()) +
                                         " blocks) is too small for this request; raise --kv-cache-memory"));
        continue;
      }
      s->kv.reset();  // retry when memory frees up; keep FCFS order
      return;
    }
    reserved += need;
    waiting_.pop_front();
    running_.push_back(s);
    budget -= w.n;
    plan.push_back(std::move(w));
  }
}

void BatchEngine::step() {
  std::vector<Work> plan;
  int64_t budget = opts_.max_step_tokens, reserved = 0;
  bool preempted = plan_running(plan, budget, reserved);
  plan_waiting(plan, budget, reserved, preempted);
  if (plan.empty()) {
    if (running_.empty() && !waiting_.empty() && kv_->free_blocks() == kv_->total_blocks()) {
      // Should not happen (plan_waiting fails what cannot fit); never spin on it.
      Sequence* s = waiting_.front();
      finish(s, s->out->finish_now(FinishReason::Error, "scheduler could not place the request"));
    }
    return;
  }

  if (draft_pool_) run_drafts(plan);
  if (mtp_pool_) run_mtp_drafts(plan);

  std::vector<BatchEntry> entries;
  entries.reserve(plan.size());
  int64_t total = 0;
  for (Work& w : plan) {
    Sequence* s = w.seq;
    const int64_t from = s->kv->length();
    w.input.assign(s->tokens.begin() + from, s->tokens.begin() + from + w.n);
    w.input.insert(w.input.end(), w.draft.begin(), w.draft.end());
    const int64_t rows = w.draft.empty() ? 1 : int64_t(w.input.size());
    s->logits.resize(size_t(rows * vocab_));
    BatchEntry e;
    e.tokens = w.input.data();
    e.n = int64_t(w.input.size());
    e.state = s->kv.get();
    e.logits = s->logits.data();
    e.all_logits = !w.draft.empty();
    if (mtp_pool_) {
      s->step_hidden.resize(w.input.size() * size_t(model_->config().hidden_size));
      e.hidden = s->step_hidden.data();
    }
    entries.push_back(e);
    total += e.n;
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
  spec_.observe_step(total, opts_.step_cost ? opts_.step_cost(total, secs) : secs);
  last_step_tokens_ = total;
  ++steps_;
  int64_t drafted = 0, accepted = 0, probes = 0;
  for (Work& w : plan) {
    drafted += int64_t(w.draft.size());
    probes += w.probe && !w.draft.empty() ? 1 : 0;
    accepted += process(w);
  }
  if (log::level() == log::Level::Debug) {  // `--log-level debug`: where a step's time goes
    const auto now = std::chrono::steady_clock::now();
    // gap: from the previous step's end to this forward (scheduling, drafts, the worker loop).
    const double gap = steps_ > 1 ? std::chrono::duration<double>(t0 - last_step_end_).count() * 1e3 : 0.0;
    std::string spec;
    if (spec_.enabled())  // what speculation did this step, and the step-cost estimate it used
      spec = ", drafted " + std::to_string(drafted) + " (accepted " + std::to_string(accepted) +
             (probes ? ", " + std::to_string(probes) + " probe" : std::string()) + "), c1/c0 " +
             std::to_string(spec_.cost_per_token_ratio());
    log::debug("step " + std::to_string(steps_) + ": " + std::to_string(plan.size()) + " seqs, " +
               std::to_string(total) + " tokens" + spec + ", forward " + std::to_string(secs * 1e3) +
               " ms, step " + std::to_string(std::chrono::duration<double>(now - t0).count() * 1e3) +
               " ms, gap " + std::to_string(gap) + " ms");
    last_step_end_ = now;
  }
}

// Draft-model proposals: the draft model first catches up on each sequence's tokens it has not
// seen (its prompt on the first draft, the accepted tokens since), then extends every sequence
// greedily one token per batched forward. Its KV is rolled back with the target's after
// verification; a sequence the draft pool cannot hold just goes without drafts this step.
void BatchEngine::run_drafts(std::vector<Work>& plan) {
  Model& dm = *opts_.draft_model;
  std::vector<Work*> ws;
  for (Work& w : plan)
    if (w.draft_k > 0) ws.push_back(&w);
  if (ws.empty()) return;
  std::vector<std::vector<int32_t>> inputs(ws.size());
  std::vector<std::vector<float>> logits(ws.size(), std::vector<float>(size_t(vocab_)));
  for (size_t i = 0; i < ws.size(); ++i) {
    Sequence* s = ws[i]->seq;
    if (!s->draft_kv) s->draft_kv.reset(static_cast<PagedKvState*>(dm.new_paged_state(draft_pool_, s->capacity).release()));
    inputs[i].assign(s->tokens.begin() + s->draft_kv->length(), s->tokens.end());
  }
  auto t0 = std::chrono::steady_clock::now();
  int forwards = 0;
  for (int j = 0;; ++j) {
    std::vector<BatchEntry> es;
    std::vector<size_t> idx;
    int64_t need = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
      Work& w = *ws[i];
      if (int(w.draft.size()) >= w.draft_k || inputs[i].empty()) continue;
      const int64_t b = w.seq->draft_kv->blocks_needed(int64_t(inputs[i].size()));
      if (need + b > int64_t(draft_pool_->free_count())) {
        w.seq->draft_kv->release();  // no room: no drafts for it this step, catch up later
        inputs[i].clear();
        continue;
      }
      need += b;
      es.push_back(BatchEntry{inputs[i].data(), int64_t(inputs[i].size()), w.seq->draft_kv.get(), logits[i].data(), false});
      idx.push_back(i);
    }
    if (es.empty()) break;
    try {
      dm.forward_batch(es.data(), es.size());
    } catch (const std::exception& e) {
      log::warn(std::string("draft model forward failed; no drafts this step: ") + e.what());
      for (Work* w : ws) {
        w->draft.clear();
        w->seq->draft_kv->release();
      }
      break;
    }
    ++forwards;
    for (size_t i : idx) {
      const float* l = logits[i].data();
      int32_t tok = int32_t(std::max_element(l, l + vocab_) - l);
      ws[i]->draft.push_back(tok);
      inputs[i].assign(1, tok);
    }
  }
  for (Work* w : ws) {
    w->draft_k = 0;
    // The last draft was never fed to the draft model: it is caught up next step if accepted.
  }
  if (forwards > 0)
    spec_.observe_draft_step(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / forwards);
}

// Appends this step's target hidden rows for positions [p0, p0 + rows) to what the MTP heads
// still have to see (a gap — a prefix-cache hit, a preemption — restarts the buffer).
void BatchEngine::keep_hidden(Sequence* s, int64_t p0, int64_t rows) {
  const size_t H = size_t(model_->config().hidden_size);
  if (rows <= 0) return;
  if (s->mtp_hidden.empty() || s->mtp_hidden_pos + int64_t(s->mtp_hidden.size() / H) != p0) {
    s->mtp_hidden.clear();
    s->mtp_hidden_pos = p0;
  }
  s->mtp_hidden.insert(s->mtp_hidden.end(), s->step_hidden.begin(), s->step_hidden.begin() + size_t(rows) * H);
}

// MTP proposals: the heads first catch up on the positions they have not seen — row i pairs the
// target's hidden state at i with token i+1 (positions without a known hidden state, e.g. a
// cached prefix, get zeros: drafts are only guesses) — which yields the first guess; each further
// guess feeds the head its own output and the previous guess. All sequences step together.
void BatchEngine::run_mtp_drafts(std::vector<Work>& plan) {
  const int64_t H = model_->config().hidden_size;
  const int layers = model_->mtp_layers();
  struct Job {
    Work* w;
    std::vector<int32_t> toks;
    std::vector<float> hid;
    std::vector<float> logits, hout;
  };
  std::vector<Job> jobs;
  for (Work& w : plan) {
    if (w.draft_k <= 0) continue;
    Sequence* s = w.seq;
    if (!s->mtp_kv) s->mtp_kv = model_->new_mtp_state(mtp_pool_, s->capacity);
    const int64_t L = s->kv->length(), Lm = s->mtp_kv->length();
    if (Lm >= L) { w.draft_k = 0; continue; }
    Job j{&w};
    j.toks.assign(s->tokens.begin() + Lm + 1, s->tokens.begin() + L + 1);
    j.hid.assign(size_t((L - Lm) * H), 0.0f);
    for (int64_t i = std::max(Lm, s->mtp_hidden_pos); i < L; ++i) {
      const int64_t r = i - s->mtp_hidden_pos;
      if (size_t((r + 1) * H) > s->mtp_hidden.size()) break;
      std::copy_n(s->mtp_hidden.begin() + r * H, H, j.hid.begin() + (i - Lm) * H);
    }
    j.logits.resize(size_t(vocab_));
    j.hout.resize(size_t(H));
    jobs.push_back(std::move(j));
  }
  for (int step = 0; !jobs.empty(); ++step) {
    std::vector<MtpEntry> es;
    std::vector<Job*> in;
    int64_t need = 0;
    for (Job& j : jobs) {
      Work& w = *j.w;
      if (int(w.draft.size()) >= w.draft_k || j.toks.empty()) continue;
      const int64_t b = static_cast<PagedKvState*>(w.seq->mtp_kv.get())->blocks_needed(int64_t(j.toks.size()));
      if (need + b > int64_t(mtp_pool_->free_count())) {
        w.seq->mtp_kv.reset();  // no room: no drafts for it this step
        j.toks.clear();
        continue;
      }
      need += b;
      es.push_back(MtpEntry{j.toks.data(), j.hid.data(), int64_t(j.toks.size()), w.seq->mtp_kv.get(),
                            j.logits.data(), j.hout.data(), step % layers});
      in.push_back(&j);
    }
    if (es.empty()) break;
    try {
      model_->forward_mtp(es.data(), es.size());
    } catch (const std::exception& e) {
      log::warn(std::string("MTP forward failed; no drafts this step: ") + e.what());
      for (Job& j : jobs) {
        j.w->draft.clear();
        j.w->seq->mtp_kv.reset();
      }
      break;
    }
    for (Job* j : in) {
      const int32_t tok = int32_t(std::max_element(j->logits.begin(), j->logits.end()) - j->logits.begin());
      j->w->draft.push_back(tok);
      j->toks.assign(1, tok);
      j->hid = j->hout;
    }
  }
  for (Job& j : jobs) {
    j.w->draft_k = 0;
    j.w->seq->mtp_hidden.clear();  // consumed (the heads saw every position up to the target's)
    j.w->seq->mtp_hidden_pos = j.w->seq->kv->length();
  }
}

int BatchEngine::process(Work& w) {
  Sequence* s = w.seq;
  const bool complete = s->kv->length() - int64_t(w.draft.size()) == int64_t(s->tokens.size());
  const int64_t p0 = s->kv->length() - int64_t(w.input.size());  // position of this step's first row
  if (!complete) {  // a prefill chunk; more of the prompt next step
    prefill_tokens_ += uint64_t(w.n);
    if (mtp_pool_) keep_hidden(s, p0, int64_t(w.input.size()));
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
  GenerationEvent merged;
  bool done = false;
  int accepted = 0;
  const int d = int(w.draft.size());
  try {
    for (int i = 0; i <= d; ++i) {
      float* row = s->logits.data() + size_t(i) * size_t(vocab_);
      bool ok = false;
      GenerationEvent ev = i < d ? s->out->emit_with_draft(row, w.draft[i], &ok) : s->out->emit(row);
      s->tokens.insert(s->tokens.end(), ev.tokens.begin(), ev.tokens.end());
      merged.tokens.insert(merged.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      merged.text += ev.text;
      merged.samples.insert(merged.samples.end(), ev.samples.begin(), ev.samples.end());
      merged.finished = ev.finished;
      merged.finish_reason = ev.finish_reason;
      merged.stop_string = ev.stop_string;
      merged.prompt_tokens = ev.prompt_tokens;
      merged.cached_tokens = ev.cached_tokens;
      merged.completion_tokens = ev.completion_tokens;
      if (ev.finished) { done = true; break; }
      if (!ok) break;
      ++accepted;
    }
  } catch (const std::exception& e) {
    finish(s, s->out->finish_now(FinishReason::Error, e.what()));
    return 0;
  }
  spec_.observe(s->spec, d, accepted, w.probe);
  if (d > 0) {
    ++spec_steps_;
    spec_drafted_ += uint64_t(d);
    spec_accepted_ += uint64_t(accepted);
    decode_tokens_ += uint64_t(accepted);
  }
  // KV of rejected drafts is dropped; the newest token is computed next step.
  s->kv->truncate(std::min<int64_t>(s->kv->length(), int64_t(s->tokens.size()) - 1));
  if (s->draft_kv) s->draft_kv->truncate(std::min<int64_t>(s->draft_kv->length(), int64_t(s->tokens.size()) - 1));
  if (mtp_pool_) {
    // Head positions from p0 on were fed the heads' own guesses: recompute them from the
    // target's hidden states of the accepted rows.
    if (s->mtp_kv) s->mtp_kv->truncate(std::min(s->mtp_kv->length(), p0));
    keep_hidden(s, p0, s->kv->length() - p0);
  }
  // The client gets its token before the bookkeeping below (persisting copies the prompt's pages).
  if (!done) {
    try {
      s->cb(merged);
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
  if (done) finish(s, std::move(merged));
  return accepted;
}

}  // namespace rapid
