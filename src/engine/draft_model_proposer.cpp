#include "engine/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "common/error.h"
#include "common/log.h"

namespace rapid::engine {

DraftModelProposer::DraftModelProposer(std::shared_ptr<model::Model> draft, int64_t vocab, int32_t block_size,
                                       uint64_t pool_bytes, SpeculationController& spec)
    : model_(std::move(draft)), vocab_(vocab), spec_(spec) {
  if (model_->config().vocab_size != vocab_)
    throw Error("the draft model's vocabulary (" + std::to_string(model_->config().vocab_size) +
                ") differs from the model's (" + std::to_string(vocab_) + ")");
  pool_ = std::make_shared<cache::BlockPool>(model_->kv_block_shape(block_size), pool_bytes);
}

model::PagedKvState& DraftModelProposer::state(const DraftJob& j) {
  auto& kv = kv_[j.seq];
  if (!kv) kv.reset(static_cast<model::PagedKvState*>(model_->new_paged_state(pool_, j.capacity).release()));
  return *kv;
}

void DraftModelProposer::propose(std::vector<DraftJob>& jobs) {
  std::vector<DraftJob*> ws;
  for (DraftJob& j : jobs)
    if (j.k > 0) ws.push_back(&j);
  if (ws.empty()) return;
  std::vector<std::vector<int32_t>> inputs(ws.size());
  std::vector<std::vector<float>> logits(ws.size(), std::vector<float>(size_t(vocab_)));
  for (size_t i = 0; i < ws.size(); ++i) inputs[i].assign(ws[i]->tokens->begin() + state(*ws[i]).length(), ws[i]->tokens->end());
  auto t0 = std::chrono::steady_clock::now();
  int forwards = 0;
  while (forward_round(ws, inputs, logits)) ++forwards;
  // The last draft was never fed to the draft model: it is caught up next step if accepted.
  if (forwards > 0)
    spec_.observe_draft_step(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / forwards);
}

// One batched forward: every sequence still short of its k guesses takes its pending input and
// gains a guess. False when nothing ran (all done, no room, or the forward failed).
bool DraftModelProposer::forward_round(std::vector<DraftJob*>& ws, std::vector<std::vector<int32_t>>& inputs,
                                       std::vector<std::vector<float>>& logits) {
  std::vector<model::BatchEntry> es;
  std::vector<size_t> idx;
  int64_t need = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    DraftJob& j = *ws[i];
    if (int(j.draft.size()) >= j.k || inputs[i].empty()) continue;
    model::PagedKvState& kv = *kv_[j.seq];
    const int64_t b = kv.blocks_needed(int64_t(inputs[i].size()));
    if (need + b > int64_t(pool_->free_count())) {
      kv.release();  // no room: no drafts for it this step, catch up later
      inputs[i].clear();
      continue;
    }
    need += b;
    es.push_back(model::BatchEntry{inputs[i].data(), int64_t(inputs[i].size()), &kv, logits[i].data(), false});
    idx.push_back(i);
  }
  if (es.empty()) return false;
  try {
    model_->forward_batch(es.data(), es.size());
  } catch (const std::exception& e) {
    log::warn(std::string("draft model forward failed; no drafts this step: ") + e.what());
    for (DraftJob* j : ws) {
      j->draft.clear();
      kv_[j->seq]->release();
    }
    return false;
  }
  for (size_t i : idx) {
    const float* l = logits[i].data();
    const int32_t tok = int32_t(std::max_element(l, l + vocab_) - l);
    ws[i]->draft.push_back(tok);
    inputs[i].assign(1, tok);
  }
  return true;
}

// Its KV is rolled back with the target's: positions past what the target kept were guesses.
void DraftModelProposer::advance(uint64_t seq, int64_t p0, int64_t rows, const float*, bool sampled) {
  auto it = kv_.find(seq);
  if (!sampled || it == kv_.end()) return;
  it->second->truncate(std::min(it->second->length(), p0 + rows));
}

}  // namespace rapid::engine
