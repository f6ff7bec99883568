// Prompt lookup as a DraftProposer: one NgramProposer index per sequence, guessing while the step
// is planned (it is cheap), so the step budget and the KV reservation count only real guesses.
#pragma once
#include <unordered_map>

#include "engine/draft_proposer.h"
#include "engine/ngram_proposer.h"

namespace rapid::engine {

class PromptLookupProposer : public DraftProposer {
 public:
  int offer(uint64_t seq, const std::vector<int32_t>& tokens, int k) override;
  std::vector<int32_t> free_guess(uint64_t seq, const std::vector<int32_t>& tokens, int k) override;
  void propose(std::vector<DraftJob>& jobs) override;  // hands out the guesses offer() made
  void advance(uint64_t, int64_t, int64_t, const float*, bool) override {}
  void forget(uint64_t seq) override;

 private:
  struct Seq {
    NgramProposer index;
    std::vector<int32_t> guess;  // made by offer() for this step
  };
  std::unordered_map<uint64_t, Seq> seqs_;
};

}  // namespace rapid::engine
