// Parser registry, detection from the real chat templates in the fixtures, the constrained-decoding
// grammar of every format (checked by generating a call from it and parsing it back), ids, errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "parsers/output_parser.h"
#include "parsers/tool_format.h"

using nlohmann::json;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ParserRegistry, AtLeast32ToolFormatsAllConstructible) {
  auto names = rapid::parsers::tool_parser_names();
  EXPECT_GE(names.size(), 32u);
  for (auto& n : names) {
    rapid::parsers::ParserOptions o;
    o.tool_parser = n;
    EXPECT_NO_THROW(rapid::parsers::make_output_parser(o)) << n;
  }
  for (auto& n : rapid::parsers::reasoning_parser_names()) {
    rapid::parsers::ParserOptions o;
    o.reasoning_parser = n;
    EXPECT_NO_THROW(rapid::parsers::make_output_parser(o)) << n;
  }
}

TEST(ParserRegistry, AliasesResolve) {
  using rapid::parsers::find_tool_format;
  EXPECT_EQ(find_tool_format("qwen3_xml")->name, "qwen3_coder");
  EXPECT_EQ(find_tool_format("deepseek_r1")->name, "deepseek_v3");
  EXPECT_EQ(find_tool_format("glm47")->name, "glm45");
  EXPECT_EQ(find_tool_format("llama")->name, "llama3_json");
  EXPECT_EQ(find_tool_format("granite_20b_fc")->name, "granite-20b-fc");
  EXPECT_EQ(find_tool_format("Hermes")->name, "hermes");
}

TEST(ParserRegistry, UnknownNamesAreClearErrors) {
  rapid::parsers::ParserOptions o;
  o.tool_parser = "no_such_format";
  try {
    rapid::parsers::make_output_parser(o);
    FAIL() << "expected an error";
  } catch (const rapid::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_format"), std::string::npos);
  }
  o.tool_parser = "";
  o.reasoning_parser = "nope";
  EXPECT_THROW(rapid::parsers::make_output_parser(o), rapid::Error);
}

// Expected parser per model family, as vLLM's tool-calling docs recommend for these models.
TEST(ParserDetect, RealChatTemplates) {
  const std::vector<std::tuple<std::string, std::string, std::string>> want = {
      {"Qwen-Qwen2.5-7B-Instruct", "hermes", ""},
      {"Qwen-Qwen3-0.6B", "hermes", "qwen3"},
      {"Qwen-QwQ-32B", "hermes", "qwen3"},
      {"Qwen3-Coder", "qwen3_coder", ""},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "hermes", ""},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", ""},
      {"meta-llama-Llama-3.1-8B-Instruct", "llama3_json", ""},
      {"meta-llama-Llama-3.2-3B-Instruct", "llama3_json", ""},
      {"mistralai-Mistral-Nemo-Instruct-2407", "mistral", ""},
      {"Mistral-Small-3.2-24B-Instruct-2506", "mistral", ""},
      {"unsloth-mistral-Devstral-Small-2507", "mistral", ""},
      {"mistralai-Ministral-3-14B-Reasoning-2512", "mistral", "mistral"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek_v3", "deepseek_r1"},
      {"deepseek-ai-DeepSeek-V3.1", "deepseek_v31", ""},
      {"deepseek-ai-DeepSeek-V3.2", "deepseek_v32", ""},
      {"moonshotai-Kimi-K2", "kimi_k2", ""},
      {"Kimi-K2-Thinking", "kimi_k2", "qwen3"},
      {"GLM-4.6", "glm45", "qwen3"},
      {"MiniMax-M2", "minimax_m2", "minimax_m2"},
      {"MiniMax-M1", "minimax", ""},
      {"openai-gpt-oss-120b", "gpt_oss", "gpt_oss"},
      {"ibm-granite-granite-3.3-2B-Instruct", "granite", "granite"},
      {"ibm-granite-granite-4.0", "hermes", ""},
      {"meetkai-functionary-medium-v3.1", "functionary_v3_1", ""},
      {"meetkai-functionary-medium-v3.2", "functionary_v3_2", ""},
      {"fireworks-ai-llama-3-firefunction-v2", "firefunction_v2", ""},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "command_r7b", "command_r7b"},
      {"ByteDance-Seed-OSS", "seed_oss", "seed_oss"},
      {"google-gemma-4-31B-it", "gemma4", "gemma4"},
      {"LFM2-8B-A1B", "lfm2", ""},
      {"GigaChat3-10B-A1.8B", "gigachat3", ""},
      {"NVIDIA-Nemotron-Nano-v2", "nemotron", "qwen3"},
      {"google-gemma-2-2b-it", "", ""},
  };
  for (auto& [file, tool, reasoning] : want) {
    std::string t = slurp(std::filesystem::path(RAPID_FIXTURES_DIR) / "chat-templates" / (file + ".jinja"));
    ASSERT_FALSE(t.empty()) << file;
    EXPECT_EQ(rapid::parsers::detect_tool_parser(t, ""), tool) << file;
    if (!reasoning.empty()) {
      EXPECT_EQ(rapid::parsers::detect_reasoning_parser(t, ""), reasoning) << file;
    }
  }
  EXPECT_EQ(rapid::parsers::detect_tool_parser("", "qwen3_moe"), "hermes");
  EXPECT_EQ(rapid::parsers::detect_tool_parser("", "llama"), "llama3_json");
  EXPECT_EQ(rapid::parsers::detect_tool_parser("", "ministral3"), "mistral");  // Devstral Small 2's text model
  EXPECT_EQ(rapid::parsers::detect_tool_parser("", "unknown_arch"), "");
}

// ---- grammar: generate the text a constrained decoder would allow, parse it back ----

std::string unquote(const std::string& lit) {
  std::string out;
  for (size_t i = 1; i + 1 < lit.size(); ++i) {
    if (lit[i] == '\\' && i + 2 < lit.size() + 1) {
      char e = lit[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    } else {
      out += lit[i];
    }
  }
  return out;
}

std::vector<std::string> tokens(const std::string& rhs) {
  std::vector<std::string> t;
  for (size_t i = 0; i < rhs.size();) {
    if (rhs[i] == ' ') { ++i; continue; }
    if (rhs[i] == '"') {
      size_t j = i + 1;
      while (j < rhs.size() && rhs[j] != '"') j += rhs[j] == '\\' ? 2 : 1;
      t.push_back(rhs.substr(i, j + 1 - i));
      i = j + 1;
    } else {
      size_t j = rhs.find(' ', i);
      if (j == std::string::npos) j = rhs.size();
      t.push_back(rhs.substr(i, j - i));
      i = j;
    }
  }
  return t;
}

std::string encode_args(const rapid::parsers::ToolCallGrammar& g, const json& args) {
  const std::string& enc = g.args_encoding;
  std::string out;
  if (enc == "json") return args.dump();
  if (enc == "xml") {
    for (auto& [k, v] : args.items()) {
      std::string p = g.param_syntax;
      p.replace(p.find("{KEY}"), 5, k);
      std::string val = v.is_string() ? v.get<std::string>() : v.dump();
      p.replace(p.find("{VALUE}"), 7, val);
      out += p;
    }
    return out;
  }
  if (enc == "python-kwargs") {
    for (auto& [k, v] : args.items()) out += (out.empty() ? "" : ", ") + k + "=" + (v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump());
    return out;
  }
  if (enc.rfind("gemma:", 0) == 0) {
    std::string q = enc.substr(6);
    for (auto& [k, v] : args.items()) out += (out.empty() ? "" : ",") + k + ":" + (v.is_string() ? q + v.get<std::string>() + q : v.dump());
    return "{" + out + "}";
  }
  ADD_FAILURE() << "unknown encoding " << enc;
  return out;
}

std::string generate(const rapid::parsers::ToolCallGrammar& g, const std::string& tool, const json& args) {
  std::map<std::string, std::string> rules;
  std::istringstream in(g.gbnf);
  for (std::string line; std::getline(in, line);) {
    size_t p = line.find(" ::= ");
    if (p != std::string::npos) rules[line.substr(0, p)] = line.substr(p + 5);
  }
  auto expand_call = [&]() {
    std::string out;
    std::string rule;
    for (size_t i = 0; i < g.tool_names.size(); ++i)
      if (g.tool_names[i] == tool) rule = g.arg_rules[i];
    for (auto& t : tokens(rules.at("call-" + rule.substr(5)))) {
      if (t[0] == '"') out += unquote(t);
      else if (t == "[0-9]+") out += "0";
      else if (t == rule) out += encode_args(g, args);
      else ADD_FAILURE() << "unexpected token " << t;
    }
    return out;
  };
  std::string out;
  int group = 0;
  for (auto& t : tokens(rules.at("root"))) {
    if (t == "(") { ++group; continue; }
    if (t == ")*") { --group; continue; }
    if (group) continue;  // the optional repetition: one call is enough
    if (t[0] == '"') out += unquote(t);
    else if (t == "call") out += expand_call();
  }
  return out;
}

TEST(ParserGrammar, EveryFormatsGrammarProducesWhatItsParserReads) {
  json tools = json::parse(slurp(std::filesystem::path(RAPID_SOURCE_DIR) / "tests/golden/parsers/tools.json"));
  json args = {{"city", "Paris"}, {"days", 3}};
  for (auto& name : rapid::parsers::tool_parser_names()) {
    if (name == "pythonic" || name == "llama4_pythonic" || name == "xlam" || name == "json" || name == "llama3_json") {
      // whole-reply formats: the grammar output is the whole reply, fine as well
    }
    auto g = rapid::parsers::tool_call_grammar(name, tools);
    ASSERT_EQ(g.arg_rules.size(), 3u) << name;
    ASSERT_EQ(g.tool_names[0], "get_weather");
    EXPECT_EQ(g.arg_rules[0], "args-get-weather");
    EXPECT_NE(g.gbnf.find("args-get-weather"), std::string::npos) << name;
    std::string text = generate(g, "get_weather", args);
    rapid::parsers::ParserOptions o;
    o.tool_parser = name;
    o.tools = tools;
    auto r = rapid::parsers::parse_output(o, text);
    ASSERT_EQ(r.tool_calls.size(), 1u) << name << " grammar text: " << text << "\ncontent: " << r.content;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather") << name;
    EXPECT_EQ(json::parse(r.tool_calls[0].arguments), args) << name << ": " << text;
    EXPECT_EQ(r.content, "") << name;
  }
}

TEST(ParserGrammar, HermesShapeAndNamedTool) {
  json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{}}},{"type":"function","function":{"name":"get_time"}}])");
  auto g = rapid::parsers::tool_call_grammar("hermes", tools, "get_time");
  EXPECT_EQ(g.gbnf,
            "root ::= call ( \"\\n\" call )*\n"
            "call ::= call-get-time\n"
            "call-get-time ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": \" args-get-time \"}\\n</tool_call>\"\n");
  EXPECT_EQ(g.args_encoding, "json");
  EXPECT_THROW(rapid::parsers::tool_call_grammar("hermes", tools, "missing"), rapid::Error);
  EXPECT_THROW(rapid::parsers::tool_call_grammar("hermes", json::array()), rapid::Error);
  EXPECT_THROW(rapid::parsers::tool_call_grammar("nope", tools), rapid::Error);
}

// ---- ids and streaming deltas ----

TEST(ParserIds, UniqueAndInEachFormatsConvention) {
  std::string two = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>";
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    rapid::parsers::ParserOptions o;
    o.tool_parser = "hermes";
    auto r = rapid::parsers::parse_output(o, two);
    ASSERT_EQ(r.tool_calls.size(), 2u);
    for (auto& c : r.tool_calls) {
      EXPECT_TRUE(std::regex_match(c.id, std::regex("call_[A-Za-z0-9]{24}")));
      EXPECT_TRUE(seen.insert(c.id).second) << "id reused across responses: " << c.id;
    }
  }
  rapid::parsers::ParserOptions m;
  m.tool_parser = "mistral";
  auto r = rapid::parsers::parse_output(m, "[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]a[ARGS]{}");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  for (auto& c : r.tool_calls) EXPECT_TRUE(std::regex_match(c.id, std::regex("[A-Za-z0-9]{9}")));
  EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
  // Kimi: duplicate ids written by the model are made unique.
  rapid::parsers::ParserOptions k;
  k.tool_parser = "kimi_k2";
  r = rapid::parsers::parse_output(k, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
                             "<|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].id, "functions.a:0");
  EXPECT_NE(r.tool_calls[1].id, r.tool_calls[0].id);
}

TEST(ParserStreaming, ContentIsReleasedAsSoonAsItCannotBeATag) {
  rapid::parsers::ParserOptions o;
  o.tool_parser = "hermes";
  auto p = rapid::parsers::make_output_parser(o);
  EXPECT_EQ(p->feed("Hello <tool").content, "Hello");  // "Hello" now; " <tool" might still be a call (space held as layout)
  auto d = p->feed("s are fun");
  EXPECT_EQ(d.content, " <tools are fun");
  d = p->feed(" <tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}");
  EXPECT_EQ(d.content, " ");  // text before the first call is content verbatim
  // The call went out with its name and its arguments as written (streamed, README "Semantics").
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"x\": 1}");
  d = p->feed("</tool_call>");
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_TRUE(p->finish().empty());
}

TEST(ParserStreaming, ReasoningOpenedByThePrompt) {
  rapid::parsers::ParserOptions o;
  o.reasoning_parser = "qwen3";
  o.starts_in_reasoning = true;
  auto r = rapid::parsers::parse_output(o, "hmm, let me think</think>The answer is 4.");
  EXPECT_EQ(r.reasoning, "hmm, let me think");
  EXPECT_EQ(r.content, "The answer is 4.");
  o.starts_in_reasoning = false;
  r = rapid::parsers::parse_output(o, "<think>a</think>b");
  EXPECT_EQ(r.reasoning, "a");
  EXPECT_EQ(r.content, "b");
  // DeepSeek R1's parser assumes the prompt opened the block, and accepts a repeated opener.
  o.reasoning_parser = "deepseek_r1";
  r = rapid::parsers::parse_output(o, "<think>a</think>b");
  EXPECT_EQ(r.reasoning, "a");
  EXPECT_EQ(r.content, "b");
}

}  // namespace
