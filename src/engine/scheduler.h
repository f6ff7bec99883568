// The continuous-batching policy (the role of vLLM v1's Scheduler), over plain sequence
// descriptors: each step it decides who runs and how many tokens each computes —
//   1. decoding sequences first: one token each, plus a draft depth from the
//      SpeculationController (never past the sequence's end or the step budget);
//   2. then unfinished prefills, in arrival order, in chunks under the per-step token budget
//      (--max-batch-tokens), each chunk capped at prefill_chunk_while_decoding (128) while any
//      sequence decodes, so a new long prompt delays running streams by one short step;
//   3. then waiting sequences, first come first served, up to max_num_seqs running (background
//      warming only while no client request runs or waits);
// and, when the KV pool cannot hold the step, whom to give up: first a sequence's drafts, then
// the newest running sequence not yet planned this step (it goes back to the waiting queue ahead
// of every later arrival, so nothing starves). A request that could not fit even an empty pool is
// rejected. No model, no threads: the engine owns the sequences and their KV, keeps the
// descriptors current, answers the SchedulerHost questions, and executes the plan.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/speculation.h"

namespace rapid::engine {

// What the scheduler knows of a sequence. The owner (the engine's sequence) keeps length,
// computed and draft_room current before each schedule().
struct SchedSeq {
  uint64_t id = 0;
  int64_t length = 0;      // tokens so far (prompt + generated)
  int64_t computed = 0;    // of those, tokens whose KV is computed (0 while waiting)
  int64_t draft_room = 0;  // most tokens it may still draft (context and max_tokens left, minus one)
  bool warm = false;       // background warming (GenerationRequest::warm_only)
  SpecState spec;          // acceptance statistics for the depth rule
  uint64_t arrival = 0;    // set by Scheduler::add (FCFS order)
  int64_t pending() const { return length - computed; }
};

// One sequence's share of a step.
struct ScheduledSeq {
  SchedSeq* seq = nullptr;
  int64_t n = 0;       // its next n tokens to compute (a prefill chunk, or 1 when decoding)
  int draft = 0;       // drafted tokens to append after them and verify in the same forward
  bool probe = false;  // the drafts are a probe (SpeculationController)
};

struct SchedulerOptions {
  int64_t max_num_seqs = 16;      // sequences in the running batch (at least 1)
  int64_t max_step_tokens = 512;  // tokens per forward (raised to max_num_seqs: one token each)
  int64_t prefill_chunk_while_decoding = 128;
};

// The engine side of scheduling: its KV memory and its proposer.
class SchedulerHost {
 public:
  virtual ~SchedulerHost() = default;
  // A waiting sequence is tried: give it a KV state holding its longest cached prefix; returns
  // that prefix's length (tokens already computed).
  virtual int64_t admit(SchedSeq& s) = 0;
  virtual void unadmit(SchedSeq& s) = 0;  // no memory for it yet: drop that state again
  // Free pool blocks appending n tokens to its KV takes.
  virtual int64_t blocks_needed(const SchedSeq& s, int64_t n) = 0;
  // Makes `blocks` blocks free (evicting cached prefixes no sequence uses); false if it cannot.
  virtual bool make_free(int64_t blocks) = 0;
  virtual int64_t free_blocks() const = 0;
  virtual int64_t total_blocks() const = 0;
  virtual void preempt(SchedSeq& s) = 0;  // gives up its KV (kept in the prefix cache) and drafts state
  virtual void reject(SchedSeq& s, const std::string& why) = 0;  // can never run: finish it with an error
  // How many drafts it will verify if offered k: a proposer that guesses while the step is
  // planned (prompt lookup) knows its count now; one that runs a model later takes k.
  virtual int drafts(SchedSeq& s, int k) = 0;
  // s drafts nothing this step: a proposer whose guesses are free may guess anyway, for the
  // depth rule to check against what s decodes (SpeculationController's shadow drafts).
  virtual void shadow(SchedSeq& s) { (void)s; }
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions o, const SpeculationController& spec);
  const SchedulerOptions& options() const { return o_; }

  void add(SchedSeq* s);     // a new arrival joins the waiting queue
  void remove(SchedSeq* s);  // finished or cancelled: leaves whichever queue holds it
  // This step's plan, running sequences first (see above). Calls host.preempt / reject on the way.
  std::vector<ScheduledSeq> schedule(SchedulerHost& host);
  const std::vector<SchedSeq*>& running() const { return running_; }  // arrival order
  const std::deque<SchedSeq*>& waiting() const { return waiting_; }   // FCFS
  bool idle() const { return running_.empty() && waiting_.empty(); }
  bool has_client_work() const;  // a non-warming sequence runs or waits

 private:
  struct Budget {
    int64_t tokens = 0, reserved = 0;  // tokens left this step; blocks promised to planned sequences
  };
  bool plan_running(SchedulerHost& host, std::vector<ScheduledSeq>& plan, Budget& b);
  void plan_waiting(SchedulerHost& host, std::vector<ScheduledSeq>& plan, Budget& b);
  void plan_drafts(SchedulerHost& host, ScheduledSeq& w, int64_t decoding, int64_t planned, const Budget& b) const;
  bool reserve(SchedulerHost& host, ScheduledSeq& w, const std::vector<ScheduledSeq>& plan, Budget& b);
  void preempt(SchedulerHost& host, SchedSeq* s);
  int64_t prefill_cap(int64_t budget) const;

  SchedulerOptions o_;
  const SpeculationController& spec_;
  std::vector<SchedSeq*> running_;
  std::deque<SchedSeq*> waiting_;
  uint64_t arrivals_ = 0;
  bool decoding_ = false;  // this step has decoding sequences (caps prefill chunks)
};

}  // namespace rapid::engine
