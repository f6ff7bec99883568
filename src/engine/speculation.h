// When and how much to speculate. Each decode step a sequence may append k drafted tokens
// (engine/draft_proposer.h); one forward verifies them. The depth k is chosen by an
// expected-value rule from two measured quantities:
//   - the sequence's acceptance rate a (per drafted token, decayed so it follows the text), so
//     drafting k tokens yields g(k) = a(1 - a^k)/(1 - a) extra tokens on average;
//   - the step time t(N) of a forward over N tokens (StepCostModel, learned from decode steps).
// k maximises batch throughput (B + g(k)) / t(N + k): speculation switches itself off for a
// sequence whose guesses fail, and for the batch once it is large enough that extra verified
// tokens cost more than they return. With mode Ngram the depth is always the maximum.
//
// Acceptance is learned from drafts, and, for a proposer whose guesses are free (prompt lookup),
// also from guesses it is never asked to verify: the rule said 0, the guess is kept aside and
// checked against the tokens the sequence then decodes (a shadow draft). So a text where lookup
// fails never pays for drafts to find that out, and one that starts repeating is noticed at once.
//
// Step costs only come from drafting: steps without drafts are all the same size. So a wrong
// early estimate (e.g. a restarted server's first, cold steps) would switch speculation off for
// good. The rule therefore keeps probing: once probe_gap sequence-steps have passed without a
// draft, a sequence that has a guess drafts max_draft tokens anyway (unless its shadow drafts say
// its guesses fail so often that drafting would not pay even at the prior's cheap step cost). The
// gap doubles after each probe (kProbeFirst .. kProbeMax), so where drafting really does not pay,
// probing costs at most max_draft extra tokens per kProbeMax sequence-steps. The pacing is
// model-wide, as the step cost is, and the gap never shrinks back: paced per request, or restarted
// whenever the rule drafted on its own, probes cost short chat requests (96 tokens) 6 % of their
// time where the first extra row of a step is dear.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace rapid::engine {

enum class SpecMode { Off, Auto, Ngram, Draft, Mtp };
// "off" | "auto" | "ngram" | "draft" | "mtp"; throws Error otherwise. "auto" drafts with the model's
// MTP heads if it has some, else a draft model if one is given, else prompt lookup (depth by the
// expected-value rule); the named modes always draft max_draft tokens with that proposer.
SpecMode parse_spec_mode(const std::string& s);
const char* spec_mode_name(SpecMode m);

struct SpeculationOptions {
  SpecMode mode = SpecMode::Auto;
  int max_draft = 8;  // --num-speculative-tokens
};

constexpr int kProbeFirst = 8, kProbeMax = 128;  // sequence-steps between probes (see above)

// Step time against the step's token count, from decode steps (every row sampled). Where a count
// was measured lately (within ~14 steps if seen once, for good if seen every few): its decayed
// mean; between such counts: the straight line joining them; past them: the nearest one plus the
// fitted slope (a decayed least-squares line through all steps); never more than a larger count's.
// Why not the line alone: on a CPU the first extra row of a step costs far more than each later one
// (the step leaves the one-token GEMV kernels, and each drafted row computes its LM head row), so a
// line through the 1- and 9-token steps that probes produce made one or two drafts look cheap, and
// auto ran open chat below off.
class StepCostModel {
 public:
  void observe(int64_t tokens, double seconds);
  double seconds(int64_t tokens) const;
  double slope() const;  // the line's seconds per extra token (a guess before data)
  double ratio() const;  // the line's slope over its intercept (for logs)

 private:
  static constexpr int64_t kCounts = 256;  // token counts with their own mean; larger ones use the line
  static constexpr double kFresh = 0.5;     // a count's aged weight below this: not measured lately
  double line_c0() const;
  std::vector<double> mean_ = std::vector<double>(kCounts, 0.0), weight_ = std::vector<double>(kCounts, 0.0);
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed sums for the line
};

// Acceptance and probe pacing, learned from decode steps: per sequence, and model-wide. A new
// sequence starts from the acceptance earlier ones measured (at the weight of two drafts): with
// the MTP heads or a draft model acceptance is mostly a property of the proposer, and with prompt
// lookup a server mostly sees one kind of text; the sequence's own drafts and shadow drafts take
// over within a few tokens. Starting each request from Beta(1,1) made every short request (an
// agent's turns, a chat answer) pay for drafts that never pay: measured on the Qwen3.5-0.8B shape
// with random MTP heads, auto decoded 64-token requests at 0.80x of off.
struct SpecEstimate {
  double accepted = 1.0, rejected = 1.0;  // decayed counts (Beta(1,1) prior)
  double rate() const { return accepted / (accepted + rejected); }
};

// Per-sequence speculation state.
struct SpecState : SpecEstimate {
  SpeculationSummary summary;  // what speculation did for this request
  std::vector<int32_t> shadow;  // a free guess not verified (see above), for tokens [shadow_at, ...)
  size_t shadow_at = 0;
  int64_t shadows = 0;  // shadow drafts settled (its acceptance is known without drafting)
};

struct SpecChoice {
  int k = 0;           // tokens to draft
  bool probe = false;  // the rule said 0: drafted to re-measure acceptance and step cost
};

class SpeculationController {
 public:
  explicit SpeculationController(SpeculationOptions o) : o_(o) {}
  bool enabled() const { return o_.mode != SpecMode::Off && o_.max_draft > 0; }
  // The state a new sequence starts from: the model-wide acceptance at the weight of Beta(1,1).
  SpecState new_state() const;
  // Draft depth for one sequence in a step with `batch` decoding sequences and `tokens` tokens:
  // the rule's, or a probe (see above).
  SpecChoice choose(const SpecState& s, int64_t batch, int64_t tokens) const;
  // The expected-value rule alone.
  int depth(const SpecState& s, int64_t batch, int64_t tokens) const;
  // A draft model's forward (one token per sequence) costs `seconds`: drafting k tokens adds k of
  // them to the step, which the depth rule charges (in units of the target's fixed step cost).
  void observe_draft_step(double seconds);
  // After each decode step of a sequence: d tokens drafted (0 = none), a of them accepted;
  // probe: the drafts were a probe.
  void observe(SpecState& s, int d, int a, bool probe = false);
  // A step that will not draft for s: whether to ask the proposer for a free guess to check later.
  bool wants_shadow(const SpecState& s) const { return o_.mode == SpecMode::Auto && s.shadow.empty(); }
  // The free guess of the tokens from position `at` on (empty: the proposer had none).
  void start_shadow(SpecState& s, std::vector<int32_t> guess, size_t at);
  // After s's tokens grew: once they settle the pending guess, learn from it as from a draft.
  void settle_shadow(SpecState& s, const std::vector<int32_t>& tokens);
  // After each decode-only forward: its token count and wall time.
  void observe_step(int64_t tokens, double seconds) { cost_.observe(tokens, seconds); }
  double cost_per_token_ratio() const { return cost_.ratio(); }  // c1 / c0 of the fitted line
  double step_c1() const { return cost_.slope(); }
  double step_seconds(int64_t n) const { return cost_.seconds(n); }               // seconds per extra target token
  const SpeculationOptions& options() const { return o_; }

 private:
  SpeculationOptions o_;
  StepCostModel cost_;
  double draft_step_s_ = 0;  // decayed mean of a draft model forward, 0 = none seen
  SpecEstimate shared_;  // model-wide acceptance: the new-sequence prior
  // Probe pacing, model-wide: sequence-steps since any sequence drafted, and the current gap.
  int idle_ = 0;
  int probe_gap_ = kProbeFirst;
};

}  // namespace rapid::engine
