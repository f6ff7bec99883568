#include "engine/prompt_lookup_proposer.h"

#include <algorithm>

namespace rapid::engine {

int PromptLookupProposer::offer(uint64_t seq, const std::vector<int32_t>& tokens, int k) {
  Seq& s = seqs_[seq];
  s.index.update(tokens);
  s.guess = s.index.propose(tokens, k);
  return int(s.guess.size());
}

std::vector<int32_t> PromptLookupProposer::free_guess(uint64_t seq, const std::vector<int32_t>& tokens, int k) {
  Seq& s = seqs_[seq];
  s.index.update(tokens);
  return s.index.propose(tokens, k);
}

void PromptLookupProposer::propose(std::vector<DraftJob>& jobs) {
  for (DraftJob& j : jobs) {
    auto it = seqs_.find(j.seq);
    if (it == seqs_.end()) continue;
    std::vector<int32_t>& g = it->second.guess;
    // The plan may have taken fewer than offered (no KV for the drafts: none).
    j.draft.assign(g.begin(), g.begin() + std::min<size_t>(size_t(std::max(j.k, 0)), g.size()));
    g.clear();
  }
}

void PromptLookupProposer::forget(uint64_t seq) { seqs_.erase(seq); }

}  // namespace rapid::engine
