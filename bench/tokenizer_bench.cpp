// Single-threaded encode/decode throughput on the test corpus (tests/corpus), one document per
// encode call, for each fixture tokenizer. Compare with HF: bench/tokenizer_bench.py.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

#include "../tests/tokenizer_corpus.h"
#include "tokenizer/tokenizer.h"

namespace {
const std::vector<rapid::test::CorpusDoc>& corpus() {
  static auto docs = rapid::test::load_tokenizer_corpus();
  return docs;
}

// Fixture names, or an absolute path (the cached GGUF models, when present).
std::string tokenizer_path(const std::string& name) {
  return name.starts_with("/") ? name : std::string(RAPID_FIXTURES_DIR) + "/tokenizers/" + name;
}

const rapid::tok::Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<rapid::tok::Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) t = rapid::tok::load_tokenizer(tokenizer_path(name));
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
    auto t = rapid::tok::load_tokenizer(tokenizer_path(name));
    benchmark::DoNotOptimize(t.get());
  }
}

int reg = [] {
  std::vector<std::pair<std::string, std::string>> toks;
  for (std::string n : {"gpt2", "llama2", "llama3_1", "qwen3", "qwen2_5", "mistral_nemo", "gemma3"}) toks.emplace_back(n, n);
  // GGUF vocabularies of the cached models (bigger than the fixtures: gemma-3 has 262k tokens).
  std::string cache = std::getenv("RAPID_MODEL_CACHE") ? std::getenv("RAPID_MODEL_CACHE")
                      : std::getenv("HOME")            ? std::string(std::getenv("HOME")) + "/.cache/rapid-mlx/models"
                                                       : "";
  for (auto [label, rel] : {std::pair<const char*, const char*>{"gguf_smollm2", "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"},
                            {"gguf_gemma3", "gemma-3-270m/gemma-3-270m-q4_k_m.gguf"}})
    if (!cache.empty() && std::filesystem::exists(cache + "/" + rel)) toks.emplace_back(label, cache + "/" + rel);
  for (auto& [label, n] : toks) {
    benchmark::RegisterBenchmark(("encode/" + label).c_str(), BM_Encode, n)->Unit(benchmark::kMillisecond)->MinTime(2.0);
    benchmark::RegisterBenchmark(("decode/" + label).c_str(), BM_Decode, n)->Unit(benchmark::kMillisecond)->MinTime(1.0);
    benchmark::RegisterBenchmark(("load/" + label).c_str(), BM_Load, n)->Unit(benchmark::kMillisecond)->Iterations(2);
  }
  return 0;
}();
}  // namespace

BENCHMARK_MAIN();
