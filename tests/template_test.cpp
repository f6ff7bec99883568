// The Jinja interpreter, one language feature at a time, against Python jinja2 in transformers'
// chat-template environment: tests/golden/template/snippets.json holds each snippet, its context
// and what jinja2 rendered or raised (scripts/gen_template_snippet_goldens.py). Plus the chat-level
// helpers (tokenizer_config template selection, message normalisation) against transformers.
#include <gtest/gtest.h>

#include <filesystem>

#include "template/chat_template.h"
#include "template_goldens.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

using rapid::fixtures::slurp;

// Renders a snippet without the chat conventions (no implicit tools/documents), as jinja2's
// Template.render(**context) does.
std::string render_plain(const std::string& src, const ordered_json& ctx) {
  rapid::jinja::ChatTemplate t(src);
  rapid::jinja::RenderOptions o;
  o.now = rapid::fixtures::golden_now();
  return t.render(ctx, o);
}

ordered_json snippets() {
  return ordered_json::parse(slurp(fs::path(RAPID_SOURCE_DIR) / "tests/golden/template/snippets.json"));
}

TEST(TemplateSnippets, MatchPythonJinja2) {
  auto all = snippets();
  ASSERT_GT(all.size(), 100u);
  int pass = 0;
  for (auto& s : all) {
    const std::string src = s["template"];
    std::string got, err;
    bool raised = false;
    try {
      got = render_plain(src, s["context"]);
    } catch (const rapid::jinja::TemplateError& e) {
      raised = true;
      err = e.what();
    }
    if (s.contains("error")) {
      EXPECT_TRUE(raised) << "jinja2 raised " << s["error"] << " but we rendered [" << got << "] for: " << src;
      pass += raised;
    } else {
      std::string want = s["output"];
      // Python prints object addresses (<generator object ... at 0x...>): compare up to the address.
      if (auto at = want.find(" at 0x"); at != std::string::npos && want[0] == '<') {
        EXPECT_EQ(got.substr(0, 1), "<") << src;
        pass += !raised;
        continue;
      }
      EXPECT_FALSE(raised) << "we raised " << err << " for: " << src;
      EXPECT_EQ(got, want) << "template: " << src;
      pass += !raised && got == want;
    }
  }
  std::printf("template snippets: %d of %zu match Python jinja2\n", pass, all.size());
}

// The error carries the line of the failing statement and the reason.
TEST(TemplateErrors, CarryLineAndReason) {
  try {
    render_plain("line1\n{% if true %}\n{{ raise_exception('bad input') }}\n{% endif %}", ordered_json::object());
    FAIL() << "expected a TemplateError";
  } catch (const rapid::jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), rapid::jinja::TemplateError::Kind::Raised);
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.reason(), "bad input");
    EXPECT_EQ(std::string(e.what()), "line 3: bad input");
  }
  try {
    rapid::jinja::ChatTemplate t("a\nb\n{% for x in %}");
    FAIL() << "expected a syntax error";
  } catch (const rapid::jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), rapid::jinja::TemplateError::Kind::Syntax);
    EXPECT_EQ(e.line(), 3);
  }
}

TEST(TemplateLimits, BoundOutputIterationsAndRecursion) {
  rapid::jinja::RenderOptions o;
  o.max_output = 1000;
  rapid::jinja::ChatTemplate big("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}");
  EXPECT_THROW(big.render(ordered_json::object(), o), rapid::jinja::TemplateError);
  rapid::jinja::ChatTemplate loops("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_THROW(loops.render(ordered_json::object()), rapid::jinja::TemplateError);
  rapid::jinja::ChatTemplate rec("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  try {
    rec.render(ordered_json::object());
    FAIL();
  } catch (const rapid::jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), rapid::jinja::TemplateError::Kind::Limit);
  }
  std::string deep(5000, '(');
  EXPECT_THROW(rapid::jinja::ChatTemplate("{{ " + deep + " }}"), rapid::jinja::TemplateError);
}

// transformers' get_chat_template: a string, or a named list with tool_use picked when tools are offered.
TEST(ChatTemplateSelect, FollowsTransformers) {
  ordered_json single = {{"chat_template", "S"}};
  EXPECT_EQ(rapid::jinja::select_chat_template(single, false), "S");
  EXPECT_EQ(rapid::jinja::select_chat_template(single, true), "S");
  ordered_json multi = {{"chat_template", ordered_json::array({{{"name", "default"}, {"template", "D"}},
                                                               {{"name", "tool_use"}, {"template", "T"}},
                                                               {{"name", "rag"}, {"template", "R"}}})}};
  EXPECT_EQ(rapid::jinja::select_chat_template(multi, false), "D");
  EXPECT_EQ(rapid::jinja::select_chat_template(multi, true), "T");
  EXPECT_EQ(rapid::jinja::select_chat_template(multi, false, "rag"), "R");
  EXPECT_THROW(rapid::jinja::select_chat_template(multi, false, "nope"), rapid::jinja::TemplateError);
  EXPECT_THROW(rapid::jinja::select_chat_template(ordered_json::object(), false), rapid::jinja::TemplateError);
  // The real Qwen3 tokenizer_config carries a single string template.
  auto cfg = ordered_json::parse(slurp(fs::path(RAPID_FIXTURES_DIR) / "tokenizers/qwen3/tokenizer_config.json"));
  EXPECT_EQ(rapid::jinja::select_chat_template(cfg, true), cfg["chat_template"].get<std::string>());
}

// What transformers' render_jinja_template does to messages: null stays None (not a missing key),
// reasoning aliased ({"thinking": r, **message, "reasoning_content": r}), tools/documents none
// when absent.
TEST(ChatTemplateRender, NormalisesMessagesLikeTransformers) {
  rapid::jinja::ChatTemplate t(
      "{% for m in messages %}{{ m|tojson }}\n{% endfor %}{{ tools is none }} {{ documents is none }} "
      "{{ add_generation_prompt }} {{ messages[1].content is none }} {{ messages[1].content is defined }}");
  ordered_json ctx = {{"messages", ordered_json::array({{{"role", "assistant"}, {"content", "x"}, {"tool_calls", nullptr},
                                                         {"reasoning", "r"}},
                                                        {{"role", "user"}, {"content", nullptr}}})}};
  // Expected: transformers 5.24 render_jinja_template (jinja2 3.1.6) on the same input and template.
  EXPECT_EQ(t.render(ctx),
            "{\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"x\", \"tool_calls\": null, "
            "\"reasoning\": \"r\", \"reasoning_content\": \"r\"}\n{\"role\": \"user\", \"content\": null}\n"
            "True True False True True");
  // A null reasoning field is not aliased.
  ordered_json ctx2 = {{"messages", ordered_json::array({{{"role", "assistant"}, {"content", "x"},
                                                          {"reasoning_content", nullptr}, {"reasoning", "r2"}}})}};
  rapid::jinja::ChatTemplate t2("{{ messages[0].thinking }}|{{ messages[0].reasoning_content }}");
  EXPECT_EQ(t2.render(ctx2), "r2|r2");
}

}  // namespace
