// The HTTP server end to end over real sockets, against a model-free backend (scripted replies
// through the real SerialEngine): routing, every API's response and stream shapes, errors,
// limits, auth and client-disconnect cancellation. The checks follow the public API references
// (OpenAI chat/completions/responses, Anthropic messages); the Python suite repeats the important
// ones with the official SDKs against the real model.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "server/http_server.h"
#include "server_fake_backend.h"

using json = nlohmann::json;
using rapid::testing::FakeBackend;

namespace {

struct Sse {
  std::vector<std::string> events;  // "event:" names ("" when absent)
  std::vector<std::string> data;    // "data:" payloads
};

Sse parse_sse(const std::string& body) {
  Sse s;
  std::string event;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("event: ", 0) == 0) event = line.substr(7);
    else if (line.rfind("data: ", 0) == 0) {
      s.events.push_back(event);
      s.data.push_back(line.substr(6));
      event.clear();
    }
  }
  return s;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  void TearDown() override { server_.reset(); }

  void start(rapid::server::ServerOptions o) {
    server_.reset();
    o.port = 0;
    o.http_threads = 16;
    if (o.max_body_bytes == (16u << 20)) o.max_body_bytes = 1 << 20;
    opts_ = o;
    server_ = std::make_unique<rapid::server::HttpServer>(backend_, o);
    port_ = server_->bind();
    server_->start();
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body, httplib::Headers h = {}) {
    auto c = client();
    return c.Post(path.c_str(), h, body.dump(), "application/json");
  }
  static json chat_body(json extra = json::object()) {
    json b = {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    for (auto& [k, v] : extra.items()) b[k] = v;
    return b;
  }

  FakeBackend backend_;
  rapid::server::ServerOptions opts_;
  std::unique_ptr<rapid::server::HttpServer> server_;
  int port_ = 0;
};

TEST_F(ServerTest, HealthModelsAndOpenapi) {
  auto c = client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/v1/models");
  ASSERT_EQ(r->status, 200);
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "fake-model");
  r = c.Get("/v1/models/fake-model");
  EXPECT_EQ(r->status, 200);
  r = c.Get("/v1/models/other");
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
  r = c.Get("/openapi.json");
  ASSERT_EQ(r->status, 200);
  json spec = json::parse(r->body);
  EXPECT_EQ(spec["openapi"].get<std::string>().substr(0, 2), "3.");
  for (const char* p : {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
                        "/v1/responses", "/v1/models", "/health", "/metrics"})
    EXPECT_TRUE(spec["paths"].contains(p)) << p;
  EXPECT_TRUE(spec["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
                  ["required"].is_array());
}

TEST_F(ServerTest, ChatCompletionNonStreaming) {
  auto r = post("/v1/chat/completions", chat_body());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello there!");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // The prompt the fake renders is "user: Hi\nassistant: " = 20 byte tokens.
  EXPECT_EQ(j["usage"]["prompt_tokens"], 20);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["total_tokens"], 32);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(ServerTest, ChatMaxTokensGivesLengthAndStopStringsCut) {
  json j = json::parse(post("/v1/chat/completions", chat_body({{"max_tokens", 5}}))->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  j = json::parse(post("/v1/chat/completions", chat_body({{"max_completion_tokens", 3}}))->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hel");
  j = json::parse(post("/v1/chat/completions", chat_body({{"stop", {" "}}}))->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerTest, ChatStreamingChunksAndUsage) {
  auto r = post("/v1/chat/completions", chat_body({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  Sse s = parse_sse(r->body);
  ASSERT_GE(s.data.size(), 4u);
  EXPECT_EQ(s.data.back(), "[DONE]");
  std::string text;
  std::string finish;
  json usage;
  for (size_t i = 0; i + 1 < s.data.size(); ++i) {
    json c = json::parse(s.data[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (c["choices"].empty()) {
      usage = c["usage"];
      continue;
    }
    EXPECT_TRUE(c["usage"].is_null());
    auto& d = c["choices"][0]["delta"];
    if (i == 0) EXPECT_EQ(d["role"], "assistant");
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "Hello there!");
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(usage["prompt_tokens"], 20);
  EXPECT_EQ(usage["completion_tokens"], 12);
}

TEST_F(ServerTest, ChatNamedToolChoiceReturnsTypedCall) {
  backend_.script.reply = R"({"city":"Paris"})";
  json tools = {{{"type", "function"},
                 {"function", {{"name", "get_weather"},
                               {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}};
  json body = chat_body({{"tools", tools},
                         {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  json j = json::parse(post("/v1/chat/completions", body)->body);
  auto& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(msg["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  // The forced call is decoded against the function's parameters schema.
  EXPECT_EQ(backend_.last_constraint.schema, tools[0]["function"]["parameters"]);
  // Streamed: the first tool-call fragment carries id and name, the rest only arguments.
  body["stream"] = true;
  Sse s = parse_sse(post("/v1/chat/completions", body)->body);
  std::string args;
  int with_name = 0;
  for (size_t i = 0; i + 1 < s.data.size(); ++i) {
    json c = json::parse(s.data[i]);
    auto& d = c["choices"][0]["delta"];
    if (!d.contains("tool_calls")) continue;
    if (d["tool_calls"][0]["function"].contains("name")) {
      ++with_name;
      EXPECT_EQ(d["tool_calls"][0]["function"]["name"], "get_weather");
    }
    args += d["tool_calls"][0]["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(with_name, 1);
  EXPECT_EQ(args, R"({"city":"Paris"})");
}

TEST_F(ServerTest, ChatLogprobsAndN) {
  json j = json::parse(post("/v1/chat/completions", chat_body({{"logprobs", true}, {"top_logprobs", 2}, {"max_tokens", 3}, {"n", 2}}))->body);
  ASSERT_EQ(j["choices"].size(), 2u);
  auto& lp = j["choices"][1]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 3u);
  EXPECT_EQ(lp[0]["token"], "H");
  EXPECT_EQ(lp[0]["bytes"], json({72}));
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
}

TEST_F(ServerTest, MessageNormalizationForTemplates) {
  json body = chat_body({{"messages",
                          {{{"role", "developer"}, {"content", "Be brief."}},
                           {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
                           {{"role", "assistant"}, {"content", nullptr},
                            {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                             {"function", {{"name", "f"}, {"arguments", "{\"x\":1}"}}}}}}},
                           {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}}}}});
  ASSERT_EQ(post("/v1/chat/completions", body)->status, 200);
  auto& m = backend_.last_messages;
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "a\nb");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], json({{"x", 1}}));
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
}

TEST_F(ServerTest, CompletionsTextAndStream) {
  json body = {{"model", "fake-model"}, {"prompt", "Say"}, {"max_tokens", 5}};
  json j = json::parse(post("/v1/completions", body)->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);  // BOS + 3 bytes
  body["echo"] = true;
  EXPECT_EQ(json::parse(post("/v1/completions", body)->body)["choices"][0]["text"], "SayHello");
  body.erase("echo");
  body["stream"] = true;
  Sse s = parse_sse(post("/v1/completions", body)->body);
  std::string text;
  for (size_t i = 0; i + 1 < s.data.size(); ++i) text += json::parse(s.data[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(s.data.back(), "[DONE]");
  body = {{"model", "fake-model"}, {"prompt", {72, 105}}, {"max_tokens", 2}};
  EXPECT_EQ(json::parse(post("/v1/completions", body)->body)["usage"]["prompt_tokens"], 2);
}

TEST_F(ServerTest, AnthropicMessages) {
  json body = {{"model", "fake-model"}, {"max_tokens", 100}, {"system", "sys"},
               {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}}};
  auto r = post("/v1/messages", body);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["content"][0]["text"], "Hello there!");
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_EQ(j["usage"]["output_tokens"], 12);
  EXPECT_EQ(j["usage"]["input_tokens"], int64_t(FakeBackend::render_text(backend_.last_messages).size()));
  EXPECT_EQ(json::parse(backend_.last_messages[0].dump()), json({{"role", "system"}, {"content", "sys"}}));
  body["max_tokens"] = 2;
  EXPECT_EQ(json::parse(post("/v1/messages", body)->body)["stop_reason"], "max_tokens");

  auto ct = post("/v1/messages/count_tokens", {{"model", "fake-model"}, {"messages", body["messages"]}, {"system", "sys"}});
  ASSERT_EQ(ct->status, 200);
  EXPECT_EQ(json::parse(ct->body)["input_tokens"], j["usage"]["input_tokens"]);
}

TEST_F(ServerTest, AnthropicToolUseAndResultsRoundTrip) {
  backend_.script.reply = R"({"q":"x"})";
  json tools = {{{"name", "search"}, {"description", "d"},
                 {"input_schema", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}}};
  json body = {{"model", "fake-model"}, {"max_tokens", 100}, {"tools", tools},
               {"tool_choice", {{"type", "tool"}, {"name", "search"}}},
               {"messages", {{{"role", "user"}, {"content", "find"}},
                             {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "hmm"}},
                                                                  {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "search"}, {"input", {{"q", "y"}}}}}}},
                             {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "found"}}}}}}}};
  json j = json::parse(post("/v1/messages", body)->body);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "tool_use");
  EXPECT_EQ(j["content"][0]["name"], "search");
  EXPECT_EQ(j["content"][0]["input"], json({{"q", "x"}}));
  EXPECT_EQ(j["content"][0]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  auto& m = backend_.last_messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1]["reasoning_content"], "hmm");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], json({{"q", "y"}}));
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(m[2]["content"], "found");
  EXPECT_EQ(backend_.last_tools[0]["function"]["parameters"], tools[0]["input_schema"]);

  body["stream"] = true;
  Sse s = parse_sse(post("/v1/messages", body)->body);
  std::vector<std::string> want_prefix = {"message_start", "ping", "content_block_start"};
  ASSERT_GE(s.events.size(), 6u);
  for (size_t i = 0; i < want_prefix.size(); ++i) EXPECT_EQ(s.events[i], want_prefix[i]);
  EXPECT_EQ(json::parse(s.data[2])["content_block"]["type"], "tool_use");
  std::string partial;
  for (size_t i = 0; i < s.data.size(); ++i) {
    json e = json::parse(s.data[i]);
    EXPECT_EQ(e["type"], s.events[i]);
    if (s.events[i] == "content_block_delta") {
      EXPECT_EQ(e["delta"]["type"], "input_json_delta");
      partial += e["delta"]["partial_json"].get<std::string>();
    }
  }
  EXPECT_EQ(json::parse(partial), json({{"q", "x"}}));
  size_t n = s.events.size();
  EXPECT_EQ(s.events[n - 3], "content_block_stop");
  EXPECT_EQ(s.events[n - 2], "message_delta");
  EXPECT_EQ(json::parse(s.data[n - 2])["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(s.events[n - 1], "message_stop");
}

TEST_F(ServerTest, ResponsesApi) {
  json body = {{"model", "fake-model"}, {"instructions", "sys"},
               {"input", {{{"role", "user"}, {"content", "hi"}},
                          {{"type", "function_call"}, {"call_id", "c1"}, {"name", "sh"}, {"arguments", "{\"cmd\":\"ls\"}"}},
                          {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "a.txt"}}}},
               {"tools", {{{"type", "function"}, {"name", "sh"}, {"parameters", {{"type", "object"}}}}}}};
  auto r = post("/v1/responses", body);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hello there!");
  EXPECT_EQ(j["usage"]["output_tokens"], 12);
  auto& m = backend_.last_messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(backend_.last_tools[0]["function"]["name"], "sh");

  body["stream"] = true;
  body["max_output_tokens"] = 4;
  Sse s = parse_sse(post("/v1/responses", body)->body);
  ASSERT_GE(s.events.size(), 5u);
  EXPECT_EQ(s.events[0], "response.created");
  EXPECT_EQ(s.events[1], "response.in_progress");
  EXPECT_EQ(s.events.back(), "response.incomplete");
  std::string text;
  for (size_t i = 0; i < s.data.size(); ++i) {
    json e = json::parse(s.data[i]);
    EXPECT_EQ(e["sequence_number"], int(i));
    if (s.events[i] == "response.output_text.delta") text += e["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hell");
  json last = json::parse(s.data.back());
  EXPECT_EQ(last["response"]["output"][0]["content"][0]["text"], "Hell");
  EXPECT_EQ(last["response"]["incomplete_details"]["reason"], "max_output_tokens");
}

TEST_F(ServerTest, ErrorsUseEachApisShape) {
  auto c = client();
  auto r = c.Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_EQ(r->status, 400);
  json e = json::parse(r->body);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"].contains("param"));
  EXPECT_TRUE(e["error"].contains("code"));
  r = post("/v1/chat/completions", chat_body({{"temperature", "hot"}}));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "temperature");
  r = post("/v1/chat/completions", chat_body({{"temperature", 5}}));
  EXPECT_EQ(r->status, 400);
  r = post("/v1/chat/completions", {{"model", "fake-model"}});
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "messages");
  r = post("/v1/chat/completions", chat_body({{"model", "gpt-9"}}));
  EXPECT_EQ(r->status, 404);
  r = post("/v1/chat/completions", chat_body({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}));
  EXPECT_EQ(r->status, 400);
  r = post("/v1/chat/completions", chat_body({{"tool_choice", "required"}}));
  EXPECT_EQ(r->status, 400);
  r = post("/v1/messages", {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_EQ(r->status, 400);
  e = json::parse(r->body);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  r = c.Post("/v1/messages", "[]", "application/json");
  EXPECT_EQ(json::parse(r->body)["type"], "error");
  r = c.Get("/v1/nothing");
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
}

TEST_F(ServerTest, PromptLongerThanContextIs400) {
  FakeBackend small(16);
  rapid::server::ServerOptions o;
  o.port = 0;
  rapid::server::HttpServer s(small, o);
  int port = s.bind();
  s.start();
  httplib::Client c("127.0.0.1", port);
  auto r = c.Post("/v1/chat/completions", chat_body().dump(), "application/json");
  ASSERT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  // Anthropic words it its own way (Claude Code compacts the conversation on this text).
  json body = {{"model", "fake-model"}, {"max_tokens", 100},
               {"messages", {{{"role", "user"}, {"content", "a rather long question"}}}}};
  r = c.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_EQ(r->status, 400);
  json e = json::parse(r->body);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  size_t n = FakeBackend::render_text(small.last_messages).size();
  EXPECT_EQ(e["error"]["message"], "prompt is too long: " + std::to_string(n) + " tokens > 15 maximum");
}

TEST_F(ServerTest, BodyOverLimitIs413) {
  rapid::server::ServerOptions o;
  o.max_body_bytes = 1000;
  start(o);
  std::string big(5000, 'x');
  auto r = post("/v1/chat/completions", chat_body({{"messages", {{{"role", "user"}, {"content", big}}}}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  r = post("/v1/messages", {{"pad", big}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "request_too_large");
}

TEST_F(ServerTest, ApiKeyViaBearerOrXApiKey) {
  rapid::server::ServerOptions o;
  o.api_key = "s3cret";
  start(o);
  EXPECT_EQ(post("/v1/chat/completions", chat_body())->status, 401);
  EXPECT_EQ(post("/v1/chat/completions", chat_body(), {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(post("/v1/chat/completions", chat_body(), {{"Authorization", "Bearer s3cret"}})->status, 200);
  auto r = post("/v1/messages", {{"model", "fake-model"}}, {{"x-api-key", "nope"}});
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  json body = {{"model", "fake-model"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  EXPECT_EQ(post("/v1/messages", body, {{"x-api-key", "s3cret"}})->status, 200);
  EXPECT_EQ(client().Get("/health")->status, 200);  // liveness needs no key
}

TEST_F(ServerTest, ClientDisconnectCancelsGeneration) {
  backend_.script.endless = true;
  backend_.script.delay = std::chrono::milliseconds(5);
  auto c = client();
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = chat_body({{"stream", true}, {"max_tokens", 100000}}).dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 5; };  // hang up
  c.send(req);
  for (int i = 0; i < 400 && backend_.script.finished.load() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(backend_.script.started.load(), 1);
  EXPECT_EQ(backend_.script.finished.load(), 1);
  EXPECT_EQ(backend_.script.cancelled.load(), 1);
  // The engine is free again: a new request completes.
  backend_.script.endless = false;
  backend_.script.delay = std::chrono::milliseconds(0);
  EXPECT_EQ(post("/v1/chat/completions", chat_body())->status, 200);
}

TEST_F(ServerTest, MetricsCountRequestsAndTokens) {
  post("/v1/chat/completions", chat_body());
  auto r = client().Get("/metrics");
  ASSERT_EQ(r->status, 200);
  const std::string& m = r->body;
  EXPECT_NE(m.find("rapid_requests_total{model_name=\"fake-model\",endpoint=\"/v1/chat/completions\",status=\"2xx\"} 1"),
            std::string::npos) << m;
  EXPECT_NE(m.find("rapid_prompt_tokens_total{model_name=\"fake-model\"} 20"), std::string::npos);
  EXPECT_NE(m.find("rapid_generation_tokens_total{model_name=\"fake-model\"} 12"), std::string::npos);
  EXPECT_NE(m.find("rapid_time_to_first_token_seconds_count{model_name=\"fake-model\"} 1"), std::string::npos);
  EXPECT_NE(m.find("rapid_inter_token_latency_seconds_count{model_name=\"fake-model\"} 11"), std::string::npos);
  EXPECT_NE(m.find("rapid_num_requests_waiting"), std::string::npos);
  EXPECT_NE(m.find("rapid_kv_cache_usage_perc"), std::string::npos);
}


// ---- Hostile clients (issue #15): raw bytes over real sockets ----

// A raw TCP client, so tests can send exactly what a hostile one would.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Raw() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    for (size_t off = 0; off < s.size();) {
      ssize_t w = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += size_t(w);
    }
    return true;
  }
  // What one read returns (waiting up to `ms` for it).
  std::string read_some(int ms) {
    pollfd p{fd_, POLLIN, 0};
    char buf[4096];
    if (::poll(&p, 1, ms) <= 0) return "";
    ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    return r > 0 ? std::string(buf, size_t(r)) : "";
  }
  // Reads until the server closes (closed = true) or `ms` pass without data.
  std::string read_all(int ms, bool* closed = nullptr) {
    std::string out;
    char buf[65536];
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, ms) <= 0) break;
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) {
        if (closed) *closed = true;
        return out;
      }
      out.append(buf, size_t(r));
    }
    if (closed) *closed = false;
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Status codes of the responses in a byte stream, in order.
std::vector<int> statuses(const std::string& s) {
  std::vector<int> out;
  for (size_t p = s.find("HTTP/1.1 "); p != std::string::npos; p = s.find("HTTP/1.1 ", p + 1))
    out.push_back(std::atoi(s.c_str() + p + 9));
  return out;
}

// Everything the server sends until it closes the connection (a failure if it has not in 5 s).
std::string until_closed(Raw& r) {
  bool closed = false;
  std::string got = r.read_all(5000, &closed);
  EXPECT_TRUE(closed) << got;
  return got;
}

std::string post_text(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

TEST_F(ServerTest, PipelinedRequestsAreAllAnsweredInOrder) {
  Raw r(port_);
  std::string chat = chat_body({{"max_tokens", 5}}).dump();
  ASSERT_TRUE(r.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n" + post_text("/v1/chat/completions", chat) +
                     "GET /v1/nothing HTTP/1.1\r\nHost: t\r\n\r\n" +
                     "GET /v1/models/fake-model HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  std::string got = until_closed(r);
  EXPECT_EQ(statuses(got), (std::vector<int>{200, 200, 404, 200})) << got;
  size_t chat_at = got.find("\"chat.completion\""), model_at = got.find("\"object\":\"model\"");
  ASSERT_NE(chat_at, std::string::npos);
  EXPECT_NE(got.find("\"content\":\"Hello\""), std::string::npos);
  EXPECT_LT(got.find("\"status\":\"ok\""), chat_at);
  EXPECT_LT(chat_at, model_at);
  // Thousands of tiny pipelined requests in one write: every one answered.
  Raw many(port_);
  std::string burst;
  for (int i = 0; i < 3000; ++i) burst += "GET /health HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(many.send(burst + "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(statuses(until_closed(many)), std::vector<int>(3001, 200));
}

TEST_F(ServerTest, ConflictingContentLengthIs400AndCloses) {
  Raw r(port_);
  ASSERT_TRUE(r.send("POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\n"
                     "hello GET /health HTTP/1.1\r\n\r\n"));
  std::string got = until_closed(r);
  EXPECT_EQ(statuses(got), std::vector<int>{400}) << got;  // the smuggled request is never answered
  EXPECT_NE(got.find("Connection: close"), std::string::npos);
  EXPECT_NE(got.find("invalid_request_error"), std::string::npos);
}

TEST_F(ServerTest, MalformedRequestIsAnsweredThenClosed) {
  Raw r(port_);
  ASSERT_TRUE(r.send("HELLO THERE\r\n\r\nGET /health HTTP/1.1\r\n\r\n"));
  std::string got = until_closed(r);
  EXPECT_EQ(statuses(got), std::vector<int>{400}) << got;
}

TEST_F(ServerTest, ChunkedBodyOverTheLimitIs413) {
  rapid::server::ServerOptions o;
  o.max_body_bytes = 4096;
  start(o);
  for (const char* path : {"/v1/chat/completions", "/v1/messages"}) {
    Raw r(port_);
    ASSERT_TRUE(r.send(std::string("POST ") + path + " HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
    std::string chunk = "400\r\n" + std::string(1024, 'x') + "\r\n";
    int sent = 0;
    while (sent < 64 && r.send(chunk)) ++sent;  // 64 KiB offered; the server stops after 4
    std::string got = until_closed(r);
    ASSERT_EQ(statuses(got), std::vector<int>{413}) << got;
    EXPECT_NE(got.find(std::string(path) == "/v1/messages" ? "request_too_large" : "invalid_request_error"),
              std::string::npos);
  }
}

TEST_F(ServerTest, HeaderFloodIs431) {
  Raw r(port_);
  std::string head = "GET /health HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 200; ++i) head += "X-Pad-" + std::to_string(i) + ": " + std::string(1000, 'p') + "\r\n";
  r.send(head + "\r\n");
  std::string got = until_closed(r);
  EXPECT_EQ(statuses(got), std::vector<int>{431}) << got;
}

TEST_F(ServerTest, SlowAndIdleClientsDoNotBlockOthers) {
  rapid::server::ServerOptions o;
  o.header_timeout_ms = 1500;
  start(o);
  // 300 connections that never finish their headers, more than the 16 worker threads.
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(std::make_unique<Raw>(port_));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->send("POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nX-Slow: ");
  }
  auto c = client();
  c.set_read_timeout(3, 0);
  auto h = c.Get("/health");
  ASSERT_TRUE(h) << "no /health answer while 300 clients dribble headers";
  EXPECT_EQ(h->status, 200);
  auto r = post("/v1/chat/completions", chat_body());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // The slow ones get 408 once their header deadline passes, and are closed.
  EXPECT_EQ(statuses(until_closed(*slow.front())), std::vector<int>{408});
}

TEST_F(ServerTest, QueueBoundGives429Or529ThenFreesSlots) {
  rapid::server::ServerOptions o;
  o.max_running = 1;
  o.max_queued_requests = 1;
  start(o);
  backend_.script.endless = true;
  backend_.script.delay = std::chrono::milliseconds(5);
  std::string stream = chat_body({{"stream", true}, {"max_tokens", 100000}}).dump();
  auto a = std::make_unique<Raw>(port_), b = std::make_unique<Raw>(port_);
  a->send(post_text("/v1/chat/completions", stream));
  b->send(post_text("/v1/chat/completions", stream));
  EXPECT_EQ(a->read_some(2000).rfind("HTTP/1.1 200 ", 0), 0u);
  EXPECT_EQ(b->read_some(2000).rfind("HTTP/1.1 200 ", 0), 0u);  // admitted, waiting in the engine queue

  auto r = post("/v1/chat/completions", chat_body());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "rate_limit_error");
  json msg = {{"model", "fake-model"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  r = post("/v1/messages", msg);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 529);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "overloaded_error");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  auto m = client().Get("/metrics");
  EXPECT_NE(m->body.find("rapid_requests_rejected_total{model_name=\"fake-model\"} 2"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("rapid_http_requests_admitted{model_name=\"fake-model\"} 2"), std::string::npos);

  // The clients leave: their generations are cancelled and their slots come back.
  a.reset();
  b.reset();
  backend_.script.endless = false;
  backend_.script.delay = std::chrono::milliseconds(0);
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    status = post("/v1/chat/completions", chat_body())->status;
  }
  EXPECT_EQ(status, 200);
}

TEST_F(ServerTest, MetricsLabelsComeFromAFixedSet) {
  rapid::server::ServerOptions o;
  o.api_key = "k";
  start(o);
  std::string before = client().Get("/metrics")->body;
  // Unauthenticated requests on 500 distinct paths, some shaped to break out of a label value.
  Raw r(port_);
  std::string burst;
  for (int i = 0; i < 500; ++i)
    burst += "GET /v1/x" + std::to_string(i) + "\"}evil_metric{a=\"" + std::to_string(i) + " HTTP/1.1\r\nHost: t\r\n\r\n";
  r.send(burst + "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(statuses(r.read_all(5000)).size(), 501u);
  std::string after = client().Get("/metrics")->body;
  EXPECT_EQ(after.find("evil"), std::string::npos);
  EXPECT_LT(after.size(), before.size() + 200);  // one new series (endpoint="other", 4xx), not 500
  EXPECT_NE(after.find("endpoint=\"other\",status=\"4xx\"} 501"), std::string::npos) << after;
}

TEST_F(ServerTest, UnprefixedRoutesRequestIdsAndAuthChallenge) {
  rapid::server::ServerOptions o;
  o.api_key = "k";
  start(o);
  httplib::Headers key = {{"Authorization", "Bearer k"}};
  auto r = post("/chat/completions", chat_body(), key);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], "Hello there!");
  EXPECT_EQ(client().Get("/models", key)->status, 200);
  std::string rid = r->get_header_value("x-request-id");
  EXPECT_EQ(rid.rfind("req_", 0), 0u);
  EXPECT_EQ(r->get_header_value("request-id"), rid);
  r = post("/v1/chat/completions", chat_body(), {{"Authorization", "Bearer k"}, {"x-request-id", "trace-42"}});
  EXPECT_EQ(r->get_header_value("x-request-id"), "trace-42");
  r = post("/v1/chat/completions", chat_body(), {{"Authorization", "Bearer k"}, {"x-request-id", "bad id"}});
  EXPECT_EQ(r->get_header_value("x-request-id").rfind("req_", 0), 0u);
  r = post("/v1/chat/completions", chat_body());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer realm=\"rapid-mlx\"");
  EXPECT_EQ(client().Get("/v1/chat/completions", key)->status, 405);
}

TEST_F(ServerTest, CorsIsOffByDefaultAndPreflightNeedsNoKey) {
  auto c = client();
  httplib::Headers pre = {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto r = c.Options("/v1/chat/completions", pre);
  EXPECT_EQ(r->status, 403);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(c.Get("/health", {{"Origin", "http://localhost:3000"}})->has_header("Access-Control-Allow-Origin"));

  rapid::server::ServerOptions o;
  o.api_key = "k";
  o.allowed_origins = {"http://localhost:3000"};
  start(o);
  auto c2 = client();
  r = c2.Options("/v1/chat/completions", pre);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  r = c2.Options("/v1/chat/completions", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(r->status, 403);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  r = c2.Get("/v1/models", {{"Origin", "http://localhost:3000"}, {"Authorization", "Bearer k"}});
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
}

TEST_F(ServerTest, SecondServerOnTheSamePortIsRefused) {
  rapid::server::ServerOptions o;
  o.port = port_;
  rapid::server::HttpServer second(backend_, o);
  EXPECT_THROW(second.bind(), rapid::Error);
  EXPECT_EQ(client().Get("/health")->status, 200);
}

// ---------------------------------------------------------------- protocol details (issue #14)

json message_body(json messages, json extra = json::object()) {
  json b = {{"model", "fake-model"}, {"max_tokens", 100}, {"messages", std::move(messages)}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

// Anthropic bills cache reads apart: input_tokens + cache_read_input_tokens (+ cache_creation) is the
// whole prompt, in the response, in message_start (the real figures, not a placeholder) and in
// message_delta.
TEST_F(ServerTest, AnthropicUsageCountsCacheReadsApart) {
  backend_.script.cached_tokens = 7;
  json body = message_body({{{"role", "user"}, {"content", "Hi there"}}});
  json j = json::parse(post("/v1/messages", body)->body);
  int64_t prompt = int64_t(FakeBackend::render_text(backend_.last_messages).size());
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 7);
  EXPECT_EQ(j["usage"]["input_tokens"], prompt - 7);
  EXPECT_EQ(j["usage"]["cache_creation_input_tokens"], 0);
  body["stream"] = true;
  Sse s = parse_sse(post("/v1/messages", body)->body);
  ASSERT_GE(s.events.size(), 4u);
  ASSERT_EQ(s.events[0], "message_start");
  json start = json::parse(s.data[0])["message"]["usage"];
  EXPECT_EQ(start["input_tokens"], prompt - 7);
  EXPECT_EQ(start["cache_read_input_tokens"], 7);
  EXPECT_EQ(start["output_tokens"], 0);
  json delta = json::parse(s.data[s.data.size() - 2]);
  ASSERT_EQ(delta["type"], "message_delta");
  EXPECT_EQ(delta["usage"]["input_tokens"], prompt - 7);
  EXPECT_EQ(delta["usage"]["cache_read_input_tokens"], 7);
  EXPECT_EQ(delta["usage"]["output_tokens"], 12);
}

// A final assistant message is a prefill: the template is asked to continue it (no new turn), and
// the answer holds only the continuation. An empty final assistant message is no prefill.
TEST_F(ServerTest, AnthropicPrefillContinuesFinalAssistantMessage) {
  json msgs = {{{"role", "user"}, {"content", "Say it"}}, {{"role", "assistant"}, {"content", "The answer:"}}};
  auto r = post("/v1/messages", message_body(msgs));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(backend_.last_extra.value("continue_final_message", false), true);
  EXPECT_EQ(backend_.last_messages.back()["role"], "assistant");
  EXPECT_EQ(backend_.last_messages.back()["content"], "The answer:");
  EXPECT_EQ(json::parse(r->body)["content"][0]["text"], "Hello there!");
  auto ct = post("/v1/messages/count_tokens", {{"model", "fake-model"}, {"messages", msgs}});
  EXPECT_EQ(backend_.last_extra.value("continue_final_message", false), true);

  msgs[1]["content"] = json::array();
  r = post("/v1/messages", message_body(msgs));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(backend_.last_extra.contains("continue_final_message"));
  EXPECT_EQ(backend_.last_messages.back()["role"], "user");
}

TEST_F(ServerTest, AnthropicStructuredOutputIsEnforcedOrRefused) {
  json schema = {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}, {"required", {"n"}}};
  json msgs = {{{"role", "user"}, {"content", "n?"}}};
  auto r = post("/v1/messages", message_body(msgs, {{"output_config", {{"format", {{"type", "json_schema"}, {"schema", schema}}}}}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(backend_.last_constraint.kind, rapid::server::ConstraintSpec::Kind::JsonSchema);
  EXPECT_EQ(json::parse(backend_.last_constraint.schema.dump()), schema);
  backend_.last_constraint = {};
  r = post("/v1/messages", message_body(msgs, {{"output_format", {{"type", "json_schema"}, {"schema", schema}}}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(backend_.last_constraint.kind, rapid::server::ConstraintSpec::Kind::JsonSchema);
  for (json bad : {json{{"format", {{"type", "regex"}, {"schema", schema}}}}, json{{"format", {{"type", "json_schema"}}}},
                   json{{"format", "json"}}}) {
    r = post("/v1/messages", message_body(msgs, {{"output_config", bad}}));
    ASSERT_EQ(r->status, 400) << bad.dump();
    json e = json::parse(r->body);
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_NE(e["error"]["message"].get<std::string>().find("output_config.format"), std::string::npos) << r->body;
  }
}

TEST_F(ServerTest, ModelAliasServesBackgroundModelNames) {
  rapid::server::ServerOptions o;
  o.model_aliases = {"claude-*-haiku-*", "gpt-?"};
  start(o);
  json msgs = {{{"role", "user"}, {"content", "Hi"}}};
  json body = message_body(msgs, {{"model", "claude-3-5-haiku-20241022"}});
  EXPECT_EQ(post("/v1/messages", body)->status, 200);
  EXPECT_EQ(post("/v1/chat/completions", chat_body({{"model", "gpt-4"}}))->status, 200);
  auto r = post("/v1/messages", message_body(msgs, {{"model", "claude-opus-4"}}));
  ASSERT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "not_found_error");
  EXPECT_EQ(post("/v1/chat/completions", chat_body({{"model", "gpt-4o"}}))->status, 404);
}

TEST_F(ServerTest, OpenAIFingerprintCreatedAndOptionalModel) {
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  json j = json::parse(post("/v1/chat/completions", chat_body())->body);
  std::string fp = j["system_fingerprint"];
  EXPECT_EQ(fp.rfind("fp_", 0), 0u);
  EXPECT_EQ(fp.size(), 15u);
  EXPECT_NEAR(double(j["created"].get<int64_t>()), double(now), 5.0);
  Sse s = parse_sse(post("/v1/chat/completions", chat_body({{"stream", true}}))->body);
  for (auto& d : s.data)
    if (d != "[DONE]") {
      EXPECT_EQ(json::parse(d)["system_fingerprint"], fp);
    }
  json c = json::parse(post("/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}})->body);
  EXPECT_EQ(c["system_fingerprint"], fp);
  json m = json::parse(client().Get("/v1/models")->body);
  EXPECT_NEAR(double(m["data"][0]["created"].get<int64_t>()), double(now), 600.0);
  // `model` may be left out (the served one), as vLLM allows.
  json body = chat_body();
  body.erase("model");
  EXPECT_EQ(post("/v1/chat/completions", body)->status, 200);
}

TEST_F(ServerTest, ChatContinueFinalMessageFlags) {
  json msgs = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hel"}}};
  auto r = post("/v1/chat/completions", chat_body({{"messages", msgs}, {"continue_final_message", true},
                                                   {"add_generation_prompt", false}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(backend_.last_extra.value("continue_final_message", false), true);
  r = post("/v1/chat/completions", chat_body({{"messages", msgs}, {"continue_final_message", true},
                                              {"add_generation_prompt", true}}));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "continue_final_message");
  // Without the flag a final assistant message is answered in a new turn (OpenAI's behaviour).
  r = post("/v1/chat/completions", chat_body({{"messages", msgs}}));
  ASSERT_EQ(r->status, 200);
  EXPECT_FALSE(backend_.last_extra.contains("continue_final_message"));
}

TEST_F(ServerTest, ResponsesTruncatedItemsAreIncomplete) {
  json body = {{"model", "fake-model"}, {"input", "hi"}, {"max_output_tokens", 4}};
  json j = json::parse(post("/v1/responses", body)->body);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["status"], "incomplete");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hell");
  body["stream"] = true;
  Sse s = parse_sse(post("/v1/responses", body)->body);
  json done;
  for (size_t i = 0; i < s.events.size(); ++i)
    if (s.events[i] == "response.output_item.done") done = json::parse(s.data[i]);
  EXPECT_EQ(done["item"]["status"], "incomplete");
  json last = json::parse(s.data.back());
  EXPECT_EQ(last["response"]["output"][0]["status"], "incomplete");
  // A finished answer's items are completed.
  body["max_output_tokens"] = 100;
  body["stream"] = false;
  j = json::parse(post("/v1/responses", body)->body);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["output"][0]["status"], "completed");
}

}  // namespace
