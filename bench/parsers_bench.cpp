// Parsing cost per streamed token over the golden corpus (tests/golden/parsers): every case is
// fed in token-sized pieces (1-7 bytes, ~4 on average, like BPE tokens of English/JSON) through
// a fresh parser, exactly as the server streams. Reported: CPU time per piece ("token"),
// counter sec_per_token (parser construction included).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "parsers/output_parser.h"

namespace fs = std::filesystem;

namespace {

struct Case {
  rapid::ParserOptions opts;
  std::string text;
  std::vector<size_t> cuts;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::vector<Case>& corpus() {
  static std::vector<Case> cases = [] {
    std::vector<Case> out;
    fs::path dir = fs::path(RAPID_SOURCE_DIR) / "tests" / "golden" / "parsers";
    auto tools = nlohmann::json::parse(slurp(dir / "tools.json"));
    std::mt19937 rng(1234);
    for (auto& d : fs::directory_iterator(dir)) {
      if (!d.is_directory()) continue;
      for (auto& f : fs::directory_iterator(d.path())) {
        if (f.path().extension() != ".txt") continue;
        fs::path jp = f.path();
        jp.replace_extension(".json");
        auto exp = nlohmann::json::parse(slurp(jp));
        Case c;
        c.opts.tool_parser = exp["options"].value("parser", "");
        c.opts.reasoning_parser = exp["options"].value("reasoning_parser", "");
        c.opts.starts_in_reasoning = exp["options"].value("starts_in_reasoning", false);
        c.opts.tools = tools;
        c.opts.id_seed = 1;
        c.text = slurp(f.path());
        for (size_t pos = 0; pos < c.text.size();) {
          pos += 1 + rng() % 7;
          if (pos < c.text.size()) c.cuts.push_back(pos);
        }
        out.push_back(std::move(c));
      }
    }
    return out;
  }();
  return cases;
}

void BM_StreamGoldenCorpus(benchmark::State& state) {
  const auto& cases = corpus();
  size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& c : cases) {
      auto p = rapid::make_output_parser(c.opts);
      size_t prev = 0;
      for (size_t cut : c.cuts) {
        benchmark::DoNotOptimize(p->feed(std::string_view(c.text).substr(prev, cut - prev)));
        prev = cut;
      }
      benchmark::DoNotOptimize(p->feed(std::string_view(c.text).substr(prev)));
      benchmark::DoNotOptimize(p->finish());
      tokens += c.cuts.size() + 1;
    }
  }
  // Time per token = 1 / items_per_second.
  state.SetItemsProcessed(static_cast<int64_t>(tokens));
  state.counters["sec_per_token"] = benchmark::Counter(static_cast<double>(tokens),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StreamGoldenCorpus)->Unit(benchmark::kMillisecond);

// A long plain-text answer (no markup): the common case, held back only at '<' and friends.
void BM_StreamLongPlainText(benchmark::State& state) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "The answer uses a < b and {x} in line " + std::to_string(i) + ". ";
  rapid::ParserOptions o;
  o.tool_parser = "hermes";
  o.reasoning_parser = "qwen3";
  size_t tokens = 0;
  for (auto _ : state) {
    auto p = rapid::make_output_parser(o);
    for (size_t pos = 0; pos < text.size(); pos += 4) benchmark::DoNotOptimize(p->feed(std::string_view(text).substr(pos, 4)));
    benchmark::DoNotOptimize(p->finish());
    tokens += (text.size() + 3) / 4;
  }
  state.SetItemsProcessed(static_cast<int64_t>(tokens));
  state.counters["sec_per_token"] = benchmark::Counter(static_cast<double>(tokens),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StreamLongPlainText)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
