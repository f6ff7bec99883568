// Every shared chat template (fixtures/chat-templates/*.jinja and each tokenizer_config.json's
// chat_template) rendered over the conversations in tests/golden/template/conversations.json must
// match, byte for byte, what transformers' render_jinja_template (Python jinja2) produced
// (scripts/gen_template_goldens.py); where Python raised, we must raise too.
#include <gtest/gtest.h>

#include <filesystem>

#include "template/chat_template.h"
#include "template_goldens.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

using rapid::fixtures::golden_now;
using rapid::fixtures::kFixtures;
using rapid::fixtures::slurp;
const fs::path kGolden = rapid::fixtures::kTemplateGolden;

// The template source a golden file was produced from (same naming as the generator script).
std::string template_source(const std::string& name) {
  if (name.rfind("tokenizer-", 0) != 0) return slurp(kFixtures / "chat-templates" / (name + ".jinja"));
  for (auto& d : fs::directory_iterator(kFixtures / "tokenizers")) {
    std::string n = d.path().filename().string();
    fs::path cfgp = d.path() / "tokenizer_config.json";
    if (!fs::exists(cfgp)) continue;
    auto cfg = ordered_json::parse(slurp(cfgp));
    auto& ct = cfg["chat_template"];
    if (ct.is_string() && name == "tokenizer-" + n) return ct.get<std::string>();
    if (ct.is_array())
      for (auto& e : ct)
        if (name == "tokenizer-" + n + "-" + e["name"].get<std::string>()) return e["template"].get<std::string>();
  }
  return {};
}

std::vector<std::string> golden_names() {
  std::vector<std::string> names;
  for (auto& d : fs::directory_iterator(kGolden)) {
    std::string f = d.path().filename().string();
    if (f == "conversations.json" || f == "snippets.json" || d.path().extension() != ".json") continue;
    names.push_back(d.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class TemplateGolden : public ::testing::TestWithParam<std::string> {};

int g_pass = 0, g_total = 0;

TEST_P(TemplateGolden, MatchesPythonJinja2) {
  const std::string name = GetParam();
  std::string src = template_source(name);
  ASSERT_FALSE(src.empty()) << "no template source for " << name;
  auto golden = ordered_json::parse(slurp(kGolden / (name + ".json")));
  auto convs = ordered_json::parse(slurp(kGolden / "conversations.json"));
  rapid::jinja::RenderOptions opts;
  opts.now = golden_now();
  std::unique_ptr<rapid::jinja::ChatTemplate> tpl;
  std::string parse_error;
  try {
    tpl = std::make_unique<rapid::jinja::ChatTemplate>(src);
  } catch (const rapid::jinja::TemplateError& e) {
    parse_error = e.what();
  }
  ASSERT_TRUE(tpl) << name << ": does not parse: " << parse_error;
  for (auto& [cname, expect] : golden["results"].items()) {
    ++g_total;
    std::string got, err;
    bool raised = false;
    try {
      got = tpl->render(convs[cname], opts);
    } catch (const rapid::jinja::TemplateError& e) {
      raised = true;
      err = e.what();
    }
    if (expect.contains("error")) {
      EXPECT_TRUE(raised) << name << " / " << cname << ": Python raised " << expect["error"]
                          << " but we rendered:\n" << got;
      if (raised) ++g_pass;
    } else {
      const std::string want = expect["output"].get<std::string>();
      EXPECT_FALSE(raised) << name << " / " << cname << ": we raised " << err;
      EXPECT_EQ(got, want) << name << " / " << cname;
      if (!raised && got == want) ++g_pass;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, TemplateGolden, ::testing::ValuesIn(golden_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

class Summary : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("template golden: %d of %d (templates x conversations) match Python jinja2\n", g_pass, g_total);
  }
};
const auto* kSummary = ::testing::AddGlobalTestEnvironment(new Summary);

}  // namespace
