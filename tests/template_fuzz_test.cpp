// Templates are untrusted input: random token soup and mutations of the 50 real chat templates must
// either render or fail with a TemplateError - never crash, hang or throw anything else. CI runs
// this under AddressSanitizer + UBSan. Seeds are fixed so failures reproduce.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
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

rapid::jinja::RenderOptions bounded() {
  rapid::jinja::RenderOptions o;
  o.max_output = 1 << 20;
  o.max_iterations = 20000;
  std::tm t{};
  t.tm_year = 126;
  t.tm_mday = 1;
  o.now = t;
  return o;
}

ordered_json contexts() {
  return ordered_json::parse(slurp(fs::path(RAPID_SOURCE_DIR) / "tests/golden/template/conversations.json"));
}

// Parses and renders; returns false (with the message) if anything other than TemplateError escapes.
bool survives(const std::string& src, const ordered_json& ctx, std::string* what) {
  try {
    rapid::jinja::ChatTemplate t(src);
    t.render(ctx, bounded());
  } catch (const rapid::jinja::TemplateError&) {
  } catch (const std::exception& e) {
    *what = e.what();
    return false;
  } catch (...) {
    *what = "non-standard exception";
    return false;
  }
  return true;
}

const std::vector<std::string> kPieces = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", " ", "\n", "if", "elif", "else", "endif",
    "for", "in", "endfor", "set", "endset", "macro", "endmacro", "call", "endcall", "filter", "endfilter",
    "raw", "endraw", "break", "continue", "not", "and", "or", "is", "defined", "none", "true", "x", "messages",
    "m", "loop", "loop.index", "ns", "namespace(", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "~", "+",
    "-", "*", "/", "//", "%", "**", "==", "!=", "<", ">=", "=", "'s'", "\"q\"", "'\\u00e9'", "0", "1", "-1",
    "1.5", "1e308", "9223372036854775807", "tojson", "trim", "length", "join", "map", "selectattr", "items",
    "default", "indent", "format", "split", "strip", "replace", "range(", "raise_exception(", "dict(",
    "strftime_now(", "'%Y'", "[::-1]", "[1:]", ".get(", "content", "role", "tools", "caller()", "varargs",
    "é", "😀", "\xff", "\xc3", "\\", "'", "\"", "{{ x }}", "{% if x %}", "{% endif %}", "{% for m in messages %}",
    "{% endfor %}",
};

TEST(TemplateFuzz, RandomTokenSoupNeverCrashes) {
  std::mt19937 rng(12345);
  auto ctx = contexts()["tool_call_result"];
  for (int iter = 0; iter < 4000; ++iter) {
    std::string src;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) src += kPieces[rng() % kPieces.size()];
    std::string what;
    ASSERT_TRUE(survives(src, ctx, &what)) << "template: " << src << "\nescaped: " << what;
  }
}

TEST(TemplateFuzz, RandomBytesNeverCrash) {
  std::mt19937 rng(777);
  auto ctx = contexts()["plain"];
  for (int iter = 0; iter < 2000; ++iter) {
    std::string src = "{{ ";
    int n = static_cast<int>(rng() % 64);
    for (int k = 0; k < n; ++k) src.push_back(static_cast<char>(rng() % 256));
    if (rng() % 2) src += " }}";
    std::string what;
    ASSERT_TRUE(survives(src, ctx, &what)) << "escaped: " << what;
  }
}

// Mutations of the real templates reach deep into valid syntax and then break it.
TEST(TemplateFuzz, MutatedRealTemplatesNeverCrash) {
  std::vector<std::string> sources;
  for (auto& d : fs::directory_iterator(fs::path(RAPID_FIXTURES_DIR) / "chat-templates"))
    if (d.path().extension() == ".jinja") sources.push_back(slurp(d.path()));
  std::sort(sources.begin(), sources.end());
  ASSERT_GE(sources.size(), 50u);
  auto convs = contexts();
  std::vector<ordered_json> ctxs;
  for (auto& [k, v] : convs.items()) ctxs.push_back(v);
  std::mt19937 rng(4242);
  for (size_t t = 0; t < sources.size(); ++t) {
    for (int m = 0; m < 12; ++m) {
      std::string src = sources[t];
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !src.empty(); ++e) {
        size_t pos = rng() % src.size();
        size_t len = 1 + rng() % 24;
        switch (rng() % 4) {
          case 0: src.erase(pos, len); break;                                     // delete a span
          case 1: src.insert(pos, src.substr(rng() % src.size(), len)); break;    // duplicate a span
          case 2: src.insert(pos, kPieces[rng() % kPieces.size()]); break;        // insert a token
          case 3: src[pos] = static_cast<char>(rng() % 128); break;               // flip a char
        }
      }
      std::string what;
      ASSERT_TRUE(survives(src, ctxs[rng() % ctxs.size()], &what))
          << "template #" << t << " mutation " << m << " escaped: " << what;
    }
  }
}

// Hostile but syntactically valid templates hit the bounds, not the machine.
TEST(TemplateFuzz, ResourceBoundsHold) {
  const char* hostile[] = {
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
      "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
      "{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(1) }}",
      "{% set s = 'xxxxxxxxxxxxxxxx' %}{% for i in range(30) %}{% set s = s ~ s %}{% endfor %}{{ s }}",
      "{{ 'x' * 100000000000 }}",
      "{{ [1] * 100000000000 }}",
      "{{ range(99999999999) }}",
      "{{ 2 ** 100000 }}",
      "{{ '{:>999999999}'.format(1) }}",
      "{{ 'a'.center(999999999999) }}",
      "{{ 9223372036854775807 + 1 }}",
      "{{ -9223372036854775807 - 1 // -1 }}",
  };
  for (const char* src : hostile) {
    std::string what;
    EXPECT_TRUE(survives(src, ordered_json::object(), &what)) << src << " escaped: " << what;
  }
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += "+1";
  chain += " }}";
  std::string what;
  EXPECT_TRUE(survives(chain, ordered_json::object(), &what)) << what;
  std::string parens(100000, '(');
  EXPECT_TRUE(survives("{{ " + parens + " }}", ordered_json::object(), &what)) << what;
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  EXPECT_TRUE(survives(attrs + " }}", ordered_json::object(), &what)) << what;
  std::string blocks;
  for (int i = 0; i < 100000; ++i) blocks += "{% if true %}";
  EXPECT_TRUE(survives(blocks, ordered_json::object(), &what)) << what;
}

}  // namespace
