// Greedy-parity checks shared by the model parity tests: a model against a golden file of
// reference logits (format of scripts/make_parity_goldens*.py and scripts/make_tiny_qwen35.py:
// probe_ids, cases[] of prompt_ids + steps[] of token, max_abs_logit, top_ids/top_logits,
// probe_logits).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/block_pool.h"
#include "model/model.h"
#include "model/paged_kv.h"

namespace rapid::parity {

using nlohmann::json;

inline json read_json(const std::string& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot open " + p);
  return json::parse(f);
}

inline int argmax(const float* x, int64_t n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// Two models in lockstep over the prompts of a golden file (`g`'s cases): each prompt, then 64
// greedy steps fed a's token: the same argmax every step and every logit within tol · max|b's
// logit| (0: bit-identical). `what` names the pair in failures. Returns the worst relative error.
inline double lockstep_greedy(model::Model& a, model::Model& b, const json& g, double tol, const std::string& what) {
  const int64_t V = a.config().vocab_size;
  std::vector<float> la(V), lb(V);
  double worst = 0;
  for (auto& c : g["cases"]) {
    std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
    auto sa = a.new_state(ids.size() + 64), sb = b.new_state(ids.size() + 64);
    a.forward(ids.data(), ids.size(), *sa, la.data());
    b.forward(ids.data(), ids.size(), *sb, lb.data());
    for (int step = 0; step < 64; ++step) {
      float mx = 0, d = 0;
      for (int64_t i = 0; i < V; ++i) {
        mx = std::max(mx, std::fabs(lb[i]));
        d = std::max(d, std::fabs(la[i] - lb[i]));
      }
      worst = std::max(worst, double(d / mx));
      EXPECT_LE(d, tol * mx) << what << " step " << step << " of prompt " << c.value("prompt", std::string());
      const int32_t t = argmax(la.data(), V);
      EXPECT_EQ(t, argmax(lb.data(), V)) << what << " step " << step;
      if (d > tol * mx || t != argmax(lb.data(), V)) return worst;
      a.forward(&t, 1, *sa, la.data());
      b.forward(&t, 1, *sb, lb.data());
    }
  }
  return worst;
}

// Free-running greedy decoding on the exact (dequantized f32) path: the same tokens as the
// reference for every step, and every stored logit (top 8 + 64 fixed probes per step) within
// tol · max|logit|. Returns the worst relative logit error.
inline double exact_greedy(model::Model& m, const json& g, double tol) {
  std::vector<int32_t> probe = g["probe_ids"].get<std::vector<int32_t>>();
  const int64_t V = m.config().vocab_size;
  std::vector<float> logits(V);
  double worst = 0;
  for (auto& c : g["cases"]) {
    std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
    auto st = m.new_state(ids.size() + c["steps"].size());
    m.forward(ids.data(), ids.size(), *st, logits.data());
    std::vector<int32_t> want, got;
    int step = 0;
    for (auto& s : c["steps"]) {
      const double mx = s["max_abs_logit"].get<double>();
      auto top_ids = s["top_ids"].get<std::vector<int32_t>>();
      auto top = s["top_logits"].get<std::vector<double>>();
      auto pl = s["probe_logits"].get<std::vector<double>>();
      for (size_t i = 0; i < top_ids.size(); ++i) {
        double d = std::fabs(logits[top_ids[i]] - top[i]);
        worst = std::max(worst, d / mx);
        EXPECT_LE(d, tol * mx) << "step " << step << " top " << i;
      }
      for (size_t i = 0; i < probe.size(); ++i) {
        double d = std::fabs(logits[probe[i]] - pl[i]);
        worst = std::max(worst, d / mx);
        EXPECT_LE(d, tol * mx) << "step " << step << " probe " << probe[i];
      }
      int32_t t = argmax(logits.data(), V);
      got.push_back(t);
      want.push_back(s["token"].get<int32_t>());
      if (t != want.back()) break;  // diverged: the remaining goldens no longer apply
      m.forward(&t, 1, *st, logits.data());
      ++step;
    }
    EXPECT_EQ(got, want) << "prompt: " << c["prompt"].get<std::string>();
  }
  return worst;
}

// The prefix cache's path on a KV-only model: a sequence that adopts another's pages after p tokens
// (whole and partial blocks of 16) and continues gives the golden case's greedy tokens (prompt in one
// call, then one token per call), for every cut p in `cuts` (negative: from the prompt's end).
inline void resume_from_adopted_pages(model::Model& m, const json& golden_case, const std::vector<int64_t>& cuts,
                                      const std::string& what) {
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> ids = golden_case["prompt_ids"].get<std::vector<int32_t>>(), want;
  for (auto& st : golden_case["steps"]) want.push_back(st["token"].get<int32_t>());
  const cache::BlockShape sh = m.kv_block_shape(16);
  auto pool = std::make_shared<cache::BlockPool>(sh, sh.block_bytes() * 40);
  for (int64_t cut : cuts) {
    const int64_t p = cut < 0 ? static_cast<int64_t>(ids.size()) + cut : cut;
    std::vector<float> logits(V);
    auto a = m.new_paged_state(pool, 256);
    m.forward(ids.data(), p, *a, logits.data());
    auto b = m.new_paged_state(pool, 256);
    static_cast<model::PagedKvState*>(b.get())->adopt_prefix(static_cast<model::PagedKvState*>(a.get())->table().blocks(), p);
    a.reset();  // b holds its own references on the adopted pages
    m.forward(ids.data() + p, static_cast<int64_t>(ids.size()) - p, *b, logits.data());
    std::vector<int32_t> got;
    for (size_t i = 0; i < want.size(); ++i) {
      int32_t t = argmax(logits.data(), V);
      got.push_back(t);
      m.forward(&t, 1, *b, logits.data());
    }
    EXPECT_EQ(got, want) << what << ": cut at " << p;
  }
}

struct FastTol {
  double vs_ref;       // max |Δlogit| / max|logit| vs the f32 reference
  double vs_llamacpp;  // same vs llama.cpp (ignored when lc is null)
  double decisive;     // top-1 ahead of top-2 by more than this · max|logit| → same argmax
};

// The shipping configuration (int8 activations × quantized weights, f16 KV), teacher-forced on
// the reference tokens.
inline void fast_teacher_forced(model::Model& m, const json& g, const json* lc, const FastTol& tol) {
  std::vector<int32_t> probe = g["probe_ids"].get<std::vector<int32_t>>();
  const int64_t V = m.config().vocab_size;
  std::vector<float> logits(V);
  double worst_hf = 0, worst_lc = 0;
  int same_hf = 0, same_lc = 0, total = 0;
  for (size_t ci = 0; ci < g["cases"].size(); ++ci) {
    auto& c = g["cases"][ci];
    std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
    auto st = m.new_state(ids.size() + c["steps"].size());
    m.forward(ids.data(), ids.size(), *st, logits.data());
    for (size_t step = 0; step < c["steps"].size(); ++step) {
      auto& s = c["steps"][step];
      const double mx = s["max_abs_logit"].get<double>();
      std::vector<int32_t> at = s["top_ids"].get<std::vector<int32_t>>();
      at.insert(at.end(), probe.begin(), probe.end());
      std::vector<double> hf = s["top_logits"].get<std::vector<double>>();
      auto hp = s["probe_logits"].get<std::vector<double>>();
      hf.insert(hf.end(), hp.begin(), hp.end());
      std::vector<double> ll;
      if (lc) {
        auto& ls = (*lc)["cases"][ci]["steps"][step];
        ll = ls["top_logits"].get<std::vector<double>>();
        auto lp = ls["probe_logits"].get<std::vector<double>>();
        ll.insert(ll.end(), lp.begin(), lp.end());
      }
      for (size_t i = 0; i < at.size(); ++i) {
        double dh = std::fabs(logits[at[i]] - hf[i]);
        worst_hf = std::max(worst_hf, dh / mx);
        EXPECT_LE(dh, tol.vs_ref * mx) << "vs reference, step " << step << " token " << at[i];
        if (lc) {
          double dl = std::fabs(logits[at[i]] - ll[i]);
          worst_lc = std::max(worst_lc, dl / mx);
          EXPECT_LE(dl, tol.vs_llamacpp * mx) << "vs llama.cpp, step " << step << " token " << at[i];
        }
      }
      int32_t want = s["token"].get<int32_t>(), t = argmax(logits.data(), V);
      same_hf += t == want;
      if (lc) same_lc += t == (*lc)["cases"][ci]["steps"][step]["argmax"].get<int32_t>();
      ++total;
      if (hf[0] - hf[1] > tol.decisive * mx) {
        EXPECT_EQ(t, want) << "decisive step " << step << " of: " << c["prompt"].get<std::string>();
      }
      m.forward(&want, 1, *st, logits.data());
    }
  }
  std::printf("fast path: worst |dlogit|/max|logit| vs reference %.3g; argmax agreement %d/%d\n",
              worst_hf, same_hf, total);
  if (lc)
    std::printf("  vs llama.cpp: worst %.3g, argmax agreement %d/%d\n", worst_lc, same_lc, total);
}

}  // namespace rapid::parity
