// Constrained decoding: GBNF and JSON-schema grammars checked against Python oracles (re,
// jsonschema — see scripts/make_constrain_goldens.py), and token masks over real vocabularies
// checked against per-token matching.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "constrain/gbnf.h"
#include "constrain/hf_vocab.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/token_constraint.h"
#include "parsers/output_parser.h"
#include "tokenizer/tokenizer.h"

using namespace rapid;
using namespace rapid::constrain;
using ojson = nlohmann::ordered_json;

namespace {

ojson load_golden(const std::string& name) {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/constrain/" + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ojson::parse(ss.str());  // ordered: schema property order matters
}

bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

std::shared_ptr<const VocabIndex> vocab(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const VocabIndex>> cache;
  auto& v = cache[name];
  if (!v) {
    HfVocab h = load_hf_vocab(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/" + name);
    v = std::make_shared<VocabIndex>(std::move(h.bytes), std::move(h.special), std::move(h.eos));
  }
  return v;
}

}  // namespace

TEST(ConstrainGbnf, AgreesWithPythonRegexOracle) {
  ojson cases = load_golden("gbnf_cases.json");
  ASSERT_GE(cases.size(), 15u);
  size_t checked = 0;
  for (const auto& c : cases) {
    auto g = parse_gbnf(c["gbnf"].get<std::string>());
    for (const auto& d : c["docs"]) {
      const std::string text = d["text"];
      EXPECT_EQ(full_match(g, text), d["valid"].get<bool>())
          << "grammar:\n" << c["gbnf"].get<std::string>() << "\ntext: " << ojson(text).dump();
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000u);
}

TEST(ConstrainGbnf, EveryPrefixOfAMatchIsLive) {
  ojson cases = load_golden("gbnf_cases.json");
  for (const auto& c : cases) {
    auto g = parse_gbnf(c["gbnf"].get<std::string>());
    for (const auto& d : c["docs"]) {
      if (!d["valid"].get<bool>()) continue;
      const std::string text = d["text"];
      GrammarMatcher m(g);
      for (size_t i = 0; i < text.size(); ++i)
        ASSERT_TRUE(m.accept_bytes(text.substr(i, 1))) << c["gbnf"] << " at byte " << i << " of " << text;
      EXPECT_TRUE(m.can_end());
    }
  }
}

TEST(ConstrainGbnf, BadGrammarsAreClearErrors) {
  const char* bad[] = {
      "",                                   // empty
      "root ::= foo",                       // undefined rule
      "root ::= root \"a\" | \"b\"",        // left recursion
      "root ::= a\na ::= b \"x\"\nb ::= a?",  // indirect left recursion
      "root ::= \"abc",                     // unterminated literal
      "root ::= [a-",                       // unterminated class
      "root ::= [z-a]",                     // reversed range
      "root ::= \"\\q\"",                   // unknown escape
      "root ::= \"a\"{3,1}",                // bad repetition
      "root ::= (\"a\"",                    // missing paren
      "root ::= <think>",                   // token reference
      "root ::= \"a\"\nroot ::= \"b\"",     // defined twice
      "root ::= x\nx ::= \"a\" x",          // can never finish
      "other ::= \"a\"",                    // no root
      "root ::= \"\xff\"",                  // invalid UTF-8
      "root ::= \"\\uD800\"",               // surrogate
      "root ::= (\"\")*",                   // nullable repetition: left recursive loop
  };
  for (const char* text : bad) EXPECT_THROW(parse_gbnf(text), GrammarError) << text;
  try {
    parse_gbnf("root ::= \"a\"\n  foo ::= \"x\" bar");
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("bar"), std::string::npos) << e.what();
  }
}

TEST(ConstrainMatcher, CheckpointsAndRollback) {
  auto g = parse_gbnf(R"(root ::= "{" [a-z]* "}")");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("{ab"));
  GrammarMatcher saved = m;
  EXPECT_FALSE(m.accept_bytes("c1"));  // refused as a whole: state unchanged
  EXPECT_EQ(m.state(), saved.state());
  ASSERT_TRUE(m.accept_bytes("c}"));
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.accept_bytes(" "));
  m = saved;
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("}"));
  EXPECT_TRUE(m.can_end());
}

TEST(ConstrainSchema, AgreesWithJsonschemaOracle) {
  ojson cases = load_golden("schema_cases.json");
  ASSERT_GE(cases.size(), 35u);
  size_t valid = 0, invalid = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::shared_ptr<const Grammar> g;
    ASSERT_NO_THROW(g = grammar_from_json_schema(c["schema"])) << c["schema"].dump();
    for (const auto& d : c["docs"]) {
      const std::string text = d["text"];
      // Valid under the schema AND in the canonical form (see json_schema.h).
      bool want = d["valid"].get<bool>() && d.value("canonical", true);
      EXPECT_EQ(full_match(g, text), want) << "schema " << i << ": " << c["schema"].dump()
                                           << "\ndoc: " << text;
      (want ? valid : invalid)++;
    }
  }
  EXPECT_GT(valid, 500u);
  EXPECT_GT(invalid, 500u);
}

TEST(ConstrainSchema, JsonObjectMatchesAnyObject) {
  ojson cases = load_golden("schema_cases.json");
  ASSERT_EQ(cases[0]["schema"], ojson({{"type", "object"}}));
  auto g = grammar_for_json_object();
  for (const auto& d : cases[0]["docs"])
    EXPECT_EQ(full_match(g, d["text"]), d["valid"].get<bool>() && d.value("canonical", true)) << d["text"];
}

// `nullable` is OpenAPI's spelling (jsonschema ignores it): it must equal type [T, "null"].
TEST(ConstrainSchema, NullableEqualsTypeListWithNull) {
  ojson cases = load_golden("schema_cases.json");
  ASSERT_EQ(cases[15]["schema"], ojson::parse(R"({"type": ["string", "null"]})"));
  auto g = grammar_from_json_schema(ojson::parse(R"({"type": "string", "nullable": true})"));
  for (const auto& d : cases[15]["docs"])
    EXPECT_EQ(full_match(g, d["text"]), d["valid"].get<bool>() && d.value("canonical", true)) << d["text"];
}

TEST(ConstrainSchema, ToolArgumentsFillGbnf) {
  ojson cases = load_golden("schema_cases.json");
  // The weather-tool schema of the corpus, used as a tool's parameters in two API shapes.
  size_t idx = 0;
  for (size_t i = 0; i < cases.size(); ++i)
    if (cases[i]["schema"].is_object() && cases[i]["schema"].contains("properties") &&
        cases[i]["schema"]["properties"].contains("location"))
      idx = i;
  ASSERT_GT(idx, 0u);
  ojson tools = ojson::array({
      {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", cases[idx]["schema"]}}}},
      {{"name", "noop"}, {"input_schema", {{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}}}},
      {{"name", "unused"}, {"parameters", {{"type", "object"}}}},
  });
  std::string gbnf = R"(root ::= "<tool_call>" ws call ws "</tool_call>"
call ::= "{\"name\": \"get_weather\", \"arguments\": " args-get-weather "}" | "{\"name\": \"noop\", \"arguments\": " args-noop "}"
ws ::= [ \n]?
)";
  std::string full = gbnf_with_tool_args(gbnf, tools);
  EXPECT_EQ(full.find("args-unused ::="), std::string::npos);
  auto g = parse_gbnf(full);
  for (const auto& d : cases[idx]["docs"]) {
    std::string text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": " + d["text"].get<std::string>() + "}</tool_call>";
    EXPECT_EQ(full_match(g, text), d["valid"].get<bool>() && d.value("canonical", true)) << text;
  }
  EXPECT_TRUE(full_match(g, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}</tool_call>"));
  EXPECT_FALSE(full_match(g, "<tool_call>{\"name\": \"noop\", \"arguments\": {\"a\": 1}}</tool_call>"));
  EXPECT_THROW(gbnf_with_tool_args("root ::= args-f", ojson::array({{{"name", "f"}}}), "gemma:<escape>"),
               GrammarError);
}

// Non-JSON argument encodings of tool-call formats (Qwen3-Coder XML parameters, pythonic calls).
TEST(ConstrainSchema, ToolArgumentsXmlAndPythonKwargs) {
  ojson tools = ojson::parse(R"j([{"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {"location": {"type": "string"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"},
      "metric": {"type": "boolean"}}, "required": ["location", "unit"]}}}])j");
  auto xml = parse_gbnf(gbnf_with_tool_args("root ::= \"<function=get_weather>\\n\" args-get-weather \"</function>\"", tools,
                                            "xml", "<parameter={KEY}>\n{VALUE}\n</parameter>\n"));
  const std::string loc = "<parameter=location>\nNew York, <NY>\n</parameter>\n";
  const std::string unit = "<parameter=unit>\ncelsius\n</parameter>\n";
  EXPECT_TRUE(full_match(xml, "<function=get_weather>\n" + loc + unit + "</function>"));
  EXPECT_TRUE(full_match(xml, "<function=get_weather>\n" + loc + unit + "<parameter=days>\n3\n</parameter>\n</function>"));
  EXPECT_FALSE(full_match(xml, "<function=get_weather>\n" + unit + "</function>"));  // location required
  EXPECT_FALSE(full_match(xml, "<function=get_weather>\n" + loc + "<parameter=unit>\nkelvin\n</parameter>\n</function>"));
  EXPECT_FALSE(full_match(xml, "<function=get_weather>\n" + loc + unit + "<parameter=days>\nthree\n</parameter>\n</function>"));

  auto py = parse_gbnf(gbnf_with_tool_args("root ::= \"get_weather(\" args-get-weather \")\"", tools, "python-kwargs"));
  EXPECT_TRUE(full_match(py, R"(get_weather(location="Paris", unit="celsius"))"));
  EXPECT_TRUE(full_match(py, R"(get_weather(location="Paris", unit="celsius", metric=True))"));
  EXPECT_FALSE(full_match(py, R"(get_weather(location="Paris", unit="celsius", metric=true))"));
  EXPECT_FALSE(full_match(py, R"(get_weather(location="Paris", unit="celsius", days="3"))"));
  EXPECT_FALSE(full_match(py, R"(get_weather(unit="celsius"))"));
}

TEST(ConstrainSchema, BadSchemasAreClearErrors) {
  const char* bad[] = {
      R"j(false)j", R"j(42)j", R"j({"type": "strnig"})j", R"j({"$ref": "#/$defs/missing"})j",
      R"j({"$ref": "http://example.com/s.json"})j", R"j({"enum": []})j", R"j({"type": "string", "pattern": "(a"})j",
      R"j({"type": "string", "pattern": "(?=a)"})j", R"j({"type": "array", "minItems": 3, "maxItems": 1})j",
      R"j({"type": "string", "minLength": -1})j", R"j({"properties": []})j", R"j({"anyOf": {}})j",
      R"j({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})j",
  };
  for (const char* s : bad) EXPECT_THROW(grammar_from_json_schema_text(s), GrammarError) << s;
  EXPECT_THROW(grammar_from_json_schema_text("{not json"), GrammarError);
}

// ---------------------------------------------------------------------------- token masks

namespace {

// Schemas for mask tests: the oracle corpus's schemas.
std::vector<ojson> corpus_schemas() {
  std::vector<ojson> out;
  for (const auto& c : load_golden("schema_cases.json")) out.push_back(c["schema"]);
  return out;
}

// One constrained random walk; picks uniformly among allowed tokens, with a bias towards tokens
// that close structures so walks end in reasonable time. Returns the text, "" if unfinished.
std::string random_walk(TokenConstraint& c, const VocabIndex& v, std::mt19937& rng, int max_steps,
                        bool check_exact) {
  std::string text;
  for (int step = 0; step < max_steps; ++step) {
    const std::vector<bool>& mask = c.mask();
    std::vector<int32_t> allowed, closers;
    for (size_t id = 0; id < mask.size(); ++id) {
      if (!mask[id]) continue;
      allowed.push_back(int32_t(id));
      const std::string& b = v.token_bytes(int32_t(id));
      if (b.find_first_of("\"}]") != std::string::npos || v.is_eos(int32_t(id))) closers.push_back(int32_t(id));
    }
    if (check_exact) {
      // The mask must equal "the token's bytes keep the matcher alive" for every token.
      for (size_t id = 0; id < mask.size(); ++id) {
        bool want;
        if (v.is_eos(int32_t(id))) want = c.can_end();
        else if (v.is_special(int32_t(id)) || v.token_bytes(int32_t(id)).empty() || c.finished()) want = false;
        else {
          GrammarMatcher m = c.matcher();
          want = m.accept_bytes(v.token_bytes(int32_t(id)));
        }
        if (mask[id] != want) {
          ADD_FAILURE() << "token " << id << " " << ojson(v.token_bytes(int32_t(id))).dump()
                        << " mask=" << mask[id] << " after " << ojson(text).dump();
          return "";
        }
      }
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after " << ojson(text).dump();
      return "";
    }
    const auto& pool = (!closers.empty() && rng() % 3 == 0) ? closers : allowed;
    int32_t tok = pool[rng() % pool.size()];
    EXPECT_TRUE(c.accept(tok));
    if (v.is_eos(tok)) return text;
    text += v.token_bytes(tok);
    if (c.finished()) return text;
  }
  return "";
}

}  // namespace

TEST(ConstrainMask, ExactlyTheTokensThatStayAlive) {
  auto v = vocab("qwen2_5");
  auto schemas = corpus_schemas();
  std::mt19937 rng(7);
  for (size_t i : {1u, 12u, 20u, 25u, 31u}) {
    TokenConstraint c(grammar_from_json_schema(schemas[i]), v);
    random_walk(c, *v, rng, 25, /*check_exact=*/true);
  }
}

// Inside free text (a JSON string) the mask takes a shortcut for plain-ASCII tokens: check it
// token by token there, for byte-level and SentencePiece vocabularies.
TEST(ConstrainMask, ExactInsideStrings) {
  std::mt19937 rng(3);
  for (const char* name : {"qwen2_5", "llama2"}) {
    auto v = vocab(name);
    for (const char* prefix : {"{\"a\": \"", "{\"a\": \"x\\u00", "{\"k\u00e9\": [\"\xc3"}) {
      TokenConstraint c(grammar_for_json_object(), v);
      ASSERT_TRUE(c.accept_text(prefix)) << prefix;
      random_walk(c, *v, rng, 3, /*check_exact=*/true);
    }
  }
}

TEST(ConstrainMask, SentencePieceVocabWithByteFallback) {
  auto v = vocab("llama2");
  ASSERT_EQ(v->token_bytes(13), "\n");  // <0x0A>
  auto schemas = corpus_schemas();
  std::mt19937 rng(11);
  TokenConstraint c(grammar_from_json_schema(schemas[31]), v);
  std::string text = random_walk(c, *v, rng, 25, /*check_exact=*/true);
  (void)text;
}

// The engine builds its VocabIndex from the real Tokenizer; the tests read tokenizer.json
// directly. Two independent readings of the same files must agree token for token.
TEST(ConstrainMask, VocabFromTokenizerAgreesWithTokenizerJson) {
  for (const char* name : {"gpt2", "llama2"}) {
    auto tok = tok::load_tokenizer(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/" + name);
    auto a = VocabIndex::from_tokenizer(*tok);
    auto b = vocab(name);
    ASSERT_EQ(a->vocab_size(), b->vocab_size()) << name;
    EXPECT_EQ(a->eos_ids(), b->eos_ids()) << name;
    EXPECT_EQ(a->trie_nodes(), b->trie_nodes()) << name;
    size_t diffs = 0;
    for (size_t id = 0; id < a->vocab_size(); ++id) {
      if (a->is_special(int32_t(id)) != b->is_special(int32_t(id)) ||
          (!a->is_special(int32_t(id)) && a->token_bytes(int32_t(id)) != b->token_bytes(int32_t(id))))
        if (diffs++ < 5) ADD_FAILURE() << name << " token " << id;
    }
    EXPECT_EQ(diffs, 0u) << name;
    // Extra end-of-turn ids join the EOS set (allowed only where the grammar can end).
    auto c = VocabIndex::from_tokenizer(*tok, {5});
    EXPECT_TRUE(c->is_eos(5));
    TokenConstraint tc(parse_gbnf(R"(root ::= "a"?)"), c);
    EXPECT_TRUE(tc.mask()[5]);
    EXPECT_TRUE(tc.accept(5));
    EXPECT_TRUE(tc.finished());
  }
}

TEST(ConstrainMask, SpecialTokensOnlyEosAtTheEnd) {
  auto v = vocab("qwen2_5");
  ASSERT_FALSE(v->eos_ids().empty());
  TokenConstraint c(parse_gbnf(R"(root ::= "{}")"), v);
  for (size_t id = 0; id < v->vocab_size(); ++id)
    if (v->is_special(int32_t(id))) {
      EXPECT_FALSE(c.mask()[id]) << id;
    }
  const int32_t eos = v->eos_ids()[0];
  EXPECT_FALSE(c.accept(eos));
  auto before = c.checkpoint();
  int32_t open = -1;
  for (size_t id = 0; id < v->vocab_size() && open < 0; ++id)
    if (v->token_bytes(int32_t(id)) == "{") open = int32_t(id);
  ASSERT_TRUE(c.accept(open));
  EXPECT_FALSE(c.mask()[size_t(eos)]);
  int32_t close = -1;
  for (size_t id = 0; id < v->vocab_size() && close < 0; ++id)
    if (v->token_bytes(int32_t(id)) == "}") close = int32_t(id);
  ASSERT_TRUE(c.accept(close));
  EXPECT_TRUE(c.finished());
  for (size_t id = 0; id < v->vocab_size(); ++id) EXPECT_EQ(c.mask()[id], int32_t(id) == eos || v->is_eos(int32_t(id)));
  c.rollback(before);
  EXPECT_FALSE(c.finished());
  EXPECT_TRUE(c.mask()[size_t(open)]);
}

// Random walks sampling only masked tokens end in documents valid under the schema. nlohmann
// checks the JSON here; with RAPID_CONSTRAIN_DUMP=<file> the documents are also written out
// for tests/python/test_constrain_walks.py, which validates them with `jsonschema`.
TEST(ConstrainWalk, MaskedRandomWalksGiveValidJson) {
  auto v = vocab("qwen2_5");
  auto schemas = corpus_schemas();
  const char* dump_path = std::getenv("RAPID_CONSTRAIN_DUMP");
  std::ofstream dump;
  if (dump_path) dump.open(dump_path);
  std::mt19937 rng(2024);
  size_t finished = 0, total = 0;
  for (size_t i = 0; i < schemas.size(); ++i) {
    auto g = grammar_from_json_schema(schemas[i]);
    for (int w = 0; w < 3; ++w) {
      TokenConstraint c(g, v);
      std::string text = random_walk(c, *v, rng, 120, /*check_exact=*/false);
      ++total;
      if (text.empty()) continue;
      ++finished;
      EXPECT_TRUE(full_match(g, text)) << text;
      EXPECT_TRUE(nlohmann::json::accept(text)) << "schema " << i << ": " << text;
      if (dump) dump << ojson({{"schema", i}, {"text", text}}).dump() << "\n";
    }
  }
  EXPECT_GT(finished, total / 2) << "too many walks hit the step limit";
}

// End to end with the tool-call formats of src/parsers: each format's call grammar with the
// arguments filled from the tool schema; random byte walks under the grammar must come back out
// of that format's output parser as a call to the tool with JSON arguments the schema accepts.
TEST(ConstrainToolCalls, EveryFormatRoundTripsThroughItsParser) {
  ojson tools = ojson::parse(R"j([{"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {"location": {"type": "string", "maxLength": 12}, "days": {"type": "integer"},
      "metric": {"type": "boolean"}}, "required": ["location"], "additionalProperties": false}}}])j");
  const nlohmann::json jtools = nlohmann::json::parse(tools.dump());
  std::mt19937 rng(1);
  int formats = 0, parsed = 0;
  for (const auto& name : parsers::tool_parser_names()) {
    parsers::ToolCallGrammar tg = parsers::tool_call_grammar(name, jtools);
    std::string full;
    try {
      full = gbnf_with_tool_args(tg.gbnf, tools, tg.args_encoding, tg.param_syntax);
    } catch (const GrammarError&) {
      EXPECT_EQ(tg.args_encoding.rfind("gemma:", 0), 0u) << name << " " << tg.args_encoding;
      continue;
    }
    std::shared_ptr<const Grammar> g;
    ASSERT_NO_THROW(g = parse_gbnf(full)) << name << "\n" << full;
    ++formats;
    for (int w = 0; w < 6; ++w) {
      GrammarMatcher m(g);
      std::string text;
      for (int i = 0; i < 600 && !m.is_complete(); ++i) {
        if (m.can_end() && rng() % 4 == 0) break;
        std::vector<char> allowed, closing;
        for (int b = 0; b < 256; ++b) {
          GrammarMatcher t = m;
          if (!t.accept_bytes(std::string(1, char(b)))) continue;
          if (b >= 32 && b < 127 && b != '\\') allowed.push_back(char(b));
          if (b == '<' || b == '"' || b == '}' || b == ')' || b == ',' || b == '\n') closing.push_back(char(b));
        }
        if (allowed.empty())  // only non-ASCII bytes continue (special-token text, UTF-8)
          for (int b = 0; b < 256; ++b) {
            GrammarMatcher t = m;
            if (t.accept_bytes(std::string(1, char(b)))) allowed.push_back(char(b));
          }
        ASSERT_FALSE(allowed.empty()) << name << " stuck after " << text;
        const auto& pool = (!closing.empty() && rng() % 3 == 0) ? closing : allowed;
        char b = pool[rng() % pool.size()];
        ASSERT_TRUE(m.accept_bytes(std::string(1, b)));
        text += b;
      }
      if (!m.can_end()) continue;
      parsers::ParserOptions o;
      o.tool_parser = name;
      o.tools = jtools;
      o.id_seed = 1;
      parsers::ParseResult r = parsers::parse_output(o, text);
      ++parsed;
      ASSERT_FALSE(r.tool_calls.empty()) << name << ": " << text;
      EXPECT_EQ(r.tool_calls[0].name, "get_weather") << name << ": " << text;
      ASSERT_TRUE(nlohmann::json::accept(r.tool_calls[0].arguments)) << name << ": " << text;
      auto args = nlohmann::json::parse(r.tool_calls[0].arguments);
      EXPECT_TRUE(args.is_object() && args.contains("location") && args["location"].is_string())
          << name << ": " << text << " -> " << r.tool_calls[0].arguments;
      for (const auto& [k, v] : args.items())
        EXPECT_TRUE(k == "location" || (k == "days" && v.is_number_integer()) || (k == "metric" && v.is_boolean()))
            << name << ": " << k << " in " << r.tool_calls[0].arguments;
    }
  }
  EXPECT_GT(formats, 20);
  EXPECT_GT(parsed, formats * 3) << "too few walks finished";
}
