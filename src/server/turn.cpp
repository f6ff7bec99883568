#include "server/turn.h"

#include <chrono>
#include <random>

#include "common/log.h"
#include "server/client_liveness.h"
#include "server/json_limits.h"

namespace rapid::server {

std::string random_id(const std::string& prefix, size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string s = prefix;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % 62];
  return s;
}

Turn::Turn(Backend& backend, Metrics* metrics, TurnSpec spec)
    : backend_(backend), metrics_(metrics), spec_(std::move(spec)), ch_(std::make_shared<Channel>()) {
  if (spec_.tool_mode != ToolMode::Named)
    parser_ = backend_.make_parser(spec_.tool_mode == ToolMode::None ? nlohmann::ordered_json::array() : spec_.tools,
                                   spec_.starts_in_reasoning);
  if (spec_.constraint.kind != ConstraintSpec::Kind::None && !backend_.apply_constraint(spec_.gen, spec_.constraint))
    log::debug("constrained decoding unavailable: the request runs unconstrained");
  start_ = last_token_ = std::chrono::steady_clock::now();
  result_.cache_generation = backend_.engine().cache_generation();
  auto ch = ch_;  // the callback may outlive this Turn: it holds only the channel
  engine_id_ = backend_.engine().submit(spec_.gen, [ch](const engine::GenerationEvent& ev) {
    {
      std::lock_guard lk(ch->mu);
      ch->events.push_back(ev);
    }
    ch->cv.notify_one();
  });
}

Turn::~Turn() {
  if (!done_) {
    cancel();
    return;
  }
  if (spec_.after && (result_.reason == engine::FinishReason::Stop || result_.reason == engine::FinishReason::Length)) {
    try {
      spec_.after(result_);
    } catch (const std::exception& e) {
      log::warn(std::string("after-turn hook failed: ") + e.what());
    }
  }
}

void Turn::cancel() { backend_.engine().cancel(engine_id_); }

std::optional<TurnDelta> Turn::next(std::chrono::milliseconds wait) {
  if (done_) return std::nullopt;
  engine::GenerationEvent ev;
  {
    std::unique_lock lk(ch_->mu);
    if (!ch_->cv.wait_for(lk, wait, [&] { return !ch_->events.empty(); })) return std::nullopt;
    ev = std::move(ch_->events.front());
    ch_->events.pop_front();
  }
  return translate(ev);
}

void Turn::add_call_text(TurnDelta& d, const std::string& text) {
  parsers::ToolCallDelta t;
  t.index = 0;
  if (!saw_call_) {
    named_id_ = random_id(spec_.id_prefix);
    t.id = named_id_;
    t.name = spec_.forced_name;
    saw_call_ = true;
  }
  t.arguments = text;
  d.tool_calls.push_back(std::move(t));
}

// tool_choice "required" without a parser hit: the output itself names the call(s), as
// {"name":..,"arguments":{..}} or a list of them (what a forcing grammar produces); failing
// that, the only offered tool gets the raw text as its arguments.
void Turn::finish_required(TurnDelta& d) {
  if (saw_call_) return;
  auto parsed = parse_output_json(held_);
  std::vector<nlohmann::ordered_json> calls;
  if (parsed.is_object()) calls.push_back(parsed);
  if (parsed.is_array())
    for (auto& c : parsed) calls.push_back(c);
  int index = 0;
  for (auto& c : calls) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
    nlohmann::ordered_json args = c.contains("arguments") ? c["arguments"]
                          : c.contains("parameters") ? c["parameters"] : nlohmann::ordered_json::object();
    d.tool_calls.push_back({index++, random_id(spec_.id_prefix), c["name"].get<std::string>(),
                            args.is_string() ? args.get<std::string>() : args.dump()});
  }
  if (d.tool_calls.empty() && !spec_.tools.empty()) {
    const auto& f = spec_.tools[0].contains("function") ? spec_.tools[0]["function"] : spec_.tools[0];
    d.tool_calls.push_back({0, random_id(spec_.id_prefix), f.value("name", ""), held_});
  }
  if (!spec_.parallel_tool_calls && d.tool_calls.size() > 1) d.tool_calls.resize(1);
  saw_call_ = !d.tool_calls.empty();
  held_.clear();
}

TurnDelta Turn::translate(const engine::GenerationEvent& ev) {
  TurnDelta d;
  d.tokens = ev.tokens;
  d.samples = ev.samples;
  d.prompt_tokens = ev.prompt_tokens;
  d.cached_tokens = ev.cached_tokens;
  d.completion_tokens = ev.completion_tokens;
  auto now = std::chrono::steady_clock::now();
  if (!ev.tokens.empty() && metrics_) {
    double dt = std::chrono::duration<double>(now - (first_token_seen_ ? last_token_ : start_)).count();
    (first_token_seen_ ? metrics_->itl : metrics_->ttft).observe(dt);
    first_token_seen_ = true;
    last_token_ = now;
  }
  parsers::ParseDelta p;
  if (spec_.tool_mode == ToolMode::Named) {
    p.content = ev.text;
  } else if (parser_) {
    p = parser_->feed(ev.text);
    if (ev.finished) {
      parsers::ParseDelta tail = parser_->finish();
      p.content += tail.content;
      p.reasoning += tail.reasoning;
      for (auto& t : tail.tool_calls) p.tool_calls.push_back(std::move(t));
    }
  } else {
    p.content = ev.text;
  }
  d.reasoning = std::move(p.reasoning);
  for (auto& t : p.tool_calls) {
    if (t.index < 0 || t.index > 255 || (!spec_.parallel_tool_calls && t.index > 0)) continue;
    if (t.id.empty() && !t.name.empty()) t.id = random_id(spec_.id_prefix);
    saw_call_ = true;
    d.tool_calls.push_back(std::move(t));
  }
  switch (spec_.tool_mode) {
    case ToolMode::Named:
      if (!p.content.empty() || (ev.finished && !saw_call_)) add_call_text(d, p.content);
      break;
    case ToolMode::Required:
      held_ += p.content;
      if (ev.finished) finish_required(d);
      break;
    default:
      d.content = std::move(p.content);
  }
  if (ev.finished) {
    done_ = true;
    d.finished = true;
    d.reason = ev.finish_reason;
    d.stop_sequence = ev.stop_string;
    d.error = ev.error;
    d.has_tool_calls = saw_call_;
    if (metrics_) {
      metrics_->add_tokens(ev.prompt_tokens, ev.cached_tokens, ev.completion_tokens);
      metrics_->add_speculation(ev.speculation);
      metrics_->e2e.observe(std::chrono::duration<double>(now - start_).count());
    }
  }
  merge(d);
  return d;
}

void Turn::merge(const TurnDelta& d) {
  TurnResult& r = result_;
  r.content += d.content;
  r.reasoning += d.reasoning;
  for (auto& t : d.tool_calls) {
    if (t.index < 0 || t.index > 255) continue;
    // Fragments of one call share its index; the first carries id and name.
    if (r.tool_calls.size() <= size_t(t.index)) r.tool_calls.resize(size_t(t.index) + 1);
    parsers::ParsedToolCall& c = r.tool_calls[size_t(t.index)];
    if (!t.id.empty()) c.id = t.id;
    if (!t.name.empty()) c.name += t.name;
    c.arguments += t.arguments;
  }
  r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
  r.samples.insert(r.samples.end(), d.samples.begin(), d.samples.end());
  if (d.finished) {
    r.reason = d.reason;
    r.stop_sequence = d.stop_sequence;
    r.error = d.error;
    r.prompt_tokens = d.prompt_tokens;
    r.cached_tokens = d.cached_tokens;
    r.completion_tokens = d.completion_tokens;
  }
}

TurnResult Turn::collect() {
  // Whether the client is still there is asked between deltas as well: a long generation
  // delivers them continuously, so the waits alone would rarely time out.
  constexpr auto kPoll = std::chrono::milliseconds(100);
  auto checked = std::chrono::steady_clock::now();
  while (!done_) {
    next(kPoll);
    const auto now = std::chrono::steady_clock::now();
    if (done_ || now - checked < kPoll) continue;
    checked = now;
    if (client_gone()) throw ClientGone();  // ~Turn cancels the generation
  }
  return result_;
}

}  // namespace rapid::server
