// Tool loops as agent clients send them, through every shared chat template:
// - normalize_openai_messages on the raw client shapes (null/absent assistant content beside
//   tool_calls, tool results as content parts, developer role, names, reasoning) must render
//   exactly what Python jinja2 renders for the same conversation normalized as vLLM does
//   (the `normalized_loop_*` goldens of scripts/gen_template_conversations.py);
// - the generic tool format (server/generic_tools.h) makes every template show the tools, the
//   call and its result, including templates with no tool support at all.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/generic_tools.h"
#include "server/openai_request.h"
#include "server/responses_request.h"
#include "template/chat_template.h"
#include "template_goldens.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace rapid;
using namespace rapid::server;

namespace {

using rapid::fixtures::golden_now;
using rapid::fixtures::kFixtures;
using rapid::fixtures::slurp;
const fs::path kGolden = rapid::fixtures::kTemplateGolden;

// The .jinja fixtures (the tokenizer_config ones are covered by template_golden_test).
std::vector<std::string> template_names() {
  std::vector<std::string> v;
  for (auto& d : fs::directory_iterator(kFixtures / "chat-templates"))
    if (d.path().extension() == ".jinja") v.push_back(d.path().stem().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class ToolLoop : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    src_ = slurp(kFixtures / "chat-templates" / (GetParam() + ".jinja"));
    ASSERT_FALSE(src_.empty());
    tpl_ = std::make_unique<jinja::ChatTemplate>(src_);
    opts_.now = golden_now();
  }
  std::string render(json ctx) const {
    ctx["bos_token"] = "<s>";
    ctx["eos_token"] = "</s>";
    return tpl_->render(ctx, opts_);
  }
  std::string src_;
  std::unique_ptr<jinja::ChatTemplate> tpl_;
  jinja::RenderOptions opts_;
};

TEST_P(ToolLoop, NormalizedClientShapesMatchJinja2) {
  auto golden = json::parse(slurp(kGolden / (GetParam() + ".json")))["results"];
  auto convs = json::parse(slurp(kGolden / "conversations.json"));
  int checked = 0;
  for (auto& [cname, conv] : convs.items()) {
    if (cname.rfind("loop_", 0) != 0) continue;
    const json& expect = golden["normalized_" + cname];
    json ctx = conv;
    ctx["messages"] = normalize_openai_messages(conv["messages"]);
    std::string got, err;
    try {
      got = tpl_->render(ctx, opts_);
    } catch (const jinja::TemplateError& e) {
      err = e.what();
    }
    if (expect.contains("error")) {
      EXPECT_FALSE(err.empty()) << cname << ": jinja2 raised " << expect["error"] << ", we rendered\n" << got;
    } else {
      EXPECT_EQ(err, "") << cname;
      EXPECT_EQ(got, expect["output"].get<std::string>()) << cname;
    }
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

// A two-turn loop: tools offered, the model called one, its result came back.
json loop_messages(bool parallel) {
  json calls = json::array({{{"id", "call_1"}, {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}});
  if (parallel)
    calls.push_back({{"id", "call_2"}, {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Tokyo\"}"}}}});
  json m = json::array({{{"role", "system"}, {"content", "Be brief."}},
                        {{"role", "user"}, {"content", "Weather in Paris?"}},
                        {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}},
                        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny-18C"}}});
  if (parallel) m.push_back({{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "rainy-9C"}});
  return normalize_openai_messages(m);
}

json weather_tools() {
  return json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"description", "Weather of a city"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}}}}},
                                                     {"required", {"city"}}}}}}}});
}

TEST_P(ToolLoop, GenericFormatShowsToolsCallsAndResults) {
  RenderFn fn = [this](const json& ctx) { return render(ctx); };
  TemplateToolSupport s = probe_tool_support(fn);
  // A template that shows everything itself is rendered as given; where jinja2 refuses such a
  // loop too (its own rules on call ids, parallel calls, ...), so do we.
  auto golden = json::parse(slurp(kGolden / (GetParam() + ".json")))["results"];
  if (golden["plain"].contains("error") && golden["tools_offered"].contains("error"))
    GTEST_SKIP() << "jinja2 refuses even a plain chat with this template: " << golden["plain"]["error"];
  bool own_rules = s.complete() && s.system_role;
  if (own_rules && golden["normalized_loop_null_content"].contains("error"))
    GTEST_SKIP() << "jinja2 refuses this template's tool loops: " << golden["normalized_loop_null_content"]["error"];
  for (bool parallel : {false, true}) {
    if (parallel && own_rules && golden["parallel_calls"].contains("error")) continue;
    json msgs = apply_generic_tools(loop_messages(parallel), weather_tools(), s);
    std::string out;
    json ctx = {{"messages", msgs}, {"add_generation_prompt", true}};
    if (s.tools) ctx["tools"] = weather_tools();  // as ModelBackend::render_text does
    ASSERT_NO_THROW(out = render(ctx))
        << GetParam() << " support " << s.tools << s.tool_calls << s.tool_responses << s.system_role;
    EXPECT_NE(out.find("get_weather"), std::string::npos) << out;
    EXPECT_NE(out.find("Paris"), std::string::npos) << out;
    EXPECT_NE(out.find("sunny-18C"), std::string::npos) << out;
    if (parallel) EXPECT_NE(out.find("rainy-9C"), std::string::npos) << out;
    if (!s.tools) EXPECT_NE(out.find("\"name\": \"<tool name>\""), std::string::npos) << out;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, ToolLoop, ::testing::ValuesIn(template_names()), test_name);

// What the probes find, checked by reading the templates: Qwen2.5 renders everything; Gemma 2
// renders no tools, drops tool calls, refuses the tool role and a system message.
TEST(GenericTools, ProbesKnownTemplates) {
  auto probe = [](const std::string& name) {
    jinja::ChatTemplate t(slurp(kFixtures / "chat-templates" / (name + ".jinja")));
    return probe_tool_support([&](const json& ctx) {
      json c = ctx;
      c["bos_token"] = "<s>";
      c["eos_token"] = "</s>";
      return t.render(c);
    });
  };
  TemplateToolSupport q = probe("Qwen-Qwen2.5-7B-Instruct");
  EXPECT_TRUE(q.tools && q.tool_calls && q.tool_responses && q.system_role);
  TemplateToolSupport g = probe("google-gemma-2-2b-it");
  EXPECT_FALSE(g.tools);
  EXPECT_FALSE(g.tool_calls);
  EXPECT_FALSE(g.tool_responses);
  EXPECT_FALSE(g.system_role);
  // SmolLM2's template (as shipped in its GGUF): ChatML, content only.
  const std::string smol =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
      "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
      "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\n' }}{% endif %}";
  jinja::ChatTemplate st(smol);
  TemplateToolSupport sm = probe_tool_support([&](const json& ctx) { return st.render(ctx); });
  EXPECT_FALSE(sm.tools);
  EXPECT_FALSE(sm.tool_calls);
  EXPECT_TRUE(sm.tool_responses);  // it renders any role's content
  EXPECT_TRUE(sm.system_role);
  // The turn-two failure: the raw OpenAI shape (content null) is refused by this
  // template; normalized it renders, the call as generic JSON in the assistant turn.
  json raw = loop_messages(false);
  json with_null = raw;
  with_null[2].erase("content");
  EXPECT_THROW(st.render(json{{"messages", with_null}, {"add_generation_prompt", true}}), jinja::TemplateError);
  std::string out = st.render(json{{"messages", apply_generic_tools(raw, weather_tools(), sm)}, {"add_generation_prompt", true}});
  EXPECT_NE(out.find("<|im_start|>assistant\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}<|im_end|>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<|im_start|>tool\nsunny-18C<|im_end|>"), std::string::npos) << out;
}

TEST(GenericTools, ConvertsWhatTheTemplateLacks) {
  TemplateToolSupport none{false, false, false, false};
  json msgs = apply_generic_tools(loop_messages(true), weather_tools(), none);
  // No system role: the tool section, then the system prompt, lead the first user message.
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0]["role"], "user");
  std::string first = msgs[0]["content"];
  EXPECT_EQ(first.rfind("You can call the following tools", 0), 0u);
  EXPECT_NE(first.find("answer directly.\n\nBe brief.\n\nWeather in Paris?"), std::string::npos) << first;
  EXPECT_FALSE(msgs[1].contains("tool_calls"));
  json calls = json::parse(msgs[1]["content"].get<std::string>());
  ASSERT_TRUE(calls.is_array());
  EXPECT_EQ(calls[1]["arguments"]["city"], "Tokyo");
  // Both results in one user turn (alternating-role templates accept it).
  EXPECT_EQ(msgs[2]["role"], "user");
  EXPECT_NE(msgs[2]["content"].get<std::string>().find("sunny-18C"), std::string::npos);
  EXPECT_NE(msgs[2]["content"].get<std::string>().find("rainy-9C"), std::string::npos);
  // A complete template gets the conversation untouched.
  TemplateToolSupport all;
  EXPECT_EQ(apply_generic_tools(loop_messages(true), weather_tools(), all), loop_messages(true));
  // The tool section, with a system role: appended to the existing system message.
  TemplateToolSupport sys{false, true, true, true};
  json m2 = apply_generic_tools(loop_messages(false), weather_tools(), sys);
  EXPECT_EQ(m2[0]["content"].get<std::string>().rfind("Be brief.\n\nYou can call", 0), 0u);
  std::string prompt = generic_tool_prompt(weather_tools());
  EXPECT_NE(prompt.find("{\"name\":\"get_weather\",\"description\":\"Weather of a city\",\"parameters\":"),
            std::string::npos);
}

TEST(ChatRequest, NormalizesClientConversations) {
  json m = json::array(
      {{{"role", "developer"}, {"content", {{{"type", "text"}, {"text", "D1"}}, {{"type", "text"}, {"text", "D2"}}}}},
       {{"role", "user"}, {"name", "alice"}, {"content", "q"}},
       {{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "think"},
        {"tool_calls", {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", {{{"type", "text"}, {"text", "r"}}}}},
       {{"role", "assistant"}, {"function_call", {{"name", "g"}, {"arguments", "not json"}}}},
       {{"role", "function"}, {"name", "g"}, {"content", "r2"}},
       {{"role", "assistant"}, {"content", {{{"type", "refusal"}, {"refusal", "no"}}}}, {"tool_calls", nullptr}}});
  json n = normalize_openai_messages(m);
  EXPECT_EQ(n[0], json({{"role", "system"}, {"content", "D1\nD2"}}));
  EXPECT_EQ(n[1]["name"], "alice");
  EXPECT_EQ(n[2]["content"], "");  // vLLM's "" for null: templates concatenate it
  EXPECT_EQ(n[2]["reasoning_content"], "think");
  EXPECT_EQ(n[2]["tool_calls"][0]["function"]["arguments"], json({{"a", 1}}));
  EXPECT_EQ(n[3], json({{"role", "tool"}, {"content", "r"}, {"tool_call_id", "c1"}}));
  EXPECT_EQ(n[4]["content"], "");
  EXPECT_EQ(n[4]["tool_calls"][0]["function"]["name"], "g");
  EXPECT_EQ(n[4]["tool_calls"][0]["function"]["arguments"], "not json");
  EXPECT_EQ(n[5]["role"], "tool");
  EXPECT_EQ(n[6], json({{"role", "assistant"}, {"content", "no"}}));
  // User and system messages still need content.
  EXPECT_THROW(normalize_openai_messages(json::array({{{"role", "user"}, {"content", nullptr}}})), ApiError);
}

// Codex sends back its freeform apply_patch calls, local-shell calls and built-in tool items.
TEST(ResponsesRequest, CodexHistoryItems) {
  json b = {{"model", "m"},
            {"input", {{{"role", "user"}, {"content", "fix it"}},
                       {{"type", "custom_tool_call"}, {"call_id", "c1"}, {"name", "apply_patch"}, {"input", "*** Begin Patch"}},
                       {{"type", "custom_tool_call_output"}, {"call_id", "c1"}, {"output", "Done"}},
                       {{"type", "web_search_call"}, {"id", "ws_1"}, {"status", "completed"}},
                       {{"type", "local_shell_call"}, {"call_id", "c2"}, {"id", "ls_1"},
                        {"action", {{"type", "exec"}, {"command", {"ls"}}}}},
                       {{"type", "local_shell_call_output"}, {"id", "c2"}, {"output", "a.txt"}}}}};
  ResponsesRequest r = parse_responses_request(b, SamplingLimits{100, 0});
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["input"], "*** Begin Patch");
  EXPECT_EQ(r.messages[2], json({{"role", "tool"}, {"content", "Done"}, {"tool_call_id", "c1"}}));
  EXPECT_EQ(r.messages[3]["tool_calls"][0]["function"]["name"], "local_shell");
  EXPECT_EQ(r.messages[4]["tool_call_id"], "c2");
  b["input"][1]["type"] = "item_reference";
  EXPECT_THROW(parse_responses_request(b, SamplingLimits{100, 0}), ApiError);
}

// Claude Code's second turn: thinking + text + tool_use sent back, then the tool_result with
// cache_control; the earlier reasoning reaches the template as reasoning_content.
TEST(AnthropicRequest, ClaudeCodeToolLoop) {
  json cc = {{"type", "ephemeral"}};
  json b = {{"model", "m"}, {"max_tokens", 8},
            {"system", {{{"type", "text"}, {"text", "S1"}, {"cache_control", cc}}, {{"type", "text"}, {"text", "S2"}}}},
            {"messages",
             {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "q"}, {"cache_control", cc}}}}},
              {{"role", "assistant"},
               {"content", {{{"type", "thinking"}, {"thinking", "plan"}, {"signature", "sig"}},
                            {{"type", "text"}, {"text", "Listing."}},
                            {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "Bash"}, {"input", {{"command", "ls"}}}}}}},
              {{"role", "user"},
               {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "a.txt"}, {"cache_control", cc}}}}}}}};
  MessagesRequest r = parse_messages_request(b, SamplingLimits{100, 0});
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0], json({{"role", "system"}, {"content", "S1\nS2"}}));
  EXPECT_EQ(r.messages[2]["content"], "Listing.");
  EXPECT_EQ(r.messages[2]["reasoning_content"], "plan");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], json({{"command", "ls"}}));
  EXPECT_EQ(r.messages[3], json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "a.txt"}}));
}

}  // namespace
