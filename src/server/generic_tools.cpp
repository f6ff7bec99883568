#include "server/generic_tools.h"

namespace rapid::server {

using ojson = nlohmann::ordered_json;

namespace {

// Probe markers: unlikely to appear in any template's own text.
constexpr const char* kFn = "rapid_probe_fn";
constexpr const char* kArg = "rapid_probe_value";
constexpr const char* kResult = "rapid_probe_result";
constexpr const char* kSystem = "rapid_probe_system";

ojson probe_tools() {
  ojson params = {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}};
  ojson fn = {{"name", kFn}, {"description", "probe"}, {"parameters", params}};
  return ojson::array({ojson{{"type", "function"}, {"function", fn}}});
}

ojson probe_call_turn() {
  ojson call = {{"id", "call_probe"}, {"type", "function"}, {"function", {{"name", kFn}, {"arguments", {{"q", kArg}}}}}};
  return {{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({call})}};
}

bool shows(const RenderFn& render, const ojson& messages, const ojson& tools, const char* marker) {
  ojson ctx = {{"messages", messages}, {"add_generation_prompt", false}};
  if (!tools.is_null()) ctx["tools"] = tools;
  try {
    return render(ctx).find(marker) != std::string::npos;
  } catch (const std::exception&) {
    return false;
  }
}

// A call as the generic format writes it: {"name": ..., "arguments": {...}}.
ojson call_json(const ojson& call) {
  const ojson& f = call.contains("function") ? call["function"] : call;
  ojson args = f.contains("arguments") ? f["arguments"] : ojson::object();
  if (args.is_string()) {
    ojson parsed = ojson::parse(args.get<std::string>(), nullptr, false);
    if (!parsed.is_discarded()) args = parsed;
  }
  return {{"name", f.value("name", "")}, {"arguments", args}};
}

std::string calls_text(const ojson& calls) {
  if (calls.size() == 1) return call_json(calls[0]).dump();
  ojson list = ojson::array();
  for (auto& c : calls) list.push_back(call_json(c));
  return list.dump();
}

std::string text_of(const ojson& m) {
  auto it = m.find("content");
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void join(ojson& msg, const std::string& text) {
  std::string c = text_of(msg);
  msg["content"] = c.empty() ? text : c + "\n\n" + text;
}

}  // namespace

TemplateToolSupport probe_tool_support(const RenderFn& render) {
  TemplateToolSupport s;
  ojson user = {{"role", "user"}, {"content", "probe"}};
  s.tools = shows(render, ojson::array({user}), probe_tools(), kFn);
  s.tool_calls = shows(render, ojson::array({user, probe_call_turn()}), probe_tools(), kArg);
  ojson result = {{"role", "tool"}, {"tool_call_id", "call_probe"}, {"name", kFn}, {"content", kResult}};
  s.tool_responses = shows(render, ojson::array({user, probe_call_turn(), result}), probe_tools(), kResult);
  // With tools too: some tool-use templates refuse a conversation without them.
  s.system_role = shows(render, ojson::array({{{"role", "system"}, {"content", kSystem}}, user}), probe_tools(), kSystem);
  return s;
}

std::string generic_tool_prompt(const ojson& tools) {
  std::string out = "You can call the following tools (each with the JSON Schema of its arguments):\n";
  for (auto& t : tools) {
    const ojson& f = t.contains("function") ? t["function"] : t;
    ojson line = {{"name", f.value("name", "")}};
    if (f.contains("description")) line["description"] = f["description"];
    line["parameters"] = f.contains("parameters") ? f["parameters"] : ojson::object();
    out += line.dump() + "\n";
  }
  out +=
      "\nTo call a tool, reply with only a JSON object of the form {\"name\": \"<tool name>\", \"arguments\": "
      "{<arguments>}}; to call several, reply with a JSON array of such objects. Tool results come back in the "
      "next message. If no tool is needed, answer directly.";
  return out;
}

namespace {

// Calls and results the template cannot show, rewritten as text (see the header).
ojson rewrite_tool_turns(const ojson& messages, const TemplateToolSupport& s) {
  ojson out = ojson::array();
  bool last_converted = false;  // out.back() is a tool result turned into a user message
  for (const ojson& m : messages) {
    std::string role = m.value("role", "");
    if (role == "assistant" && !s.tool_calls && m.contains("tool_calls") && !m["tool_calls"].empty()) {
      ojson a = m;
      a.erase("tool_calls");
      join(a, calls_text(m["tool_calls"]));
      out.push_back(std::move(a));
      last_converted = false;
      continue;
    }
    bool convert = role == "tool" && !s.tool_responses;
    if (convert || (role == "user" && last_converted)) {
      std::string text = text_of(m);
      if (convert) {
        std::string name = m.value("name", "");
        text = "Tool result" + (name.empty() ? std::string() : " (" + name + ")") + ":\n" + text;
      }
      // Consecutive results (parallel calls) and the user's next words share one user turn, so
      // templates that insist on alternating roles accept the conversation.
      if (last_converted) join(out.back(), text);
      else out.push_back({{"role", "user"}, {"content", text}});
      last_converted = true;
      continue;
    }
    out.push_back(m);
    last_converted = false;
  }
  return out;
}

// No system role: system text (and the tool section, `preamble`) leads the next user message.
ojson fold_system(const ojson& messages, std::string preamble) {
  ojson out = ojson::array();
  std::string pending = std::move(preamble);
  for (const ojson& m : messages) {
    if (m.value("role", "") == "system") {
      std::string t = text_of(m);
      pending = pending.empty() ? t : t.empty() ? pending : pending + "\n\n" + t;
      continue;
    }
    ojson c = m;
    if (!pending.empty() && c.value("role", "") == "user") {
      std::string t = text_of(c);
      c["content"] = t.empty() ? pending : pending + "\n\n" + t;
      pending.clear();
    }
    out.push_back(std::move(c));
  }
  if (!pending.empty()) out.push_back({{"role", "user"}, {"content", pending}});
  return out;
}

}  // namespace

ojson apply_generic_tools(const ojson& messages, const ojson& tools, const TemplateToolSupport& s) {
  bool offer = !tools.empty() && !s.tools;
  bool has_system = false;
  for (auto& m : messages) has_system |= m.value("role", "") == "system";
  if (!offer && s.tool_calls && s.tool_responses && (s.system_role || !has_system)) return messages;
  ojson out = rewrite_tool_turns(messages, s);
  std::string prompt = offer ? generic_tool_prompt(tools) : std::string();
  if (!s.system_role) return fold_system(out, prompt);
  if (!offer) return out;
  if (!out.empty() && out[0].value("role", "") == "system") join(out[0], prompt);
  else out.insert(out.begin(), ojson{{"role", "system"}, {"content", prompt}});
  return out;
}

}  // namespace rapid::server
