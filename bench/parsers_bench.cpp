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
  rapid::parsers::ParserOptions opts;
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
      auto p = rapid::parsers::make_output_parser(c.opts);
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
  rapid::parsers::ParserOptions o;
  o.tool_parser = "hermes";
  o.reasoning_parser = "qwen3";
  size_t tokens = 0;
  for (auto _ : state) {
    auto p = rapid::parsers::make_output_parser(o);
    for (size_t pos = 0; pos < text.size(); pos += 4) benchmark::DoNotOptimize(p->feed(std::string_view(text).substr(pos, 4)));
    benchmark::DoNotOptimize(p->finish());
    tokens += (text.size() + 3) / 4;
  }
  state.SetItemsProcessed(static_cast<int64_t>(tokens));
  state.counters["sec_per_token"] = benchmark::Counter(static_cast<double>(tokens),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StreamLongPlainText)->Unit(benchmark::kMillisecond);

// One tool call with long arguments (~30 KB, e.g. a file an agent writes), fed in 4-byte pieces:
// the arguments are streamed as they arrive (formats with the name first), so the per-token cost
// must stay flat in the length of the call. Arg: 0 = kimi_k2, 1 = mistral, 2 = deepseek_v3, 3 = hermes.
void BM_StreamLongToolCall(benchmark::State& state) {
  std::string args = "{\"path\": \"src/main.cpp\", \"content\": \"";
  for (int i = 0; i < 1000; ++i) args += "int f" + std::to_string(i) + "(int x) { return x * 2; }\\n";
  args += "\"}";
  static const char* names[] = {"kimi_k2", "mistral", "deepseek_v3", "hermes"};
  std::string text;
  switch (state.range(0)) {
    case 0:
      text = "<|tool_calls_section_begin|><|tool_call_begin|>functions.write:0<|tool_call_argument_begin|>" + args +
             "<|tool_call_end|><|tool_calls_section_end|>";
      break;
    case 1: text = "[TOOL_CALLS]write[ARGS]" + args; break;
    case 2:
      text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>write\n```json\n" + args +
             "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
      break;
    default: text = "<tool_call>\n{\"name\": \"write\", \"arguments\": " + args + "}\n</tool_call>"; break;
  }
  rapid::parsers::ParserOptions o;
  o.tool_parser = names[state.range(0)];
  o.id_seed = 1;
  state.SetLabel(o.tool_parser);
  size_t tokens = 0;
  for (auto _ : state) {
    auto p = rapid::parsers::make_output_parser(o);
    for (size_t pos = 0; pos < text.size(); pos += 4) benchmark::DoNotOptimize(p->feed(std::string_view(text).substr(pos, 4)));
    benchmark::DoNotOptimize(p->finish());
    tokens += (text.size() + 3) / 4;
  }
  state.SetItemsProcessed(static_cast<int64_t>(tokens));
  state.counters["sec_per_token"] = benchmark::Counter(static_cast<double>(tokens),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StreamLongToolCall)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
