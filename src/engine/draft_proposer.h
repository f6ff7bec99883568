// Speculative decoding's proposers behind one interface: each step the scheduler gives a decoding
// sequence a draft depth k (SpeculationController), the proposer guesses up to k next tokens,
// the target verifies them in its forward (engine/verify.h), and the proposer learns what was
// kept. Three implementations, one per file: prompt lookup (prompt_lookup_proposer.h), a smaller
// draft model (draft_model_proposer.h) and the target's own MTP heads (mtp_proposer.h). A
// proposer keeps its per-sequence state (an n-gram index, a draft KV cache, ...) keyed by the
// sequence id until forget(). Called from the engine thread only.
#pragma once
#include <cstdint>
#include <vector>

namespace rapid::engine {

// One sequence's drafting for a step.
struct DraftJob {
  uint64_t seq = 0;
  const std::vector<int32_t>* tokens = nullptr;  // prompt + generated so far
  int64_t computed = 0;                          // the target's KV length before this step
  int64_t capacity = 0;                          // the sequence's token limit
  int k = 0;                                     // guesses wanted
  std::vector<int32_t> draft;                    // out: at most k guesses
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // While the step is planned: how many drafts the sequence gets if offered k. A proposer that
  // guesses cheaply (prompt lookup) guesses now, so the step budget counts only real drafts;
  // one that runs a model guesses in propose() and takes k.
  virtual int offer(uint64_t seq, const std::vector<int32_t>& tokens, int k) {
    (void)seq, (void)tokens;
    return k;
  }
  // A guess of the k tokens after `tokens` that no step will verify, or none: only a proposer whose
  // guesses cost nothing (prompt lookup) makes them, for auto to learn acceptance from without
  // drafting (SpeculationController's shadow drafts).
  virtual std::vector<int32_t> free_guess(uint64_t seq, const std::vector<int32_t>& tokens, int k) {
    (void)seq, (void)tokens, (void)k;
    return {};
  }
  // Fills every job's draft, batched over the step's sequences, before the target's forward.
  // A sequence it cannot serve (no memory, a failed forward) just gets fewer or no drafts.
  virtual void propose(std::vector<DraftJob>& jobs) = 0;
  // Whether advance() needs the target's final hidden rows (the MTP heads read them).
  virtual bool wants_hidden() const { return false; }
  // After the target's forward: positions [p0, p0 + rows) of seq are computed and kept (rejected
  // drafts already rolled back), `hidden` their rows when wants_hidden(). `sampled`: the step
  // sampled tokens (verified drafts) rather than prefilling a chunk of the prompt.
  virtual void advance(uint64_t seq, int64_t p0, int64_t rows, const float* hidden, bool sampled) = 0;
  virtual void forget(uint64_t seq) = 0;  // preempted or finished: drop its state
};

}  // namespace rapid::engine
