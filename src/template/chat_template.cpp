#include "template/chat_template.h"

#include "template/interpreter.h"
#include "template/parser.h"

namespace rapid::jinja {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = jinja::parse_template(source);
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::json& context) const {
  return render(nlohmann::ordered_json::parse(context.dump()), RenderOptions{});
}

namespace {

using jinja::Value;

// transformers' render_jinja_template: null stays None (jinja2 tells it from a missing key), and
// _alias_reasoning_fields copies the first non-null reasoning field.
Value prepare_messages(const nlohmann::ordered_json& msgs) {
  if (!msgs.is_array()) return jinja::from_json(msgs);
  jinja::List out;
  for (auto& m : msgs) {
    if (!m.is_object()) {
      out.push_back(jinja::from_json(m));
      continue;
    }
    Value d = Value::new_dict();
    for (auto it = m.begin(); it != m.end(); ++it)
      d.dict->items.emplace_back(Value::string(it.key()), jinja::from_json(it.value()));
    const Value* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"})
      if ((reasoning = d.dict->find(std::string_view(key))) && !reasoning->is_none()) break;
    if (reasoning && reasoning->is_none()) reasoning = nullptr;
    if (reasoning) {
      // {"thinking": r, **message, "reasoning_content": r}: thinking first unless already present.
      Value r = *reasoning;
      Value a = Value::new_dict();
      a.dict->items.emplace_back(Value::string("thinking"), r);
      for (auto& kv : d.dict->items) a.dict->set(kv.first, kv.second);
      a.dict->set("reasoning_content", r);
      d = a;
    }
    out.push_back(d);
  }
  return Value::new_list(std::move(out));
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const RenderOptions& opts) const {
  Value ctx = Value::new_dict();
  ctx.dict->set("tools", Value::none());
  ctx.dict->set("documents", Value::none());
  ctx.dict->set("add_generation_prompt", Value::boolean(false));
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      if (it.key() == "messages") ctx.dict->set("messages", prepare_messages(it.value()));
      else ctx.dict->set(it.key(), jinja::from_json(it.value()));
    }
  } else if (!context.is_null()) {
    throw TemplateError(TemplateError::Kind::Type, "the render context must be a JSON object");
  }
  std::tm now{};
  if (opts.now) {
    now = *opts.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  jinja::Limits limits;
  limits.max_output = opts.max_output;
  limits.max_iterations = opts.max_iterations;
  jinja::Interpreter in(impl_->body, ctx, limits, now);
  return in.run();
}

std::string select_chat_template(const nlohmann::ordered_json& cfg, bool has_tools, const std::string& name) {
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null())
    throw TemplateError(TemplateError::Kind::Type, "tokenizer_config.json has no chat_template");
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw TemplateError(TemplateError::Kind::Type, "chat_template must be a string or a list");
  auto find = [&](const std::string& n) -> const nlohmann::ordered_json* {
    for (auto& e : *it)
      if (e.is_object() && e.value("name", "") == n && e.contains("template") && e["template"].is_string())
        return &e["template"];
    return nullptr;
  };
  if (!name.empty()) {
    if (auto* t = find(name)) return t->get<std::string>();
    throw TemplateError(TemplateError::Kind::Type, "no chat template named '" + name + "'");
  }
  if (has_tools)
    if (auto* t = find("tool_use")) return t->get<std::string>();
  if (auto* t = find("default")) return t->get<std::string>();
  throw TemplateError(TemplateError::Kind::Type,
                      "This model has multiple chat templates with no default specified");
}

}  // namespace rapid::jinja
