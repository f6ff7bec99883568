// A smaller draft model with the target's vocabulary as a DraftProposer (--draft-model). Each
// step it first catches up on every drafting sequence's tokens it has not seen (the prompt on
// the first draft, the accepted tokens since), then extends all of them greedily, one token per
// batched forward. Its own KV pool has no prefix cache: drafts are cheap to recompute, and a
// sequence that pool cannot hold goes without drafts for the step.
#pragma once
#include <memory>
#include <unordered_map>

#include "cache/block_pool.h"
#include "engine/draft_proposer.h"
#include "engine/speculation.h"
#include "model/model.h"
#include "model/paged_kv.h"

namespace rapid::engine {

class DraftModelProposer : public DraftProposer {
 public:
  // Throws Error when the draft model's vocabulary differs from the target's.
  DraftModelProposer(std::shared_ptr<model::Model> draft, int64_t vocab, int32_t block_size, uint64_t pool_bytes,
                     SpeculationController& spec);
  void propose(std::vector<DraftJob>& jobs) override;
  void advance(uint64_t seq, int64_t p0, int64_t rows, const float* hidden, bool sampled) override;
  void forget(uint64_t seq) override { kv_.erase(seq); }

 private:
  model::PagedKvState& state(const DraftJob& j);
  bool forward_round(std::vector<DraftJob*>& jobs, std::vector<std::vector<int32_t>>& inputs,
                     std::vector<std::vector<float>>& logits);

  std::shared_ptr<model::Model> model_;
  int64_t vocab_;
  std::shared_ptr<cache::BlockPool> pool_;
  SpeculationController& spec_;  // learns the draft forward's cost
  std::unordered_map<uint64_t, std::unique_ptr<model::PagedKvState>> kv_;
};

}  // namespace rapid::engine
