// Speculative decoding on the Qwen3.5 hybrid: what verification and the recurrent-state rollback
// cost, and decode speed with MTP drafts on and off. The model is $RAPID_BENCH_QWEN35 (a Qwen3.5
// checkpoint directory with `mtp.*` weights; tokenizer.json beside it) or the tiny one of
// scripts/make_qwen35_mtp.py ($RAPID_MODEL_CACHE/qwen35-tiny-mtp/vheads-untied).
// The model may also be a .gguf with the head (scripts/qwen35_gguf.py --bench-mtp writes the
// 0.8B-shaped $RAPID_MODEL_CACHE/bench/qwen3.5-0.8b-shape/q4_0-mtp.gguf); its tokenizer is the file's.
//   build/qwen35_spec_bench
// BM_VerifyAndRollback/k: a forward over the next token + k drafts with every row's logits (the
//   verification; it snapshots the DeltaNet state), then truncate() keeping j = 0..k drafts (the
//   rollback: state restored, conv + recurrence replayed over the kept positions). Counters:
//   decode1_ms (one plain decode step, for scale), verify_ms, rollback_j<j>_ms.
// BM_MtpDraft: one MTP head forward for one sequence, i.e. what each drafted token costs (the
//   head's gated-attention layer, its fc, and the LM head over the whole vocabulary).
// BM_EngineDecode/mode: one greedy request of 64 tokens through the batching engine with
//   --speculative off (0), mtp (1), auto (2), four requests in a row; items = generated tokens;
//   counters drafted/accepted.
//   With random heads nearly every draft is rejected: mtp shows the cost of speculating for
//   nothing, auto whether the depth rule turns it off.
#include <benchmark/benchmark.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cache/block_pool.h"
#include "engine/batch_engine.h"
#include "model/arch.h"
#include "tokenizer/tokenizer.h"

using namespace rapid;

namespace {

std::string model_dir() {
  if (const char* p = std::getenv("RAPID_BENCH_QWEN35")) return p;
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return std::string(c ? c : std::string(home ? home : "") + "/.cache/rapid-mlx/models") +
         "/qwen35-tiny-mtp/vheads-untied";
}

std::shared_ptr<model::Model> model() {
  static std::shared_ptr<model::Model> m = [] {
    model::ModelOptions o;
    o.num_threads = 2;
    return std::shared_ptr<model::Model>(model::create_model(model::load_checkpoint(model_dir()), o));
  }();
  return m;
}

std::string tokenizer_path() {
  const std::string d = model_dir();
  return d.size() > 5 && d.compare(d.size() - 5, 5, ".gguf") == 0 ? d : d + "/tokenizer.json";
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void BM_VerifyAndRollback(benchmark::State& st) {
  model::Model& m = *model();
  const int k = static_cast<int>(st.range(0));
  const int64_t V = m.config().vocab_size, P = 64, cap = 4096;
  std::vector<int32_t> prompt(P);
  for (int64_t i = 0; i < P; ++i) prompt[i] = int32_t(1 + (i * 37) % (V - 1));
  std::vector<int32_t> win(static_cast<size_t>(k + 1));
  for (int i = 0; i <= k; ++i) win[i] = int32_t(3 + 11 * i);
  std::vector<float> logits(static_cast<size_t>((k + 1) * V));
  auto plain = m.new_state(cap), s = m.new_state(cap);
  auto restart = [&](model::SequenceState& x) {
    x.truncate(0);
    m.forward(prompt.data(), P, x, logits.data());
  };
  restart(*plain);
  restart(*s);
  double decode = 0, verify = 0;
  std::vector<double> rollback(static_cast<size_t>(k), 0.0);
  int64_t n = 0;
  for (auto _ : st) {
    if (s->length() + k * (k + 1) > cap || plain->length() + 1 > cap) {
      st.PauseTiming();
      restart(*s);
      restart(*plain);
      st.ResumeTiming();
    }
    auto t0 = std::chrono::steady_clock::now();
    m.forward(&win[0], 1, *plain, logits.data());
    decode += ms_since(t0);
    for (int j = 0; j < k; ++j) {  // keep the next token and j drafts (j == k would roll nothing back)
      const int64_t L = s->length();
      t0 = std::chrono::steady_clock::now();
      m.forward(win.data(), k + 1, *s, logits.data(), true);
      verify += ms_since(t0);
      t0 = std::chrono::steady_clock::now();
      s->truncate(L + 1 + j);
      rollback[static_cast<size_t>(j)] += ms_since(t0);
    }
    ++n;
  }
  st.counters["decode1_ms"] = decode / double(n);
  st.counters["verify_ms"] = verify / double(n * k);
  for (int j = 0; j < k; ++j) st.counters["rollback_keep" + std::to_string(j) + "_ms"] = rollback[j] / double(n);
}
BENCHMARK(BM_VerifyAndRollback)->Arg(1)->Arg(3)->Unit(benchmark::kMillisecond);

void BM_MtpDraft(benchmark::State& st) {
  model::Model& m = *model();
  if (m.mtp_layers() == 0) {
    st.SkipWithError("the model has no MTP head");
    return;
  }
  const int64_t H = m.config().hidden_size, cap = 4096;
  auto pool = std::make_shared<cache::BlockPool>(m.mtp_block_shape(16), 64ull << 20);
  auto s = m.new_mtp_state(pool, cap);
  std::vector<float> hid(static_cast<size_t>(H), 0.01f), hout(static_cast<size_t>(H));
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  int32_t tok = 5;
  for (auto _ : st) {
    if (s->length() + 1 > cap) {
      st.PauseTiming();
      s->truncate(0);
      st.ResumeTiming();
    }
    model::MtpEntry e{&tok, hid.data(), 1, s.get(), logits.data(), hout.data(), 0};
    m.forward_mtp(&e, 1);
    tok = int32_t(1 + (tok * 37) % (m.config().vocab_size - 1));
  }
}
BENCHMARK(BM_MtpDraft)->Unit(benchmark::kMillisecond);

void BM_EngineDecode(benchmark::State& st) {
  const engine::SpecMode mode = st.range(0) == 0 ? engine::SpecMode::Off : st.range(0) == 1 ? engine::SpecMode::Mtp : engine::SpecMode::Auto;
  std::shared_ptr<const tok::Tokenizer> tok = tok::load_tokenizer(tokenizer_path());
  engine::BatchEngineOptions o;
  o.spec.mode = mode;
  o.spec.max_draft = 3;
  o.kv.pool_bytes = 64ull << 20;
  o.draft_pool_bytes = 16ull << 20;
  engine::BatchEngine e(model(), tok, o);
  const int64_t V = model()->config().vocab_size;
  int64_t tokens = 0;
  for (auto _ : st) {
    engine::GenerationRequest q;
    for (int i = 0; i < 32; ++i) q.prompt.push_back(int32_t(1 + (i * 53 + tokens) % (V - 1)));
    q.sampling.temperature = 0;
    q.max_tokens = 64;
    q.ignore_eos = true;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    e.submit(q, [&](const engine::GenerationEvent& ev) {
      std::lock_guard lk(mu);
      tokens += int64_t(ev.tokens.size());
      if (ev.finished) done = true;
      cv.notify_all();
    });
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return done; });
  }
  const engine::BatchEngineStats s = e.stats();
  st.SetItemsProcessed(tokens);
  st.counters["drafted"] = double(s.spec_drafted);
  st.counters["accepted"] = double(s.spec_accepted);
  st.SetLabel(engine::spec_mode_name(mode));
}
// Four requests in a row, as an agent sends its turns: auto learns across them what MTP earns.
BENCHMARK(BM_EngineDecode)->Arg(0)->Arg(1)->Arg(2)->Iterations(4)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
