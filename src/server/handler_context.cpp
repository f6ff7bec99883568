#include "server/handler_context.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "server/json_limits.h"
#include "server/sse.h"

namespace rapid::server {

SamplingLimits HandlerContext::limits() const {
  SamplingLimits l;
  l.vocab_size = backend.tokenizer().vocab_size();
  l.default_max_tokens = opts.default_max_tokens;
  return l;
}

void HandlerContext::check_model(const std::string& model) const {
  // OpenAI-style bodies without `model` mean the default (first) one.
  if (!models.knows(model)) throw models.not_found(model);
}

nlohmann::ordered_json HandlerContext::body(const httplib::Request& req) {
  if (!parsed) return parse_json_body(req);
  nlohmann::ordered_json b = std::move(*parsed);
  parsed.reset();
  return b;
}

void HandlerContext::fit_context(engine::GenerationRequest& gen, std::vector<int32_t> prompt) const {
  int64_t ctx = backend.context_length();
  int64_t n = int64_t(prompt.size());
  if (n == 0) throw bad_request("the prompt is empty", "prompt");
  if (ctx > 0 && n >= ctx)
    throw bad_request("This model's maximum context length is " + std::to_string(ctx) + " tokens, but the prompt has " +
                          std::to_string(n) + " tokens",
                      "messages", "context_length_exceeded");
  int64_t room = ctx > 0 ? ctx - n : (1 << 30);
  if (gen.max_tokens <= 0 || gen.max_tokens > room) gen.max_tokens = room;
  if (gen.min_tokens > gen.max_tokens) gen.min_tokens = gen.max_tokens;
  gen.prompt = std::move(prompt);
}

nlohmann::ordered_json parse_json_body(const httplib::Request& req) {
  return parse_request_json(req.body);
}

std::string query_param(const std::string& target, const std::string& name) {
  size_t q = target.find('?');
  for (size_t p = q; p != std::string::npos && p < target.size();) {
    size_t end = std::min(target.find('&', p + 1), target.size());
    if (target.compare(p + 1, name.size() + 1, name + "=") == 0 && p + 1 + name.size() + 1 <= end)
      return httplib::detail::decode_url(target.substr(p + name.size() + 2, end - p - name.size() - 2), true);
    p = end;
  }
  return "";
}

void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(to_json_text(body), "application/json");
}

void start_sse(httplib::Response& res, std::shared_ptr<SsePump> pump) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto last_write = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  res.set_chunked_content_provider("text/event-stream", [pump, last_write](size_t, httplib::DataSink& sink) {
    std::string out;
    bool more = true;
    try {
      more = pump->pump(out);
    } catch (const std::exception& e) {
      log::error(std::string("stream failed: ") + e.what());
      out.clear();
      pump->fail(out, e.what());
      pump->cancel();
      more = false;
    }
    auto now = std::chrono::steady_clock::now();
    // While the model is busy (long prefill, queued behind others), a comment line every second
    // lets a failed write reveal a client that has gone.
    if (out.empty() && more && now - *last_write > std::chrono::seconds(1)) out = sse_keepalive();
    if (!out.empty()) {
      if (!sink.write(out.data(), out.size())) {
        pump->cancel();
        return false;
      }
      *last_write = now;
    }
    if (!more) sink.done();
    return true;
  });
}

}  // namespace rapid::server
