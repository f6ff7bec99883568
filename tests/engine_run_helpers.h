// Running requests to the end for the engine tests: plain decoding (the single-sequence Generator,
// no speculation: the reference) and a BatchEngine serving several requests at once.
#pragma once
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/batch_engine.h"
#include "engine/generator.h"

namespace rapid::test {

inline std::vector<int32_t> plain_tokens(model::Model& m, const tok::Tokenizer& tok, const engine::GenerationRequest& q) {
  engine::Generator g(m, tok, q);
  std::vector<int32_t> t;
  for (;;) {
    engine::GenerationEvent ev = g.step();
    t.insert(t.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finished) return t;
  }
}

// Submits every request at once; each one's tokens once all have finished (none with an error).
inline std::vector<std::vector<int32_t>> run_all(engine::BatchEngine& e, const std::vector<engine::GenerationRequest>& qs) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<int32_t>> out(qs.size());
  size_t done = 0;
  for (size_t i = 0; i < qs.size(); ++i)
    e.submit(qs[i], [&, i](const engine::GenerationEvent& ev) {
      std::lock_guard lk(mu);
      out[i].insert(out[i].end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) {
        EXPECT_NE(ev.finish_reason, engine::FinishReason::Error) << ev.error;
        ++done;
        cv.notify_all();
      }
    });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done == qs.size(); });
  return out;
}

}  // namespace rapid::test
