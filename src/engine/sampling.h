// Token sampling: one function from logits to a token, with every knob the APIs expose.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

namespace rapid::engine {

struct SamplingParams {
  double temperature = 1.0;  // 0 → greedy
  double top_p = 1.0;
  int top_k = 0;             // 0 → off
  double min_p = 0.0;
  double repetition_penalty = 1.0;  // HF-style, applied to tokens seen in prompt + output
  double presence_penalty = 0.0;    // OpenAI-style, over generated tokens
  double frequency_penalty = 0.0;
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;
  int top_logprobs = 0;  // how many alternatives to report (0 = none); logprobs of the chosen too
  bool logprobs = false;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;                // of the chosen token, under the unmodified distribution
  std::vector<TokenLogprob> top;       // top_logprobs alternatives, best first
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // `logits` is modified in place (penalties, bias). `prompt` and `generated` feed the penalties.
  // `mask` (optional, vocab-sized, true = allowed) comes from constrained decoding.
  SampleResult sample(float* logits, int64_t vocab, const std::vector<int32_t>& prompt,
                      const std::vector<int32_t>& generated, const std::vector<bool>* mask = nullptr);
  // Speculative verification of a drafted token (drafts are deterministic guesses, q = one-hot):
  // greedy → argmax; otherwise draft d is kept with probability p(d) and else a token is drawn
  // from p with d removed (renormalised) — so the token is distributed exactly as sample() draws
  // (Leviathan et al. 2023 with a point-mass proposal). `*accepted`: the result is the draft.
  SampleResult sample_draft(float* logits, int64_t vocab, const std::vector<int32_t>& prompt,
                            const std::vector<int32_t>& generated, const std::vector<bool>* mask,
                            int32_t draft, bool* accepted);
  const SamplingParams& params() const { return p_; }

 private:
  SampleResult run(float* logits, int64_t vocab, const std::vector<int32_t>& prompt,
                   const std::vector<int32_t>& generated, const std::vector<bool>* mask, int32_t draft,
                   bool* accepted);
  SamplingParams p_;
  std::mt19937_64 rng_;
};

}  // namespace rapid::engine
