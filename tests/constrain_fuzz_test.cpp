// Robustness: mutated GBNF text, random JSON schemas and regex patterns must compile or fail with
// GrammarError — never crash, hang or throw anything else — and whatever compiles must run.
// CI runs this under AddressSanitizer + UBSan; iteration counts keep it well under a minute.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/schema_regex.h"
#include "constrain/token_constraint.h"

using namespace rapid;
using namespace rapid::constrain;
using ojson = nlohmann::ordered_json;

namespace {

ojson golden(const std::string& name) {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/constrain/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ojson::parse(ss.str());
}

std::string mutate(std::string s, std::mt19937& rng) {
  static const std::string alphabet = "\"[]()|*+?{},.-^\\:= \n#abcxyz019\xc3\xa9\xff";
  int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 4) {
      case 0: s.insert(s.begin() + long(pos), alphabet[rng() % alphabet.size()]); break;
      case 1: if (pos < s.size()) s.erase(pos, 1 + rng() % 3); break;
      case 2: if (pos < s.size()) s[pos] = alphabet[rng() % alphabet.size()]; break;
      case 3: {  // duplicate a slice (grows nesting / repetition)
        if (s.empty()) break;
        size_t a = rng() % s.size(), n = 1 + rng() % 12;
        s.insert(pos, s.substr(a, n));
        break;
      }
    }
  }
  return s;
}

// Runs a compiled grammar on random bytes and on random bytes it allows.
void exercise(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
  GrammarMatcher m(g);
  for (int i = 0; i < 64; ++i) {
    // Prefer a byte the grammar allows, so the walk goes deep.
    uint8_t b = uint8_t(rng());
    for (int k = 0; k < 8; ++k) {
      GrammarMatcher t = m;
      if (t.accept_bytes(std::string(1, char(b)))) break;
      b = uint8_t(rng() % 128);
    }
    m.accept_bytes(std::string(1, char(b)));
    (void)m.can_end();
    (void)m.is_complete();
  }
}

template <typename F>
void expect_clean(F&& f, const std::string& input) {
  try {
    f();
  } catch (const GrammarError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception " << e.what() << " for " << input;
  }
}

}  // namespace

TEST(ConstrainFuzz, MutatedGbnf) {
  std::vector<std::string> seeds;
  for (const auto& c : golden("gbnf_cases.json")) seeds.push_back(c["gbnf"]);
  auto schemas = golden("schema_cases.json");
  for (size_t i = 0; i < schemas.size(); i += 4) seeds.push_back(json_schema_to_gbnf(schemas[i]["schema"]));
  std::mt19937 rng(42);
  int compiled = 0;
  for (int it = 0; it < 4000; ++it) {
    std::string text = mutate(seeds[rng() % seeds.size()], rng);
    expect_clean([&] {
      auto g = parse_gbnf(text);
      ++compiled;
      exercise(g, rng);
    }, text);
  }
  EXPECT_GT(compiled, 200);
}

TEST(ConstrainFuzz, RandomBytesAsGbnf) {
  std::mt19937 rng(5);
  for (int it = 0; it < 2000; ++it) {
    std::string text = "root ::= ";
    int n = int(rng() % 40);
    for (int i = 0; i < n; ++i) text += char(rng() % 256);
    expect_clean([&] { exercise(parse_gbnf(text), rng); }, text);
  }
}

namespace {

ojson random_schema(std::mt19937& rng, int depth) {
  static const char* types[] = {"object", "array", "string", "number", "integer", "boolean", "null", "bogus"};
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  if (depth > 3 || pick(6) == 0) {
    switch (pick(6)) {
      case 0: return ojson(bool(pick(2)));
      case 1: return ojson(pick(5) - 1);
      case 2: return ojson("x");
      case 3: return ojson::array();
      default: return ojson{{"type", types[pick(8)]}};
    }
  }
  ojson s = ojson::object();
  int keys = 1 + pick(4);
  for (int k = 0; k < keys; ++k) {
    switch (pick(16)) {
      case 0: s["type"] = types[pick(8)]; break;
      case 1: {
        ojson props = ojson::object();
        for (int i = 0, n = pick(4); i < n; ++i) props[std::string(1, char('a' + pick(4)))] = random_schema(rng, depth + 1);
        s["properties"] = props;
        break;
      }
      case 2: s["required"] = pick(3) ? ojson::array({"a", "b"}) : ojson("a"); break;
      case 3: s["additionalProperties"] = pick(2) ? ojson(bool(pick(2))) : random_schema(rng, depth + 1); break;
      case 4: s["items"] = random_schema(rng, depth + 1); break;
      case 5: s[pick(2) ? "minItems" : "maxItems"] = pick(8) - 2; break;
      case 6: s[pick(2) ? "minLength" : "maxLength"] = pick(2) ? ojson(pick(10) - 2) : ojson(100000); break;
      case 7: {
        static const char* pats[] = {"^a+$", "(x|y)*z", "[^\\d]{2,}", "(", "a{2,1}", "\\", "[z-a]", "(?<=a)b", "^\\w+@\\S+$", "[\\s\\S]"};
        s["pattern"] = pats[pick(10)];
        break;
      }
      case 8: s["enum"] = pick(4) ? ojson::array({1, "two", nullptr, ojson::array({3})}) : ojson::array(); break;
      case 9: s["const"] = random_schema(rng, depth + 1); break;
      case 10: case 11: {
        ojson arr = ojson::array();
        for (int i = 0, n = pick(3); i < n; ++i) arr.push_back(random_schema(rng, depth + 1));
        s[pick(3) == 0 ? "allOf" : pick(2) ? "anyOf" : "oneOf"] = arr;
        break;
      }
      case 12: s["$ref"] = pick(2) ? "#/$defs/a" : pick(2) ? "#" : "#/nope/0"; break;
      case 13: s["$defs"] = ojson{{"a", random_schema(rng, depth + 1)}}; break;
      case 14: s["nullable"] = pick(3) ? ojson(true) : ojson("yes"); break;
      case 15: s["format"] = pick(2) ? "date" : "uuid"; break;
    }
  }
  return s;
}

}  // namespace

TEST(ConstrainFuzz, RandomSchemas) {
  // A tiny byte vocabulary: every single byte plus a few multi-byte tokens, and an EOS.
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  for (const char* t : {"{\"", "\":", "\",", "true", "null", "[]", "{}", "\"}", "\xc3\xa9"}) bytes.push_back(t);
  bytes.push_back("");
  std::vector<bool> special(bytes.size(), false);
  special.back() = true;
  auto vocab = std::make_shared<VocabIndex>(bytes, special, std::vector<int32_t>{int32_t(bytes.size() - 1)});

  std::mt19937 rng(99);
  int compiled = 0;
  for (int it = 0; it < 4000; ++it) {
    ojson schema = random_schema(rng, 0);
    expect_clean([&] {
      auto g = grammar_from_json_schema(schema);
      ++compiled;
      TokenConstraint c(g, vocab);
      std::string text;
      for (int step = 0; step < 40 && !c.finished(); ++step) {
        const auto& mask = c.mask();
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < mask.size(); ++id)
          if (mask[id]) allowed.push_back(int32_t(id));
        ASSERT_FALSE(allowed.empty()) << schema.dump() << " after " << text;
        int32_t t = allowed[rng() % allowed.size()];
        ASSERT_TRUE(c.accept(t));
        if (vocab->is_eos(t)) break;
        text += bytes[size_t(t)];
      }
      if (c.finished()) EXPECT_TRUE(nlohmann::json::accept(text)) << schema.dump() << " gave " << text;
    }, schema.dump());
    // The same schema as tool parameters in the non-JSON argument encodings.
    ojson tools = ojson::array({{{"name", "t"}, {"parameters", schema}}});
    expect_clean([&] { exercise(parse_gbnf(gbnf_with_tool_args("root ::= args-t", tools, "xml", "<p={KEY}>{VALUE}</p>")), rng); },
                 schema.dump());
    expect_clean([&] { exercise(parse_gbnf(gbnf_with_tool_args("root ::= args-t", tools, "python-kwargs")), rng); },
                 schema.dump());
  }
  EXPECT_GT(compiled, 800);
}

TEST(ConstrainFuzz, RandomRegexPatterns) {
  std::mt19937 rng(3);
  static const std::string alphabet = "ab()[]{}|*+?^$\\.-,0123dws\"";
  for (int it = 0; it < 3000; ++it) {
    std::string p;
    for (int i = 0, n = int(rng() % 14); i < n; ++i) p += alphabet[rng() % alphabet.size()];
    expect_clean([&] {
      auto g = parse_gbnf("root ::= \"\\\"\" " + regex_to_gbnf(p, "c") + " \"\\\"\"\nc ::= [a-z]");
      exercise(g, rng);
    }, p);
  }
}
