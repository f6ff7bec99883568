// Sampler vs transformers' logits processors (goldens from scripts/make_sampler_parity_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/sampling.h"

using nlohmann::json;
using namespace rapid;
using namespace rapid::engine;

namespace {

json cases() {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/model/sampler_cases.json");
  return json::parse(f)["cases"];
}

SamplingParams params_of(const json& p) {
  SamplingParams s;
  s.temperature = p.value("temperature", 1.0);
  s.top_k = p.value("top_k", 0);
  s.top_p = p.value("top_p", 1.0);
  s.min_p = p.value("min_p", 0.0);
  s.repetition_penalty = p.value("repetition_penalty", 1.0);
  s.presence_penalty = p.value("presence_penalty", 0.0);
  s.frequency_penalty = p.value("frequency_penalty", 0.0);
  if (p.contains("logit_bias"))
    for (auto& [k, v] : p["logit_bias"].items()) s.logit_bias[std::stoi(k)] = v.get<float>();
  return s;
}

}  // namespace

TEST(Sampler, ProcessedScoresMatchTransformers) {
  for (auto& c : cases()) {
    SamplingParams sp = params_of(c["params"]);
    sp.seed = 1;
    Sampler s(sp);
    std::vector<float> lg = c["logits"].get<std::vector<float>>();
    auto r = s.sample(lg.data(), lg.size(), c["prompt"].get<std::vector<int32_t>>(),
                      c["generated"].get<std::vector<int32_t>>());
    auto& want = c["processed"];
    if (sp.temperature <= 0) {
      EXPECT_EQ(r.token, c["greedy"].get<int32_t>()) << c["params"].dump();
      continue;
    }
    for (size_t i = 0; i < lg.size(); ++i) {
      if (want[i].is_null()) {
        EXPECT_TRUE(std::isinf(lg[i]) && lg[i] < 0) << c["params"].dump() << " token " << i << " should be filtered";
      } else {
        ASSERT_FALSE(std::isinf(lg[i])) << c["params"].dump() << " token " << i << " should be kept";
        EXPECT_NEAR(lg[i], want[i].get<double>(), 1e-4 * std::max(1.0, std::fabs(want[i].get<double>())));
      }
    }
    EXPECT_FALSE(want[r.token].is_null()) << "sampled a filtered token";
  }
}

// Draw frequencies follow softmax(processed scores): checked on the top-p case with 20000 draws.
TEST(Sampler, DrawsFollowTheProcessedDistribution) {
  json c = cases()[3];
  SamplingParams sp = params_of(c["params"]);
  sp.seed = 12345;
  Sampler s(sp);
  auto& want = c["processed"];
  std::vector<double> p(want.size(), 0.0);
  double z = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!want[i].is_null()) z += p[i] = std::exp(want[i].get<double>());
  std::vector<int> hist(want.size(), 0);
  const int N = 20000;
  std::vector<float> base = c["logits"].get<std::vector<float>>();
  auto prompt = c["prompt"].get<std::vector<int32_t>>(), gen = c["generated"].get<std::vector<int32_t>>();
  for (int n = 0; n < N; ++n) {
    std::vector<float> lg = base;
    ++hist[s.sample(lg.data(), lg.size(), prompt, gen).token];
  }
  for (size_t i = 0; i < p.size(); ++i) {
    double expect = p[i] / z;
    double sd = std::sqrt(expect * (1 - expect) / N);
    EXPECT_NEAR(hist[i] / double(N), expect, 5 * sd + 1e-9) << "token " << i;
  }
}

TEST(Sampler, SeedMakesSamplingReproducible) {
  json c = cases()[0];
  SamplingParams sp = params_of(c["params"]);
  sp.seed = 99;
  Sampler a(sp), b(sp);
  std::vector<float> base = c["logits"].get<std::vector<float>>();
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 50; ++i) {
    auto la = base, lb = base;
    ta.push_back(a.sample(la.data(), la.size(), {}, {}).token);
    tb.push_back(b.sample(lb.data(), lb.size(), {}, {}).token);
  }
  EXPECT_EQ(ta, tb);
  EXPECT_GT(std::set<int32_t>(ta.begin(), ta.end()).size(), 5u);  // it does sample, not argmax
}

TEST(Sampler, LogprobsAreLogSoftmaxOfRawLogits) {
  json c = cases()[6];  // has a repetition penalty: logprobs must ignore it
  SamplingParams sp = params_of(c["params"]);
  sp.seed = 3;
  sp.logprobs = true;
  sp.top_logprobs = 5;
  Sampler s(sp);
  std::vector<float> lg = c["logits"].get<std::vector<float>>();
  auto lsm = c["log_softmax"].get<std::vector<double>>();
  auto r = s.sample(lg.data(), lg.size(), c["prompt"].get<std::vector<int32_t>>(),
                    c["generated"].get<std::vector<int32_t>>());
  EXPECT_NEAR(r.logprob, lsm[r.token], 1e-4);
  ASSERT_EQ(r.top.size(), 5u);
  std::vector<int> order(lsm.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return lsm[a] > lsm[b]; });
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.top[i].token, order[i]);
    EXPECT_NEAR(r.top[i].logprob, lsm[order[i]], 1e-4);
  }
}

TEST(Sampler, MaskRestrictsChoicesAndAllMaskedIsAnError) {
  json c = cases()[0];
  std::vector<float> base = c["logits"].get<std::vector<float>>();
  std::vector<bool> mask(base.size(), false);
  mask[7] = mask[123] = mask[301] = true;
  for (double temp : {0.0, 1.0}) {
    SamplingParams sp;
    sp.temperature = temp;
    sp.seed = 5;
    Sampler s(sp);
    for (int i = 0; i < 30; ++i) {
      auto lg = base;
      int32_t t = s.sample(lg.data(), lg.size(), {}, {}, &mask).token;
      EXPECT_TRUE(t == 7 || t == 123 || t == 301) << t;
    }
    std::vector<bool> none(base.size(), false);
    auto lg = base;
    EXPECT_THROW(s.sample(lg.data(), lg.size(), {}, {}, &none), Error);
  }
}
