// Sampling pipeline, in the order transformers applies it: mask → logit_bias → repetition penalty
// (HF) → presence/frequency penalties (OpenAI) → [greedy] or temperature → top-k → top-p → min-p
// → draw. After sample(), `logits` holds the final processed scores (-inf = filtered out). Tokens
// more than 40 below the best after temperature are never drawn (relative mass < e^-40 each).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "common/error.h"
#include "compute/kernels.h"
#include "engine/sampling.h"

namespace rapid::engine {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Higher score first; equal scores by lower id, so every ordering here is deterministic.
auto by_score(const float* logits) {
  return [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
}

// The raw logits' log-softmax, for logprobs: taken before any modification.
struct RawLogprobs {
  double lse = 0;
  std::vector<TokenLogprob> top;
  std::vector<float> copy;
};

RawLogprobs raw_logprobs(const float* logits, int64_t vocab, int top_n) {
  RawLogprobs r;
  float mx = kNegInf;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(logits[i]) - mx);
  r.lse = mx + std::log(s);
  if (top_n > 0) {
    const int64_t k = std::min<int64_t>(top_n, vocab);
    std::vector<int32_t> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), by_score(logits));
    for (int64_t i = 0; i < k; ++i) r.top.push_back({idx[i], static_cast<float>(logits[idx[i]] - r.lse)});
  }
  r.copy.assign(logits, logits + vocab);
  return r;
}

// mask → logit_bias → repetition penalty (HF) → presence/frequency penalties (OpenAI).
void adjust_logits(float* logits, int64_t vocab, const SamplingParams& p, const std::vector<bool>* mask,
                   const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated) {
  if (mask)
    for (int64_t i = 0; i < vocab; ++i)
      if (!(*mask)[i]) logits[i] = kNegInf;
  for (auto& [tok, b] : p.logit_bias)
    if (tok >= 0 && tok < vocab) logits[tok] += b;
  if (p.repetition_penalty != 1.0 && p.repetition_penalty > 0) {
    const float pen = static_cast<float>(p.repetition_penalty);
    std::vector<bool> seen(vocab, false);
    auto apply = [&](int32_t t) {
      if (t < 0 || t >= vocab || seen[t]) return;
      seen[t] = true;
      logits[t] = logits[t] < 0 ? logits[t] * pen : logits[t] / pen;
    };
    for (int32_t t : prompt) apply(t);
    for (int32_t t : generated) apply(t);
  }
  if (p.presence_penalty != 0 || p.frequency_penalty != 0) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : generated)
      if (t >= 0 && t < vocab) ++counts[t];
    for (auto& [t, c] : counts) logits[t] -= static_cast<float>(p.presence_penalty + p.frequency_penalty * c);
  }
}

// What survives temperature → top-k → top-p → min-p: ids best first, their probabilities. Filtered
// tokens are set to -inf in `logits` as transformers does.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> probs;
};

void softmax_of(const float* logits, Candidates& c) {
  c.probs.resize(c.ids.size());
  double mx = logits[c.ids[0]], s = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) s += c.probs[i] = std::exp(static_cast<double>(logits[c.ids[i]]) - mx);
  for (auto& v : c.probs) v /= s;
}

void keep_first(float* logits, Candidates& c, size_t keep) {
  for (size_t i = keep; i < c.ids.size(); ++i) logits[c.ids[i]] = kNegInf;
  c.ids.resize(keep);
}

// As transformers: keep every token scoring >= the k-th score (ties included).
void top_k_filter(float* logits, std::vector<int32_t>& cand, int top_k) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= cand.size()) return;
  std::nth_element(cand.begin(), cand.begin() + (top_k - 1), cand.end(), by_score(logits));
  const float kth = logits[cand[top_k - 1]];
  std::vector<int32_t> kept;
  for (int32_t c : cand) {
    if (logits[c] >= kth) kept.push_back(c);
    else logits[c] = kNegInf;
  }
  cand.swap(kept);
}

Candidates filtered_candidates(float* logits, int64_t vocab, const SamplingParams& p) {
  const float inv_t = static_cast<float>(1.0 / p.temperature);
  for (int64_t i = 0; i < vocab; ++i) logits[i] *= inv_t;
  // Tokens more than 40 below the best have relative probability < e^-40: they cannot change
  // the draw, top-p mass or a min-p cut, so only the rest is sorted (vocabularies of 150k
  // would otherwise cost milliseconds per token). Their scores stay as they are...
  const float floor = logits[compute::kernels().argmax_f32(logits, vocab)] - 40.0f;
  Candidates c;
  for (int64_t i = 0; i < vocab; ++i)
    if (logits[i] != kNegInf && logits[i] >= floor) c.ids.push_back(static_cast<int32_t>(i));
  // ...unless a top-k/top-p/min-p filter runs, which would remove them (as transformers does).
  const bool top_p = p.top_p < 1.0 && p.top_p > 0;
  if (p.top_k > 0 || top_p || p.min_p > 0)
    for (int64_t i = 0; i < vocab; ++i)
      if (logits[i] < floor) logits[i] = kNegInf;
  if (c.ids.empty()) throw Error("sampler: every token is masked out");
  top_k_filter(logits, c.ids, p.top_k);
  std::sort(c.ids.begin(), c.ids.end(), by_score(logits));
  if (top_p) {
    // transformers: drop tokens whose ascending cumulative probability is <= 1 - top_p.
    softmax_of(logits, c);
    double asc = 0;
    size_t keep = c.ids.size();
    for (size_t i = c.ids.size(); i-- > 1;) {
      asc += c.probs[i];
      if (asc <= 1.0 - p.top_p) keep = i;
      else break;
    }
    keep_first(logits, c, keep);
  }
  if (p.min_p > 0) {
    softmax_of(logits, c);
    const double thr = p.min_p * c.probs[0];
    size_t keep = c.ids.size();
    for (size_t i = 1; i < c.ids.size(); ++i)
      if (c.probs[i] < thr) {
        keep = i;
        break;
      }
    keep_first(logits, c, keep);
  }
  softmax_of(logits, c);
  return c;
}

// A draw from the candidates. With a draft (accepted != nullptr), speculative sampling: accept the
// draft with its probability, else draw from the rest renormalised, so the output is distributed
// exactly as a plain draw.
int32_t draw(Candidates c, std::mt19937_64& rng, int32_t draft, bool* accepted) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (accepted) {
    auto it = std::find(c.ids.begin(), c.ids.end(), draft);
    const double pd = it == c.ids.end() ? 0.0 : c.probs[size_t(it - c.ids.begin())];
    if (pd > 0 && u(rng) < pd) {
      *accepted = true;
      return draft;
    }
    if (pd > 0) {
      // Rejected: draw from p without the draft. Only reachable when pd < 1, so mass remains.
      c.probs[size_t(it - c.ids.begin())] = 0.0;
      for (auto& v : c.probs) v /= (1.0 - pd);
    }
  }
  int32_t chosen = -1;
  double r = u(rng), acc = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (c.probs[i] == 0.0) continue;  // underflow, or the rejected draft
    chosen = c.ids[i];                // rounding fallback: the last token with mass
    acc += c.probs[i];
    if (r < acc) break;
  }
  return chosen;
}
}  // namespace

Sampler::Sampler(const SamplingParams& p) : p_(p) {
  if (p.seed) rng_.seed(*p.seed);
  else rng_.seed(std::random_device{}());
}

SampleResult Sampler::sample(float* logits, int64_t vocab, const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& generated, const std::vector<bool>* mask) {
  return run(logits, vocab, prompt, generated, mask, -1, nullptr);
}

SampleResult Sampler::sample_draft(float* logits, int64_t vocab, const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& generated, const std::vector<bool>* mask,
                                   int32_t draft, bool* accepted) {
  return run(logits, vocab, prompt, generated, mask, draft, accepted);
}

SampleResult Sampler::run(float* logits, int64_t vocab, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& generated, const std::vector<bool>* mask, int32_t draft,
                          bool* accepted) {
  if (vocab <= 0) throw Error("sampler: empty vocabulary");
  if (mask && static_cast<int64_t>(mask->size()) < vocab)
    throw Error("sampler: constraint mask smaller than the vocabulary");
  if (accepted) *accepted = false;
  const bool want_lp = p_.logprobs || p_.top_logprobs > 0;
  RawLogprobs raw;
  if (want_lp) raw = raw_logprobs(logits, vocab, p_.top_logprobs);

  adjust_logits(logits, vocab, p_, mask, prompt, generated);
  int32_t chosen = -1;
  if (p_.temperature <= 0) {
    chosen = static_cast<int32_t>(compute::kernels().argmax_f32(logits, vocab));
    if (accepted) *accepted = chosen == draft;
  } else {
    chosen = draw(filtered_candidates(logits, vocab, p_), rng_, draft, accepted);
  }
  if (chosen < 0 || logits[chosen] == kNegInf) throw Error("sampler: every token is masked out");

  SampleResult res;
  res.token = chosen;
  if (want_lp) {
    res.logprob = static_cast<float>(raw.copy[chosen] - raw.lse);
    res.top = std::move(raw.top);
  }
  return res;
}

}  // namespace rapid::engine
