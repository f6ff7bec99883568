// Cross-check against the expectations in vLLM's own parser tests
// (github.com/vllm-project/vllm, tests/tool_parsers/test_<format>_tool_parser.py). Each case
// restates a model output from those tests and what vLLM asserts for it; where our behaviour
// deliberately differs (we never drop text), the case asserts ours and says why.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "parsers/output_parser.h"

using nlohmann::json;

namespace {

struct Want {
  Want(std::string n, json a, bool r = false, std::string i = "")
      : name(std::move(n)), args(std::move(a)), raw(r), id(std::move(i)) {}
  std::string name;
  json args;  // a JSON value, or a string holding the raw (invalid) arguments text
  bool raw;   // args is the raw arguments text
  std::string id;
};

rapid::parsers::ParseResult parse(const std::string& parser, const std::string& text, const json& tools = json::array(),
                         const std::string& reasoning = "") {
  rapid::parsers::ParserOptions o;
  o.tool_parser = parser;
  o.reasoning_parser = reasoning;
  o.tools = tools;
  o.id_seed = 7;
  auto whole = rapid::parsers::parse_output(o, text);
  // The same text one byte at a time must give the same answer.
  auto p = rapid::parsers::make_output_parser(o);
  std::string content, reasoning_text;
  // Tool calls arrive as fragments (id + name first, then argument pieces): merge by index.
  std::vector<rapid::parsers::ParsedToolCall> calls;
  auto merge = [&](const rapid::parsers::ParseDelta& d) {
    content += d.content;
    reasoning_text += d.reasoning;
    for (auto& t : d.tool_calls) {
      if (t.index >= static_cast<int>(calls.size())) calls.resize(t.index + 1);
      auto& c = calls[t.index];
      if (!t.id.empty()) c.id = t.id;
      if (!t.name.empty()) c.name = t.name;
      c.arguments += t.arguments;
    }
  };
  for (char c : text) merge(p->feed(std::string_view(&c, 1)));
  merge(p->finish());
  EXPECT_EQ(content, whole.content);
  EXPECT_EQ(reasoning_text, whole.reasoning);
  EXPECT_EQ(calls.size(), whole.tool_calls.size());
  for (size_t i = 0; i < std::min(calls.size(), whole.tool_calls.size()); ++i) {
    EXPECT_EQ(calls[i].id, whole.tool_calls[i].id);
    EXPECT_EQ(calls[i].name, whole.tool_calls[i].name);
    EXPECT_EQ(calls[i].arguments, whole.tool_calls[i].arguments);
  }
  return whole;
}

void expect(const rapid::parsers::ParseResult& r, const std::optional<std::string>& content, const std::vector<Want>& calls) {
  if (content) {
    EXPECT_EQ(r.content, *content);
  }
  ASSERT_EQ(r.tool_calls.size(), calls.size()) << r.content;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(r.tool_calls[i].name, calls[i].name);
    if (calls[i].raw) {
      EXPECT_EQ(r.tool_calls[i].arguments, calls[i].args.get<std::string>());
    } else {
      json got = json::parse(r.tool_calls[i].arguments, nullptr, false);
      EXPECT_EQ(got, calls[i].args) << r.tool_calls[i].arguments;
    }
    if (!calls[i].id.empty()) {
      EXPECT_EQ(r.tool_calls[i].id, calls[i].id);
    }
  }
}

const std::optional<std::string> kNone = std::string();  // vLLM's content None

// ---- hermes: test_hermes_tool_parser.py ----
TEST(CrossCheckVllm, Hermes) {
  std::string t = "This is some prior text that has nothing to do with tool calling.";
  expect(parse("hermes", t), t, {});
  expect(parse("hermes", "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}\n</tool_call>"), kNone,
         {{"final_answer", {{"trigger", true}}}});
  // Unterminated at end of stream: still a call.
  expect(parse("hermes", "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}"), kNone,
         {{"final_answer", {{"trigger", true}}}});
  // Missing outer brace: vLLM's non-streaming parser returns the text; here the call went out
  // (streamed) at `"arguments": {` and its arguments balanced, so it stands (README "Semantics").
  t = "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}";
  expect(parse("hermes", t), kNone, {{"final_answer", {{"trigger", true}}}});
  // Arguments already serialised as a string are decoded once; a plain string stays a string.
  expect(parse("hermes", "<tool_call>\n{\"name\": \"get_db_config\", \"arguments\": \"{\\\"param\\\": \\\"max_connections\\\"}\"}\n</tool_call>"),
         kNone, {{"get_db_config", {{"param", "max_connections"}}}});
  expect(parse("hermes", "<tool_call>\n{\"name\": \"do_thing\", \"arguments\": \"hello\"}\n</tool_call>"), kNone,
         {{"do_thing", "hello"}});
  expect(parse("hermes", "Sure, let me check the weather.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"NYC\"}}</tool_call>"),
         std::string("Sure, let me check the weather."), {{"get_weather", {{"city", "NYC"}}}});
  expect(parse("hermes", "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"cats\"}}</tool_call>"
                         "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"dogs\"}}</tool_call>"),
         kNone, {{"search", {{"q", "cats"}}}, {"search", {{"q", "dogs"}}}});
}

// ---- kimi_k2: test_kimi_k2_tool_parser.py (ids come from the model) ----
std::string kimi(const std::vector<std::pair<std::string, std::string>>& calls) {
  std::string s = "<|tool_calls_section_begin|>";
  for (auto& [id, args] : calls) s += "<|tool_call_begin|>" + id + " <|tool_call_argument_begin|>" + args + "<|tool_call_end|>";
  return s + "<|tool_calls_section_end|>";
}

TEST(CrossCheckVllm, KimiK2) {
  expect(parse("kimi_k2", "This is a test"), std::string("This is a test"), {});
  expect(parse("kimi_k2", "I'll check. " + kimi({{"functions.get_weather:0", "{\"city\": \"Beijing\"}"}})),
         std::string("I'll check. "), {{"get_weather", {{"city", "Beijing"}}, false, "functions.get_weather:0"}});
  expect(parse("kimi_k2", "Compare weather. " + kimi({{"functions.get_weather:0", "{\"city\": \"Beijing\"}"},
                                                      {"functions.get_weather:1", "{\"city\": \"Shanghai\"}"}})),
         std::string("Compare weather. "),
         {{"get_weather", {{"city", "Beijing"}}, false, "functions.get_weather:0"},
          {"get_weather", {{"city", "Shanghai"}}, false, "functions.get_weather:1"}});
  expect(parse("kimi_k2", "Multiple tasks. " + kimi({{"functions.get_weather:0", "{\"city\": \"New York\"}"},
                                                     {"functions.get_news:1", "{\"topic\": \"technology\"}"},
                                                     {"functions.send_email:2", "{\"to\": \"user@example.com\", \"subject\": \"Daily Update\"}"}})),
         std::string("Multiple tasks. "),
         {{"get_weather", {{"city", "New York"}}}, {"get_news", {{"topic", "technology"}}},
          {"send_email", {{"to", "user@example.com"}, {"subject", "Daily Update"}}}});
  expect(parse("kimi_k2", "Process HTML. " + kimi({{"functions.process_html:0", "{\"html\": \"<div>content</div>\"}"}})),
         std::string("Process HTML. "), {{"process_html", {{"html", "<div>content</div>"}}}});
  expect(parse("kimi_k2", "Formatted. " + kimi({{"functions.process_data:0", "{\n  \"name\": \"test\",\n  \"value\": 123\n}"}})),
         std::string("Formatted. "), {{"process_data", {{"name", "test"}, {"value", 123}}}});
  expect(parse("kimi_k2", "No prefix. " + kimi({{"get_weather:0", "{\"city\": \"Tokyo\"}"}})), std::string("No prefix. "),
         {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("kimi_k2", "Empty args. " + kimi({{"functions.test:0", "{}"}})), std::string("Empty args. "),
         {{"test", json::object()}});
  // Invalid JSON is still a call, arguments as written.
  expect(parse("kimi_k2", "Help. " + kimi({{"functions.bad:0", "{\"city\": \"Beijing\""}, {"functions.good:1", "{\"city\": \"Shanghai\"}"}})),
         std::nullopt, {{"bad", "{\"city\": \"Beijing\"", true}, {"good", {{"city", "Shanghai"}}}});
}

// ---- deepseek_v31: test_deepseekv31_tool_parser.py ----
TEST(CrossCheckVllm, DeepseekV31) {
  expect(parse("deepseek_v31", "normal text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
         std::string("normal text"), {{"foo", {{"x", 1}}}});
  // vLLM drops " some suffix text" after the calls; we keep it as content (never lose text).
  expect(parse("deepseek_v31", "some prefix text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜>"
                               "<｜tool▁call▁begin｜>bar<｜tool▁sep｜>{\"y\":2}<｜tool▁call▁end｜><｜tool▁calls▁end｜> some suffix text"),
         std::string("some prefix text some suffix text"), {{"foo", {{"x", 1}}}, {"bar", {{"y", 2}}}});
  for (std::string t : {std::string("Let me look that up.<｜tool▁calls▁begin｜>get_weather"),
                        std::string("<｜tool▁calls▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁calls▁end｜>")})
    expect(parse("deepseek_v31", t), t, {});
}

// ---- deepseek_v3: test_deepseekv3_tool_parser.py (common_tests config) ----
TEST(CrossCheckVllm, DeepseekV3) {
  auto call = [](const std::string& name, const std::string& args) {
    return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" + args + "\n```<｜tool▁call▁end｜>";
  };
  std::string t = "How can I help you today? I can check weather for you.";
  expect(parse("deepseek_v3", t), t, {});
  expect(parse("deepseek_v3", "<｜tool▁calls▁begin｜>" + call("get_weather", "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}") + "<｜tool▁calls▁end｜>"),
         kNone, {{"get_weather", {{"city", "Tokyo"}, {"unit", "celsius"}}}});
  expect(parse("deepseek_v3", "<｜tool▁calls▁begin｜>" + call("get_weather", "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}") +
                                  call("search_hotels", "{\"location\": \"Tokyo\", \"check_in\": \"2025-01-15\"}") + "<｜tool▁calls▁end｜>"),
         kNone, {{"get_weather", {{"city", "Tokyo"}, {"unit", "celsius"}}}, {"search_hotels", {{"location", "Tokyo"}, {"check_in", "2025-01-15"}}}});
  expect(parse("deepseek_v3", "<｜tool▁calls▁begin｜>" + call("get_current_time", "{}") + "<｜tool▁calls▁end｜>"), kNone,
         {{"get_current_time", json::object()}});
  expect(parse("deepseek_v3", "Let me check the weather for you.<｜tool▁calls▁begin｜>" + call("get_weather", "{\"city\": \"Paris\"}") + "<｜tool▁calls▁end｜>"),
         std::string("Let me check the weather for you."), {{"get_weather", {{"city", "Paris"}}}});
  expect(parse("deepseek_v3", "<｜tool▁calls▁begin｜>" + call("send_message", R"({"text": "He said \"hello\"", "path": "C:\\Users\\file", "newline": "line1\nline2"})") + "<｜tool▁calls▁end｜>"),
         kNone, {{"send_message", {{"text", "He said \"hello\""}, {"path", "C:\\Users\\file"}, {"newline", "line1\nline2"}}}});
}

// ---- glm45: test_glm4_moe_tool_parser.py ----
TEST(CrossCheckVllm, Glm45) {
  json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  std::string dallas = "<tool_call>get_current_weather\n    <arg_key>city</arg_key>\n    <arg_value>Dallas</arg_value>\n    <arg_key>state</arg_key>\n"
                       "    <arg_value>TX</arg_value>\n    <arg_key>unit</arg_key>\n    <arg_value>fahrenheit</arg_value>\n    </tool_call>";
  json dallas_args = {{"city", "Dallas"}, {"state", "TX"}, {"unit", "fahrenheit"}};
  expect(parse("glm45", "This is a test", tools), std::string("This is a test"), {});
  expect(parse("glm45", dallas, tools), kNone, {{"get_current_weather", dallas_args}});
  std::string orlando = "<tool_call>get_current_weather\n    <arg_key>city</arg_key>\n    <arg_value>Orlando</arg_value>\n    <arg_key>state</arg_key>\n"
                        "    <arg_value>FL</arg_value>\n    <arg_key>unit</arg_key>\n    <arg_value>fahrenheit</arg_value>\n    </tool_call>";
  expect(parse("glm45", dallas + "\n    " + orlando, tools), kNone,
         {{"get_current_weather", dallas_args}, {"get_current_weather", {{"city", "Orlando"}, {"state", "FL"}, {"unit", "fahrenheit"}}}});
  expect(parse("glm45", "I'll help you check the weather. " + dallas, tools), std::string("I'll help you check the weather. "),
         {{"get_current_weather", dallas_args}});
  expect(parse("glm45", "I will help you get the weather.<tool_call>get_weather\n    <arg_key>city</arg_key>\n    <arg_value>Beijing</arg_value>\n"
                        "    <arg_key>date</arg_key>\n    <arg_value>2025-08-01</arg_value>\n    </tool_call>", tools),
         std::string("I will help you get the weather."), {{"get_weather", {{"city", "Beijing"}, {"date", "2025-08-01"}}}});
  // Without a reasoning parser the think block is content.
  expect(parse("glm45", "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n<tool_call>get_weather\n"
                        "<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>\n</tool_call>", tools),
         std::string("<think>I want to get the weather.</think>\n\nI will help you get the weather.\n"), {{"get_weather", {{"city", "Beijing"}, {"date", "2025-08-01"}}}});
  expect(parse("glm45", "<tool_call>get_current_time\n</tool_call>", tools), kNone, {{"get_current_time", json::object()}});
  std::string incomplete = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>";
  // vLLM: no call (the block never closed). Here the call streamed out once its name line was
  // complete, so it stands with the arguments it had (src/parsers/README.md, Semantics).
  expect(parse("glm45", incomplete, tools), kNone, {{"get_weather", {{"city", "Beijing"}, {"date", "2025-08-01"}}}});
}

// ---- llama3_json: test_llama3_json_tool_parser.py ----
TEST(CrossCheckVllm, Llama3Json) {
  expect(parse("llama3_json", R"({"name": "searchTool", "parameters": {"query": "test query", "limit": 10}})"), kNone,
         {{"searchTool", {{"query", "test query"}, {"limit", 10}}}});
  std::string t = "This is just some text without any tool calls";
  expect(parse("llama3_json", t), t, {});
  // vLLM: no call. Here the call streamed out at `"parameters": {`, so it stands with the raw text.
  t = R"({"name": "invalidTool", "parameters": {invalid json})";
  expect(parse("llama3_json", t), kNone, {{"invalidTool", "{invalid json}", true}});
  expect(parse("llama3_json", R"({"name": "searchTool", "arguments": {"query": "test"}})"), kNone, {{"searchTool", {{"query", "test"}}}});
  for (std::string sep : {"; ", " ; "})
    expect(parse("llama3_json", R"({"name": "searchTool", "parameters": {"query": "test1"}})" + sep +
                                    R"({"name": "getOpenIncidentsTool", "parameters": {}})" + sep +
                                    R"({"name": "searchTool", "parameters": {"query": "test2"}})"),
           kNone, {{"searchTool", {{"query", "test1"}}}, {"getOpenIncidentsTool", json::object()}, {"searchTool", {{"query", "test2"}}}});
  expect(parse("llama3_json", R"({"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}})"), kNone,
         {{"complexTool", {{"level1", {{"level2", {{"level3", {{"level4", {{"value", "deep"}}}}}}}}}}}});
  expect(parse("llama3_json", R"({"name": "searchTool", "parameters": {"query": "test {value} [complex]","nested": {"inner": "more {brackets}"}}})"), kNone,
         {{"searchTool", {{"query", "test {value} [complex]"}, {"nested", {{"inner", "more {brackets}"}}}}}});
  expect(parse("llama3_json", R"({"name": "parserTool", "parameters": {"text": "He said \"Hello {world}\""}})"), kNone,
         {{"parserTool", {{"text", "He said \"Hello {world}\""}}}});
  for (std::string t2 : {std::string(R"({"parameters": {}})"), std::string(R"({"name": "toolWithoutParams"})")})
    expect(parse("llama3_json", t2), t2, {});
  // A brace in trailing prose does not discard the call (the prose stays content here).
  expect(parse("llama3_json", R"({"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.)"),
         std::string("I used {searchTool} for this."), {{"searchTool", {{"query", "test"}}}});
  for (std::string sep : {"; ", ";", ";\n", "\n"})
    expect(parse("llama3_json", R"({"name": "searchTool", "parameters": {"query": "test1"}})" + sep + R"({"name": "getOpenIncidentsTool", "parameters": {}})"),
           kNone, {{"searchTool", {{"query", "test1"}}}, {"getOpenIncidentsTool", json::object()}});
}

// ---- pythonic / olmo3 / lfm2 share vLLM's pythonic cases ----
const std::string kSimple = "get_weather(city='San Francisco', metric='celsius')";
const json kSimpleArgs = {{"city", "San Francisco"}, {"metric", "celsius"}};
const std::string kMoreTypes = "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])";
const json kMoreTypesArgs = {{"name", "John Doe"}, {"age", 37}, {"address", {{"city", "San Francisco"}, {"state", "CA"}}},
                             {"role", nullptr}, {"passed_test", true}, {"aliases", {"John", "Johnny"}}};
const std::string kEscaped = R"(get_weather(city='Martha\'s Vineyard', metric='\"cool units\"'))";
const json kEscapedArgs = {{"city", "Martha's Vineyard"}, {"metric", "\"cool units\""}};

void pythonic_cases(const std::string& parser, const std::string& open, const std::string& sep, const std::string& close) {
  expect(parse(parser, "How can I help you today?"), std::string("How can I help you today?"), {});
  expect(parse(parser, open + kSimple + close), kNone, {{"get_weather", kSimpleArgs}});
  expect(parse(parser, open + kMoreTypes + close), kNone, {{"register_user", kMoreTypesArgs}});
  expect(parse(parser, open + "get_weather()" + close), kNone, {{"get_weather", json::object()}});
  expect(parse(parser, open + "do_something_cool(additional_data={})" + close), kNone, {{"do_something_cool", {{"additional_data", json::object()}}}});
  expect(parse(parser, open + "do_something_cool(steps=[])" + close), kNone, {{"do_something_cool", {{"steps", json::array()}}}});
  expect(parse(parser, open + kEscaped + close), kNone, {{"get_weather", kEscapedArgs}});
  expect(parse(parser, open + kSimple + sep + kMoreTypes + close), kNone, {{"get_weather", kSimpleArgs}, {"register_user", kMoreTypesArgs}});
}

TEST(CrossCheckVllm, Pythonic) { pythonic_cases("pythonic", "[", ", ", "]"); }

TEST(CrossCheckVllm, Olmo3) {
  pythonic_cases("olmo3", "<function_calls>", "\n", "</function_calls>");
  // JSON-style literals are accepted too.
  expect(parse("olmo3", "<function_calls>register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=null, passed_test=true, aliases=['John', 'Johnny'])</function_calls>"),
         kNone, {{"register_user", kMoreTypesArgs}});
}

TEST(CrossCheckVllm, Lfm2) {
  pythonic_cases("lfm2", "<|tool_call_start|>[", ", ", "]<|tool_call_end|>");
  auto wrap = [](const std::string& s) { return "<|tool_call_start|>[" + s + "]<|tool_call_end|>"; };
  expect(parse("lfm2", wrap("get_candidate_status(candidate_id='12345')") + "\nChecking the current status of candidate ID 12345."),
         std::string("Checking the current status of candidate ID 12345."), {{"get_candidate_status", {{"candidate_id", "12345"}}}});
  expect(parse("lfm2", wrap("grocery.orderIngredients(ingredientList=[{'name': 'Lasagna noodles', 'amount': 250, 'unit': 'g'}], deliveryAddress='845 Willow Lane, Springfield, IL 62704')")),
         kNone, {{"grocery.orderIngredients", {{"ingredientList", {{{"name", "Lasagna noodles"}, {"amount", 250}, {"unit", "g"}}}}, {"deliveryAddress", "845 Willow Lane, Springfield, IL 62704"}}}});
  expect(parse("lfm2", wrap("exec(command='grep -F \"]\" log.txt')")), kNone, {{"exec", {{"command", "grep -F \"]\" log.txt"}}}});
  expect(parse("lfm2", wrap("exec(command='cat > f.py << EOF\nimport csv\nprint(1)\nEOF')")), kNone,
         {{"exec", {{"command", "cat > f.py << EOF\nimport csv\nprint(1)\nEOF"}}}});
  expect(parse("lfm2", wrap("set_date(month=07, day=05)")), kNone, {{"set_date", {{"month", 7}, {"day", 5}}}});
  expect(parse("lfm2", wrap(std::string("exec(command='printf a\0b')", 26))), kNone, {{"exec", {{"command", std::string("printf a\0b", 10)}}}});
  expect(parse("lfm2", "<|tool_call_start|> [" + kSimple + "]<|tool_call_end|>"), kNone, {{"get_weather", kSimpleArgs}});
}

// ---- jamba: test_jamba_tool_parser.py ----
TEST(CrossCheckVllm, Jamba) {
  std::string call = "{\"name\": \"get_current_weather\", \"arguments\": {\"city\": \"Dallas\", \"state\": \"TX\", \"unit\": \"fahrenheit\"}}";
  json dallas = {{"city", "Dallas"}, {"state", "TX"}, {"unit", "fahrenheit"}};
  expect(parse("jamba", "This is a test"), std::string("This is a test"), {});
  expect(parse("jamba", " <tool_calls>[\n    " + call + "\n]</tool_calls>"), kNone, {{"get_current_weather", dallas}});
  expect(parse("jamba", " Sure! let me call the tool for you.<tool_calls>[\n    " + call + "\n]</tool_calls>"),
         std::string(" Sure! let me call the tool for you."), {{"get_current_weather", dallas}});
  expect(parse("jamba", " <tool_calls>[\n    " + call + ",\n    {\"name\": \"get_current_weather\", \"arguments\": {\"city\": \"Orlando\", \"state\": \"FL\", \"unit\": \"fahrenheit\"}}\n]</tool_calls>"),
         kNone, {{"get_current_weather", dallas}, {"get_current_weather", {{"city", "Orlando"}, {"state", "FL"}, {"unit", "fahrenheit"}}}});
}

// ---- minimax_m2: test_minimax_m2_tool_parser.py (no tools: values stay text) ----
TEST(CrossCheckVllm, MinimaxM2) {
  expect(parse("minimax_m2", "Hello world"), std::string("Hello world"), {});
  expect(parse("minimax_m2", "Let me check. <minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">Seattle</parameter></invoke></minimax:tool_call>"),
         std::string("Let me check. "), {{"get_weather", {{"city", "Seattle"}}}});
  expect(parse("minimax_m2", "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">Seattle</parameter><parameter name=\"days\">5</parameter></invoke></minimax:tool_call>"),
         kNone, {{"get_weather", {{"city", "Seattle"}, {"days", "5"}}}});
  expect(parse("minimax_m2", "<minimax:tool_call><invoke name=\"search_web\"><parameter name=\"query\">OpenAI</parameter></invoke>"
                             "<invoke name=\"search_web\"><parameter name=\"query\">Gemini</parameter></invoke></minimax:tool_call>"),
         kNone, {{"search_web", {{"query", "OpenAI"}}}, {"search_web", {{"query", "Gemini"}}}});
  auto r = parse("minimax_m2", "<minimax:tool_call><invoke name=\"fn\"><parameter name=\"k\">v</parameter></invoke></minimax:tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].id.rfind("call_", 0), 0u);
}

// ---- seed_oss: test_seed_oss_tool_parser.py ----
TEST(CrossCheckVllm, SeedOss) {
  expect(parse("seed_oss", "This is a test response without any tool calls"), std::string("This is a test response without any tool calls"), {});
  expect(parse("seed_oss", "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n</function>\n</seed:tool_call>"),
         kNone, {{"get_weather", {{"location", "Barcelona, Spain"}}}});
  std::string think = "<seed:think>The user's current thinking budget is 512.</seed:cot_budget_reflect>\nLet me analyze.\n"
                      "<seed:cot_budget_reflect>I have used 131 tokens.</seed:cot_budget_reflect>\n The unit parameter can be omitted.</seed:think>\n";
  expect(parse("seed_oss", think + "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n</function>\n</seed:tool_call>"),
         think, {{"get_weather", {{"location", "Barcelona, Spain"}}}});
}

// ---- gpt-oss: test_openai_tool_parser.py (harmony messages after <|start|>assistant) ----
TEST(CrossCheckVllm, GptOss) {
  expect(parse("gpt_oss", "<|channel|>final<|message|>This is a test<|return|>"), std::string("This is a test"), {});
  std::string analysis = "<|channel|>analysis<|message|>User asks: \"What is the weather in Tokyo?\" We need to use get_current_weather tool.<|end|>";
  for (std::string args : {std::string("{\"location\": \"Tokyo\"}"), std::string("{\n\"location\": \"Tokyo\"\n}")})
    expect(parse("gpt_oss", analysis + "<|start|>assistant to=functions.get_current_weather<|channel|>commentary <|constrain|>json<|message|>" + args + "<|call|>"),
           kNone, {{"get_current_weather", {{"location", "Tokyo"}}}});
  auto msg = [](const std::string& to, const std::string& body, bool json_type) {
    return "<|start|>assistant to=functions." + to + "<|channel|>commentary" + (json_type ? " <|constrain|>json" : "") + "<|message|>" + body + "<|call|>";
  };
  auto r = parse("gpt_oss", analysis + msg("get_current_weather", "{\"location\": \"Tokyo\"}", true) + msg("get_user_location", "{\"location\": \"Tokyo\"}", true) +
                                msg("no_content_type", "{\"location\": \"Tokyo\"}", false) + msg("not_json_no_content_type", "foo", false) +
                                msg("empty_args", "{}", true));
  expect(r, kNone, {{"get_current_weather", {{"location", "Tokyo"}}}, {"get_user_location", {{"location", "Tokyo"}}},
                    {"no_content_type", {{"location", "Tokyo"}}}, {"not_json_no_content_type", "foo", true}, {"empty_args", json::object()}});
  EXPECT_FALSE(r.reasoning.empty());
  expect(parse("gpt_oss", analysis + msg("get_current_weather", "{\"location\": \"Tokyo\"}", true) +
                              "<|start|>assistant<|channel|>final<|message|>This tool call will get the weather.<|return|>"),
         std::string("This tool call will get the weather."), {{"get_current_weather", {{"location", "Tokyo"}}}});
}

// ---- granite-20b-fc: test_granite_20b_fc_tool_parser.py ----
TEST(CrossCheckVllm, Granite20bFc) {
  std::string t = "This is a regular response without any tool calls.";
  expect(parse("granite-20b-fc", t), t, {});
  expect(parse("granite-20b-fc", "<function_call> {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}"), kNone, {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("granite-20b-fc", "<function_call> {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n<function_call> {\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}"),
         kNone, {{"get_weather", {{"city", "Tokyo"}}}, {"get_time", {{"timezone", "Asia/Tokyo"}}}});
  expect(parse("granite-20b-fc", "<function_call> {\"name\": \"refresh\", \"arguments\": {}}"), kNone, {{"refresh", json::object()}});
  expect(parse("granite-20b-fc", "Let me check the weather for you.\n<function_call> {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}"),
         std::string("Let me check the weather for you.\n"), {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("granite-20b-fc", "<function_call> {\n  \"name\": \"test_function\",\n  \"arguments\": {\n    \"quoted\": \"He said \\\"hello\\\"\",\n    \"path\": \"C:\\\\Users\\\\file.txt\",\n"
                                 "    \"newline\": \"line1\\nline2\",\n    \"unicode\": \"emoji: 🎉\"\n  }\n}"),
         kNone, {{"test_function", {{"quoted", "He said \"hello\""}, {"path", "C:\\Users\\file.txt"}, {"newline", "line1\nline2"}, {"unicode", "emoji: 🎉"}}}});
  // vLLM: truncated arguments give no call. Here the call streamed out at `"arguments": {`, so it
  // stands with the raw text (README "Semantics"); a body that never looked like a call stays text.
  expect(parse("granite-20b-fc", "<function_call> {\"name\": \"func\", \"arguments\": {"), kNone, {{"func", "{", true}});
  std::string bad = "<function_call> {\"name\": 123}";
  expect(parse("granite-20b-fc", bad), bad, {});
}

// ---- longcat: test_longcat_tool_parser.py ----
TEST(CrossCheckVllm, Longcat) {
  auto c = [](const std::string& body) { return "<longcat_tool_call>" + body + "</longcat_tool_call>"; };
  expect(parse("longcat", c("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}")), kNone, {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("longcat", c("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}") + "\n" + c("{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}")),
         kNone, {{"get_weather", {{"city", "Tokyo"}}}, {"get_time", {{"timezone", "Asia/Tokyo"}}}});
  expect(parse("longcat", "Let me check the weather for you.\n" + c("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}") + "\nHere is the result."),
         std::string("Let me check the weather for you.\n\nHere is the result."), {{"get_weather", {{"city", "Tokyo"}}}});
  std::string bad = "Some text with <longcat_tool_call>invalid json";
  expect(parse("longcat", bad), bad, {});
}

// ---- step3: test_step3_tool_parser.py ----
TEST(CrossCheckVllm, Step3) {
  std::string inv = "<steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">Tokyo</steptml:parameter></steptml:invoke>";
  expect(parse("step3", "<｜tool_calls_begin｜><｜tool_call_begin｜>" + inv + "<｜tool_call_end｜><｜tool_calls_end｜>"), kNone, {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("step3", "<｜tool_calls_begin｜><｜tool_call_begin｜>" + inv + "<｜tool_call_end｜><｜tool_sep｜><｜tool_call_begin｜><steptml:invoke name=\"get_time\">"
                        "<steptml:parameter name=\"timezone\">Asia/Tokyo</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"),
         kNone, {{"get_weather", {{"city", "Tokyo"}}}, {"get_time", {{"timezone", "Asia/Tokyo"}}}});
  expect(parse("step3", "<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"refresh\"></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"),
         kNone, {{"refresh", json::object()}});
  // String values keep their surrounding whitespace; typed ones are normalised.
  json tools = json::parse(R"([{"type":"function","function":{"name":"edit_file","parameters":{"type":"object","properties":{
      "old_string":{"type":"string"},"indent":{"type":"integer"},"enabled":{"type":"boolean"}}}}}])");
  for (std::string v : {"    if x:", "return 1\n", "    if x:\n        return 1\n", "hello ", "hello\u00a0", "hello"}) {
    std::string out = "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>edit_file\n<steptml:invoke name=\"edit_file\">"
                      "<steptml:parameter name=\"old_string\">" + v + "</steptml:parameter><steptml:parameter name=\"indent\"> 4 </steptml:parameter>"
                      "<steptml:parameter name=\"enabled\"> true </steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>";
    expect(parse("step3", out, tools), kNone, {{"edit_file", {{"old_string", v}, {"indent", 4}, {"enabled", true}}}});
  }
}

// ---- xlam: test_xlam_tool_parser.py ----
TEST(CrossCheckVllm, Xlam) {
  std::string call = R"({"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}})";
  json dallas = {{"city", "Dallas"}, {"state", "TX"}, {"unit", "fahrenheit"}};
  expect(parse("xlam", "This is a test"), std::string("This is a test"), {});
  expect(parse("xlam", "[" + call + R"(, {"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}}])"),
         kNone, {{"get_current_weather", dallas}, {"get_current_weather", {{"city", "Orlando"}, {"state", "FL"}, {"unit", "fahrenheit"}}}});
  expect(parse("xlam", "I'll help you with that.\n```json\n[" + call + "]\n```"), std::string("I'll help you with that.\n"), {{"get_current_weather", dallas}});
  expect(parse("xlam", "I'll check the weather for you.[TOOL_CALLS][" + call + "]"), std::string("I'll check the weather for you."), {{"get_current_weather", dallas}});
  expect(parse("xlam", "I'll help you check the weather.<tool_call>[" + call + "]</tool_call>"), std::string("I'll help you check the weather."),
         {{"get_current_weather", dallas}});
  expect(parse("xlam", "```json\n[" + call + "]\n```"), kNone, {{"get_current_weather", dallas}});
}

// ---- internlm: test_internlm2_tool_parser.py ----
TEST(CrossCheckVllm, Internlm) {
  auto c = [](const std::string& body) { return "<|action_start|><|plugin|>" + body + "<|action_end|>"; };
  expect(parse("internlm", c(R"({"name": "get_weather", "parameters": {"city": "Tokyo"}})")), kNone, {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("internlm", c(R"({"name": "refresh", "parameters": {}})")), kNone, {{"refresh", json::object()}});
  expect(parse("internlm", "Let me check the weather for you. " + c(R"({"name": "get_weather", "parameters": {"city": "Tokyo"}})")),
         std::string("Let me check the weather for you. "), {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("internlm", c("{\n  \"name\": \"test_function\",\n  \"parameters\": {\n    \"string_field\": \"hello\",\n    \"int_field\": 42,\n    \"float_field\": 3.14,\n"
                             "    \"bool_field\": true,\n    \"null_field\": null,\n    \"array_field\": [\"a\", \"b\", \"c\"],\n    \"object_field\": {\"nested\": \"value\"},\n"
                             "    \"empty_array\": [],\n    \"empty_object\": {}\n  }\n}")),
         kNone, {{"test_function", {{"string_field", "hello"}, {"int_field", 42}, {"float_field", 3.14}, {"bool_field", true}, {"null_field", nullptr},
                                    {"array_field", {"a", "b", "c"}}, {"object_field", {{"nested", "value"}}}, {"empty_array", json::array()}, {"empty_object", json::object()}}}});
  std::string bad = "<|action_start|><|plugin|>not json<|action_end|>";
  expect(parse("internlm", bad), bad, {});
}

// ---- phi4_mini_json: test_phi4mini_tool_parser.py ----
TEST(CrossCheckVllm, Phi4Mini) {
  std::string t = "This is a regular response without any tool calls.";
  expect(parse("phi4_mini_json", t), t, {});
  expect(parse("phi4_mini_json", R"(functools[{"name": "get_weather", "arguments": {"city": "Tokyo"}}])"), kNone, {{"get_weather", {{"city", "Tokyo"}}}});
  expect(parse("phi4_mini_json", "functools[\n  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}},\n  {\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}\n]"),
         kNone, {{"get_weather", {{"city", "Tokyo"}}}, {"get_time", {{"timezone", "Asia/Tokyo"}}}});
  expect(parse("phi4_mini_json", R"(functools[{"name": "refresh", "arguments": {}}])"), kNone, {{"refresh", json::object()}});
  // vLLM drops the surrounding text when a call is present; we keep it as content.
  expect(parse("phi4_mini_json", "Let me check the weather for you.\nfunctools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}]\nWould you like to know more?"),
         std::string("Let me check the weather for you.\n\nWould you like to know more?"), {{"get_weather", {{"city", "Tokyo"}}}});
}

// ---- qwen3_coder: test_qwen3coder_tool_parser.py (values typed by the tools' schemas) ----
TEST(CrossCheckVllm, Qwen3Coder) {
  json tools = json::parse(R"([
    {"type":"function","function":{"name":"get_current_weather","parameters":{"type":"object","properties":{
      "city":{"type":"string"},"state":{"type":"string"},"unit":{"type":"string","enum":["fahrenheit","celsius"]}},"required":["city","state"]}}},
    {"type":"function","function":{"name":"calculate_area","parameters":{"type":"object","properties":{
      "shape":{"type":"string"},"dimensions":{"type":"object"},"precision":{"type":"integer"}}}}}])");
  auto weather = [](const std::string& city, const std::string& state) {
    return "<tool_call>\n<function=get_current_weather>\n<parameter=city>\n" + city + "\n</parameter>\n<parameter=state>\n" + state +
           "\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>";
  };
  json dallas = {{"city", "Dallas"}, {"state", "TX"}, {"unit", "fahrenheit"}};
  std::string t = "This is a test response without any tool calls";
  expect(parse("qwen3_coder", t, tools), t, {});
  expect(parse("qwen3_coder", weather("Dallas", "TX"), tools), kNone, {{"get_current_weather", dallas}});
  expect(parse("qwen3_coder", "Sure! Let me check the weather for you." + weather("Dallas", "TX"), tools),
         std::string("Sure! Let me check the weather for you."), {{"get_current_weather", dallas}});
  expect(parse("qwen3_coder", "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n{\"width\": 10, \n \"height\": 20}\n"
                              "</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>", tools),
         kNone, {{"calculate_area", {{"shape", "rectangle"}, {"dimensions", {{"width", 10}, {"height", 20}}}, {"precision", 2}}}});
  expect(parse("qwen3_coder", weather("Dallas", "TX") + "\n" + weather("Orlando", "FL"), tools), kNone,
         {{"get_current_weather", dallas}, {"get_current_weather", {{"city", "Orlando"}, {"state", "FL"}, {"unit", "fahrenheit"}}}});
  expect(parse("qwen3_coder", "Let me calculate that area for you.<tool_call>\n<function=calculate_area>\n<parameter=shape>\ncircle\n</parameter>\n"
                              "<parameter=dimensions>\n{\"radius\": 15.5}\n</parameter>\n<parameter=precision>\n3\n</parameter>\n</function>\n</tool_call>", tools),
         std::string("Let me calculate that area for you."), {{"calculate_area", {{"shape", "circle"}, {"dimensions", {{"radius", 15.5}}}, {"precision", 3}}}});
  json typed = json::parse(R"([{"type":"function","function":{"name":"test_types","parameters":{"type":"object","properties":{
      "int_param":{"type":"integer"},"float_param":{"type":"float"},"bool_param":{"type":"boolean"},"str_param":{"type":"string"},"obj_param":{"type":"object"},
      "anyof_int":{"anyOf":[{"type":"integer"},{"type":"null"}]},"type_as_array":{"type":["integer","null"]}}}}}])");
  expect(parse("qwen3_coder", "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n<parameter=float_param>\n3.14\n</parameter>\n"
                              "<parameter=bool_param>\ntrue\n</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n<parameter=obj_param>\n{\"key\": \"value\"}\n</parameter>\n"
                              "<parameter=anyof_int>\n5\n</parameter>\n<parameter=type_as_array>\n7\n</parameter>\n</function>\n</tool_call>", typed),
         kNone, {{"test_types", {{"int_param", 42}, {"float_param", 3.14}, {"bool_param", true}, {"str_param", "hello world"},
                                 {"obj_param", {{"key", "value"}}}, {"anyof_int", 5}, {"type_as_array", 7}}}});
}

}  // namespace
