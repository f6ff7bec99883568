// Prompt lookup decoding: guesses the next tokens by finding the most recent earlier place where
// the sequence's last n tokens (n = max_n down to min_n; long n-grams first, because source code
// repeats short ones — measured on the code-edit bench: acceptance 0.62 with n <= 4, 0.70 with
// n <= 8) occurred — in the prompt or in the text
// generated so far — and proposing what followed there. Agents editing code ask for text that is
// mostly already in the prompt, so these guesses are often long and right.
// One hash table per n maps the hash of an n-gram to the latest two positions it ended at; each
// new token updates them in O(max_n), and a proposal is O(max_n + k).
//
// How far to guess: where the matched n-gram occurred twice before, the guess stops where what
// followed those two occurrences stops agreeing. A model that rewrites a file with a counter in it
// (function 12, 13, ...) follows each function with the next one, equal up to the counter's digits;
// the last two copies disagree exactly there, so the guess ends where the model will leave it, and
// the draft rows past it, which cost a verified row each and cannot be accepted, are not spent.
// Replaying SmolLM2's code-edit answer (600 tokens, bench/README.md, issue 18) through the
// controller, depth <= 8, a drafted row at 0.24 of a one-token step: 2.27x -> 2.55x of off. Where
// the two continuations disagree at once, there is no guess (a coin flip between them does not
// pay for its row). A context seen once (a file copied verbatim) is guessed as far as asked.
// Tried and not kept (same replay): the continuation most occurrences take (SuffixDecoding's
// vote) and staying on the last step's source gave the latest occurrence's steps (within 3).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace rapid::engine {

class NgramProposer {
 public:
  explicit NgramProposer(int min_n = 2, int max_n = 8) : min_n_(min_n), max_n_(max_n), tables_(max_n + 1) {}

  // Index tokens[indexed_ .. tokens.size()) (call after the sequence grows or shrinks; a shrink
  // below what was indexed rebuilds).
  void update(const std::vector<int32_t>& tokens);
  // Up to k tokens that followed the longest recent earlier match of the sequence's suffix, cut
  // where the two latest matches' continuations disagree (see above).
  std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int k) const;

 private:
  static uint64_t hash(const int32_t* p, int n);
  int min_n_, max_n_;
  struct Ends {
    int64_t latest, before;  // just after its latest occurrence, and the one before (-1: none)
  };
  // tables_[n]: n-gram hash → where its latest two occurrences end (excluding the suffix).
  std::vector<std::unordered_map<uint64_t, Ends>> tables_;
  int64_t indexed_ = 0;  // n-grams ending before this position are in the tables
};

}  // namespace rapid::engine
