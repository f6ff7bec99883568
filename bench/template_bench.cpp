// Rendering cost of real chat templates: a 20-message conversation with 10 tools offered (target:
// well under 1 ms per render), plus parsing cost. Run: build/template_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "template/chat_template.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string template_named(const std::string& name) {
  return slurp(fs::path(RAPID_FIXTURES_DIR) / "chat-templates" / (name + ".jinja"));
}

// 10 tools with realistic JSON-schema parameters and 20 messages mixing user/assistant turns,
// tool calls and tool results.
ordered_json conversation() {
  ordered_json tools = ordered_json::array();
  for (int t = 0; t < 10; ++t) {
    ordered_json params = {{"type", "object"},
                           {"properties",
                            {{"path", {{"type", "string"}, {"description", "File path relative to the repository root"}}},
                             {"limit", {{"type", "integer"}, {"description", "Maximum number of results"}}},
                             {"flags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                           {"required", {"path"}}};
    tools.push_back({{"type", "function"},
                     {"function", {{"name", "tool_" + std::to_string(t)},
                                   {"description", "Tool number " + std::to_string(t) + " does something useful for coding agents."},
                                   {"parameters", params}}}});
  }
  ordered_json msgs = ordered_json::array();
  msgs.push_back({{"role", "system"}, {"content", "You are a coding agent. Use the tools to inspect and edit files."}});
  for (int i = 0; msgs.size() < 20; ++i) {
    msgs.push_back({{"role", "user"}, {"content", "Please look at src/file_" + std::to_string(i) + ".cpp and fix the bug."}});
    ordered_json call = {{"id", "call" + std::to_string(i)},
                         {"type", "function"},
                         {"function", {{"name", "tool_" + std::to_string(i % 10)},
                                       {"arguments", {{"path", "src/file_" + std::to_string(i) + ".cpp"}, {"limit", 50}}}}}};
    msgs.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}});
    msgs.push_back({{"role", "tool"}, {"tool_call_id", "call" + std::to_string(i)},
                    {"content", "int main() {\n  return 0;\n}\n// " + std::string(200, 'x')}});
    if (msgs.size() < 20)
      msgs.push_back({{"role", "assistant"}, {"content", "I found the problem: the return value is wrong. Fixed."}});
  }
  return {{"messages", msgs}, {"tools", tools}, {"add_generation_prompt", true},
          {"bos_token", "<s>"}, {"eos_token", "</s>"}};
}

void render_bench(benchmark::State& state, const std::string& name) {
  rapid::jinja::ChatTemplate tpl(template_named(name));
  ordered_json ctx = conversation();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = tpl.render(ctx);
    bytes = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}

void BM_Render_Qwen3(benchmark::State& s) { render_bench(s, "Qwen-Qwen3-0.6B"); }
void BM_Render_Qwen3Coder(benchmark::State& s) { render_bench(s, "Qwen3-Coder"); }
void BM_Render_Llama31(benchmark::State& s) { render_bench(s, "meta-llama-Llama-3.1-8B-Instruct"); }
void BM_Render_GptOss(benchmark::State& s) { render_bench(s, "openai-gpt-oss-120b"); }
void BM_Render_DeepSeekV31(benchmark::State& s) { render_bench(s, "deepseek-ai-DeepSeek-V3.1"); }

void BM_Parse_Qwen3Coder(benchmark::State& state) {
  std::string src = template_named("Qwen3-Coder");
  for (auto _ : state) {
    rapid::jinja::ChatTemplate tpl(src);
    benchmark::DoNotOptimize(tpl);
  }
}

BENCHMARK(BM_Render_Qwen3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Render_Qwen3Coder)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Render_Llama31)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Render_GptOss)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Render_DeepSeekV31)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Parse_Qwen3Coder)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
