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
}

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
  SampleResult res;
  if (accepted) *accepted = false;

  // Log-softmax of the raw logits, for logprobs (computed before any modification).
  float raw_max = kNegInf;
  double raw_lse = 0;
  std::vector<TokenLogprob> raw_top;
  const bool want_lp = p_.logprobs || p_.top_logprobs > 0;
  if (want_lp) {
    for (int64_t i = 0; i < vocab; ++i) raw_max = std::max(raw_max, logits[i]);
    double s = 0;
    for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(logits[i]) - raw_max);
    raw_lse = raw_max + std::log(s);
    if (p_.top_logprobs > 0) {
      int64_t k = std::min<int64_t>(p_.top_logprobs, vocab);
      std::vector<int32_t> idx(vocab);
      std::iota(idx.begin(), idx.end(), 0);
      auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
      for (int64_t i = 0; i < k; ++i)
        raw_top.push_back({idx[i], static_cast<float>(logits[idx[i]] - raw_lse)});
    }
  }
  std::vector<float> raw_copy;
  if (want_lp) raw_copy.assign(logits, logits + vocab);

  if (mask)
    for (int64_t i = 0; i < vocab; ++i)
      if (!(*mask)[i]) logits[i] = kNegInf;
  for (auto& [tok, b] : p_.logit_bias)
    if (tok >= 0 && tok < vocab) logits[tok] += b;
  if (p_.repetition_penalty != 1.0 && p_.repetition_penalty > 0) {
    const float pen = static_cast<float>(p_.repetition_penalty);
    std::vector<bool> seen(vocab, false);
    auto apply = [&](int32_t t) {
      if (t < 0 || t >= vocab || seen[t]) return;
      seen[t] = true;
      logits[t] = logits[t] < 0 ? logits[t] * pen : logits[t] / pen;
    };
    for (int32_t t : prompt) apply(t);
    for (int32_t t : generated) apply(t);
  }
  if (p_.presence_penalty != 0 || p_.frequency_penalty != 0) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : generated)
      if (t >= 0 && t < vocab) ++counts[t];
    for (auto& [t, c] : counts)
      logits[t] -= static_cast<float>(p_.presence_penalty + p_.frequency_penalty * c);
  }

  int32_t chosen = -1;
  if (p_.temperature <= 0) {
    chosen = static_cast<int32_t>(compute::kernels().argmax_f32(logits, vocab));
  } else {
    const float inv_t = static_cast<float>(1.0 / p_.temperature);
    for (int64_t i = 0; i < vocab; ++i) logits[i] *= inv_t;
    // Candidates sorted by score; everything else is set to -inf as we go.
    // Tokens more than 40 below the best have relative probability < e^-40: they cannot change
    // the draw, top-p mass or a min-p cut, so only the rest is sorted (vocabularies of 150k
    // would otherwise cost milliseconds per token). Their scores stay as they are.
    const float mx = logits[compute::kernels().argmax_f32(logits, vocab)];
    const float floor = mx - 40.0f;
    std::vector<int32_t> cand;
    for (int64_t i = 0; i < vocab; ++i)
      if (logits[i] != kNegInf && logits[i] >= floor) cand.push_back(static_cast<int32_t>(i));
    // Any top-k/top-p/min-p filter would remove them (as transformers does): mark them so.
    const bool filtering = p_.top_k > 0 || (p_.top_p < 1.0 && p_.top_p > 0) || p_.min_p > 0;
    if (filtering)
      for (int64_t i = 0; i < vocab; ++i)
        if (logits[i] < floor) logits[i] = kNegInf;
    if (cand.empty()) throw Error("sampler: every token is masked out");
    auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    auto drop_from = [&](size_t keep) {
      for (size_t i = keep; i < cand.size(); ++i) logits[cand[i]] = kNegInf;
      cand.resize(keep);
    };
    if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < cand.size()) {
      std::nth_element(cand.begin(), cand.begin() + (p_.top_k - 1), cand.end(), better);
      const float kth = logits[cand[p_.top_k - 1]];
      // As transformers: keep every token scoring >= the k-th score (ties included).
      std::vector<int32_t> kept;
      for (int32_t c : cand) {
        if (logits[c] >= kth) kept.push_back(c);
        else logits[c] = kNegInf;
      }
      cand.swap(kept);
    }
    std::sort(cand.begin(), cand.end(), better);
    auto probs_of = [&](std::vector<double>& pr) {
      pr.resize(cand.size());
      double mx = logits[cand[0]], s = 0;
      for (size_t i = 0; i < cand.size(); ++i) s += pr[i] = std::exp(static_cast<double>(logits[cand[i]]) - mx);
      for (auto& v : pr) v /= s;
    };
    std::vector<double> pr;
    if (p_.top_p < 1.0 && p_.top_p > 0) {
      // transformers: drop tokens whose ascending cumulative probability is <= 1 - top_p.
      probs_of(pr);
      double asc = 0;
      size_t keep = cand.size();
      for (size_t i = cand.size(); i-- > 1;) {
        asc += pr[i];
        if (asc <= 1.0 - p_.top_p) keep = i;
        else break;
      }
      drop_from(keep);
    }
    if (p_.min_p > 0) {
      probs_of(pr);
      const double thr = p_.min_p * pr[0];
      size_t keep = cand.size();
      for (size_t i = 1; i < cand.size(); ++i)
        if (pr[i] < thr) { keep = i; break; }
      drop_from(keep);
    }
    probs_of(pr);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (accepted) {
      auto it = std::find(cand.begin(), cand.end(), draft);
      double pd = it == cand.end() ? 0.0 : pr[size_t(it - cand.begin())];
      if (pd > 0 && u(rng_) < pd) {
        chosen = draft;
        *accepted = true;
      } else if (pd > 0) {
        // Rejected: draw from p without the draft. Only reachable when pd < 1, so mass remains.
        pr[size_t(it - cand.begin())] = 0.0;
        for (auto& v : pr) v /= (1.0 - pd);
      }
    }
    if (chosen < 0) {
      double r = u(rng_), acc = 0;
      for (size_t i = 0; i < cand.size(); ++i) {
        if (pr[i] == 0.0) continue;  // underflow, or the rejected draft
        chosen = cand[i];            // rounding fallback: the last token with mass
        acc += pr[i];
        if (r < acc) break;
      }
    }
  }
  if (accepted && p_.temperature <= 0) *accepted = chosen == draft;
  if (chosen < 0 || logits[chosen] == kNegInf) throw Error("sampler: every token is masked out");

  res.token = chosen;
  if (want_lp) {
    res.logprob = static_cast<float>(raw_copy[chosen] - raw_lse);
    res.top = std::move(raw_top);
  }
  return res;
}

}  // namespace rapid::engine
