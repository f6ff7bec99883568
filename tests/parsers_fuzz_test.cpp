// Robustness: random soups of every format's markers, JSON/XML/Python fragments, broken UTF-8 and
// plain text, fed to every parser whole and in random chunks. Nothing may crash (CI runs this under
// ASan/UBSan), and every chunking must give the whole-output result. Bounded to a few seconds.
#include <gtest/gtest.h>

#include <random>

#include "parsers/output_parser.h"
#include "parsers/tool_format.h"

namespace {

std::vector<std::string> vocabulary() {
  std::vector<std::string> v = {"{", "}", "[", "]", "\"", "\\", ":", ",", ";", " ", "\n", "name", "arguments", "parameters",
                                "\"name\": \"f\"", "\"arguments\": {", "get_weather(", "city=", "'x'", ")", "=", "<", ">", "/",
                                "</", "<|", "|>", "｜", "▁", "\xE4\xBD", "\xA0", "\xFF", "日本", "true", "null", "1e999", "-",
                                "<think>", "</think>", "```json", "```", "call:", "<escape>", "<|\"|>", "functions.f:0",
                                "<|channel|>", "analysis", "final", "commentary to=functions.f", "<|message|>", "<|end|>",
                                "<|call|>", "<|start|>", "assistant", "<|constrain|>", ">>>", "all\n", "[ARGS]", "[CALL_ID]"};
  for (auto& f : rapid::parsers::tool_formats()) {
    for (auto& m : f.starts) v.push_back(m);
    for (auto& m : f.strip) v.push_back(m);
    if (!f.end.empty()) v.push_back(f.end);
    if (!f.inner_start.empty()) v.push_back(f.inner_start);
    if (!f.inner_end.empty()) v.push_back(f.inner_end);
    if (!f.sep.empty()) v.push_back(f.sep);
    for (auto* s : {&f.invoke_open, &f.invoke_close, &f.param_open, &f.param_close})
      if (!s->empty()) v.push_back(*s);
  }
  for (auto& r : rapid::parsers::reasoning_formats()) {
    for (auto& m : r.starts) v.push_back(m);
    for (auto& m : r.ends) v.push_back(m);
  }
  for (std::string x : {"<function=f>", "<parameter=a>", "</parameter>", "</function>", "<invoke name=\"f\">",
                        "<parameter name=\"a\">", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"})
    v.push_back(x);
  return v;
}

std::string describe(const rapid::parsers::ParseResult& r) {
  std::string s = r.content + "\x01" + r.reasoning;
  for (auto& c : r.tool_calls) s += "\x02" + c.id + "\x03" + c.name + "\x03" + c.arguments;
  return s;
}

// Tool calls arrive as fragments (id + name first, then argument pieces): merge by index as a
// client does. A fragment for an index that is not next-or-existing is kept as its own entry so
// a bad index still shows up in the comparison.
void merge_calls(rapid::parsers::ParseResult& r, const rapid::parsers::ParseDelta& d) {
  for (auto& t : d.tool_calls) {
    if (t.index == static_cast<int>(r.tool_calls.size())) r.tool_calls.push_back({t.id, t.name, ""});
    if (t.index < 0 || t.index >= static_cast<int>(r.tool_calls.size())) {
      r.tool_calls.push_back({t.id, t.name, t.arguments});
      continue;
    }
    auto& c = r.tool_calls[t.index];
    if (!t.id.empty()) c.id = t.id;
    if (!t.name.empty()) c.name = t.name;
    c.arguments += t.arguments;
  }
}

TEST(ParsersFuzz, RandomMarkerSoupNeverCrashesAndChunkingIsInvisible) {
  const auto vocab = vocabulary();
  std::vector<std::string> parsers = rapid::parsers::tool_parser_names();
  std::mt19937_64 rng(20261129);
  const nlohmann::json tools = nlohmann::json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"},"city":{"type":"string"}}}}}])");
  int runs = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    int pieces = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < pieces; ++i) text += vocab[rng() % vocab.size()];
    rapid::parsers::ParserOptions o;
    o.tool_parser = parsers[rng() % parsers.size()];
    auto rnames = rapid::parsers::reasoning_parser_names();
    if (rng() % 2) o.reasoning_parser = rnames[rng() % rnames.size()];
    o.starts_in_reasoning = rng() % 4 == 0;
    o.tools = tools;
    o.id_seed = 99;
    auto whole = rapid::parsers::parse_output(o, text);
    for (auto& c : whole.tool_calls) EXPECT_FALSE(c.id.empty());
    // One random chunking per soup.
    auto p = rapid::parsers::make_output_parser(o);
    rapid::parsers::ParseResult r;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = 1 + rng() % 9;
      auto d = p->feed(std::string_view(text).substr(pos, n));
      pos += n;
      r.content += d.content;
      r.reasoning += d.reasoning;
      merge_calls(r, d);
    }
    auto d = p->finish();
    r.content += d.content;
    r.reasoning += d.reasoning;
    merge_calls(r, d);
    ASSERT_EQ(describe(r), describe(whole)) << o.tool_parser << " / " << o.reasoning_parser << " on: " << text;
    ++runs;
  }
  EXPECT_EQ(runs, 3000);
}

TEST(ParsersFuzz, RandomBytesNeverCrash) {
  std::mt19937_64 rng(7);
  for (auto& name : rapid::parsers::tool_parser_names()) {
    for (int iter = 0; iter < 40; ++iter) {
      std::string text(rng() % 300, '\0');
      for (auto& ch : text) ch = static_cast<char>(rng() % 256);
      rapid::parsers::ParserOptions o;
      o.tool_parser = name;
      auto r = rapid::parsers::parse_output(o, text);
      // With no markup in the bytes, everything must come back as content (nothing lost).
      if (r.tool_calls.empty() && r.reasoning.empty()) {
        EXPECT_LE(r.content.size(), text.size());
      }
    }
  }
}

TEST(ParsersFuzz, DeepNestingAndHugeNumbersAreHandled) {
  std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(5000, '[') + std::string(5000, ']') + "}</tool_call>";
  rapid::parsers::ParserOptions o;
  o.tool_parser = "hermes";
  auto r = rapid::parsers::parse_output(o, deep);  // must not crash; nlohmann parses depth iteratively enough
  EXPECT_LE(r.tool_calls.size(), 1u);
  o.tool_parser = "pythonic";
  const std::string deep_c = "c=" + std::string(3000, '[') + ")]";
  r = rapid::parsers::parse_output(o, "[f(a=1e999, b=-99999999999999999999999, " + deep_c);
  // The call went out at "f(" and stands; the too-deep value does not parse: content from it on.
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\":null,\"b\":-9.999999999999999e+22}");  // out of long long range: a double
  EXPECT_EQ(r.content, deep_c);
  o.tool_parser = "qwen3_coder";
  o.tools = nlohmann::json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer"}}}}}])");
  r = rapid::parsers::parse_output(o, "<tool_call><function=f><parameter=n>1e300</parameter></function></tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
}

}  // namespace
