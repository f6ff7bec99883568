// Token-mask speed for constrained decoding on a ~50k byte-level vocabulary (GPT-2, 50257
// tokens; SmolLM2 has 49152). "cold" builds a fresh constraint each iteration (empty automaton
// and mask caches: the first request with a new schema); "warm" is the steady state of a request
// (the state has been seen before); "walk" is a whole constrained generation per iteration.
//   build-cons/constrain_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <random>

#include "constrain/hf_vocab.h"
#include "constrain/json_schema.h"
#include "constrain/token_constraint.h"

using namespace rapid;

namespace {

std::shared_ptr<const constrain::VocabIndex> gpt2() {
  static auto v = [] {
    constrain::HfVocab h = constrain::load_hf_vocab(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/gpt2");
    return std::make_shared<constrain::VocabIndex>(std::move(h.bytes), std::move(h.special), std::move(h.eos));
  }();
  return v;
}

const char* kSchema = R"({"type": "object", "properties": {
  "location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["location", "unit"], "additionalProperties": false})";

// Text prefixes that put the matcher in typical states.
const char* kPrefixes[] = {
    "",                                       // start of document
    "{\"location\": \"San Fr",                // inside a free string
    "{\"location\": \"Paris\", ",             // between properties (key expected)
    "{\"location\": \"Paris\", \"unit\": \"celsius\", \"days\": 1",  // inside a number
};

std::shared_ptr<const constrain::Grammar> grammar() {
  static auto g = constrain::grammar_from_json_schema_text(kSchema);
  return g;
}

void feed(constrain::TokenConstraint& c, const char* prefix) {
  // Bytes, not tokens: reaches the state directly.
  auto& m = const_cast<constrain::GrammarMatcher&>(c.matcher());
  if (!m.accept_bytes(prefix)) std::abort();
}

void BM_MaskCold(benchmark::State& st) {
  auto v = gpt2();
  for (auto _ : st) {
    constrain::TokenConstraint c(grammar(), v);
    feed(c, kPrefixes[st.range(0)]);
    benchmark::DoNotOptimize(c.mask_bits().data());
  }
}
BENCHMARK(BM_MaskCold)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

// Automaton warm (transitions known), mask cache bypassed: the cost of one trie walk.
void BM_MaskTrieWalkWarm(benchmark::State& st) {
  auto v = gpt2();
  constrain::TokenConstraint c(grammar(), v);
  feed(c, kPrefixes[st.range(0)]);
  std::vector<uint64_t> bits((v->vocab_size() + 63) / 64);
  v->allowed(c.matcher().automaton(), c.matcher().state(), bits);
  for (auto _ : st) {
    std::fill(bits.begin(), bits.end(), 0);
    v->allowed(c.matcher().automaton(), c.matcher().state(), bits);
    benchmark::DoNotOptimize(bits.data());
  }
}
BENCHMARK(BM_MaskTrieWalkWarm)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// Cached bit mask converted to the vector<bool> the Sampler takes (state inside a string, where
// nearly every token is allowed: the worst case). Alternates two states to defeat the memo.
void BM_MaskVectorBoolCached(benchmark::State& st) {
  auto v = gpt2();
  constrain::TokenConstraint c(grammar(), v);
  auto start = c.checkpoint();
  feed(c, kPrefixes[1]);
  auto a = c.checkpoint();
  c.mask();
  c.rollback(start);
  feed(c, kPrefixes[3]);
  auto b = c.checkpoint();
  c.mask();
  bool flip = false;
  for (auto _ : st) {
    c.rollback((flip = !flip) ? a : b);
    benchmark::DoNotOptimize(c.mask().size());
  }
}
BENCHMARK(BM_MaskVectorBoolCached)->Unit(benchmark::kMicrosecond);

// A whole random constrained generation (mask + accept per token), fresh constraint each time.
void BM_RandomWalkPerToken(benchmark::State& st) {
  auto v = gpt2();
  std::mt19937 rng(1);
  int64_t tokens = 0;
  for (auto _ : st) {
    constrain::TokenConstraint c(grammar(), v);
    for (int step = 0; step < 200 && !c.finished(); ++step) {
      const auto& bits = c.mask_bits();
      std::vector<int32_t> allowed;
      for (size_t w = 0; w < bits.size(); ++w)
        for (uint64_t x = bits[w]; x; x &= x - 1) allowed.push_back(int32_t(w * 64 + size_t(__builtin_ctzll(x))));
      if (allowed.empty()) std::abort();
      int32_t t = allowed[rng() % allowed.size()];
      c.accept(t);
      ++tokens;
      if (v->is_eos(t)) break;
    }
  }
  st.counters["per_token"] = benchmark::Counter(double(tokens), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RandomWalkPerToken)->Unit(benchmark::kMillisecond);

void BM_CompileSchema(benchmark::State& st) {
  for (auto _ : st) benchmark::DoNotOptimize(constrain::grammar_from_json_schema_text(kSchema).get());
}
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMicrosecond);

void BM_BuildVocabIndex(benchmark::State& st) {
  constrain::HfVocab h = constrain::load_hf_vocab(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/gpt2");
  for (auto _ : st) benchmark::DoNotOptimize(constrain::VocabIndex(h.bytes, h.special, h.eos).trie_nodes());
}
BENCHMARK(BM_BuildVocabIndex)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
