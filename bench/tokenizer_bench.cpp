// Single-threaded encode/decode throughput on the test corpus (tests/corpus), one document per
// encode call, for each fixture tokenizer. Compare with HF: bench/tokenizer_bench.py.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "../tests/tokenizer_corpus.h"
#include "tokenizer/tokenizer.h"

namespace {
const std::vector<rapid::test::CorpusDoc>& corpus() {
  static auto docs = rapid::test::load_tokenizer_corpus();
  return docs;
}

const rapid::Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<rapid::Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) t = rapid::load_tokenizer(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/" + name);
  return *t;
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  const auto& tok = tokenizer(name);
  size_t tokens = 0, bytes = 0;
  for (auto _ : state) {
    for (const auto& d : corpus()) {
      auto ids = tok.encode(d.text, true, true);
      tokens += ids.size();
      bytes += d.text.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["bytes_per_s"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsRate);
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  const auto& tok = tokenizer(name);
  std::vector<std::vector<int32_t>> all;
  for (const auto& d : corpus()) all.push_back(tok.encode(d.text));
  size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& ids : all) {
      auto s = tok.decode(ids);
      tokens += ids.size();
      benchmark::DoNotOptimize(s.data());
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_Load(benchmark::State& state, const std::string& name) {
  for (auto _ : state) {
    auto t = rapid::load_tokenizer(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/" + name);
    benchmark::DoNotOptimize(t.get());
  }
}

int reg = [] {
  for (std::string n : {"gpt2", "llama2", "llama3_1", "qwen3", "qwen2_5", "mistral_nemo", "gemma3"}) {
    benchmark::RegisterBenchmark(("encode/" + n).c_str(), BM_Encode, n)->Unit(benchmark::kMillisecond)->MinTime(2.0);
    benchmark::RegisterBenchmark(("decode/" + n).c_str(), BM_Decode, n)->Unit(benchmark::kMillisecond)->MinTime(1.0);
    benchmark::RegisterBenchmark(("load/" + n).c_str(), BM_Load, n)->Unit(benchmark::kMillisecond)->Iterations(2);
  }
  return 0;
}();
}  // namespace

BENCHMARK_MAIN();
