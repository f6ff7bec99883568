// Hostile JSON nesting (issue #15): 30k levels in any field that reaches the chat template or the
// grammar compiler used to overflow an HTTP thread's stack and kill the server. Each must be a
// 400 in the calling API's shape naming the field and the limit, and the server keeps serving.
// The reference for "valid JSON" here is the JSON grammar itself: every deep body is well-formed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/http_server.h"
#include "server/json_limits.h"
#include "server/openai_request.h"
#include "server_fake_backend.h"
#include "template/template_error.h"
#include "template/value.h"

using json = nlohmann::json;
using rapid::server::kMaxJsonDepth;
using rapid::testing::FakeBackend;

namespace {

std::string nest(int depth, const std::string& open = "[", const std::string& close = "]",
                 const std::string& inner = "1") {
  std::string s;
  s.reserve(size_t(depth) * (open.size() + close.size()) + inner.size());
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

// A JSON object nesting `depth` levels as {"a":{"a":...}}.
std::string nest_objects(int depth) { return nest(depth, "{\"a\":", "}", "1"); }

}  // namespace

TEST(JsonLimits, FindsTheFirstTooDeepPathAndIgnoresBracketsInStrings) {
  using rapid::server::json_too_deep;
  EXPECT_FALSE(json_too_deep(nest(kMaxJsonDepth), kMaxJsonDepth));
  EXPECT_EQ(json_too_deep(nest(kMaxJsonDepth + 1), kMaxJsonDepth).value_or("none"), "[0][0][0][0][0][0][0][0]...");
  std::string body = R"({"x":"[[[[[[[[","tools":[{"a":1},{"function":{"parameters":)" + nest(200) + "}}]}";
  EXPECT_EQ(json_too_deep(body, 8).value_or("none"), "tools[1].function.parameters[0][0][0][0]...");
  EXPECT_FALSE(json_too_deep(R"({"s":")" + std::string(100000, '[') + R"("})", 4));
  EXPECT_FALSE(json_too_deep(R"({"s":"\"[[[[[[\\"})", 2));  // escaped quotes keep the string open
  EXPECT_EQ(json_too_deep(nest_objects(10), 3, "args").value_or("none"), "args.a.a.a");
  // Unterminated or garbage input is scanned without crashing.
  EXPECT_TRUE(json_too_deep(std::string(300000, '{'), kMaxJsonDepth));
  EXPECT_FALSE(json_too_deep(std::string(300000, '}'), kMaxJsonDepth));
  EXPECT_FALSE(json_too_deep("\"\\", 1));
}

TEST(JsonLimits, RequestBodyAndNestedArgumentsGive400NamingFieldAndLimit) {
  using rapid::server::ApiError;
  try {
    rapid::server::parse_request_json(R"({"model":"m","chat_template_kwargs":{"x":)" + nest(30000) + "}}");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "chat_template_kwargs.x[0][0][0][0][0][0]...");
    EXPECT_NE(std::string(e.what()).find(std::to_string(kMaxJsonDepth) + " levels"), std::string::npos) << e.what();
  }
  json ok = rapid::server::parse_request_json(R"({"k":)" + nest(kMaxJsonDepth - 1) + "}");
  EXPECT_TRUE(ok.is_object());
  // A tool call's arguments arrive as a JSON string: checked when parsed.
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  msgs.push_back({{"role", "user"}, {"content", "hi"}});
  msgs.push_back({{"role", "assistant"},
                  {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                                   {"function", {{"name", "f"}, {"arguments", nest_objects(30000)}}}}}}});
  try {
    rapid::server::normalize_openai_messages(msgs, "messages");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param().rfind("messages[1].tool_calls[0].function.arguments.a.a", 0), 0u) << e.param();
  }
  EXPECT_TRUE(rapid::server::parse_output_json(nest(30000)).is_discarded());
  EXPECT_EQ(rapid::server::parse_output_json("[[1]]"), nlohmann::ordered_json::parse("[[1]]"));
}

// The JSON -> template value conversion is bounded by itself too (the CLI and other callers).
TEST(JsonLimits, TemplateValueConversionRefusesDeepJson) {
  auto deep = nlohmann::ordered_json::parse(nest(30000));
  try {
    rapid::jinja::from_json(deep);
    FAIL() << "converted";
  } catch (const rapid::jinja::TemplateError& e) {
    EXPECT_EQ(e.kind(), rapid::jinja::TemplateError::Kind::Limit);
  }
  EXPECT_EQ(rapid::jinja::from_json(nlohmann::ordered_json::parse(nest(200))).type_name(), "list");
}

class DeepJsonHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    rapid::server::ServerOptions o;
    o.port = 0;
    o.http_threads = 8;
    o.max_body_bytes = 4 << 20;
    server_ = std::make_unique<rapid::server::HttpServer>(backend_, o);
    port_ = server_->bind();
    server_->start();
  }
  httplib::Result post(const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c.Post(path.c_str(), body, "application/json");
  }
  void expect_still_serving() {
    auto r = post("/v1/chat/completions",
                  R"({"model":"fake-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":4})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }

  FakeBackend backend_;
  std::unique_ptr<rapid::server::HttpServer> server_;
  int port_ = 0;
};

// Every field that reaches the template or the grammar compiler, through the real HTTP server.
TEST_F(DeepJsonHttp, EveryFieldGives400InItsApisShapeAndTheServerKeepsServing) {
  const std::string deep = nest(30000), deep_obj = nest_objects(30000);
  const std::string deep_args = json(deep_obj).dump();  // as a JSON string
  const std::string msgs = R"([{"role":"user","content":"Hi"}])";
  struct Case {
    const char* name;
    std::string path, body, field;
    bool anthropic = false;
  };
  std::vector<Case> cases = {
      {"chat_template_kwargs", "/v1/chat/completions",
       R"({"model":"fake-model","messages":)" + msgs + R"(,"chat_template_kwargs":{"x":)" + deep + "}}",
       "chat_template_kwargs.x"},
      {"tools parameters", "/v1/chat/completions",
       R"({"model":"fake-model","messages":)" + msgs +
           R"(,"tools":[{"type":"function","function":{"name":"f","parameters":)" + deep_obj + "}}]}",
       "tools[0].function.parameters.a"},
      {"tool-call arguments", "/v1/chat/completions",
       R"({"model":"fake-model","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":)" +
           deep_args + R"(}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]})",
       "messages[1].tool_calls[0].function.arguments.a"},
      {"response_format schema", "/v1/chat/completions",
       R"({"model":"fake-model","messages":)" + msgs +
           R"(,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":)" + deep_obj + "}}}",
       "response_format.json_schema.schema.a"},
      {"anthropic input_schema", "/v1/messages",
       R"({"model":"fake-model","max_tokens":8,"messages":)" + msgs +
           R"(,"tools":[{"name":"f","input_schema":)" + deep_obj + "}]}",
       "tools[0].input_schema.a", true},
      {"anthropic tool_use input", "/v1/messages",
       R"({"model":"fake-model","max_tokens":8,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":)" +
           deep_obj + R"(}]}]})",
       "messages[1].content[0].input.a", true},
      {"responses tools", "/v1/responses",
       R"({"model":"fake-model","input":"Hi","tools":[{"type":"function","name":"f","parameters":)" + deep_obj + "}]}",
       "tools[0].parameters.a"},
      {"responses function_call arguments", "/v1/responses",
       R"({"model":"fake-model","input":[{"type":"function_call","call_id":"c","name":"f","arguments":)" + deep_args +
           R"(},{"type":"function_call_output","call_id":"c","output":"ok"}]})",
       "input[0].arguments.a"},
  };
  for (const Case& c : cases) {
    auto r = post(c.path, c.body);
    ASSERT_TRUE(r) << c.name << ": no response (server died?)";
    EXPECT_EQ(r->status, 400) << c.name << ": " << r->body.substr(0, 300);
    json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << c.name;
    std::string message;
    if (c.anthropic) {
      EXPECT_EQ(e.value("type", ""), "error") << c.name;
      message = e["error"].value("message", "");
    } else {
      message = e["error"].value("message", "");
      EXPECT_EQ(e["error"]["param"].get<std::string>().rfind(c.field, 0), 0u) << c.name << ": " << e.dump();
    }
    EXPECT_NE(message.find(c.field), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(std::to_string(kMaxJsonDepth)), std::string::npos) << c.name << ": " << message;
    expect_still_serving();
  }
}
