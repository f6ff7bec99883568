#include "engine/token_emitter.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace rapid::engine {

TokenEmitter::TokenEmitter(const tok::Tokenizer& tok, const model::ModelConfig& cfg, const GenerationRequest& req, int64_t capacity)
    : tok_(tok), req_(req), vocab_(cfg.vocab_size), capacity_(capacity), sampler_(req_.sampling),
      detok_(tok, /*skip_special=*/true) {
  if (req_.prompt.empty()) throw Error("generation: the prompt has no tokens");
  if (req_.max_tokens < 0) throw Error("generation: max_tokens must be >= 0");
  const int64_t P = static_cast<int64_t>(req_.prompt.size());
  if (P >= capacity_)
    throw Error("generation: prompt of " + std::to_string(P) + " tokens does not fit the context of " +
                std::to_string(capacity_) + " tokens");
  for (int32_t t : req_.prompt)
    if (t < 0 || t >= vocab_) throw Error("generation: prompt token " + std::to_string(t) + " is outside the vocabulary");
  if (!req_.ignore_eos) {
    stop_ids_ = cfg.eos_token_ids;
    for (int32_t e : tok_.eos_ids()) stop_ids_.push_back(e);
  }
  for (int32_t e : req_.stop_token_ids) stop_ids_.push_back(e);
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());
}

GenerationEvent TokenEmitter::base_event() const {
  GenerationEvent ev;
  ev.prompt_tokens = static_cast<int64_t>(req_.prompt.size());
  ev.cached_tokens = cached_;
  ev.completion_tokens = static_cast<int64_t>(generated_.size());
  return ev;
}

GenerationEvent TokenEmitter::finish(GenerationEvent ev, FinishReason why) {
  finished_ = true;
  reason_ = why;
  ev.finished = true;
  ev.finish_reason = why;
  ev.stop_string = stop_matched_;
  ev.completion_tokens = static_cast<int64_t>(generated_.size());
  return ev;
}

GenerationEvent TokenEmitter::finish_now(FinishReason why, const std::string& error) {
  GenerationEvent ev = base_event();
  if (finished_) return finish(std::move(ev), reason_);
  ev.error = error;
  // A cancelled or failed generation still hands over the text it had released up to now only:
  // what the stop-string hold-back keeps may be the start of a stop string.
  return finish(std::move(ev), why);
}

// Ends the text: releases what the detokenizer and the stop-string hold-back still keep (up to a
// stop string, should the last bytes complete one). Returns true if a stop string was hit.
bool TokenEmitter::drain_text(std::string& text) {
  bool hit = false;
  text += release_text(detok_.flush(), &hit);
  if (!hit) text += held_;
  held_.clear();
  return hit;
}

// Appends decoded text and returns what can be released: everything before a complete stop
// string (then *stop_hit) or before the earliest suffix that could still grow into one.
std::string TokenEmitter::release_text(const std::string& add, bool* stop_hit) {
  held_ += add;
  *stop_hit = false;
  if (req_.stop.empty()) {
    std::string out;
    out.swap(held_);
    return out;
  }
  size_t first = std::string::npos;
  for (const auto& s : req_.stop) {
    if (s.empty()) continue;
    size_t p = held_.find(s);
    if (p != std::string::npos && p < first) {
      first = p;
      stop_matched_ = s;
    }
  }
  if (first != std::string::npos) {
    *stop_hit = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  size_t keep_from = held_.size();
  for (const auto& s : req_.stop) {
    for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); len > 0; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep_from = std::min(keep_from, held_.size() - len);
        break;
      }
    }
  }
  std::string out = held_.substr(0, keep_from);
  held_.erase(0, keep_from);
  return out;
}

void TokenEmitter::prepare_logits(float* logits) const {
  // min_tokens: stop tokens are not allowed yet.
  if (static_cast<int64_t>(generated_.size()) < req_.min_tokens)
    for (int32_t s : stop_ids_)
      if (s >= 0 && s < vocab_) logits[s] = -std::numeric_limits<float>::infinity();
}

GenerationEvent TokenEmitter::emit(float* logits) {
  if (finished_) return finish(base_event(), reason_);
  prepare_logits(logits);
  const std::vector<bool>* mask = req_.constraint ? &req_.constraint->mask() : nullptr;
  return after_sample(sampler_.sample(logits, vocab_, req_.prompt, generated_, mask));
}

GenerationEvent TokenEmitter::emit_with_draft(float* logits, int32_t draft, bool* accepted) {
  *accepted = false;
  if (finished_) return finish(base_event(), reason_);
  prepare_logits(logits);
  const std::vector<bool>* mask = req_.constraint ? &req_.constraint->mask() : nullptr;
  return after_sample(sampler_.sample_draft(logits, vocab_, req_.prompt, generated_, mask, draft, accepted));
}

GenerationEvent TokenEmitter::after_sample(const SampleResult& r) {
  if (req_.constraint) req_.constraint->accept(r.token);
  generated_.push_back(r.token);
  GenerationEvent ev = base_event();
  ev.tokens.push_back(r.token);
  if (req_.sampling.logprobs || req_.sampling.top_logprobs > 0) ev.samples.push_back(r);

  if (std::binary_search(stop_ids_.begin(), stop_ids_.end(), r.token)) {
    drain_text(ev.text);  // the stop token itself is never decoded
    return finish(std::move(ev), FinishReason::Stop);
  }
  bool stop_hit = false;
  ev.text = release_text(detok_.push(r.token), &stop_hit);
  if (stop_hit) return finish(std::move(ev), FinishReason::Stop);
  const int64_t total = static_cast<int64_t>(req_.prompt.size() + generated_.size());
  if (static_cast<int64_t>(generated_.size()) >= req_.max_tokens || total >= capacity_) {
    bool hit = drain_text(ev.text);
    return finish(std::move(ev), hit ? FinishReason::Stop : FinishReason::Length);
  }
  return ev;
}

}  // namespace rapid::engine
