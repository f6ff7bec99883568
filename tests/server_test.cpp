// Pure parts of the server, no sockets: auth, SSE framing, request validation and normalization,
// error shapes, metrics text, reasoning detection, and the serial engine's queue/cancel contract.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/serial_engine.h"
#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/handler_context.h"
#include "server/metrics.h"
#include "server/model_backend.h"
#include "server/openai_format.h"
#include "server/openai_request.h"
#include "server/responses_request.h"
#include "server/sse.h"
#include "server_fake_backend.h"

using json = nlohmann::ordered_json;
using namespace rapid;
using namespace rapid::server;

namespace {

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.status();
  }
  return 0;
}

std::string param_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.param();
  }
  return "<no error>";
}

TEST(Auth, ConstantTimeEqualAndKeySources) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_EQ(presented_key("Bearer k1", ""), "k1");
  EXPECT_EQ(presented_key("bearer   k1 ", ""), "k1");
  EXPECT_EQ(presented_key("", "k2"), "k2");
  EXPECT_EQ(presented_key("Basic zzz", "k3"), "k3");
  EXPECT_TRUE(authorized("", "", ""));
  EXPECT_TRUE(authorized("k", "Bearer k", ""));
  EXPECT_TRUE(authorized("k", "Bearer other", "k"));
  EXPECT_FALSE(authorized("k", "", ""));
  EXPECT_FALSE(authorized("k", "Bearer kk", "x"));
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_data(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("ping", json{{"type", "ping"}}), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  EXPECT_STREQ(sse_done(), "data: [DONE]\n\n");
  // Newlines inside strings are escaped, so a frame is always one data line.
  EXPECT_EQ(sse_data(json("a\nb")), "data: \"a\\nb\"\n\n");
  // Invalid UTF-8 never throws: it becomes U+FFFD.
  EXPECT_EQ(to_json_text(json(std::string("x\xff"))), "\"x\xEF\xBF\xBD\"");
}

TEST(Errors, Shapes) {
  json o = openai_error_body(400, "bad", "temperature", "");
  EXPECT_EQ(o.dump(), R"({"error":{"message":"bad","type":"invalid_request_error","param":"temperature","code":null}})");
  EXPECT_EQ(openai_error_body(401, "k")["error"]["type"], "authentication_error");
  json a = anthropic_error_body(404, "nope");
  EXPECT_EQ(a.dump(), R"({"type":"error","error":{"type":"not_found_error","message":"nope"}})");
  EXPECT_EQ(anthropic_error_body(413, "big")["error"]["type"], "request_too_large");
  EXPECT_EQ(anthropic_error_body(500, "x")["error"]["type"], "api_error");
}

TEST(Sampling, ParsesAndValidates) {
  SamplingLimits lim{100, 0};
  json b = {{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 40}, {"min_p", 0.05}, {"seed", 7},
            {"presence_penalty", 1}, {"frequency_penalty", -1}, {"repetition_penalty", 1.1},
            {"logit_bias", {{"5", -100}, {"7", 3.5}}}, {"stop", "END"}, {"max_tokens", 12},
            {"min_tokens", 2}, {"ignore_eos", true}};
  engine::GenerationRequest g = parse_sampling(b, lim);
  EXPECT_DOUBLE_EQ(g.sampling.temperature, 0.5);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_EQ(g.sampling.seed.value(), 7u);
  EXPECT_FLOAT_EQ(g.sampling.logit_bias.at(7), 3.5f);
  EXPECT_EQ(g.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(g.max_tokens, 12);
  EXPECT_EQ(g.min_tokens, 2);
  EXPECT_TRUE(g.ignore_eos);
  EXPECT_EQ(parse_sampling(json{{"top_k", -1}}, lim).sampling.top_k, 0);
  EXPECT_EQ(parse_sampling(json{{"max_tokens", 5.0}}, lim).max_tokens, 5);  // integral float accepted
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"temperature", "hot"}}, lim); }), "temperature");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"temperature", 2.5}}, lim); }), "temperature");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"top_p", 0}}, lim); }), "top_p");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"max_tokens", 0}}, lim); }), "max_tokens");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"max_tokens", 1.5}}, lim); }), "max_tokens");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"logit_bias", {{"100", 1}}}}, lim); }), "logit_bias");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"logit_bias", {{"abc", 1}}}}, lim); }), "logit_bias");
  EXPECT_EQ(param_of([&] { parse_sampling(json{{"stop", {1, 2}}}, lim); }), "stop");
  // null means "not given"
  EXPECT_DOUBLE_EQ(parse_sampling(json{{"temperature", nullptr}}, lim).sampling.temperature, 1.0);
}

TEST(ChatRequest, ToolsChoiceAndFormats) {
  SamplingLimits lim{100, 0};
  json tools = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}};
  json b = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", tools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", {{"type", "object"}}}}}}},
            {"stream", true}, {"stream_options", {{"include_usage", true}}}, {"logprobs", true}, {"top_logprobs", 3}};
  ChatRequest r = parse_chat_request(b, lim);
  EXPECT_EQ(r.tool_choice.mode, ToolMode::Named);
  EXPECT_EQ(r.tool_choice.name, "f");
  EXPECT_EQ(r.constraint.kind, ConstraintSpec::Kind::JsonSchema);
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.gen.sampling.top_logprobs, 3);
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "g"}}}};
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "tool_choice");
  b["tool_choice"] = "auto";
  b.erase("tools");
  EXPECT_EQ(parse_chat_request(b, lim).tool_choice.mode, ToolMode::None);  // no tools: nothing to call
  b["tool_choice"] = "required";
  EXPECT_EQ(status_of([&] { parse_chat_request(b, lim); }), 400);
  b.erase("tool_choice");
  b["top_logprobs"] = 2;
  b["logprobs"] = false;
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "top_logprobs");
  b.erase("top_logprobs");
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}};
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "messages[0].content[0].type");
  b["messages"] = json::array();
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "messages");
  b["messages"] = {{{"role", "user"}}};
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "messages[0].content");
  b.erase("model");  // optional: the served model (as vLLM)
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "messages[0].content");
  b["model"] = 7;
  EXPECT_EQ(param_of([&] { parse_chat_request(b, lim); }), "model");
}

TEST(AnthropicRequest, ConvertsBlocksToChat) {
  SamplingLimits lim{100, 0};
  json b = {{"model", "m"}, {"max_tokens", 10}, {"system", {{{"type", "text"}, {"text", "S"}}}},
            {"stop_sequences", {"\n\n"}}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}},
            {"tools", {{{"name", "t"}, {"input_schema", {{"type", "object"}}}}}}, {"tool_choice", {{"type", "any"}}},
            {"messages", {{{"role", "user"}, {"content", "q"}},
                          {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "a"}},
                                                               {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "t"}, {"input", {{"k", 1}}}}}}},
                          {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                                           {"content", {{{"type", "text"}, {"text", "r"}}}}, {"is_error", true}},
                                                          {{"type", "text"}, {"text", "next"}}}}}}}};
  MessagesRequest r = parse_messages_request(b, lim);
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["k"], 1);
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.messages[3]["content"], "Error: r");
  EXPECT_EQ(r.messages[4]["content"], "next");
  EXPECT_EQ(r.tool_mode, ToolMode::Required);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r.template_extra["enable_thinking"], true);
  b.erase("max_tokens");
  EXPECT_EQ(param_of([&] { parse_messages_request(b, lim); }), "max_tokens");
  EXPECT_NO_THROW(parse_messages_request(b, lim, /*for_count=*/true));
  b["max_tokens"] = 5;
  b["messages"][0]["role"] = "system";
  EXPECT_EQ(param_of([&] { parse_messages_request(b, lim); }), "messages[0].role");
}

TEST(ResponsesRequest, InputItems) {
  SamplingLimits lim{100, 0};
  json b = {{"model", "m"}, {"instructions", "I"}, {"max_output_tokens", 9},
            {"input", {{{"type", "message"}, {"role", "developer"}, {"content", "D"}},
                       {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "U"}}}}},
                       {{"type", "reasoning"}, {"summary", {{{"type", "summary_text"}, {"text", "think"}}}}},
                       {{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", "{\"a\":1}"}},
                       {{"type", "function_call"}, {"call_id", "c2"}, {"name", "f"}, {"arguments", "{}"}},
                       {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "o1"}}}},
            {"tools", {{{"type", "function"}, {"name", "f"}}, {{"type", "web_search"}}}},
            {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", {{"type", "object"}}}}}}}};
  ResponsesRequest r = parse_responses_request(b, lim);
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0]["content"], "I");
  EXPECT_EQ(r.messages[1]["role"], "system");
  EXPECT_EQ(r.messages[3]["role"], "assistant");
  EXPECT_EQ(r.messages[3]["reasoning_content"], "think");
  EXPECT_EQ(r.messages[3]["tool_calls"].size(), 2u);
  EXPECT_EQ(r.messages[4]["tool_call_id"], "c1");
  EXPECT_EQ(r.tools.size(), 1u);  // built-in tools are not ours to run
  EXPECT_EQ(r.gen.max_tokens, 9);
  EXPECT_EQ(r.constraint.kind, ConstraintSpec::Kind::JsonSchema);
  b["previous_response_id"] = "resp_1";
  EXPECT_EQ(param_of([&] { parse_responses_request(b, lim); }), "previous_response_id");
  b.erase("previous_response_id");
  b["max_output_tokens"] = 0;
  EXPECT_EQ(param_of([&] { parse_responses_request(b, lim); }), "max_output_tokens");
}

TEST(ProtocolDetails, GlobMatch) {
  EXPECT_TRUE(glob_match("claude-*", "claude-3-5-haiku-20241022"));
  EXPECT_TRUE(glob_match("claude-*", "claude-"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*haiku*", "claude-haiku-4-5"));
  EXPECT_TRUE(glob_match("gpt-?", "gpt-4"));
  EXPECT_TRUE(glob_match("a*b*c", "axxbyybzc"));
  EXPECT_FALSE(glob_match("gpt-?", "gpt-4o"));
  EXPECT_FALSE(glob_match("claude-*", "claud"));
  EXPECT_FALSE(glob_match("a*b*c", "axxbyy"));
  EXPECT_FALSE(glob_match("", "x"));
  EXPECT_TRUE(glob_match("exact", "exact"));
}

// transformers' continue_final_message rule: cut after the last occurrence of the final message's
// text (or of its trimmed form when the template trims), dropping the turn's closing tokens.
TEST(ProtocolDetails, CutAfterFinalMessage) {
  json msgs = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hi"}}};
  EXPECT_EQ(cut_after_final_message("<u>Hi</u><a>Hi</a>\n", msgs), "<u>Hi</u><a>Hi");
  msgs[1]["content"] = "  Sure, \n";
  EXPECT_EQ(cut_after_final_message("<u>Hi</u><a>Sure,</a>", msgs), "<u>Hi</u><a>Sure,");
  EXPECT_EQ(cut_after_final_message("<a>  Sure, \n</a>", msgs), "<a>  Sure, \n");
  msgs[1]["content"] = "absent";
  EXPECT_EQ(status_of([&] { cut_after_final_message("<a>other</a>", msgs); }), 400);
}

TEST(ProtocolDetails, AnthropicOutputConfigAndPrefill) {
  json extra = json::object();
  json body = {{"output_config", {{"effort", "low"}, {"format", {{"type", "json_schema"}, {"schema", {{"type", "object"}}}}}}}};
  ConstraintSpec c = parse_output_config(body, extra);
  EXPECT_EQ(c.kind, ConstraintSpec::Kind::JsonSchema);
  EXPECT_EQ(c.schema, json({{"type", "object"}}));
  EXPECT_EQ(extra["reasoning_effort"], "low");
  EXPECT_EQ(parse_output_config(json::object(), extra).kind, ConstraintSpec::Kind::None);
  EXPECT_EQ(param_of([&] { parse_output_config({{"output_format", {{"type", "json_object"}}}}, extra); }),
            "output_format.type");
  EXPECT_EQ(param_of([&] { parse_output_config({{"output_config", {{"format", {{"type", "json_schema"}}}}}}, extra); }),
            "output_config.format.schema");

  json m = {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", "A:"}}};
  EXPECT_TRUE(take_assistant_prefill(m));
  EXPECT_EQ(m.size(), 2u);
  m[1]["content"] = " \n";
  EXPECT_FALSE(take_assistant_prefill(m));
  EXPECT_EQ(m.size(), 1u);
  EXPECT_FALSE(take_assistant_prefill(m));  // ends with the user: a normal turn
  m.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({json::object()})}});
  EXPECT_FALSE(take_assistant_prefill(m));
  EXPECT_EQ(m.size(), 2u);
}

TEST(ProtocolDetails, UsageAndFingerprint) {
  json u = anthropic_usage(100, 60, 7);
  EXPECT_EQ(u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>() +
                u["cache_creation_input_tokens"].get<int64_t>(), 100);
  EXPECT_EQ(u["cache_read_input_tokens"], 60);
  EXPECT_EQ(u["output_tokens"], 7);
  std::string a = system_fingerprint("m", 4096);
  EXPECT_EQ(a, system_fingerprint("m", 4096));
  EXPECT_NE(a, system_fingerprint("m", 8192));
  EXPECT_NE(a, system_fingerprint("n", 4096));
  EXPECT_EQ(a.size(), 15u);
  EXPECT_EQ(a.rfind("fp_", 0), 0u);
}

TEST(Format, OpenAIAndAnthropicPieces) {
  EXPECT_EQ(openai_finish_reason(engine::FinishReason::Length, true), "length");
  EXPECT_EQ(openai_finish_reason(engine::FinishReason::Stop, true), "tool_calls");
  EXPECT_EQ(openai_finish_reason(engine::FinishReason::Stop, false), "stop");
  EXPECT_EQ(anthropic_stop_reason(engine::FinishReason::Stop, true), "tool_use");
  EXPECT_EQ(anthropic_stop_reason(engine::FinishReason::Length, false), "max_tokens");
  EXPECT_EQ(tool_input_object("{\"a\":1}")["a"], 1);
  EXPECT_EQ(tool_input_object("not json"), json::object());
  json u = openai_usage({10, 5, 3});
  EXPECT_EQ(u["total_tokens"], 15);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 3);

  // Anthropic blocks: thinking → text → tool_use, each opened once and closed before the next.
  AnthropicBlockWriter w;
  std::string out;
  TurnDelta d1;
  d1.reasoning = "r";
  w.write(d1, out);
  TurnDelta d2;
  d2.content = "c";
  w.write(d2, out);
  TurnDelta d3;
  d3.tool_calls.push_back({0, "call_x", "f", "{\"a\""});
  w.write(d3, out);
  TurnDelta d4;
  d4.tool_calls.push_back({0, "", "", ":1}"});
  w.write(d4, out);
  w.close(out);
  std::vector<std::string> kinds;
  size_t pos = 0;
  while ((pos = out.find("event: ", pos)) != std::string::npos) {
    size_t e = out.find('\n', pos);
    kinds.push_back(out.substr(pos + 7, e - pos - 7));
    pos = e;
  }
  std::vector<std::string> want = {"content_block_start", "content_block_delta", "content_block_stop",
                                   "content_block_start", "content_block_delta", "content_block_stop",
                                   "content_block_start", "content_block_delta", "content_block_delta",
                                   "content_block_stop"};
  EXPECT_EQ(kinds, want);
  EXPECT_NE(out.find("\"id\":\"toolu_x\""), std::string::npos);
  EXPECT_NE(out.find("\"type\":\"thinking_delta\""), std::string::npos);
  EXPECT_NE(out.find("\"index\":2"), std::string::npos);
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.add_tokens(10, 2, 5);
  m.ttft.observe(0.003);
  m.ttft.observe(0.2);
  std::string t = m.render("m\"x", EngineStats{3, 1, 0.5, 0, 0});
  EXPECT_NE(t.find("rapid_requests_total{model_name=\"m\\\"x\",endpoint=\"/v1/chat/completions\",status=\"2xx\"} 2"), std::string::npos) << t;
  EXPECT_NE(t.find("status=\"4xx\"} 1"), std::string::npos);
  // A label the client chose never reaches the text: unknown endpoints count as "other".
  m.count_request("/v1/x\"} 1\nevil 1", 401);
  std::string t2 = m.render("m", EngineStats{});
  EXPECT_EQ(t2.find("evil"), std::string::npos);
  EXPECT_NE(t2.find("endpoint=\"other\",status=\"4xx\"} 1"), std::string::npos) << t2;
  EXPECT_NE(t.find("rapid_num_requests_waiting{model_name=\"m\\\"x\"} 3"), std::string::npos);
  EXPECT_NE(t.find("rapid_kv_cache_usage_perc{model_name=\"m\\\"x\"} 0.5"), std::string::npos);
  // Cumulative buckets: 0.005 holds 1, 0.25 holds 2, +Inf holds 2.
  EXPECT_NE(t.find("rapid_time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"0.005\"} 1"), std::string::npos);
  EXPECT_NE(t.find("rapid_time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"0.25\"} 2"), std::string::npos);
  EXPECT_NE(t.find("rapid_time_to_first_token_seconds_bucket{model_name=\"m\\\"x\",le=\"+Inf\"} 2"), std::string::npos);
  EXPECT_NE(t.find("rapid_time_to_first_token_seconds_count{model_name=\"m\\\"x\"} 2"), std::string::npos);

  // Whole numbers as integers, whatever their trailing zeros: the shortest round-trip %g of 40 is
  // "4e+01" (tests/python/test_qwen35_cache.py read that for 40 checkpoints).
  EngineStats big;
  big.queued = 40, big.running = 100, big.kv_usage = 0.25, big.checkpoints = 1000000, big.state_bytes_per_seq = 4096;
  const std::string t3 = m.render("m", big);
  EXPECT_NE(t3.find("rapid_num_requests_waiting{model_name=\"m\"} 40\n"), std::string::npos) << t3;
  EXPECT_NE(t3.find("rapid_num_requests_running{model_name=\"m\"} 100\n"), std::string::npos) << t3;
  EXPECT_NE(t3.find("rapid_prefix_cache_checkpoints{model_name=\"m\"} 1000000\n"), std::string::npos) << t3;
  EXPECT_NE(t3.find("rapid_kv_cache_usage_perc{model_name=\"m\"} 0.25\n"), std::string::npos) << t3;
  EXPECT_EQ(t3.find("e+"), std::string::npos) << t3;
}

TEST(ModelBackend, ReasoningOpenAtPromptEnd) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("user said <think> earlier\n<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning("plain"));
}

TEST(SerialEngine, RunsInOrderAndCancels) {
  rapid::testing::Script script;
  script.reply = "abc";
  script.delay = std::chrono::milliseconds(20);  // job 1 is still running when job 2 is cancelled
  engine::SerialEngine eng([&](const engine::GenerationRequest& r) { return std::make_unique<rapid::testing::ScriptRunner>(r, script); });
  std::mutex mu;
  std::vector<std::string> log;
  std::atomic<int> done{0};
  auto cb = [&](int tag) {
    return [&, tag](const engine::GenerationEvent& ev) {
      std::lock_guard lk(mu);
      log.push_back(std::to_string(tag) + ":" + ev.text + (ev.finished ? "|" + std::to_string(int(ev.finish_reason)) : ""));
      if (ev.finished) done++;
    };
  };
  engine::GenerationRequest req;
  req.prompt = {1, 2};
  req.max_tokens = 10;
  eng.submit(req, cb(1));
  uint64_t id2 = eng.submit(req, cb(2));
  eng.cancel(id2);  // may be queued or running: either way it ends Cancelled
  eng.submit(req, cb(3));
  for (int i = 0; i < 2000 && done < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(done.load(), 3);
  std::lock_guard lk(mu);
  std::vector<std::string> want1 = {"1:a", "1:b", "1:c", "1:|1"};
  EXPECT_EQ(std::vector<std::string>(log.begin(), log.begin() + 4), want1);
  // Request 2 ends with FinishReason::Cancelled (3) and request 3 runs after it, whole.
  auto it2 = std::find_if(log.begin(), log.end(), [](const std::string& s) { return s.rfind("2:", 0) == 0 && s.find('|') != std::string::npos; });
  ASSERT_NE(it2, log.end());
  std::string all;
  for (auto& l : log) all += l + " ";
  EXPECT_EQ(it2->substr(it2->find('|')), "|3") << all;
  EXPECT_EQ(log.back(), "3:|1");
  EXPECT_EQ(eng.running(), 0);
  EXPECT_EQ(eng.queued(), 0);
}

TEST(SerialEngine, RunnerFailureBecomesErrorEvent) {
  engine::SerialEngine eng([](const engine::GenerationRequest&) -> std::unique_ptr<engine::SequenceRunner> { throw std::runtime_error("boom"); });
  std::atomic<bool> got{false};
  engine::GenerationEvent last;
  engine::GenerationRequest req;
  req.prompt = {1};
  eng.submit(req, [&](const engine::GenerationEvent& ev) {
    last = ev;
    got = true;
  });
  for (int i = 0; i < 500 && !got; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(got);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.finish_reason, engine::FinishReason::Error);
  EXPECT_EQ(last.error, "boom");
}

}  // namespace
