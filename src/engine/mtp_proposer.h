// The target's own multi-token-prediction heads as a DraftProposer (Qwen3-Next / Qwen3.5 `mtp.*`
// weights). A head pairs the target's final hidden row at position i with token i+1 and predicts
// token i+2. Each step the heads first catch up on the positions they have not seen (rows the
// target produced since; positions without a known row, e.g. a cached prefix, get zeros: drafts
// are only guesses), which yields the first guess; each further guess feeds a head its own output
// and the previous guess. All sequences step together; the heads' KV has its own pool.
#pragma once
#include <memory>
#include <unordered_map>

#include "cache/block_pool.h"
#include "engine/draft_proposer.h"
#include "engine/speculation.h"
#include "model/model.h"

namespace rapid::engine {

class MtpProposer : public DraftProposer {
 public:
  MtpProposer(model::Model& target, int32_t block_size, uint64_t pool_bytes, SpeculationController& spec);
  void propose(std::vector<DraftJob>& jobs) override;
  bool wants_hidden() const override { return true; }
  void advance(uint64_t seq, int64_t p0, int64_t rows, const float* hidden, bool sampled) override;
  void forget(uint64_t seq) override { seqs_.erase(seq); }

 private:
  struct Seq {
    std::unique_ptr<model::SequenceState> kv;  // the heads' KV
    std::vector<float> hidden;          // target rows the heads have not seen yet,
    int64_t hidden_pos = 0;             //   for positions hidden_pos, +1, ...
  };
  struct Job;
  bool start(DraftJob& j, Job& job);
  bool forward_round(std::vector<Job>& jobs, int step);
  void keep_hidden(Seq& s, int64_t p0, int64_t rows, const float* hidden) const;

  model::Model& model_;
  int64_t hidden_size_, vocab_;
  int layers_;
  std::shared_ptr<cache::BlockPool> pool_;
  std::unordered_map<uint64_t, Seq> seqs_;
  SpeculationController& spec_;  // learns a head forward's cost (what a draft costs: --speculative auto)
};

}  // namespace rapid::engine
