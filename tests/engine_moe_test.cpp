// Mixture-of-experts models in the continuous-batching engine, on the tiny mlx-lm-written models
// of scripts/make_tiny_moe.py (tests/moe_tiny.h): batching rows that share experts must not change
// any request's tokens. The reference is the single-sequence Generator (whose forward is checked
// against mlx-lm's greedy output in model_moe_test).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "engine/batch_engine.h"
#include "engine/generator.h"
#include "model/arch.h"
#include "model_parity_helpers.h"
#include "moe_tiny.h"
#include "tokenizer/tokenizer.h"

using namespace rapid;
using namespace rapid::engine;
using namespace rapid::moe_tiny;
using namespace rapid::parity;

// Through the continuous-batching engine: 16 greedy requests submitted together give each the
// tokens the single-sequence Generator gives it alone.
TEST(MoeEngine, SixteenRequestsMatchAlone) {
  REQUIRE_TINY();
  for (const char* c : kConfigs) {
    const std::string dir = root + "/" + c + "/mlx-q4";
    json g = read_json(dir + "/greedy.json");
    std::shared_ptr<model::Model> model = make(dir, compute::MatmulPath::Fast, tensor::DType::F16);
    std::shared_ptr<const tok::Tokenizer> tok = tok::load_tokenizer(dir);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 16; ++i) {
      GenerationRequest q;
      q.prompt = g["cases"][i % 5]["prompt_ids"].get<std::vector<int32_t>>();
      q.prompt.push_back(static_cast<int32_t>(100 + i));
      q.sampling.temperature = 0;
      q.max_tokens = 12 + i % 3;
      q.ignore_eos = true;
      reqs.push_back(q);
    }
    std::vector<std::vector<int32_t>> want;
    for (auto& q : reqs) {
      Generator gen(*model, *tok, q);
      std::vector<int32_t> out;
      for (;;) {
        GenerationEvent ev = gen.step();
        out.insert(out.end(), ev.tokens.begin(), ev.tokens.end());
        if (ev.finished) break;
      }
      want.push_back(out);
    }
    BatchEngineOptions o;
    o.max_num_seqs = 16;
    o.max_step_tokens = 64;
    o.kv.pool_bytes = 32ull << 20;
    BatchEngine eng(model, tok, o);
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::vector<int32_t>> got(reqs.size());
    size_t done = 0;
    for (size_t i = 0; i < reqs.size(); ++i)
      eng.submit(reqs[i], [&, i](const GenerationEvent& ev) {
        std::lock_guard lk(mu);
        got[i].insert(got[i].end(), ev.tokens.begin(), ev.tokens.end());
        if (ev.finished) ++done;
        cv.notify_all();
      });
    {
      std::unique_lock lk(mu);
      ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(300), [&] { return done == reqs.size(); }));
    }
    size_t tokens = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << c << " request " << i;
      tokens += got[i].size();
    }
    EXPECT_LT(eng.stats().steps, tokens) << c << ": the requests were not batched";
  }
}

