#include "engine/mtp_proposer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "common/log.h"
#include "model/paged_kv.h"

namespace rapid::engine {

struct MtpProposer::Job {
  DraftJob* w;
  Seq* s;
  std::vector<int32_t> toks;  // the next head forward's tokens ...
  std::vector<float> hid;     // ... and hidden rows
  std::vector<float> logits, hout;
};

MtpProposer::MtpProposer(model::Model& target, int32_t block_size, uint64_t pool_bytes, SpeculationController& spec)
    : model_(target),
      hidden_size_(target.config().hidden_size),
      vocab_(target.config().vocab_size),
      layers_(target.mtp_layers()),
      pool_(std::make_shared<cache::BlockPool>(target.mtp_block_shape(block_size), pool_bytes)),
      spec_(spec) {}

// The catch-up input: row i pairs the target's hidden row at Lm + i with token Lm + i + 1.
bool MtpProposer::start(DraftJob& w, Job& j) {
  Seq& s = seqs_[w.seq];
  if (!s.kv) s.kv = model_.new_mtp_state(pool_, w.capacity);
  const int64_t H = hidden_size_, L = w.computed, Lm = s.kv->length();
  if (Lm >= L) return false;
  j.w = &w;
  j.s = &s;
  j.toks.assign(w.tokens->begin() + Lm + 1, w.tokens->begin() + L + 1);
  j.hid.assign(size_t((L - Lm) * H), 0.0f);
  for (int64_t i = std::max(Lm, s.hidden_pos); i < L; ++i) {
    const int64_t r = i - s.hidden_pos;
    if (size_t((r + 1) * H) > s.hidden.size()) break;
    std::copy_n(s.hidden.begin() + r * H, H, j.hid.begin() + (i - Lm) * H);
  }
  j.logits.resize(size_t(vocab_));
  j.hout.resize(size_t(H));
  return true;
}

void MtpProposer::propose(std::vector<DraftJob>& drafts) {
  std::vector<Job> jobs;
  for (DraftJob& w : drafts) {
    if (w.k <= 0) continue;
    Job j;
    if (start(w, j)) jobs.push_back(std::move(j));
  }
  const auto t0 = std::chrono::steady_clock::now();
  int step = 0;
  while (!jobs.empty() && forward_round(jobs, step)) ++step;
  if (step > 0)  // each guess is one head forward: the depth rule charges it per draft
    spec_.observe_draft_step(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / step);
  for (Job& j : jobs) {
    j.s->hidden.clear();  // consumed (the heads saw every position up to the target's)
    j.s->hidden_pos = j.w->computed;
  }
}

// One batched head forward for every sequence still short of its guesses; false when none ran.
bool MtpProposer::forward_round(std::vector<Job>& jobs, int step) {
  std::vector<model::MtpEntry> es;
  std::vector<Job*> in;
  int64_t need = 0;
  for (Job& j : jobs) {
    if (int(j.w->draft.size()) >= j.w->k || j.toks.empty()) continue;
    const int64_t b = static_cast<model::PagedKvState*>(j.s->kv.get())->blocks_needed(int64_t(j.toks.size()));
    if (need + b > int64_t(pool_->free_count())) {
      j.s->kv.reset();  // no room: no drafts for it this step
      j.toks.clear();
      continue;
    }
    need += b;
    es.push_back(model::MtpEntry{j.toks.data(), j.hid.data(), int64_t(j.toks.size()), j.s->kv.get(), j.logits.data(),
                          j.hout.data(), step % layers_});
    in.push_back(&j);
  }
  if (es.empty()) return false;
  try {
    model_.forward_mtp(es.data(), es.size());
  } catch (const std::exception& e) {
    log::warn(std::string("MTP forward failed; no drafts this step: ") + e.what());
    for (Job& j : jobs) {
      j.w->draft.clear();
      j.s->kv.reset();
    }
    return false;
  }
  for (Job* j : in) {
    const int32_t tok = int32_t(std::max_element(j->logits.begin(), j->logits.end()) - j->logits.begin());
    j->w->draft.push_back(tok);
    j->toks.assign(1, tok);
    j->hid = j->hout;
  }
  return true;
}

// Appends the target's rows for positions [p0, p0 + rows) to what the heads still have to see
// (a gap — a prefix-cache hit, a preemption — restarts the buffer).
void MtpProposer::keep_hidden(Seq& s, int64_t p0, int64_t rows, const float* hidden) const {
  const size_t H = size_t(hidden_size_);
  if (rows <= 0) return;
  if (s.hidden.empty() || s.hidden_pos + int64_t(s.hidden.size() / H) != p0) {
    s.hidden.clear();
    s.hidden_pos = p0;
  }
  s.hidden.insert(s.hidden.end(), hidden, hidden + size_t(rows) * H);
}

void MtpProposer::advance(uint64_t seq, int64_t p0, int64_t rows, const float* hidden, bool sampled) {
  Seq& s = seqs_[seq];
  // Head positions from p0 on were fed the heads' own guesses: recompute them from the target's
  // hidden rows of the accepted positions.
  if (sampled && s.kv) s.kv->truncate(std::min(s.kv->length(), p0));
  keep_hidden(s, p0, rows, hidden);
}

}  // namespace rapid::engine
