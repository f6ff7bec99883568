// Speculative decoding parts that need no model: the prompt-lookup proposer, the depth rule, and
// the draft-verifying sampler, whose tokens must follow exactly the plain sampler's
// distribution (chi-square against the softmax computed here independently).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "engine/ngram_proposer.h"
#include "engine/sampling.h"
#include "engine/speculation.h"

using namespace rapid;

TEST(NgramProposer, ProposesWhatFollowedTheLatestMatch) {
  NgramProposer p(2, 4);
  std::vector<int32_t> t = {5, 6, 7, 8, 9, 1, 2, 6, 7, 8, 3, 4, 0, 6, 7, 8};
  p.update(t);
  // Suffix "6 7 8": latest earlier occurrence is at 7..9, followed by 3 4 0 6 ...
  EXPECT_EQ(p.propose(t, 3), (std::vector<int32_t>{3, 4, 0}));
  EXPECT_EQ(p.propose(t, 10), (std::vector<int32_t>{3, 4, 0, 6, 7, 8}));
  t.push_back(3);  // suffix "7 8 3"
  p.update(t);
  EXPECT_EQ(p.propose(t, 2), (std::vector<int32_t>{4, 0}));
  t.push_back(42);  // nothing like "3 42" before
  p.update(t);
  EXPECT_TRUE(p.propose(t, 4).empty());
  EXPECT_TRUE(p.propose(t, 0).empty());
}

TEST(NgramProposer, NeverMatchesTheSuffixItself) {
  NgramProposer p(2, 4);
  std::vector<int32_t> t = {1, 2, 3, 4};
  p.update(t);
  EXPECT_TRUE(p.propose(t, 4).empty());
  // Incremental updates equal a fresh index.
  std::vector<int32_t> u;
  NgramProposer inc(2, 4);
  for (int i = 0; i < 200; ++i) {
    u.push_back((i * 7) % 13);
    inc.update(u);
    NgramProposer fresh(2, 4);
    fresh.update(u);
    ASSERT_EQ(inc.propose(u, 5), fresh.propose(u, 5)) << i;
  }
}

TEST(SpeculationController, DepthFollowsAcceptanceAndBatchSize) {
  SpeculationOptions o;
  o.mode = SpecMode::Auto;
  o.max_draft = 8;
  SpeculationController c(o);
  // Measured steps: 10 ms + 1 ms per token.
  for (int i = 1; i <= 64; i += 3) c.observe_step(i, 0.010 + 0.001 * i);
  EXPECT_NEAR(c.cost_per_token_ratio(), 0.1, 0.01);
  SpecState good, mid, bad;
  for (int i = 0; i < 30; ++i) {
    c.observe(good, 8, 8);
    c.observe(mid, 4, 2);  // two of three drafted tokens accepted
    c.observe(bad, 8, 0);
  }
  EXPECT_GE(c.depth(good, 1, 1), 6);
  EXPECT_GE(c.depth(mid, 1, 1), 2);
  EXPECT_EQ(c.depth(bad, 1, 1), 0);
  // A big batch: for a mediocre guesser each extra token costs the batch more than it returns.
  EXPECT_EQ(c.depth(mid, 64, 64), 0);
  EXPECT_GE(c.depth(good, 64, 64), 1);
  SpeculationOptions off;
  off.mode = SpecMode::Off;
  EXPECT_EQ(SpeculationController(off).depth(good, 1, 1), 0);
  EXPECT_EQ(parse_spec_mode("draft"), SpecMode::Draft);
  EXPECT_EQ(parse_spec_mode("mtp"), SpecMode::Mtp);
  EXPECT_THROW(parse_spec_mode("medusa"), std::exception);
}

namespace {

// Chi-square statistic of counts against probabilities (cells with expectation >= 5).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n, int* dof) {
  double x = 0;
  *dof = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    double e = p[i] * n;
    if (e < 5) continue;
    x += (counts[i] - e) * (counts[i] - e) / e;
    ++*dof;
  }
  return x;
}

}  // namespace

TEST(SpeculativeSampler, DraftVerificationPreservesTheDistribution) {
  const std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 0.8f};
  const int V = int(logits.size());
  for (double temperature : {1.0, 0.7}) {
    std::vector<double> p(V);
    double mx = *std::max_element(logits.begin(), logits.end()), s = 0;
    for (int i = 0; i < V; ++i) s += p[i] = std::exp((logits[i] - mx) / temperature);
    for (auto& v : p) v /= s;
    // Drafts: the likeliest token, a mid one, an unlikely one, and a varying guess.
    for (int draft : {0, 3, 6, -1}) {
      SamplingParams sp;
      sp.temperature = temperature;
      sp.seed = 1234 + draft;
      Sampler smp(sp);
      const int N = 40000;
      std::vector<int> counts(V, 0);
      int accepted_n = 0;
      for (int k = 0; k < N; ++k) {
        std::vector<float> l = logits;
        int d = draft >= 0 ? draft : k % V;
        bool acc = false;
        SampleResult r = smp.sample_draft(l.data(), V, {}, {}, nullptr, d, &acc);
        ASSERT_EQ(acc, r.token == d && acc);
        ++counts[r.token];
        accepted_n += acc;
      }
      int dof = 0;
      double x = chi_square(counts, p, N, &dof);
      // 99.9th percentile of chi-square with 7 degrees of freedom is 24.3.
      EXPECT_LT(x, 24.3) << "temperature " << temperature << " draft " << draft;
      if (draft >= 0) {
        EXPECT_NEAR(double(accepted_n) / N, p[draft], 0.015);
      }
    }
  }
}

TEST(SpeculativeSampler, GreedyAcceptsExactlyTheArgmax) {
  SamplingParams sp;
  sp.temperature = 0;
  Sampler smp(sp);
  std::vector<float> l = {0.1f, 3.0f, 0.2f};
  bool acc = true;
  EXPECT_EQ(smp.sample_draft(l.data(), 3, {}, {}, nullptr, 0, &acc).token, 1);
  EXPECT_FALSE(acc);
  l = {0.1f, 3.0f, 0.2f};
  EXPECT_EQ(smp.sample_draft(l.data(), 3, {}, {}, nullptr, 1, &acc).token, 1);
  EXPECT_TRUE(acc);
}
