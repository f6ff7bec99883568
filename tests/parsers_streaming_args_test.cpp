// Incremental tool-call arguments: for formats whose name comes before the arguments JSON, the
// call goes out (id + name) as soon as the name is known and its argument text follows in
// fragments while the model writes it. The joined fragments must equal the whole-output result.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "parsers/output_parser.h"

namespace {

using nlohmann::json;

struct Fed {
  std::vector<rapid::parsers::ParsedToolCall> calls;  // merged by index
  std::string content;
  int header_at = -1;          // byte offset after which call 0's id + name arrived
  int first_args_at = -1;      // byte offset after which call 0's first argument bytes arrived
  std::vector<std::pair<size_t, std::string>> frags;  // call 0: (bytes fed so far, fragment)
  std::vector<std::string> all_frags;                 // every non-empty argument fragment
};

// Feeds `text` one byte at a time and merges the deltas as a client does.
Fed feed_bytes(const rapid::parsers::ParserOptions& o, const std::string& text) {
  auto p = rapid::parsers::make_output_parser(o);
  Fed f;
  auto merge = [&](const rapid::parsers::ParseDelta& d, size_t fed) {
    f.content += d.content;
    for (auto& t : d.tool_calls) {
      EXPECT_GE(t.index, 0);
      EXPECT_LE(t.index, static_cast<int>(f.calls.size()));  // indices are dense and in order
      if (t.index >= static_cast<int>(f.calls.size())) {
        f.calls.resize(t.index + 1);
        // The first fragment of a call carries its id and name.
        EXPECT_FALSE(t.id.empty());
        EXPECT_FALSE(t.name.empty());
        if (t.index == 0) f.header_at = static_cast<int>(fed);
      } else {
        EXPECT_TRUE(t.id.empty());  // later fragments only append arguments
        EXPECT_TRUE(t.name.empty());
      }
      auto& c = f.calls[t.index];
      if (!t.id.empty()) c.id = t.id;
      if (!t.name.empty()) c.name = t.name;
      c.arguments += t.arguments;
      if (!t.arguments.empty()) {
        f.all_frags.push_back(t.arguments);
        if (t.index == 0) {
          if (f.first_args_at < 0) f.first_args_at = static_cast<int>(fed);
          f.frags.emplace_back(fed, t.arguments);
        }
      }
    }
  };
  for (size_t i = 0; i < text.size(); ++i) merge(p->feed(std::string_view(text).substr(i, 1)), i + 1);
  merge(p->finish(), text.size() + 1);
  return f;
}

rapid::parsers::ParserOptions opts(const std::string& parser) {
  rapid::parsers::ParserOptions o;
  o.tool_parser = parser;
  o.id_seed = 11;
  return o;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

struct Case {
  std::string parser;
  std::string before;  // output up to the call's closing marker
  std::string after;   // closing marker and the rest
  std::string args;    // the arguments text the call must end up with
  bool leading = false;  // a whole-reply format: the call must be the start of the reply
};

const std::string kArgs = "{\"city\": \"Paris\", \"unit\": \"celsius\", \"days\": [1, 2, 3]}";

std::vector<Case> converted() {
  return {
      {"kimi_k2",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" + kArgs,
       "<|tool_call_end|><|tool_calls_section_end|>", kArgs},
      {"deepseek_v31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + kArgs,
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", kArgs},
      {"deepseek_v3",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" + kArgs + "\n```",
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", kArgs},
      {"functionary_v3_1", "<function=get_weather>" + kArgs, "</function>", kArgs},
      // Mistral v11 has no closing marker: the arguments end where their JSON balances.
      {"mistral", "[TOOL_CALLS]get_weather[ARGS]" + kArgs, "", kArgs},
      // gpt-oss harmony: the call goes out when the recipient header is complete (<|message|>).
      // Functionary v3.2: the prompt wrote ">>>"; the block ends where the next ">>>" starts.
      {"functionary_v3_2", "all\nChecking.>>>get_weather\n" + kArgs, ">>>all\nDone.", kArgs, true},
      {"gpt_oss", "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + kArgs,
       "<|call|>", kArgs},
  };
}

// JSON-call formats (name inside the JSON): the call goes out at `"arguments": {`.
std::vector<Case> json_calls() {
  const std::string head = "{\"name\": \"get_weather\", \"arguments\": ";
  const std::string head_p = "{\"name\": \"get_weather\", \"parameters\": ";
  return {
      {"hermes", "<tool_call>\n" + head + kArgs, "}\n</tool_call>", kArgs},
      {"llama3_json", "<|python_tag|>" + head_p + kArgs, "}", kArgs},
      {"llama3_json", head_p + kArgs, "}<|eom_id|>", kArgs, true},
      {"json", head + kArgs, "}", kArgs, true},
      {"xlam", "[" + head + kArgs, "}]", kArgs, true},
      {"minimax", "<tool_calls>\n" + head + kArgs, "}\n</tool_calls>", kArgs},
      {"granite", "<|tool_call|>[" + head + kArgs, "}]", kArgs},
      {"granite-20b-fc", "<function_call> " + head + kArgs, "}", kArgs},
      {"firefunction_v2", " functools[" + head + kArgs, "}]", kArgs},
      {"phi4_mini_json", "functools[" + head + kArgs, "}]", kArgs},
      {"internlm", "<|action_start|><|plugin|>\n" + head_p + kArgs, "}<|action_end|>", kArgs},
      {"jamba", "<tool_calls>[" + head + kArgs, "}]</tool_calls>", kArgs},
      {"hunyuan_a13b", "<tool_calls>[" + head + kArgs, "}]</tool_calls>", kArgs},
      {"longcat", "<longcat_tool_call>" + head + kArgs, "}</longcat_tool_call>", kArgs},
      {"ernie45", "<tool_call>" + head + kArgs, "}</tool_call>", kArgs},
      {"nemotron", "<TOOLCALL>[" + head + kArgs, "}]</TOOLCALL>", kArgs},
      {"gigachat3", "<|message_sep|>\n\nfunction call<|role_sep|>\n" + head + kArgs, "}", kArgs},
  };
}

std::vector<Case> all_cases() {
  auto v = converted();
  for (auto& c : json_calls()) v.push_back(c);
  return v;
}

TEST(ParsersStreamingArgs, ArgumentsArriveInFragmentsBeforeTheClosingMarker) {
  for (auto& c : all_cases()) {
    SCOPED_TRACE(c.parser + ": " + c.before);
    const std::string pre = c.leading ? "" : "Checking. ";
    std::string text = pre + c.before + c.after;
    auto whole = rapid::parsers::parse_output(opts(c.parser), text);
    ASSERT_EQ(whole.tool_calls.size(), 1u);
    EXPECT_EQ(whole.tool_calls[0].name, "get_weather");
    EXPECT_EQ(whole.tool_calls[0].arguments, c.args);
    EXPECT_EQ(json::parse(whole.tool_calls[0].arguments),
              json({{"city", "Paris"}, {"unit", "celsius"}, {"days", {1, 2, 3}}}));

    Fed f = feed_bytes(opts(c.parser), text);
    ASSERT_EQ(f.calls.size(), 1u);
    EXPECT_EQ(f.content, whole.content);
    EXPECT_EQ(f.calls[0].id, whole.tool_calls[0].id);
    EXPECT_EQ(f.calls[0].name, "get_weather");
    EXPECT_EQ(f.calls[0].arguments, whole.tool_calls[0].arguments);  // joined == whole, exactly

    const size_t close_at = pre.size() + c.before.size();  // closing marker starts here
    // The name went out before any argument text, and before the arguments were complete (at
    // the latest with their opening brace: JSON-call formats know the call only then).
    ASSERT_GE(f.header_at, 0);
    EXPECT_LE(f.header_at, f.first_args_at);
    EXPECT_LE(static_cast<size_t>(f.header_at), close_at - kArgs.size() + 1);
    // Argument text arrived in several fragments before the closing marker was fed.
    size_t early = 0;
    for (auto& [fed, s] : f.frags) early += fed <= close_at;
    EXPECT_GT(early, 1u);
    EXPECT_GE(f.frags.size(), kArgs.size() / 2);  // roughly one fragment per byte fed
    for (auto& [fed, s] : f.frags) {
      EXPECT_EQ(s.find("<"), std::string::npos) << s;  // no marker bytes in arguments
      EXPECT_EQ(s.find("`"), std::string::npos) << s;  // nor the closing fence
    }
  }
}

// Every split of the text into two chunks gives the whole result (fragments differ, the joined
// arguments do not); also for malformed calls and calls followed by more text.
TEST(ParsersStreamingArgs, EverySplitJoinsToTheWholeResult) {
  std::vector<std::pair<std::string, std::string>> texts;
  for (auto& c : all_cases()) texts.emplace_back(c.parser, (c.leading ? "" : "Hi ") + c.before + c.after + "\nbye");
  // JSON calls: parallel, more keys after the arguments, key-order variants (whole), malformed.
  texts.emplace_back("hermes", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}\\\"{\"}}\n</tool_call>\n"
                               "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": [1, {\"z\": \"é\"}]}, \"id\": \"q\"}\n</tool_call>");
  texts.emplace_back("hermes", "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"a\"}</tool_call>");
  texts.emplace_back("hermes", "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n{\"arguments\": {}, \"name\": \"b\"}"
                               " {\"name\": \"c\", \"arguments\": {}}</tool_call>");
  texts.emplace_back("hermes", "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}} trailing words</tool_call> after");
  texts.emplace_back("hermes", "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": \"Par}\n</tool_call>");
  texts.emplace_back("jamba", "<tool_calls>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": \"日本\"}}]</tool_calls>");
  texts.emplace_back("llama3_json", "{\"name\": \"a\", \"parameters\": {\"q\": 1}}; {\"name\": \"b\", \"parameters\": {}}<|eom_id|>");
  texts.emplace_back("granite-20b-fc", "<function_call> {\"name\": \"a\", \"arguments\": {\"s\": \"<function_call>\"}} "
                                       "<function_call> {\"name\": \"b\", \"arguments\": {}} and text");
  texts.emplace_back("kimi_k2",
                     "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{\"x\": \"Par"
                     "<|tool_call_end|><|tool_call_begin|>functions.b:1<|tool_call_argument_begin|>{\"y\": [1, {\"z\": \"é\"}]}"
                     "<|tool_call_end|><|tool_calls_section_end|>");
  texts.emplace_back("mistral", "[TOOL_CALLS]a[ARGS]{\"x\": \"[TOOL_CALLS]\"} [TOOL_CALLS]b[CALL_ID]abc123XYZ[ARGS]{\"y\": 2");
  texts.emplace_back("mistral", "[TOOL_CALLS]a[ARGS]{\"x\": 1, [TOOL_CALLS]b[ARGS]{}");
  texts.emplace_back("deepseek_v3",
                     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"q\": \"a`b ``` c\"}\n```"
                     "<｜tool▁call▁end｜><｜tool▁call▁begin｜>junk<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  texts.emplace_back("functionary_v3_1", "<function=f>{\"s\": \"日本語\"}</function> done");
  // gpt-oss: analysis, parallel calls, a truncated body, non-object and empty arguments, a
  // header without <|end|>, a reply that starts inside the header.
  const std::string h = "<|start|>assistant<|channel|>commentary to=functions.";
  texts.emplace_back("gpt_oss", "<|channel|>analysis<|message|>think <|c<|end|>" + h + "a <|constrain|>json<|message|> {\"x\": \"<|\u65e5\", \"y\": \"日本\"}\n<|call|>" +
                                    h + "b <|constrain|>json<|message|>[1, 2]<|call|>");
  texts.emplace_back("gpt_oss", h + "a <|constrain|>json<|message|>{\"x\": \"Par<|call|>" + h + "b<|message|>\"s\"<|call|>" + h +
                                    "c<|message|>  <|call|><|start|>assistant<|channel|>final<|message|>done");
  texts.emplace_back("gpt_oss", " to=functions.f<|channel|>commentary json<|message|>{\"q\": 1}<|start|>assistant<|channel|>final<|message|>ok");
  texts.emplace_back("gpt_oss", h + "f<|message|>{\"q\": \"unterminated é");
  texts.emplace_back("functionary_v3_2", "get_weather\n{\"city\": \">>\"}>>>get_time\n{\"tz\": \"日本\"}>>>all\nok>>>f\n\"s\"");
  texts.emplace_back("functionary_v3_2", "all\nHi >>>f\n{\"a\": [1, >>>g\n{}\n");
  for (auto& [parser, text] : texts) {
    SCOPED_TRACE(parser + ": " + text);
    auto o = opts(parser);
    auto whole = rapid::parsers::parse_output(o, text);
    ASSERT_FALSE(whole.tool_calls.empty());
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      auto p = rapid::parsers::make_output_parser(o);
      rapid::parsers::ParseResult r;
      for (auto d : {p->feed(std::string_view(text).substr(0, cut)), p->feed(std::string_view(text).substr(cut)), p->finish()}) {
        r.content += d.content;
        for (auto& t : d.tool_calls) {
          if (t.index >= static_cast<int>(r.tool_calls.size())) r.tool_calls.resize(t.index + 1);
          auto& c = r.tool_calls[t.index];
          if (!t.id.empty()) c.id = t.id;
          if (!t.name.empty()) c.name = t.name;
          c.arguments += t.arguments;
        }
      }
      ASSERT_EQ(r.content, whole.content) << cut;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << cut;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << cut;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << cut;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << cut;
      }
    }
    Fed f = feed_bytes(o, text);
    for (auto& s : f.all_frags) EXPECT_TRUE(valid_utf8(s)) << s;  // fragments never split a character
  }
}

// Malformed after fragments went out: the call stays, with the model's raw argument text.
TEST(ParsersStreamingArgs, MalformedAfterFragmentsKeepsRawArguments) {
  std::string text =
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Par"
      "<|tool_call_end|><|tool_calls_section_end|>";
  Fed f = feed_bytes(opts("kimi_k2"), text);
  ASSERT_EQ(f.calls.size(), 1u);
  EXPECT_GT(f.frags.size(), 1u);
  EXPECT_EQ(f.calls[0].arguments, "{\"city\": \"Par");
  EXPECT_EQ(rapid::parsers::parse_output(opts("kimi_k2"), text).tool_calls.at(0).arguments, "{\"city\": \"Par");

  // A section that never closes, once a call went out, still yields the call.
  std::string open = "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}";
  auto r = rapid::parsers::parse_output(opts("kimi_k2"), open);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\": 1}");
  EXPECT_EQ(feed_bytes(opts("kimi_k2"), open).calls.at(0).arguments, "{\"a\": 1}");

  // A piece that is not a call after one went out comes back as content, verbatim.
  std::string bad = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
                    "<｜tool▁call▁begin｜>no separator<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  r = rapid::parsers::parse_output(opts("deepseek_v31"), bad);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "f");
  EXPECT_EQ(r.content, "<｜tool▁call▁begin｜>no separator<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  // Before any call went out, the old rule holds: the whole block is content.
  std::string bad_first = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>no separator<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  r = rapid::parsers::parse_output(opts("deepseek_v31"), bad_first);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, bad_first);
}

// Arguments that are not an object/array (a string holding JSON, a bare word) are normalised or
// kept raw, so they are released whole when the call closes, after the id + name fragment.
TEST(ParsersStreamingArgs, NonObjectArgumentsComeWhole) {
  std::string text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>\"{\\\"a\\\": 1}\"<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  Fed f = feed_bytes(opts("deepseek_v31"), text);
  ASSERT_EQ(f.calls.size(), 1u);
  EXPECT_EQ(json::parse(f.calls[0].arguments), json({{"a", 1}}));
  EXPECT_EQ(f.frags.size(), 1u);
  EXPECT_LT(f.header_at, f.first_args_at);
}

// JSON-call formats (hermes...): the call goes out with id + name and arguments "" once
// `{"name": "N", "arguments": {` has been seen; the outer object's closing brace never becomes
// part of the arguments; other key orders keep whole-call delivery.
TEST(ParsersStreamingArgs, JsonCallsStreamOnceNameAndArgumentsKeyAreSeen) {
  const std::string head = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
  auto p = rapid::parsers::make_output_parser(opts("hermes"));
  auto d = p->feed(head);
  EXPECT_TRUE(d.tool_calls.empty());  // the arguments value may still be a string: not yet
  d = p->feed("{");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_FALSE(d.tool_calls[0].id.empty());
  EXPECT_EQ(d.tool_calls[0].arguments, "{");
  d = p->feed("\"city\": \"Par");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "\"city\": \"Par");
  EXPECT_TRUE(d.tool_calls[0].name.empty());
  d = p->feed("is\"}");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "is\"}");
  d = p->feed("}\n</tool_call>");  // the outer brace is not arguments
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_TRUE(d.content.empty());
  EXPECT_TRUE(p->finish().empty());

  // Key order "arguments" first: whole call at the closing marker (re-serialised as before).
  std::string rev = "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"a\"}";
  Fed f = feed_bytes(opts("hermes"), rev + "</tool_call>");
  ASSERT_EQ(f.calls.size(), 1u);
  EXPECT_EQ(f.calls[0].arguments, "{\"x\":1}");
  EXPECT_GT(static_cast<size_t>(f.header_at), rev.size());

  // Malformed after the call went out: it stands with the raw arguments; text after it inside
  // the block comes back as content.
  auto r = rapid::parsers::parse_output(opts("hermes"), "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": \"Par}\n</tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"x\": \"Par}");
  EXPECT_EQ(r.content, "");
  r = rapid::parsers::parse_output(opts("hermes"), "<tool_call>{\"name\": \"a\", \"arguments\": {}} oops</tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.content, "oops</tool_call>");
  // Before any call went out the whole-block rule holds.
  std::string bad = "<tool_call>{\"name\": \"a\", \"arguments\": \"x\"</tool_call>";
  r = rapid::parsers::parse_output(opts("hermes"), bad);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, bad);
}

// Random soups of the converted formats' markers and JSON pieces: byte-at-a-time and random
// chunkings must join to the whole result, and no fragment may split a UTF-8 character.
TEST(ParsersStreamingArgs, RandomSoupsJoinToTheWholeResult) {
  const std::vector<std::string> parsers = {"kimi_k2", "deepseek_v3", "deepseek_v31", "mistral", "functionary_v3_1",
                                            "functionary_v3_2", "gpt_oss"};
  const std::vector<std::string> atoms = {
      "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>",
      "<|tool_call_argument_begin|>", "functions.f:0", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
      "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "function", "[TOOL_CALLS]", "[ARGS]",
      "[CALL_ID]", "<function=", "</function>", ">", "f", "get_weather", "\n", "```json\n", "```", " ", "\n",
      "{", "}", "[", "]", "\"", "\\", ":", ",", "\"city\": ", "\"Paris\"", "1", "é", "日本", "\xE6", "<", "<|", "`",
      "text ", ">>>", ">>>all\n", "all\n", "<|start|>assistant", "<|channel|>commentary to=functions.f ", "<|message|>",
      "<|call|>", "<|end|>", "<|constrain|>json", "<|channel|>analysis"};
  std::mt19937_64 rng(2024);
  int with_calls = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const std::string& parser = parsers[rng() % parsers.size()];
    std::string text;
    size_t n = 1 + rng() % 24;
    for (size_t i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    if (rng() % 4 != 0) {
      // A well-formed reply of this format with a random argument text, then maybe damaged.
      std::string args = "{";
      for (size_t i = 0, k = rng() % 8; i < k; ++i) args += atoms[16 + rng() % (atoms.size() - 16)];
      if (rng() % 2) args += "}";
      std::string call = parser == "kimi_k2"       ? "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>" + args + "<|tool_call_end|>"
                         : parser == "deepseek_v3"  ? "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n" + args + "\n```<｜tool▁call▁end｜>"
                         : parser == "deepseek_v31" ? "<｜tool▁call▁begin｜>f<｜tool▁sep｜>" + args + "<｜tool▁call▁end｜>"
                         : parser == "mistral"      ? "[TOOL_CALLS]f[ARGS]" + args
                                                    : "<function=f>" + args + "</function>";
      std::string calls = call;
      if (rng() % 2) calls += (parser == "mistral" || parser == "functionary_v3_1" ? "" : "\n") + call;
      text = parser == "kimi_k2"       ? "<|tool_calls_section_begin|>" + calls + "<|tool_calls_section_end|>"
             : parser == "deepseek_v3" || parser == "deepseek_v31" ? "<｜tool▁calls▁begin｜>" + calls + "<｜tool▁calls▁end｜>"
                                                                   : calls;
      if (rng() % 2) text = atoms.back() + text;
      for (size_t i = 0, k = rng() % 3; i < k; ++i) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.insert(at, atoms[rng() % atoms.size()]);
      }
      if (rng() % 4 == 0) text.resize(rng() % (text.size() + 1));
    }
    auto o = opts(parser);
    auto whole = rapid::parsers::parse_output(o, text);
    with_calls += !whole.tool_calls.empty();
    auto check = [&](const std::vector<size_t>& cuts) {
      auto p = rapid::parsers::make_output_parser(o);
      rapid::parsers::ParseResult r;
      auto merge = [&](const rapid::parsers::ParseDelta& d) {
        r.content += d.content;
        for (auto& t : d.tool_calls) {
          ASSERT_TRUE(valid_utf8(t.arguments) || !valid_utf8(text)) << t.arguments;
          ASSERT_LE(t.index, static_cast<int>(r.tool_calls.size()));
          if (t.index == static_cast<int>(r.tool_calls.size())) r.tool_calls.emplace_back();
          auto& c = r.tool_calls[t.index];
          if (!t.id.empty()) c.id = t.id;
          if (!t.name.empty()) c.name = t.name;
          c.arguments += t.arguments;
        }
      };
      size_t prev = 0;
      for (size_t c : cuts) {
        merge(p->feed(std::string_view(text).substr(prev, c - prev)));
        prev = c;
      }
      merge(p->feed(std::string_view(text).substr(prev)));
      merge(p->finish());
      ASSERT_EQ(r.content, whole.content) << parser << " on: " << text;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << parser << " on: " << text;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << parser << " on: " << text;
      }
    };
    std::vector<size_t> bytes;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    check(bytes);
    std::vector<size_t> rnd;
    for (size_t pos = 1 + rng() % 6; pos < text.size(); pos += 1 + rng() % 6) rnd.push_back(pos);
    check(rnd);
  }
  EXPECT_GT(with_calls, 600) << "the soups should produce calls";
  std::printf("soups with calls: %d / 1500\n", with_calls);
}

// The same for JSON-call formats: random pieces of call objects, lists, separators, fences,
// markers; byte-at-a-time and random chunkings must join to the whole result.
TEST(ParsersStreamingArgs, RandomJsonCallSoupsJoinToTheWholeResult) {
  const std::vector<std::string> parsers = {"hermes", "granite", "llama3_json", "jamba", "granite-20b-fc", "json"};
  const std::vector<std::string> atoms = {
      "<tool_call>", "</tool_call>", "<|tool_call|>", "<tool_calls>", "</tool_calls>", "<function_call>",
      "<|python_tag|>", "<|eom_id|>", "<tool", "</", "```json\n", "```", "\n", " ", ";", ",", "[", "]", "{", "}",
      "\"", "\\", ":", "\"name\": ", "\"arguments\": ", "\"parameters\": ", "\"f\"", "\"x\": ", "1", "é",
      "日本", "\xE6", "{\"name\": \"f\", \"arguments\": ", "{\"arguments\": {}, \"name\": \"g\"}", "text "};
  std::mt19937_64 rng(77);
  int with_calls = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const std::string& parser = parsers[rng() % parsers.size()];
    std::string text;
    size_t n = 1 + rng() % 24;
    for (size_t i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    if (rng() % 4 != 0) {
      std::string calls;
      for (size_t k = 0, m = 1 + rng() % 3; k < m; ++k) {
        std::string args = "{";
        for (size_t i = 0, a = rng() % 8; i < a; ++i) args += atoms[14 + rng() % (atoms.size() - 14)];
        if (rng() % 3) args += "}";
        if (k) calls += parser == "granite-20b-fc" ? " <function_call> " : parser == "hermes" ? "\n" : ", ";
        calls += "{\"name\": \"f" + std::to_string(k) + "\", \"" + (rng() % 2 ? "arguments" : "parameters") + "\": " + args + "}";
      }
      text = parser == "hermes"           ? "<tool_call>\n" + calls + "\n</tool_call>"
             : parser == "granite"        ? "<|tool_call|>[" + calls + "]"
             : parser == "llama3_json"    ? (rng() % 2 ? "<|python_tag|>" : "") + calls
             : parser == "jamba"          ? "<tool_calls>[" + calls + "]</tool_calls>"
             : parser == "granite-20b-fc" ? "<function_call> " + calls
                                          : calls;
      if (rng() % 3 == 0) text = "text " + text;
      for (size_t i = 0, k = rng() % 3; i < k; ++i) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.insert(at, atoms[rng() % atoms.size()]);
      }
      if (rng() % 4 == 0) text.resize(rng() % (text.size() + 1));
    }
    auto o = opts(parser);
    auto whole = rapid::parsers::parse_output(o, text);
    with_calls += !whole.tool_calls.empty();
    auto check = [&](const std::vector<size_t>& cuts) {
      auto p = rapid::parsers::make_output_parser(o);
      rapid::parsers::ParseResult r;
      auto merge = [&](const rapid::parsers::ParseDelta& d) {
        r.content += d.content;
        for (auto& t : d.tool_calls) {
          ASSERT_TRUE(valid_utf8(t.arguments) || !valid_utf8(text)) << t.arguments;
          ASSERT_LE(t.index, static_cast<int>(r.tool_calls.size()));
          if (t.index == static_cast<int>(r.tool_calls.size())) r.tool_calls.emplace_back();
          auto& c = r.tool_calls[t.index];
          if (!t.id.empty()) c.id = t.id;
          if (!t.name.empty()) c.name = t.name;
          c.arguments += t.arguments;
        }
      };
      size_t prev = 0;
      for (size_t c : cuts) {
        merge(p->feed(std::string_view(text).substr(prev, c - prev)));
        prev = c;
      }
      merge(p->feed(std::string_view(text).substr(prev)));
      merge(p->finish());
      ASSERT_EQ(r.content, whole.content) << parser << " on: " << text;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << parser << " on: " << text;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << parser << " on: " << text;
      }
    };
    std::vector<size_t> bytes;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    check(bytes);
    std::vector<size_t> rnd;
    for (size_t pos = 1 + rng() % 6; pos < text.size(); pos += 1 + rng() % 6) rnd.push_back(pos);
    check(rnd);
  }
  EXPECT_GT(with_calls, 600) << "the soups should produce calls";
  std::printf("json soups with calls: %d / 1500\n", with_calls);
}

// Merges every delta of feeding `text` cut at `cuts`, as a client does.
rapid::parsers::ParseResult run_cuts(const rapid::parsers::ParserOptions& o, std::string_view text, const std::vector<size_t>& cuts) {
  auto p = rapid::parsers::make_output_parser(o);
  rapid::parsers::ParseResult r;
  auto merge = [&](const rapid::parsers::ParseDelta& d) {
    r.content += d.content;
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

rapid::parsers::ParserOptions xml_opts(const std::string& parser) {
  auto o = opts(parser);
  o.tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"type": "string"}, "days": {"type": "array"}, "n": {"type": "integer"}}}}}])");
  return o;
}

// XML functions (qwen3_coder, seed_oss): the call goes out at <function=NAME>; string-typed
// values stream JSON-escaped as they arrive, other values when their </parameter> arrives; the
// arguments keep the model's parameter order and equal the whole-output result exactly.
TEST(ParsersStreamingArgs, XmlFunctionArgumentsStream) {
  for (std::string parser : {"qwen3_coder", "seed_oss"}) {
    SCOPED_TRACE(parser);
    const std::string open = parser == "qwen3_coder" ? "<tool_call>" : "<seed:tool_call>";
    const std::string close = parser == "qwen3_coder" ? "</tool_call>" : "</seed:tool_call>";
    const std::string city = "Paris, the \"city\" of light\\ é";
    std::string before = open + "\n<function=get_weather>\n<parameter=city>\n" + city + "\n</parameter>\n<parameter=unit>\ncelsius\n"
                         "</parameter>\n<parameter=days>\n[1, 2, 3]\n</parameter>\n</function>\n";
    std::string text = "Checking. " + before + close;
    auto whole = rapid::parsers::parse_output(xml_opts(parser), text);
    ASSERT_EQ(whole.tool_calls.size(), 1u);
    EXPECT_EQ(whole.content, "Checking. ");
    // Model order (not sorted: "unit" before "days"), compact JSON.
    EXPECT_EQ(whole.tool_calls[0].arguments,
              "{\"city\":\"Paris, the \\\"city\\\" of light\\\\ é\",\"unit\":\"celsius\",\"days\":[1,2,3]}");
    Fed f = feed_bytes(xml_opts(parser), text);
    ASSERT_EQ(f.calls.size(), 1u);
    EXPECT_EQ(f.content, whole.content);
    EXPECT_EQ(f.calls[0].id, whole.tool_calls[0].id);
    EXPECT_EQ(f.calls[0].name, "get_weather");
    EXPECT_EQ(f.calls[0].arguments, whole.tool_calls[0].arguments);
    // The name went out at <function=get_weather>, long before the block closed.
    const size_t name_at = text.find("<function=get_weather>") + std::string("<function=get_weather>").size();
    EXPECT_EQ(static_cast<size_t>(f.header_at), name_at);
    // The city string streamed in many fragments before its </parameter>.
    const size_t city_end = text.find("</parameter>");
    size_t early = 0;
    for (auto& [fed, s] : f.frags) early += fed <= city_end;
    EXPECT_GT(early, city.size() / 2);
    // The array came in one piece, when its </parameter> arrived.
    bool whole_days = false;
    for (auto& [fed, s] : f.frags) whole_days |= s.find("[1,2,3]") != std::string::npos;
    EXPECT_TRUE(whole_days);
    for (auto& s : f.all_frags) EXPECT_TRUE(valid_utf8(s)) << s;
  }
}

TEST(ParsersStreamingArgs, XmlFunctionEverySplitJoinsToTheWholeResult) {
  std::vector<std::pair<std::string, std::string>> texts = {
      {"qwen3_coder", "Hi <tool_call>\n<function=get_weather>\n<parameter=city>\n日本 \"x\"\n\n</parameter>\n<parameter=n>\n 42 \n</parameter>\n"
                      "</function>\n<function=other>\n<parameter=q>\n{\"a\": 1}\n</parameter>\n</function>\n</tool_call> bye"},
      // Missing </parameter> (ends at the next parameter / </function>), repeated key, no newlines.
      {"qwen3_coder", "<tool_call><function=get_weather><parameter=city>Rome<parameter=unit>C  </function></tool_call>"},
      {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n</function>\n</tool_call>"},
      // Unterminated block, unterminated value; a broken parameter tag after the call went out.
      {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar  \n"},
      {"qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city\n</function>\n</tool_call>"},
      {"seed_oss", "<seed:tool_call>\n<function=get_weather>\n<parameter=days>\n[1, 2\n</parameter>\n</function>\n</seed:tool_call>"},
  };
  for (auto& [parser, text] : texts) {
    SCOPED_TRACE(parser + ": " + text);
    auto o = xml_opts(parser);
    auto whole = rapid::parsers::parse_output(o, text);
    ASSERT_FALSE(whole.tool_calls.empty());
    for (auto& c : whole.tool_calls) EXPECT_FALSE(json::parse(c.arguments, nullptr, false).is_discarded()) << c.arguments;
    std::vector<size_t> bytes;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      auto r = run_cuts(o, text, {cut});
      ASSERT_EQ(r.content, whole.content) << cut;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << cut;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << cut;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << cut;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << cut;
      }
    }
    auto r = run_cuts(o, text, bytes);
    ASSERT_EQ(r.content, whole.content);
    ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size());
    for (size_t i = 0; i < r.tool_calls.size(); ++i) EXPECT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments);
  }
  // Values as documented: one newline each side is layout; a value cut short loses trailing space.
  auto r = rapid::parsers::parse_output(xml_opts("qwen3_coder"), texts[1].second);
  EXPECT_EQ(r.tool_calls.at(0).arguments, "{\"city\":\"Rome\",\"unit\":\"C\"}");
  r = rapid::parsers::parse_output(xml_opts("qwen3_coder"), texts[4].second);
  EXPECT_EQ(r.tool_calls.at(0).arguments, "{}");
  EXPECT_EQ(r.content, "<parameter=city\n</function>\n</tool_call>");
}

// Random soups of XML function pieces: byte-at-a-time and random chunkings join to the whole.
TEST(ParsersStreamingArgs, RandomXmlSoupsJoinToTheWholeResult) {
  const std::vector<std::string> parsers = {"qwen3_coder", "seed_oss"};
  const std::vector<std::string> atoms = {
      "<tool_call>", "</tool_call>", "<seed:tool_call>", "</seed:tool_call>", "<function=", "</function>", "<parameter=",
      "</parameter>", "get_weather", "city", "n", "days", ">", "<", "</", "\n", " ", "\"", "\\", "[1, 2]", "42", "x", "é",
      "日本", "\xE6", "text "};
  std::mt19937_64 rng(99);
  int with_calls = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const std::string& parser = parsers[rng() % parsers.size()];
    std::string text;
    for (size_t i = 0, n = 1 + rng() % 24; i < n; ++i) text += atoms[rng() % atoms.size()];
    if (rng() % 4 != 0) {
      std::string fn = "<function=get_weather>\n";
      for (size_t k = 0, m = rng() % 4; k < m; ++k) {
        fn += "<parameter=" + atoms[9 + rng() % 3] + ">\n";
        for (size_t i = 0, a = rng() % 5; i < a; ++i) fn += atoms[12 + rng() % (atoms.size() - 12)];
        fn += rng() % 4 ? "\n</parameter>\n" : "\n";
      }
      fn += "</function>\n";
      if (rng() % 3 == 0) fn += fn;
      text = parser == "qwen3_coder" ? "<tool_call>\n" + fn + "</tool_call>" : "<seed:tool_call>\n" + fn + "</seed:tool_call>";
      if (rng() % 3 == 0) text = "text " + text;
      for (size_t i = 0, k = rng() % 3; i < k; ++i) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.insert(at, atoms[rng() % atoms.size()]);
      }
      if (rng() % 4 == 0) text.resize(rng() % (text.size() + 1));
    }
    auto o = xml_opts(parser);
    auto whole = rapid::parsers::parse_output(o, text);
    with_calls += !whole.tool_calls.empty();
    std::vector<size_t> bytes, rnd;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    for (size_t pos = 1 + rng() % 6; pos < text.size(); pos += 1 + rng() % 6) rnd.push_back(pos);
    for (auto* cuts : {&bytes, &rnd}) {
      auto r = run_cuts(o, text, *cuts);
      ASSERT_EQ(r.content, whole.content) << parser << " on: " << text;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << parser << " on: " << text;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << parser << " on: " << text;
      }
    }
  }
  EXPECT_GT(with_calls, 600) << "the soups should produce calls";
  std::printf("xml soups with calls: %d / 1500\n", with_calls);
}

// Argument-tag formats (glm45 / glm47, minimax_m2, deepseek_v32, step3): the call goes out as
// soon as its name is certain, then the arguments as a JSON object in the model's order, text
// values streamed as they arrive, others whole at their closing tag.
struct TagFormat {
  std::string parser, open, close;       // block markers
  std::string call_open, call_close;     // around one call (step3 sections, invoke tags)
  std::function<std::string(const std::string&)> head;  // the call's head for a name
  std::function<std::string(const std::string&, const std::string&)> param;  // key, value
};

std::vector<TagFormat> tag_formats() {
  auto inv = [](std::string io, std::string ic, std::string po, std::string pc, std::string co, std::string cc) {
    TagFormat f;
    f.call_open = co;
    f.call_close = ic + cc;
    f.head = [io](const std::string& n) { return io + " name=\"" + n + "\">"; };
    f.param = [po, pc](const std::string& k, const std::string& v) { return po + " name=\"" + k + "\">" + v + pc; };
    return f;
  };
  std::vector<TagFormat> v;
  TagFormat glm;
  glm.parser = "glm45";
  glm.open = "<tool_call>";
  glm.close = "</tool_call>";
  glm.head = [](const std::string& n) { return n + "\n"; };
  glm.param = [](const std::string& k, const std::string& v) {
    return "<arg_key>" + k + "</arg_key>\n<arg_value>" + v + "</arg_value>\n";
  };
  v.push_back(glm);
  TagFormat glm47 = glm;  // GLM 4.7: no newlines
  glm47.parser = "glm47";
  glm47.head = [](const std::string& n) { return n; };
  glm47.param = [](const std::string& k, const std::string& v) { return "<arg_key>" + k + "</arg_key><arg_value>" + v + "</arg_value>"; };
  v.push_back(glm47);
  TagFormat mm = inv("<invoke", "</invoke>", "<parameter", "</parameter>", "\n", "\n");
  mm.parser = "minimax_m2";
  mm.open = "<minimax:tool_call>";
  mm.close = "</minimax:tool_call>";
  v.push_back(mm);
  TagFormat ds = inv("<｜DSML｜invoke", "</｜DSML｜invoke>", "<｜DSML｜parameter", "</｜DSML｜parameter>", "\n", "\n");
  ds.parser = "deepseek_v32";
  ds.open = "<｜DSML｜function_calls>";
  ds.close = "</｜DSML｜function_calls>";
  v.push_back(ds);
  TagFormat st = inv("<steptml:invoke", "</steptml:invoke>", "<steptml:parameter", "</steptml:parameter>",
                     "<｜tool_call_begin｜>function<｜tool_sep｜>", "<｜tool_call_end｜>");
  st.parser = "step3";
  st.open = "<｜tool_calls_begin｜>";
  st.close = "<｜tool_calls_end｜>";
  v.push_back(st);
  return v;
}

std::string tag_call(const TagFormat& f, const std::string& name, const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string s = f.call_open + f.head(name);
  for (auto& [k, v] : kv) s += f.param(k, v);
  return s + f.call_close;
}

TEST(ParsersStreamingArgs, TagArgumentsStream) {
  for (auto& f : tag_formats()) {
    SCOPED_TRACE(f.parser);
    const std::string city = "Paris, the \"city\" of light\\ é";
    std::string call = tag_call(f, "get_weather", {{"city", city}, {"unit", "celsius"}, {"days", "[1, 2, 3]"}});
    std::string text = "Checking. " + f.open + call + f.close;
    auto whole = rapid::parsers::parse_output(xml_opts(f.parser), text);
    ASSERT_EQ(whole.tool_calls.size(), 1u);
    EXPECT_EQ(whole.content, "Checking. ");
    // Model order (not sorted: "unit" before "days"), compact JSON, values verbatim.
    EXPECT_EQ(whole.tool_calls[0].arguments,
              "{\"city\":\"Paris, the \\\"city\\\" of light\\\\ é\",\"unit\":\"celsius\",\"days\":[1,2,3]}");
    Fed fed = feed_bytes(xml_opts(f.parser), text);
    ASSERT_EQ(fed.calls.size(), 1u);
    EXPECT_EQ(fed.content, whole.content);
    EXPECT_EQ(fed.calls[0].id, whole.tool_calls[0].id);
    EXPECT_EQ(fed.calls[0].name, "get_weather");
    EXPECT_EQ(fed.calls[0].arguments, whole.tool_calls[0].arguments);
    // The name went out as soon as it was certain: GLM at the end of its name line (newline or
    // <arg_key>), the others when the <invoke ...> tag closed.
    size_t name_at = text.find(f.open) + f.open.size() + f.call_open.size() + f.head("get_weather").size();
    if (f.parser == "glm47") name_at += std::string("<arg_key>").size();
    EXPECT_EQ(static_cast<size_t>(fed.header_at), name_at);
    // The first fragment ("{") came with the name.
    ASSERT_FALSE(fed.frags.empty());
    EXPECT_EQ(fed.frags[0].first, name_at);
    EXPECT_EQ(fed.frags[0].second, "{");
    // The city string streamed in many fragments before its closing tag.
    const size_t city_end = text.find(city) + city.size();
    size_t early = 0;
    for (auto& [at, s] : fed.frags) early += at <= city_end;
    EXPECT_GT(early, city.size() / 2);
    // The array came in one piece, when its closing tag arrived.
    bool whole_days = false;
    for (auto& [at, s] : fed.frags) whole_days |= s.find("[1,2,3]") != std::string::npos;
    EXPECT_TRUE(whole_days);
    for (auto& s : fed.all_frags) EXPECT_TRUE(valid_utf8(s)) << s;
  }
}

void expect_every_split(const rapid::parsers::ParserOptions& o, const std::string& text) {
  auto whole = rapid::parsers::parse_output(o, text);
  for (auto& c : whole.tool_calls) EXPECT_FALSE(json::parse(c.arguments, nullptr, false).is_discarded()) << c.arguments;
  auto same = [&](const rapid::parsers::ParseResult& r, const std::string& how) {
    ASSERT_EQ(r.content, whole.content) << how;
    ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << how;
    for (size_t i = 0; i < r.tool_calls.size(); ++i) {
      ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << how;
      ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << how;
      ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << how;
    }
  };
  for (size_t cut = 0; cut <= text.size(); ++cut) same(run_cuts(o, text, {cut}), "cut " + std::to_string(cut));
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  same(run_cuts(o, text, bytes), "bytes");
}

TEST(ParsersStreamingArgs, TagEverySplitJoinsToTheWholeResult) {
  for (auto& f : tag_formats()) {
    SCOPED_TRACE(f.parser);
    auto o = xml_opts(f.parser);
    std::vector<std::string> texts = {
        "Hi " + f.open + tag_call(f, "get_weather", {{"city", "日本 \"x\"\n"}, {"n", " 42 "}}) +
            tag_call(f, "other", {{"q", "{\"a\": 1}"}}) + f.close + " bye",
        f.open + tag_call(f, "get_weather", {{"city", "A"}, {"city", "B"}, {"days", "[[1]"}}) + f.close,  // repeated key, bad array
        f.open + tag_call(f, "get_weather", {}) + f.close,                                            // no arguments
        f.open + tag_call(f, "get_weather", {{"city", "Par  "}}).substr(0, 60),                       // unterminated
        f.open + "{not a name}" + f.close,                                                            // no call: content
    };
    for (auto& t : texts) {
      SCOPED_TRACE(t);
      expect_every_split(o, t);
    }
  }
  // Documented edge cases.
  auto o = xml_opts("glm45");
  // A value cut short by the block end keeps its text; the call stands although the block (which
  // GLM requires to close) never did.
  auto r = rapid::parsers::parse_output(o, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome ");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\":\"Rome \"}");
  EXPECT_EQ(r.content, "");
  // A key with no value ends the call; the rest of the block is content.
  const std::string broken = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n<arg_key>unit</arg_key>oops</tool_call>";
  expect_every_split(o, broken);
  r = rapid::parsers::parse_output(o, broken);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\":\"Rome\"}");
  EXPECT_EQ(r.content, "<arg_key>unit</arg_key>oops</tool_call>");
  // Before any call the whole-block rule is unchanged: markup in the name line -> content.
  r = rapid::parsers::parse_output(o, "<tool_call>get<x>\n</tool_call>");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "<tool_call>get<x>\n</tool_call>");
  // Invoke formats: string="true"/"false" override the schema; a parameter tag with no '>'
  // ends the call and the rest of the block is content.
  auto m = xml_opts("minimax_m2");
  const std::string typed = "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"n\" string=\"true\">42</parameter>"
                            "<parameter name=\"city\" string=\"false\">[1]</parameter></invoke></minimax:tool_call>";
  expect_every_split(m, typed);
  r = rapid::parsers::parse_output(m, typed);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"n\":\"42\",\"city\":[1]}");
  const std::string cut = "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">X</parameter><parameter name=\"n\"</invoke></minimax:tool_call>";
  expect_every_split(m, cut);
  r = rapid::parsers::parse_output(m, cut);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\":\"X\"}");
  EXPECT_EQ(r.content, "<parameter name=\"n\"</invoke></minimax:tool_call>");
}

// Random soups of argument-tag pieces: byte-at-a-time and random chunkings join to the whole.
TEST(ParsersStreamingArgs, RandomTagSoupsJoinToTheWholeResult) {
  const auto formats = tag_formats();
  const std::vector<std::string> atoms = {"get_weather", "city", "n", "days", ">", "<", "</", "\n", " ", "\"", "\\",
                                          "[1, 2]", "42", "x", "é", "日本", "\xE6", "text ", "{", "=\"", "string=\"true\""};
  std::mt19937_64 rng(123);
  int with_calls = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const TagFormat& f = formats[rng() % formats.size()];
    // Markup of this format as extra atoms.
    std::vector<std::string> marks = {f.open, f.close, f.call_open, f.call_close, f.head("get_weather"), f.param("city", "")};
    for (auto& s : {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}) marks.push_back(s);
    auto atom = [&]() -> const std::string& {
      return rng() % 3 == 0 ? marks[rng() % marks.size()] : atoms[rng() % atoms.size()];
    };
    std::string text;
    for (size_t i = 0, n = 1 + rng() % 24; i < n; ++i) text += atom();
    if (rng() % 4 != 0) {
      std::string body;
      for (size_t c = 0, nc = 1 + rng() % 2; c < nc; ++c) {
        std::vector<std::pair<std::string, std::string>> kv;
        for (size_t k = 0, m = rng() % 4; k < m; ++k) {
          std::string v;
          for (size_t i = 0, a = rng() % 5; i < a; ++i) v += atoms[1 + rng() % (atoms.size() - 1)];
          kv.emplace_back(atoms[1 + rng() % 3], v);
        }
        body += tag_call(f, "get_weather", kv);
      }
      text = f.open + body + f.close;
      if (rng() % 3 == 0) text = "text " + text;
      for (size_t i = 0, k = rng() % 3; i < k; ++i) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.insert(at, atom());
      }
      if (rng() % 4 == 0) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.resize(at);
      }
    }
    auto o = xml_opts(f.parser);
    auto whole = rapid::parsers::parse_output(o, text);
    with_calls += !whole.tool_calls.empty();
    for (auto& c : whole.tool_calls) ASSERT_FALSE(c.name.empty()) << f.parser << " on: " << text;
    std::vector<size_t> bytes, rnd;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    for (size_t pos = 1 + rng() % 6; pos < text.size(); pos += 1 + rng() % 6) rnd.push_back(pos);
    for (auto* cuts : {&bytes, &rnd}) {
      auto r = run_cuts(o, text, *cuts);
      ASSERT_EQ(r.content, whole.content) << f.parser << " on: " << text;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << f.parser << " on: " << text;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << f.parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << f.parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << f.parser << " on: " << text;
      }
    }
  }
  EXPECT_GT(with_calls, 600) << "the soups should produce calls";
  std::printf("tag soups with calls: %d / 1500\n", with_calls);
}

// gpt-oss harmony: the call goes out when the recipient header is complete (<|message|>), the
// JSON arguments follow as written, fragment by fragment, until <|call|>.
TEST(ParsersStreamingArgs, HarmonyArgumentsStream) {
  const std::string head = "<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>commentary "
                           "to=functions.get_weather <|constrain|>json<|message|>";
  const std::string args = "{\"city\": \"Paris <|x\", \"days\": [1, 2]}";
  const std::string text = head + args + "<|call|>";
  auto o = opts("gpt_oss");
  auto whole = rapid::parsers::parse_output(o, text);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].arguments, args);  // as written
  EXPECT_EQ(whole.reasoning, "thinking");
  Fed f = feed_bytes(o, text);
  ASSERT_EQ(f.calls.size(), 1u);
  EXPECT_EQ(f.calls[0].name, "get_weather");
  EXPECT_EQ(f.calls[0].arguments, args);
  EXPECT_EQ(static_cast<size_t>(f.header_at), head.size());  // at <|message|>
  size_t early = 0;
  for (auto& [fed, s] : f.frags) {
    early += fed <= head.size() + args.size();
    EXPECT_EQ(s.find("<|call"), std::string::npos) << s;
  }
  EXPECT_GT(early, args.size() / 2);
  // Non-object arguments come whole (normalised, as before); empty ones are {}.
  auto r = rapid::parsers::parse_output(o, "<|start|>assistant to=functions.f<|message|> \"{\\\"a\\\": 1}\" <|call|>"
                                  "<|start|>assistant to=functions.g<|message|><|call|>");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
  expect_every_split(o, text);
}

rapid::parsers::ParserOptions py_opts(const std::string& parser) { return xml_opts(parser); }

// Pythonic formats: the call goes out at `NAME(`; arguments are compact JSON in the model's
// keyword order; string values stream JSON-escaped as they arrive, other values when complete.
TEST(ParsersStreamingArgs, PythonicArgumentsStream) {
  const std::string city = "Paris, \\\"FR\\\" it's 日本 \\u00e9\\n";
  const std::string call = "get_weather(city=\"" + city + "\", unit='celsius', days=[1, 2, (3, 4)], n=None)";
  const std::string expect_args = "{\"city\":\"Paris, \\\"FR\\\" it's 日本 é\\n\",\"unit\":\"celsius\",\"days\":[1,2,[3,4]],\"n\":null}";
  struct V { std::string parser, pre, post; };
  for (auto& v : std::vector<V>{{"pythonic", "[", ", get_time()]"},
                                {"llama4_pythonic", "Let me check. <|python_start|>[", ", get_time()]<|python_end|>"},
                                {"llama4_pythonic", "[", ", get_time()]"},
                                {"lfm2", "Sure. <|tool_call_start|>[", ", get_time()]<|tool_call_end|>"},
                                {"olmo3", "Sure. <function_calls>", "\nget_time()</function_calls>"}}) {
    SCOPED_TRACE(v.parser + " " + v.pre);
    auto o = py_opts(v.parser);
    const std::string text = v.pre + call + v.post;
    auto whole = rapid::parsers::parse_output(o, text);
    ASSERT_EQ(whole.tool_calls.size(), 2u);
    EXPECT_EQ(whole.tool_calls[0].name, "get_weather");
    EXPECT_EQ(whole.tool_calls[0].arguments, expect_args);
    EXPECT_EQ(whole.tool_calls[1].name, "get_time");
    EXPECT_EQ(whole.tool_calls[1].arguments, "{}");
    Fed f = feed_bytes(o, text);
    ASSERT_EQ(f.calls.size(), 2u);
    EXPECT_EQ(f.content, whole.content);
    EXPECT_EQ(f.calls[0].arguments, expect_args);
    // The name went out at its '(' and the city string streamed before its closing quote.
    const size_t paren = text.find('(') + 1;
    EXPECT_EQ(static_cast<size_t>(f.header_at), paren);
    const size_t city_end = text.find("\", unit");
    size_t early = 0;
    for (auto& [fed, s] : f.frags) early += fed <= city_end;
    EXPECT_GT(early, 10u);
    for (auto& s : f.all_frags) EXPECT_TRUE(valid_utf8(s)) << s;
    expect_every_split(o, text);
  }
  // The leading rule is kept: text before the list means no call.
  auto r = rapid::parsers::parse_output(py_opts("pythonic"), "Hi [get_weather(city='x')]");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "Hi [get_weather(city='x')]");
  // Not a call before any went out: the whole reply is content, as before.
  for (std::string t : {"[1, 2, 3]", "[see below]", "[]", "[get weather(x=1)]"}) {
    r = rapid::parsers::parse_output(py_opts("pythonic"), t);
    EXPECT_TRUE(r.tool_calls.empty()) << t;
    EXPECT_EQ(r.content, t);
    expect_every_split(py_opts("pythonic"), t);
  }
  // Once a call went out it stands; the piece that does not parse and the rest are content.
  for (std::string t : {"[f(a=1, b), g()]", "[f(a='x' + 'y')] done", "[f(a=1)] trailing", "[f(a=\"\"\"tri\"ple\"\"\", b=x)]",
                        "[f(a='cut", "[f(a=[1, 2", "[f(a=1), g(", "[f(a=1), 'x']", "[f(k=\"\\x41\\u00e9\\\\\", k=2)]"}) {
    SCOPED_TRACE(t);
    expect_every_split(py_opts("pythonic"), t);
    EXPECT_FALSE(rapid::parsers::parse_output(py_opts("pythonic"), t).tool_calls.empty());
  }
  r = rapid::parsers::parse_output(py_opts("pythonic"), "[f(a=1, b), g()]");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(r.content, "b), g()]");
  r = rapid::parsers::parse_output(py_opts("pythonic"), "[f(a='cut");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\":\"cut\"}");
  r = rapid::parsers::parse_output(py_opts("pythonic"), "[f(k=\"\\x41\\u00e9\\\\\", k=2)]");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"k\":\"Aé\\\\\",\"k\":2}");  // repeated key sent again
}

// Random soups of pythonic pieces: byte-at-a-time and random chunkings join to the whole.
TEST(ParsersStreamingArgs, RandomPythonicSoupsJoinToTheWholeResult) {
  const std::vector<std::string> parsers = {"pythonic", "llama4_pythonic", "lfm2", "olmo3"};
  const std::vector<std::string> atoms = {"get_weather(", "f(", ")", "]", "[", "(", ",", ", ", "city=", "n=", "=", "\"", "'",
                                          "\"\"\"", "\\", "\\u00e9", "\\x4", "1", "2.5", "True", "None", "{'a': [1]}", " ",
                                          "\n", "x", "é", "日本", "\xE6", "<|python_end|>", "<|tool_call_end|>",
                                          "</function_calls>", "text "};
  std::mt19937_64 rng(321);
  int with_calls = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const std::string& parser = parsers[rng() % parsers.size()];
    std::string text;
    if (rng() % 3 != 0) {
      // A plausible call list, then perturbed.
      text = parser == "olmo3" ? "<function_calls>" : parser == "lfm2" ? "<|tool_call_start|>[" : parser == "llama4_pythonic" && rng() % 2 ? "<|python_start|>[" : "[";
      for (size_t c = 0, nc = 1 + rng() % 3; c < nc; ++c) {
        if (c) text += parser == "olmo3" ? "\n" : ", ";
        text += rng() % 2 ? "get_weather(" : "f(";
        for (size_t k = 0, m = rng() % 4; k < m; ++k) {
          if (k) text += ", ";
          text += rng() % 2 ? "city=" : "n=";
          switch (rng() % 4) {
            case 0: text += "\"a\\\"b é\\n\""; break;
            case 1: text += "'x'"; break;
            case 2: text += "[1, {'k': None}]"; break;
            default: text += "42"; break;
          }
        }
        text += ")";
      }
      text += parser == "olmo3" ? "</function_calls>" : parser == "lfm2" ? "]<|tool_call_end|>" : "]";
      for (size_t i = 0, k = rng() % 3; i < k; ++i) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.insert(at, atoms[rng() % atoms.size()]);
      }
      if (rng() % 4 == 0) {
        size_t at = rng() % (text.size() + 1);
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        text.resize(at);
      }
    } else {
      for (size_t i = 0, n = 1 + rng() % 20; i < n; ++i) text += atoms[rng() % atoms.size()];
    }
    auto o = py_opts(parser);
    auto whole = rapid::parsers::parse_output(o, text);
    with_calls += !whole.tool_calls.empty();
    for (auto& c : whole.tool_calls)
      ASSERT_FALSE(json::parse(c.arguments, nullptr, false).is_discarded()) << parser << " on: " << text << " -> " << c.arguments;
    std::vector<size_t> bytes, rnd;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    for (size_t pos = 1 + rng() % 6; pos < text.size(); pos += 1 + rng() % 6) rnd.push_back(pos);
    for (auto* cuts : {&bytes, &rnd}) {
      auto r = run_cuts(o, text, *cuts);
      ASSERT_EQ(r.content, whole.content) << parser << " on: " << text;
      ASSERT_EQ(r.tool_calls.size(), whole.tool_calls.size()) << parser << " on: " << text;
      for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        ASSERT_EQ(r.tool_calls[i].id, whole.tool_calls[i].id) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].name, whole.tool_calls[i].name) << parser << " on: " << text;
        ASSERT_EQ(r.tool_calls[i].arguments, whole.tool_calls[i].arguments) << parser << " on: " << text;
      }
    }
  }
  EXPECT_GT(with_calls, 600) << "the soups should produce calls";
  std::printf("pythonic soups with calls: %d / 1500\n", with_calls);
}

}  // namespace
