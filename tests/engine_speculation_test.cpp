// Speculative decoding parts that need no model: the prompt-lookup proposer, the depth rule, and
// the draft-verifying sampler, whose tokens must follow exactly the plain sampler's
// distribution (chi-square against the softmax computed here independently).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <tuple>
#include <vector>

#include "engine/ngram_proposer.h"
#include "engine/sampling.h"
#include "engine/speculation.h"

using namespace rapid;
using namespace rapid::engine;

TEST(NgramProposer, ProposesWhatFollowedTheLatestMatch) {
  NgramProposer p(2, 4);
  std::vector<int32_t> t = {5, 6, 7, 8, 3, 4, 0, 1, 2, 6, 7, 8};
  p.update(t);
  // Suffix "6 7 8": its one earlier occurrence ends at 4, followed by 3 4 0 1 2 6 7 8.
  EXPECT_EQ(p.propose(t, 3), (std::vector<int32_t>{3, 4, 0}));
  EXPECT_EQ(p.propose(t, 10), (std::vector<int32_t>{3, 4, 0, 1, 2, 6, 7, 8}));
  t.push_back(3);  // suffix "6 7 8 3", seen once (ending at 5)
  p.update(t);
  EXPECT_EQ(p.propose(t, 2), (std::vector<int32_t>{4, 0}));
  t.push_back(42);  // nothing like "3 42" before
  p.update(t);
  EXPECT_TRUE(p.propose(t, 4).empty());
  EXPECT_TRUE(p.propose(t, 0).empty());
}

// A counter in a repeated block (SmolLM2 rewriting compute_total_12, _13, ...): the guess stops
// where the last two blocks differ, the counter, which the model then writes itself.
TEST(NgramProposer, StopsWhereTheTwoLatestMatchesDisagree) {
  NgramProposer p(2, 4);
  // Blocks "10 11 <counter> 12 13" for counters 1..4.
  std::vector<int32_t> t = {10, 11, 1, 12, 13, 10, 11, 2, 12, 13, 10, 11, 3, 12, 13, 10, 11, 4, 12, 13};
  p.update(t);
  // "12 13" last ended at 15 (then 10 11 4 12 13) and before that at 10 (then 10 11 3): they agree
  // for two tokens. Without the cut: 10 11 4 12 13.
  EXPECT_EQ(p.propose(t, 8), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(p.propose(t, 1), (std::vector<int32_t>{10}));
  t.insert(t.end(), {10, 11});  // suffix "13 10 11": ended at 7, 12, 17, followed by 2 / 3 / 4
  p.update(t);
  EXPECT_TRUE(p.propose(t, 8).empty());
  // Two earlier occurrences that agree a long way: a text copied twice, now a third time.
  NgramProposer q(2, 4);
  std::vector<int32_t> u = {1, 2, 3, 4, 5, 6, 9, 1, 2, 3, 4, 5, 6, 8, 1, 2};
  q.update(u);
  // "1 2" ended at 2 (then 3 4 5 6 9) and at 9 (then 3 4 5 6 8): four tokens agree.
  EXPECT_EQ(q.propose(u, 8), (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(q.propose(u, 3), (std::vector<int32_t>{3, 4, 5}));
}

namespace {

// The rule read plainly, O(L^2): the longest n in [min_n, max_n] whose suffix n-gram occurred
// earlier; its latest earlier end e, and the end before that; tokens from e, as many as asked and
// known, cut where the two continuations differ.
std::vector<int32_t> brute_propose(const std::vector<int32_t>& t, int k, int min_n, int max_n) {
  const int64_t L = int64_t(t.size());
  for (int n = max_n; n >= min_n; --n) {
    if (n > L - 1) continue;
    std::vector<int64_t> ends;  // ends e < L of earlier occurrences, latest first
    for (int64_t e = L - 1; e >= n; --e)
      if (std::equal(t.begin() + (e - n), t.begin() + e, t.begin() + (L - n))) ends.push_back(e);
    if (ends.empty()) continue;
    std::vector<int32_t> out;
    for (int64_t i = 0; i < k && ends[0] + i < L; ++i) {
      if (ends.size() > 1 && t[size_t(ends[1] + i)] != t[size_t(ends[0] + i)]) break;
      out.push_back(t[size_t(ends[0] + i)]);
    }
    return out;
  }
  return {};
}

}  // namespace

TEST(NgramProposer, MatchesAPlainReadingOfTheRule) {
  uint64_t rng = 12345;
  auto next = [&](int m) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return int32_t((rng >> 33) % uint64_t(m));
  };
  for (int alphabet : {3, 6, 20}) {
    NgramProposer p(2, 5);
    std::vector<int32_t> t;
    for (int i = 0; i < 300; ++i) {
      // Now and then copy an earlier stretch, so long matches and agreeing repeats occur.
      if (t.size() > 10 && next(10) == 0) {
        const size_t from = size_t(next(int(t.size()) - 8)), len = size_t(2 + next(12));
        for (size_t j = 0; j < len && from + j < t.size(); ++j) t.push_back(t[from + j]);
      } else {
        t.push_back(next(alphabet));
      }
      p.update(t);
      for (int k : {1, 4, 16}) ASSERT_EQ(p.propose(t, k), brute_propose(t, k, 2, 5)) << alphabet << " " << i << " " << k;
    }
  }
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

namespace {

SpeculationOptions auto_mode() {
  SpeculationOptions o;
  o.mode = SpecMode::Auto;
  o.max_draft = 8;
  return o;
}

// A controller that has measured steps of 10 ms + 1 ms per token.
SpeculationController measured_linear() {
  SpeculationController c(auto_mode());
  for (int i = 1; i <= 64; i += 3) c.observe_step(i, 0.010 + 0.001 * i);
  return c;
}

}  // namespace

TEST(SpeculationController, DepthFollowsAcceptanceAndBatchSize) {
  SpeculationController c = measured_linear();
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

// Issue 22: a wrong early estimate must not switch speculation off for good. The fit starts from
// the first forwards of a restarted server (recorded with --log-level debug: 7, 3, 1, 1 tokens in
// 147.7, 79.3, 34.9, 48.0 ms — a cold process) and a sequence whose first drafts were rejected, so the
// rule says 0; steps without drafts are all one token and carry no news. The true costs (the same
// trace, later: 35.0 ms + ~11 ms per extra token) and a proposer that is now always right are
// simulated: the controller must probe, learn, and end up drafting as deep as the true costs
// make worthwhile (computed here from them, by brute force over k).
TEST(SpeculationController, KeepsProbingAfterAWrongEarlyEstimate) {
  const SpeculationOptions o = auto_mode();
  auto true_cost = [](int64_t n) { return 0.0350 + 0.0110 * double(n - 1); };
  auto run = [&](bool with_probes) {
    SpeculationController c(o);
    c.observe_step(7, 0.1477);
    c.observe_step(3, 0.0793);
    c.observe_step(1, 0.0349);
    c.observe_step(1, 0.0480);
    SpecState s;
    c.observe(s, 2, 0);  // the answer's first words: guesses rejected
    c.observe(s, 2, 0);
    EXPECT_EQ(c.depth(s, 1, 1), 0) << "the trap: the early estimates say drafting never pays";
    int64_t tokens = 0, steps = 0, probes = 0;
    int last_k = 0;
    while (tokens < 400) {
      SpecChoice ch = c.choose(s, 1, 1);
      if (!with_probes && ch.probe) ch = {};
      c.observe_step(1 + ch.k, true_cost(1 + ch.k));
      c.observe(s, ch.k, ch.k, ch.probe);  // every guess right
      tokens += 1 + ch.k;
      ++steps;
      probes += ch.probe ? 1 : 0;
      last_k = ch.probe ? last_k : ch.k;
    }
    return std::make_tuple(steps, probes, last_k);
  };
  auto [plain_steps, plain_probes, plain_k] = run(false);
  EXPECT_EQ(plain_steps, 400) << "without probes no draft is ever made (the bug)";
  auto [steps, probes, k] = run(true);
  // The depth that maximises tokens per second under the true costs with every guess right.
  int best_k = 0;
  for (int j = 1; j <= o.max_draft; ++j)
    if ((1.0 + j) / true_cost(1 + j) > (1.0 + best_k) / true_cost(1 + best_k)) best_k = j;
  ASSERT_EQ(best_k, 8);
  EXPECT_GE(probes, 1);
  EXPECT_LE(probes, 3) << "once drafting pays, the rule drafts on its own";
  EXPECT_GE(k, best_k - 1);
  EXPECT_LT(steps, 400 / 4) << "most steps carry deep, accepted drafts";
}

// Where drafting really does not pay (every guess wrong), probes stay rare: the gap doubles up to
// kProbeMax steps, so they cost at most max_draft tokens per kProbeMax steps in the long run.
TEST(SpeculationController, ProbesBackOffWhereDraftingDoesNotPay) {
  SpeculationOptions o = auto_mode();
  SpeculationController c = measured_linear();
  SpecState s;
  int probes = 0, drafted = 0;
  const int steps = 4000;
  for (int i = 0; i < steps; ++i) {
    const SpecChoice ch = c.choose(s, 1, 1);
    probes += ch.probe ? 1 : 0;
    drafted += ch.k;
    c.observe(s, ch.k, 0, ch.probe);
  }
  EXPECT_GE(probes, steps / kProbeMax);      // it never stops re-testing
  EXPECT_LE(probes, steps / kProbeMax + 8);  // the first few, then one per kProbeMax steps
  EXPECT_LE(double(drafted) / steps, 0.1);   // under 0.1 wasted token per step
  EXPECT_EQ(s.summary.probe_steps, probes);
  EXPECT_EQ(s.summary.decode_steps, steps);
  // Named modes never probe: their depth is fixed, however long nothing drafted.
  o.mode = SpecMode::Ngram;
  SpeculationController named(o);
  SpecState fresh;
  for (int i = 0; i < 1000; ++i) named.observe(fresh, 0, 0);
  EXPECT_FALSE(named.choose(fresh, 1, 1).probe);
}

// A proposer whose guesses are always wrong (random MTP heads), serving many short requests (an
// agent's turns): the first request's lesson carries over to the next ones and probes are paced
// model-wide, yet they never stop. Then the same for a proposer that is always right: a new request
// drafts at full depth from its first step. (Learning per request, each re-drafted from the
// Beta(1,1) prior and re-probed at steps 8, 24 and 56: auto ran 64-token requests at 0.80x of off.)
TEST(SpeculationController, AcceptanceAndProbingCarryAcrossRequests) {
  constexpr int kRequests = 40, kSteps = 64;
  auto run = [](bool right) {
    SpeculationController c = measured_linear();
    int drafted = 0, probes = 0, first_k = 0;
    for (int r = 0; r < kRequests; ++r) {
      SpecState s = c.new_state();
      for (int i = 0; i < kSteps; ++i) {
        const SpecChoice ch = c.choose(s, 1, 1);
        if (r == kRequests - 1 && i == 0) first_k = ch.k;
        drafted += ch.k;
        probes += ch.probe ? 1 : 0;
        c.observe(s, ch.k, right ? ch.k : 0, ch.probe);
      }
    }
    return std::make_tuple(drafted, probes, first_k);
  };
  const auto [drafted, probes, k] = run(false);
  EXPECT_GE(probes, kRequests * kSteps / kProbeMax) << "probing never stops";
  EXPECT_LE(probes, kRequests * kSteps / kProbeMax + 8);
  EXPECT_LT(drafted, 8 * (probes + 4)) << "only probes and the first request's first steps draft";
  EXPECT_EQ(k, 0);
  const auto [good_drafted, good_probes, good_k] = run(true);
  EXPECT_EQ(good_k, 8);
  EXPECT_EQ(good_probes, 0);
  EXPECT_GE(good_drafted, kRequests * kSteps * 7);
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

namespace {

// One stream served request after request with --speculative auto, against a true step cost and a
// proposer that always has a guess, each token of it right with probability p (the first wrong one
// ends the run), as prompt lookup on a text; its guesses are free, so auto also checks them
// unverified (shadow drafts). Returns tokens per second of auto over off (off: one token per t(1)).
double auto_over_off(const std::function<double(int64_t)>& true_cost, double p, int requests, int steps) {
  SpeculationController c(auto_mode());
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  auto uniform = [&] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return double(rng >> 11) * 0x1.0p-53;
  };
  auto run_length = [&](int k) {  // how many of k guesses are right
    int a = 0;
    while (a < k && uniform() < p) ++a;
    return a;
  };
  double seconds = 0;
  int64_t tokens = 0;
  for (int r = 0; r < requests; ++r) {
    SpecState s = c.new_state();
    std::vector<int32_t> text = {1, 2, 3};
    std::vector<int32_t> future;  // what the sequence will decode next, where already decided
    for (int i = 0; i < steps; ++i) {
      const SpecChoice ch = c.choose(s, 1, 1);
      const int a = ch.k > 0 ? run_length(ch.k) : 0;
      if (ch.k == 0 && c.wants_shadow(s)) {  // guess "100, 101, ...": the text follows it for a run
        std::vector<int32_t> guess(size_t(c.options().max_draft));
        for (size_t j = 0; j < guess.size(); ++j) guess[j] = int32_t(100 + j);
        const int right = run_length(int(guess.size()));
        future.assign(guess.begin(), guess.begin() + right);
        future.push_back(7);  // then a token the guess did not have
        c.start_shadow(s, guess, text.size());
      }
      for (int j = 0; j <= a; ++j) {
        text.push_back(future.empty() ? 7 : future.front());
        if (!future.empty()) future.erase(future.begin());
      }
      const double t = true_cost(1 + ch.k);
      c.observe_step(1 + ch.k, t);
      c.observe(s, ch.k, a, ch.probe);
      c.settle_shadow(s, text);
      seconds += t;
      tokens += 1 + a;
    }
  }
  return double(tokens) / seconds * true_cost(1);
}

}  // namespace

// Issue 18: auto must never fall below off (>= 0.97x) where drafting does not pay, and must gain
// where it does, also when an extra verified row costs more than a straight line through the steps
// says. Measured on SmolLM2 (compute_bench q4_1 / q8_0 n1 vs n8, and the --log-level debug step
// trace): the first extra row of a step costs far more than each later one (the step leaves the
// one-token GEMV path, and every drafted row computes its LM head row), so a line fitted through
// the 1- and 9-token steps that probes produce makes one or two drafts look cheap. Off runs at 1/t(1).
TEST(SpeculationController, AutoDoesNotLoseToOffWhenTheFirstExtraRowIsDear) {
  // 10 ms for one token; 16 ms for two; then 2 ms per further token (9 tokens: 30 ms).
  auto concave = [](int64_t n) { return n == 1 ? 0.010 : 0.016 + 0.002 * double(n - 2); };
  auto linear = [](int64_t n) { return 0.010 + 0.0025 * double(n - 1); };
  for (auto [name, cost] : {std::pair{"concave", std::function<double(int64_t)>(concave)},
                            std::pair{"linear", std::function<double(int64_t)>(linear)}}) {
    for (double p : {0.0, 0.2, 0.35, 0.5})
      EXPECT_GE(auto_over_off(cost, p, 60, 96), 0.97) << name << " cost, acceptance " << p;
    EXPECT_GE(auto_over_off(cost, 0.95, 60, 96), 2.0) << name << " cost: a text that repeats must gain";
  }
}
