// The model registry (several models in one server) with fake backends: name resolution, loading
// on first use (once, however many requests arrive together), LRU unloading under a count and a
// memory budget, a request keeping an unloaded model alive, load failures; then the HTTP server
// routing requests by their `model` field, and its 404 in each API's shape.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "server/model_registry.h"
#include "server_fake_backend.h"

using json = nlohmann::json;
using rapid::server::ApiError;
using rapid::server::LoadedModel;
using rapid::server::ModelRegistry;
using rapid::server::RegistryLimits;
using rapid::server::ServedModel;
using rapid::testing::FakeBackend;

namespace {

// A loader that builds a FakeBackend replying with the model's name, counting its calls.
struct CountingLoader {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::chrono::milliseconds delay{0};
  uint64_t bytes = 100;
  LoadedModel operator()(const ServedModel& m) const {
    ++*calls;
    std::this_thread::sleep_for(delay);
    auto b = std::make_shared<FakeBackend>(4096, m.name);
    b->script.reply = "I am " + m.name;
    return {b, bytes};
  }
};

std::vector<ServedModel> three() { return {{"a", {"alpha"}, "/a"}, {"b", {}, "/b"}, {"c", {}, "/c"}}; }

std::vector<std::string> loaded(const ModelRegistry& r) {
  std::vector<std::string> out;
  for (auto& s : r.status())
    if (s.loaded) out.push_back(s.name);
  return out;
}

TEST(ModelRegistry, ResolvesNamesAliasesPatternsAndTheDefault) {
  CountingLoader load;
  ModelRegistry r(three(), load, {}, {{"claude-*", "b"}});
  EXPECT_EQ(r.acquire("")->model_id(), "a");  // no model: the first
  EXPECT_EQ(r.acquire("alpha")->model_id(), "a");
  EXPECT_EQ(r.acquire("claude-3-5-haiku")->model_id(), "b");
  EXPECT_EQ(r.canonical("alpha"), "a");
  EXPECT_TRUE(r.knows("c"));
  EXPECT_FALSE(r.knows("d"));
  EXPECT_EQ(*load.calls, 2);  // a and b, each once
  try {
    r.acquire("gpt-4");
    FAIL() << "unknown model served";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_EQ(e.code(), "model_not_found");
    EXPECT_EQ(std::string(e.what()), "The model 'gpt-4' does not exist; this server serves 'a', 'b', 'c'");
  }
  EXPECT_EQ(loaded(r), (std::vector<std::string>{"a", "b"}));
}

TEST(ModelRegistry, UnloadsTheLeastRecentlyUsedBeyondTheCount) {
  CountingLoader load;
  ModelRegistry r(three(), load, RegistryLimits{2, 0});
  r.acquire("a");
  r.acquire("b");
  r.acquire("a");  // b is now the least recently used
  r.acquire("c");
  EXPECT_EQ(loaded(r), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(r.unloads(), 1u);
  r.acquire("b");  // reloads, unloading a (c was used after it)
  EXPECT_EQ(loaded(r), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(*load.calls, 4);
  EXPECT_EQ(r.loads(), 4u);
}

TEST(ModelRegistry, UnloadsTheLeastRecentlyUsedBeyondTheMemoryBudget) {
  CountingLoader load;  // 100 bytes each
  ModelRegistry r(three(), load, RegistryLimits{0, 250});
  r.acquire("a");
  r.acquire("b");
  EXPECT_EQ(loaded(r).size(), 2u);
  r.acquire("c");  // 300 > 250: a goes
  EXPECT_EQ(loaded(r), (std::vector<std::string>{"b", "c"}));
  uint64_t total = 0;
  for (auto& s : r.status()) total += s.bytes;
  EXPECT_EQ(total, 200u);
}

TEST(ModelRegistry, AModelLargerThanTheBudgetStillLoadsAlone) {
  CountingLoader load;
  load.bytes = 1000;
  ModelRegistry r(three(), load, RegistryLimits{0, 250});
  r.acquire("a");
  r.acquire("b");
  EXPECT_EQ(loaded(r), (std::vector<std::string>{"b"}));
}

TEST(ModelRegistry, ConcurrentFirstRequestsShareOneLoad) {
  CountingLoader load;
  load.delay = std::chrono::milliseconds(200);
  ModelRegistry r(three(), load);
  std::vector<std::thread> ts;
  std::vector<std::shared_ptr<rapid::server::Backend>> got(8);
  for (int i = 0; i < 8; ++i) ts.emplace_back([&, i] { got[i] = r.acquire("b"); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(*load.calls, 1);
  for (auto& g : got) EXPECT_EQ(g.get(), got[0].get());
}

TEST(ModelRegistry, AnInFlightRequestKeepsAnUnloadedModelAlive) {
  CountingLoader load;
  ModelRegistry r(three(), load, RegistryLimits{1, 0});
  std::shared_ptr<rapid::server::Backend> held = r.acquire("a");
  std::weak_ptr<rapid::server::Backend> watch = held;
  r.acquire("b");  // unloads a from the registry...
  EXPECT_EQ(loaded(r), (std::vector<std::string>{"b"}));
  ASSERT_FALSE(watch.expired());  // ...but the request holding it still runs on it
  rapid::engine::GenerationRequest g;
  g.prompt = {1, 2, 3};
  g.max_tokens = 64;
  std::atomic<bool> done{false};
  std::string text;
  held->engine().submit(g, [&](const rapid::engine::GenerationEvent& ev) {
    text += ev.text;
    if (ev.finished) done = true;
  });
  for (int i = 0; i < 500 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(text, "I am a");
  held.reset();
  EXPECT_TRUE(watch.expired());  // the last holder gone, the model is freed
}

TEST(ModelRegistry, ALoadFailureIsA503ForThatRequestAndTheNextOneRetries) {
  auto calls = std::make_shared<int>(0);
  ModelRegistry r(three(), [calls](const ServedModel& m) -> LoadedModel {
    if (++*calls == 1) throw std::runtime_error("/b: truncated file");
    return {std::make_shared<FakeBackend>(4096, m.name), 1};
  });
  try {
    r.acquire("b");
    FAIL() << "a failed load served";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.code(), "model_load_failed");
    EXPECT_NE(std::string(e.what()).find("/b: truncated file"), std::string::npos);
  }
  EXPECT_TRUE(loaded(r).empty());
  EXPECT_EQ(r.acquire("b")->model_id(), "b");
}

// The HTTP server over a registry: each request served by the model it names.
class MultiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CountingLoader load;
    calls_ = load.calls;
    registry_ = std::make_shared<ModelRegistry>(three(), load, RegistryLimits{2, 0});
    rapid::server::ServerOptions o;
    o.port = 0;
    o.http_threads = 16;
    server_ = std::make_unique<rapid::server::HttpServer>(registry_, o);
    port_ = server_->bind();
    server_->start();
  }
  void TearDown() override { server_.reset(); }
  httplib::Result post(const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c.Post(path.c_str(), body.dump(), "application/json");
  }
  httplib::Result get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    return c.Get(path.c_str());
  }
  static json chat(const std::string& model) {
    return {{"model", model}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  }

  std::shared_ptr<std::atomic<int>> calls_;
  std::shared_ptr<ModelRegistry> registry_;
  std::unique_ptr<rapid::server::HttpServer> server_;
  int port_ = 0;
};

TEST_F(MultiServerTest, EachRequestIsServedByTheModelItNames) {
  auto r = get("/v1/models");
  ASSERT_EQ(r->status, 200);
  json models = json::parse(r->body)["data"];
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0]["id"], "a");
  EXPECT_EQ(models[0]["state"], "not-loaded");  // listing loads nothing
  EXPECT_EQ(models[0]["aliases"], json::array({"alpha"}));
  EXPECT_EQ(*calls_, 0);

  for (const char* m : {"b", "alpha", "c", "b"}) {
    r = post("/v1/chat/completions", chat(m));
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    std::string name = m == std::string("alpha") ? "a" : m;
    EXPECT_EQ(j["model"], name);
    EXPECT_EQ(j["choices"][0]["message"]["content"], "I am " + name);
  }
  r = post("/v1/messages", {{"model", "c"}, {"max_tokens", 50}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["content"][0]["text"], "I am c");
  // --max-loaded-models 2: c's load unloaded b, b's reload then a (used before c).
  models = json::parse(get("/v1/models")->body)["data"];
  EXPECT_EQ(models[0]["state"], "not-loaded");
  EXPECT_EQ(models[1]["state"], "loaded");
  EXPECT_EQ(models[2]["state"], "loaded");
  EXPECT_EQ(models[2]["max_model_len"], 4096);
  EXPECT_EQ(get("/v1/models/alpha")->status, 200);
  std::string metrics = get("/metrics")->body;
  EXPECT_NE(metrics.find("rapid_model_loaded{model_name=\"a\"} 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("rapid_model_loaded{model_name=\"b\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("rapid_model_unloads_total 2"), std::string::npos);
  EXPECT_EQ(*calls_, 4);
}

TEST_F(MultiServerTest, AnUnknownModelIsA404InEachApisShapeListingTheModels) {
  auto r = post("/v1/chat/completions", chat("gpt-4o"));
  ASSERT_EQ(r->status, 404);
  json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_EQ(e["param"], "model");
  EXPECT_EQ(e["message"], "The model 'gpt-4o' does not exist; this server serves 'a', 'b', 'c'");
  r = post("/v1/messages", {{"model", "claude-opus-4"}, {"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(r->status, 404);
  json a = json::parse(r->body);
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "not_found_error");
  EXPECT_NE(a["error"]["message"].get<std::string>().find("'a', 'b', 'c'"), std::string::npos);
  EXPECT_EQ(get("/v1/models/nope")->status, 404);
  // /v1/cache names its model in the query; it loads none.
  r = get("/v1/cache?model=b");
  ASSERT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_loaded");
  r = get("/v1/cache?model=zz%2Fz");
  ASSERT_EQ(r->status, 404);
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("'zz/z'"), std::string::npos);
  EXPECT_EQ(*calls_, 0);
  // Without `model` (OpenAI bodies may leave it out): the first one.
  r = post("/v1/completions", {{"prompt", "Hi"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["model"], "a");
}

TEST_F(MultiServerTest, ConcurrentRequestsToSeveralModelsAllGetTheirOwnAnswer) {
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 12; ++i)
    ts.emplace_back([&, i] {
      std::string m = i % 2 ? "a" : "b";
      auto r = post("/v1/chat/completions", chat(m));
      if (r && r->status == 200 && json::parse(r->body)["choices"][0]["message"]["content"] == "I am " + m) ++ok;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok, 12);
  EXPECT_EQ(*calls_, 2);
}

}  // namespace
