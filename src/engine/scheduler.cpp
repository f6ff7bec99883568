#include "engine/scheduler.h"

#include <algorithm>

namespace rapid::engine {

Scheduler::Scheduler(SchedulerOptions o, const SpeculationController& spec) : o_(o), spec_(spec) {
  o_.max_num_seqs = std::max<int64_t>(1, o_.max_num_seqs);
  // Every running sequence must be able to take at least one token per step.
  o_.max_step_tokens = std::max(o_.max_step_tokens, o_.max_num_seqs);
}

void Scheduler::add(SchedSeq* s) {
  s->arrival = arrivals_++;
  waiting_.push_back(s);
}

void Scheduler::remove(SchedSeq* s) {
  std::erase(running_, s);
  std::erase(waiting_, s);
}

bool Scheduler::has_client_work() const {
  auto client = [](const SchedSeq* s) { return !s->warm; };
  return std::any_of(running_.begin(), running_.end(), client) || std::any_of(waiting_.begin(), waiting_.end(), client);
}

int64_t Scheduler::prefill_cap(int64_t budget) const {
  return decoding_ ? std::min(budget, std::max<int64_t>(1, o_.prefill_chunk_while_decoding)) : budget;
}

std::vector<ScheduledSeq> Scheduler::schedule(SchedulerHost& host) {
  std::vector<ScheduledSeq> plan;
  Budget b{o_.max_step_tokens, 0};
  // After a preemption nothing new is admitted this step: the memory it freed is for the
  // sequences already running.
  if (!plan_running(host, plan, b)) plan_waiting(host, plan, b);
  if (plan.empty() && running_.empty() && !waiting_.empty() && host.free_blocks() == host.total_blocks()) {
    // Should not happen (plan_waiting rejects what cannot fit); never spin on it.
    SchedSeq* s = waiting_.front();
    waiting_.pop_front();
    host.reject(*s, "scheduler could not place the request");
  }
  return plan;
}

// Decoding sequences first (one token each, plus drafts), then unfinished prefills with what is
// left of the budget: a long prompt never stalls the streams already running. Returns whether a
// sequence was preempted.
bool Scheduler::plan_running(SchedulerHost& host, std::vector<ScheduledSeq>& plan, Budget& b) {
  std::vector<SchedSeq*> order;
  for (SchedSeq* s : running_)
    if (s->pending() == 1) order.push_back(s);
  const int64_t decoding = int64_t(order.size());
  for (SchedSeq* s : running_)
    if (s->pending() > 1) order.push_back(s);
  decoding_ = decoding > 0;
  bool preempted = false;
  int64_t drafted = 0;  // drafts planned so far this step
  for (SchedSeq* s : order) {
    if (std::find(running_.begin(), running_.end(), s) == running_.end()) continue;  // preempted
    ScheduledSeq w{s};
    w.n = std::min(s->pending(), prefill_cap(b.tokens));
    if (w.n <= 0) continue;
    if (w.n == 1 && s->pending() == 1 && spec_.enabled()) plan_drafts(host, w, decoding, decoding + drafted, b);
    const size_t before = running_.size();
    const bool placed = reserve(host, w, plan, b);
    preempted |= running_.size() < before;
    if (!placed) continue;
    b.tokens -= w.n + w.draft;
    drafted += w.draft;
    plan.push_back(w);
  }
  return preempted;
}

// The depth rule's choice, clamped to the sequence's room and the step budget. The step so far:
// one token per decoding sequence and the drafts planned before this one.
void Scheduler::plan_drafts(SchedulerHost& host, ScheduledSeq& w, int64_t decoding, int64_t planned,
                            const Budget& b) const {
  const SpecChoice c = spec_.choose(w.seq->spec, decoding, planned);
  w.probe = c.probe;
  const int k = int(std::clamp<int64_t>(std::min<int64_t>(c.k, w.seq->draft_room), 0, b.tokens - w.n));
  if (k > 0) w.draft = host.drafts(*w.seq, k);
  if (w.draft == 0) host.shadow(*w.seq);
}

// Finds KV blocks for w: drops its drafts, then preempts the newest running sequence not yet
// planned (possibly w's own) until the step fits. False when w itself was preempted.
bool Scheduler::reserve(SchedulerHost& host, ScheduledSeq& w, const std::vector<ScheduledSeq>& plan, Budget& b) {
  for (;;) {
    const int64_t need = host.blocks_needed(*w.seq, w.n + w.draft);
    if (host.make_free(b.reserved + need)) {
      b.reserved += need;
      return true;
    }
    if (w.draft > 0) {
      w.draft = 0;
      w.probe = false;
      continue;
    }
    SchedSeq* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend() && !victim; ++it)
      if (std::none_of(plan.begin(), plan.end(), [&](const ScheduledSeq& p) { return p.seq == *it; })) victim = *it;
    preempt(host, victim);
    if (victim == w.seq) return false;
  }
}

void Scheduler::plan_waiting(SchedulerHost& host, std::vector<ScheduledSeq>& plan, Budget& b) {
  while (!waiting_.empty() && int64_t(running_.size()) < o_.max_num_seqs && b.tokens > 0) {
    SchedSeq* s = waiting_.front();
    if (s->warm && has_client_work()) return;  // warming waits for an idle engine
    s->computed = host.admit(*s);
    ScheduledSeq w{s};
    w.n = std::min(s->pending(), prefill_cap(b.tokens));
    const int64_t need = host.blocks_needed(*s, w.n);
    if (!host.make_free(b.reserved + need)) {
      if (plan.empty() && running_.empty() && need > host.total_blocks()) {
        // Even an empty pool could not hold this chunk: the pool is too small for it.
        waiting_.pop_front();
        host.reject(*s, "the KV cache pool (" + std::to_string(host.total_blocks()) +
                            " blocks) is too small for this request; raise --kv-cache-memory");
        continue;
      }
      host.unadmit(*s);  // retry when memory frees up; keep FCFS order
      s->computed = 0;
      return;
    }
    b.reserved += need;
    waiting_.pop_front();
    running_.push_back(s);
    b.tokens -= w.n;
    plan.push_back(w);
  }
}

// Recompute-style preemption: the host keeps its KV in the prefix cache (evictable), so resuming
// usually re-adopts most of it. It goes back ahead of every later arrival (no starvation).
void Scheduler::preempt(SchedulerHost& host, SchedSeq* s) {
  host.preempt(*s);
  s->computed = 0;
  std::erase(running_, s);
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](SchedSeq* w) { return w->arrival > s->arrival; });
  waiting_.insert(pos, s);
}

}  // namespace rapid::engine
