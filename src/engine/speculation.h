// When and how much to speculate. Each decode step a sequence may append k drafted tokens
// (engine/draft_proposer.h); one forward verifies them. The depth k is chosen by an
// expected-value rule from two measured quantities:
//   - the sequence's acceptance rate a (per drafted token, decayed so it follows the text), so
//     drafting k tokens yields g(k) = a(1 - a^k)/(1 - a) extra tokens on average;
//   - the step cost t(N) = c0 + c1·N for a forward over N tokens (a decayed least-squares fit of
//     measured steps), so k drafts cost c1·k more for the whole batch.
// k maximises batch throughput (B + g(k)) / (t(N) + c1·k): speculation switches itself off for a
// sequence whose guesses fail, and for the batch once it is large enough that extra verified
// tokens cost more than they return. With mode Ngram the depth is always the maximum.
//
// Both estimates only learn from drafting: steps without drafts are all the same size (they say
// nothing about c1) and verify nothing (they say nothing about a). So a wrong early estimate —
// e.g. c1 fitted on a few small, noisy steps, as after a restart where the prompt comes from the
// disk snapshot and no large prefill step anchors the fit — would switch speculation off for
// good. The rule therefore keeps probing: a sequence the rule has kept from drafting for
// probe_gap decode steps drafts max_draft tokens anyway (when the proposer has a guess). The gap
// doubles after each probe (kProbeFirst .. kProbeMax steps), so where drafting really does not
// pay, probing costs at most max_draft·c1 per kProbeMax steps; it restarts at kProbeFirst
// once the rule drafts on its own.
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

constexpr int kProbeFirst = 8, kProbeMax = 128;  // decode steps between probes (see above)

// Acceptance and probe pacing, learned from decode steps: per sequence, and for a shared
// controller model-wide too. With the MTP heads or a draft model, acceptance is mostly a property
// of the proposer (how well it predicts this target), not of one request's text as with prompt
// lookup. Learning it afresh per request makes every short request (an agent's turns) pay for
// drafts that never pay: measured on the Qwen3.5-0.8B shape with random heads, auto decoded
// 64-token requests at 0.80x of off. So for those proposers (share_across_sequences) a new
// sequence starts from the acceptance that earlier sequences measured, and probing is paced
// model-wide: the gap counts every sequence's idle decode steps and backs off across requests.
struct SpecEstimate {
  double accepted = 1.0, rejected = 1.0;  // decayed counts (Beta(1,1) prior)
  int idle = 0;                           // decode steps since it last drafted
  int probe_gap = kProbeFirst;
  double rate() const { return accepted / (accepted + rejected); }
};

// Per-sequence speculation state.
struct SpecState : SpecEstimate {
  SpeculationSummary summary;  // what speculation did for this request
};

struct SpecChoice {
  int k = 0;           // tokens to draft
  bool probe = false;  // the rule said 0: drafted to re-measure acceptance and step cost
};

class SpeculationController {
 public:
  explicit SpeculationController(SpeculationOptions o) : o_(o) {}
  bool enabled() const { return o_.mode != SpecMode::Off && o_.max_draft > 0; }
  // Acceptance belongs to the proposer (MTP heads, a draft model): learn and probe model-wide.
  void share_across_sequences(bool on) { shared_on_ = on; }
  // The state a new sequence starts from: Beta(1,1), or the model-wide rate at the same weight.
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
  // After each forward: its token count and wall time.
  void observe_step(int64_t tokens, double seconds);
  double cost_per_token_ratio() const;  // c1 / c0 as currently estimated
  double step_c1() const;               // seconds per extra target token (fit slope)
  const SpeculationOptions& options() const { return o_; }

 private:
  SpeculationOptions o_;
  // Decayed sums for the least-squares fit of step time against tokens.
  double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double draft_step_s_ = 0;  // decayed mean of a draft model forward, 0 = none seen
  bool shared_on_ = false;
  SpecEstimate shared_;  // model-wide, when shared_on_
};

}  // namespace rapid::engine
