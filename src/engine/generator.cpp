#include "engine/generator.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace rapid {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(Model& model, const Tokenizer& tok, GenerationRequest req, GeneratorOptions opts)
    : model_(model), tok_(tok), req_(std::move(req)), opts_(opts), sampler_(req_.sampling),
      detok_(tok, /*skip_special=*/true) {
  if (req_.prompt.empty()) throw Error("generation: the prompt has no tokens");
  if (req_.max_tokens < 0) throw Error("generation: max_tokens must be >= 0");
  const ModelConfig& c = model_.config();
  const int64_t P = static_cast<int64_t>(req_.prompt.size());
  int64_t ctx = c.max_position_embeddings > 0 ? c.max_position_embeddings : P + req_.max_tokens;
  if (P >= ctx)
    throw Error("generation: prompt of " + std::to_string(P) + " tokens does not fit the context of " +
                std::to_string(ctx) + " tokens");
  for (int32_t t : req_.prompt)
    if (t < 0 || t >= c.vocab_size) throw Error("generation: prompt token " + std::to_string(t) + " is outside the vocabulary");
  capacity_ = std::min(ctx, P + std::max<int64_t>(req_.max_tokens, 1));
  state_ = model_.new_state(capacity_);
  if (!req_.ignore_eos) {
    stop_ids_ = c.eos_token_ids;
    for (int32_t e : tok_.eos_ids()) stop_ids_.push_back(e);
  }
  for (int32_t e : req_.stop_token_ids) stop_ids_.push_back(e);
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());
  logits_.resize(static_cast<size_t>(c.vocab_size));
  opts_.prefill_chunk = std::max<int64_t>(1, opts_.prefill_chunk);
}

GenerationEvent Generator::base_event() const {
  GenerationEvent ev;
  ev.prompt_tokens = static_cast<int64_t>(req_.prompt.size());
  ev.completion_tokens = static_cast<int64_t>(generated_.size());
  return ev;
}

GenerationEvent Generator::finish(GenerationEvent ev, FinishReason why) {
  finished_ = true;
  reason_ = why;
  ev.finished = true;
  ev.finish_reason = why;
  ev.stop_string = stop_matched_;
  ev.completion_tokens = static_cast<int64_t>(generated_.size());
  return ev;
}

// Ends the text: releases what the detokenizer and the stop-string hold-back still keep (up to a
// stop string, should the last bytes complete one). Returns true if a stop string was hit.
bool Generator::drain_text(std::string& text) {
  bool hit = false;
  text += release_text(detok_.flush(), &hit);
  if (!hit) text += held_;
  held_.clear();
  return hit;
}

// Appends decoded text and returns what can be released: everything before a complete stop
// string (then *stop_hit) or before the earliest suffix that could still grow into one.
std::string Generator::release_text(const std::string& add, bool* stop_hit) {
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

GenerationEvent Generator::cancel() {
  if (finished_) return finish(base_event(), reason_);
  return finish(base_event(), FinishReason::Cancelled);
}

GenerationEvent Generator::step() {
  if (finished_) {
    GenerationEvent ev = base_event();
    ev.finished = true;
    ev.finish_reason = reason_;
    return ev;
  }
  try {
    const int64_t P = static_cast<int64_t>(req_.prompt.size());
    if (prefilled_ < P) {
      auto t0 = std::chrono::steady_clock::now();
      int64_t n = std::min(opts_.prefill_chunk, P - prefilled_);
      model_.forward(req_.prompt.data() + prefilled_, n, *state_, logits_.data());
      prefilled_ += n;
      prefill_s_ += since(t0);
      if (prefilled_ < P) return base_event();
      if (req_.max_tokens == 0) return finish(base_event(), FinishReason::Length);
      return sample_and_emit();
    }
    auto t0 = std::chrono::steady_clock::now();
    int32_t last = generated_.back();
    model_.forward(&last, 1, *state_, logits_.data());
    decode_s_ += since(t0);
    ++decode_steps_;
    return sample_and_emit();
  } catch (const std::exception& e) {
    GenerationEvent ev = base_event();
    ev.error = e.what();
    return finish(std::move(ev), FinishReason::Error);
  }
}

GenerationEvent Generator::sample_and_emit() {
  const int64_t V = static_cast<int64_t>(logits_.size());
  // min_tokens: stop tokens are not allowed yet.
  if (static_cast<int64_t>(generated_.size()) < req_.min_tokens)
    for (int32_t s : stop_ids_)
      if (s >= 0 && s < V) logits_[s] = -std::numeric_limits<float>::infinity();
  const std::vector<bool>* mask = req_.constraint ? &req_.constraint->mask() : nullptr;
  SampleResult r = sampler_.sample(logits_.data(), V, req_.prompt, generated_, mask);
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

}  // namespace rapid
