#include "server/turn_warmer.h"

#include <algorithm>

#include "common/log.h"
#include "server/json_limits.h"

namespace rapid::server {

using ojson = nlohmann::ordered_json;

ojson assistant_message(const TurnResult& r, bool with_reasoning) {
  ojson m = {{"role", "assistant"}, {"content", r.content}};
  if (with_reasoning && !r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const parsers::ParsedToolCall& c : r.tool_calls) {
      // Model output: depth-checked before the template walks it; text that is not JSON goes back
      // as the client got it.
      ojson args = parse_output_json(c.arguments);
      if (args.is_discarded()) args = c.arguments;
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
    }
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

// The conversation as the agent sends it next, with `text` as the follow-up's content.
static ojson with_follow_up(const TurnInputs& in, const ojson& assistant, const std::string& text) {
  ojson msgs = in.messages;
  msgs.push_back(assistant);
  if (assistant.contains("tool_calls")) {
    for (const auto& c : assistant["tool_calls"])
      msgs.push_back({{"role", "tool"}, {"tool_call_id", c["id"]}, {"name", c["function"]["name"]}, {"content", text}});
  } else {
    msgs.push_back({{"role", "user"}, {"content", text}});
  }
  return msgs;
}

std::vector<int32_t> next_turn_prefix(const Backend& backend, const TurnInputs& in, const ojson& assistant) {
  try {
    // Two follow-ups that differ from their first character on.
    const std::vector<int32_t> a = backend.render_chat(with_follow_up(in, assistant, "A"), in.tools, in.extra).tokens;
    const std::vector<int32_t> b = backend.render_chat(with_follow_up(in, assistant, "Z"), in.tools, in.extra).tokens;
    size_t n = size_t(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
    // The real follow-up may merge with the token before it (e.g. "\n" + "\n..."): keep one back.
    n = n > 0 ? n - 1 : 0;
    return std::vector<int32_t>(a.begin(), a.begin() + int64_t(n));
  } catch (const std::exception& e) {
    log::debug(std::string("turn warming skipped: ") + e.what());
    return {};
  }
}

void warm_next_turn(Backend& backend, const TurnInputs& in, const TurnResult& r) {
  std::vector<std::vector<int32_t>> prefixes;
  for (bool reasoning : {false, true}) {
    if (reasoning && r.reasoning.empty()) break;
    std::vector<int32_t> p = next_turn_prefix(backend, in, assistant_message(r, reasoning));
    if (!p.empty() && std::find(prefixes.begin(), prefixes.end(), p) == prefixes.end()) prefixes.push_back(std::move(p));
  }
  for (auto& p : prefixes) {
    engine::GenerationRequest g;
    g.prompt = std::move(p);
    g.warm_only = true;
    g.cache_generation = r.cache_generation;
    g.max_tokens = 1;  // unused: a warm request samples nothing
    try {
      backend.engine().submit(std::move(g), [](const engine::GenerationEvent&) {});
    } catch (const std::exception& e) {
      log::debug(std::string("turn warming not queued: ") + e.what());
    }
  }
}

}  // namespace rapid::server
