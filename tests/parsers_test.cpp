// Golden cases per tool-call format (tests/golden/parsers, written by scripts/make_parser_goldens.py
// from each model's chat-template encoding) and the streaming property: any chunking of the
// output gives exactly the whole-output result, with no markup in content.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "parsers/output_parser.h"
#include "parsers/tool_format.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct GoldenCase {
  std::string format, name, text;
  json expected;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path golden_dir() { return fs::path(RAPID_SOURCE_DIR) / "tests" / "golden" / "parsers"; }

const json& golden_tools() {
  static const json t = json::parse(slurp(golden_dir() / "tools.json"));
  return t;
}

std::vector<GoldenCase> load_cases() {
  std::vector<GoldenCase> out;
  for (auto& dir : fs::directory_iterator(golden_dir())) {
    if (!dir.is_directory()) continue;
    for (auto& f : fs::directory_iterator(dir.path())) {
      if (f.path().extension() != ".txt") continue;
      fs::path jp = f.path();
      jp.replace_extension(".json");
      out.push_back({dir.path().filename().string(), f.path().stem().string(), slurp(f.path()),
                     json::parse(slurp(jp))});
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.format + a.name < b.format + b.name; });
  return out;
}

rapid::parsers::ParserOptions options_for(const GoldenCase& c, uint64_t seed = 42) {
  rapid::parsers::ParserOptions o;
  const json& opt = c.expected["options"];
  o.tool_parser = opt.value("parser", "");
  o.reasoning_parser = opt.value("reasoning_parser", "");
  o.starts_in_reasoning = opt.value("starts_in_reasoning", false);
  o.tools = golden_tools();
  o.id_seed = seed;
  return o;
}

// Feeds `text` cut at `cuts` (sorted byte offsets) and merges the deltas as a client would.
rapid::parsers::ParseResult run_chunks(const rapid::parsers::ParserOptions& o, std::string_view text, const std::vector<size_t>& cuts) {
  auto p = rapid::parsers::make_output_parser(o);
  rapid::parsers::ParseResult r;
  auto merge = [&](const rapid::parsers::ParseDelta& d) {
    r.content += d.content;
    r.reasoning += d.reasoning;
    for (auto& t : d.tool_calls) {
      if (t.index >= static_cast<int>(r.tool_calls.size())) r.tool_calls.resize(t.index + 1);
      auto& c = r.tool_calls[t.index];
      if (!t.id.empty()) c.id = t.id;
      if (!t.name.empty()) c.name = t.name;
      c.arguments += t.arguments;
    }
  };
  size_t prev = 0;
  for (size_t c : cuts) {
    merge(p->feed(text.substr(prev, c - prev)));
    prev = c;
  }
  merge(p->feed(text.substr(prev)));
  merge(p->finish());
  return r;
}

// Markup of a format: none of it may reach content in a well-formed reply.
std::vector<std::string> markup_of(const rapid::parsers::ParserOptions& o) {
  std::vector<std::string> m;
  if (auto* f = rapid::parsers::find_tool_format(o.tool_parser)) {
    for (auto* v : {&f->starts, &f->strip}) m.insert(m.end(), v->begin(), v->end());
    if (!f->end.empty()) m.push_back(f->end);
  }
  if (auto* r = rapid::parsers::find_reasoning_format(o.reasoning_parser)) {
    for (auto* v : {&r->starts, &r->ends, &r->strip}) m.insert(m.end(), v->begin(), v->end());
  }
  if (rapid::parsers::is_harmony(o.tool_parser))
    m.insert(m.end(), {"<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>", "<|return|>", "<|constrain|>"});
  return m;
}

std::string describe(const rapid::parsers::ParseResult& r) {
  json j;
  j["content"] = r.content;
  j["reasoning"] = r.reasoning;
  for (auto& c : r.tool_calls) j["calls"].push_back({c.id, c.name, c.arguments});
  return j.dump();
}

// One test per format (each checks all of that format's cases), so CTest starts few processes.
using FormatCases = std::vector<GoldenCase>;

std::vector<FormatCases> cases_by_format() {
  std::map<std::string, FormatCases> by;
  for (auto& c : load_cases()) by[c.format].push_back(c);
  std::vector<FormatCases> out;
  for (auto& [_, v] : by) out.push_back(v);
  return out;
}

void PrintTo(const FormatCases& v, std::ostream* os) { *os << (v.empty() ? "" : v[0].format); }

void check_expectation(const GoldenCase& c) {
  auto o = options_for(c, 0);  // random ids: check the convention, not a value
  rapid::parsers::ParseResult r = rapid::parsers::parse_output(o, c.text);
  const json& e = c.expected;
  EXPECT_EQ(r.content, e["content"].is_null() ? "" : e["content"].get<std::string>());
  EXPECT_EQ(r.reasoning, e["reasoning_content"].is_null() ? "" : e["reasoning_content"].get<std::string>());
  ASSERT_EQ(r.tool_calls.size(), e["tool_calls"].size()) << describe(r);
  std::set<std::string> ids;
  const auto* fmt = rapid::parsers::find_tool_format(o.tool_parser);
  for (size_t i = 0; i < r.tool_calls.size(); ++i) {
    const auto& got = r.tool_calls[i];
    const json& want = e["tool_calls"][i];
    EXPECT_EQ(got.name, want["name"].get<std::string>());
    if (want["arguments"].is_string()) {
      EXPECT_EQ(got.arguments, want["arguments"].get<std::string>());
    } else {
      json args = json::parse(got.arguments, nullptr, false);
      ASSERT_FALSE(args.is_discarded()) << got.arguments;
      EXPECT_EQ(args, want["arguments"]) << got.arguments;
    }
    if (want.contains("id")) {
      EXPECT_EQ(got.id, want["id"].get<std::string>());
    } else if (fmt && fmt->ids == rapid::parsers::IdStyle::Mistral9) {
      EXPECT_TRUE(std::regex_match(got.id, std::regex("[A-Za-z0-9]{9}"))) << got.id;
    } else {
      EXPECT_TRUE(std::regex_match(got.id, std::regex("call_[A-Za-z0-9]{24}"))) << got.id;
    }
    EXPECT_TRUE(ids.insert(got.id).second) << "duplicate id " << got.id;
  }
  if (e.value("markup_free", true)) {
    for (auto& m : markup_of(o)) EXPECT_EQ(r.content.find(m), std::string::npos) << "markup '" << m << "' in content";
  }
}

void check_two_chunk_splits(const GoldenCase& c) {
  auto o = options_for(c);
  std::string whole = describe(rapid::parsers::parse_output(o, c.text));
  for (size_t cut = 0; cut <= c.text.size(); ++cut) {
    auto r = run_chunks(o, c.text, {cut});
    ASSERT_EQ(describe(r), whole) << "split at byte " << cut;
  }
}

void check_random_chunkings(const GoldenCase& c) {
  auto o = options_for(c);
  std::string whole = describe(rapid::parsers::parse_output(o, c.text));
  std::vector<size_t> bytes;  // 1-byte chunks
  for (size_t i = 1; i < c.text.size(); ++i) bytes.push_back(i);
  ASSERT_EQ(describe(run_chunks(o, c.text, bytes)), whole) << "1-byte chunks";
  std::mt19937_64 rng(std::hash<std::string>{}(c.format + c.name));
  for (int trial = 0; trial < 40 && c.text.size() > 1; ++trial) {
    size_t n = 1 + rng() % 63;
    std::vector<size_t> cuts;
    for (size_t i = 0; i < n; ++i) cuts.push_back(1 + rng() % (c.text.size() - 1));
    std::sort(cuts.begin(), cuts.end());
    ASSERT_EQ(describe(run_chunks(o, c.text, cuts)), whole) << "trial " << trial;
  }
}

class Golden : public ::testing::TestWithParam<FormatCases> {};

TEST_P(Golden, MatchesExpectation) {
  for (auto& c : GetParam()) {
    SCOPED_TRACE(c.format + "/" + c.name);
    check_expectation(c);
  }
}

TEST_P(Golden, EveryTwoChunkSplitMatchesWhole) {
  for (auto& c : GetParam()) {
    SCOPED_TRACE(c.format + "/" + c.name);
    check_two_chunk_splits(c);
  }
}

TEST_P(Golden, RandomChunkingsAndOneByteChunksMatchWhole) {
  for (auto& c : GetParam()) {
    SCOPED_TRACE(c.format + "/" + c.name);
    check_random_chunkings(c);
  }
}

std::string format_name(const ::testing::TestParamInfo<FormatCases>& info) {
  std::string n = info.param.empty() ? "none" : info.param[0].format;
  for (auto& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Parsers, Golden, ::testing::ValuesIn(cases_by_format()), format_name);

TEST(ParserGolden, EveryToolFormatHasSixCases) {
  std::map<std::string, int> per;
  for (auto& c : load_cases()) per[c.format]++;
  for (auto& n : rapid::parsers::tool_parser_names()) EXPECT_GE(per[n], 6) << n;
  EXPECT_GE(rapid::parsers::tool_parser_names().size(), 32u);
}

}  // namespace
